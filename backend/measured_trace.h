#pragma once
// Turning the ranks' step timings into the measured pipescope.trace (DESIGN.md §6): every op of
// every measured step on rank 0's clock, the transfers, per-step and mean metrics, the devices and
// the clock error bound; and the live
// {"event":"step"} of one step.
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "backend/device.h"
#include "engine/evaluation.h"
#include "engine/run_events.h"
#include "engine/trace_file.h"

namespace pipescope::backend {

/// One rank's timings of one step as shipped to rank 0 (a flat vector of doubles).
struct RankStepRecord {
  int pipeline_rank = 0;
  RankCoords coords;
  StepTimings timings;
};
std::vector<double> encodeRecord(const RankStepRecord &record);
Result<RankStepRecord> decodeRecord(const std::vector<double> &values);

/// Text carried through a gather of doubles (device descriptions).
std::vector<double> encodeText(const std::string &text);
std::string decodeText(const std::vector<double> &values);

struct MeasuredStep {
  int step = 0;
  double makespan_us = 0, bubble_fraction = 0, bubble_ratio = 0, gradient_sync_us = 0;
  std::vector<double> busy_us; ///< per pipeline rank
};

/// Rank 0's collection of the measured steps.
class MeasuredTraceBuilder {
public:
  MeasuredTraceBuilder(const Plan &plan, const Schedule &schedule, const LoweredProgram &program,
                       std::vector<std::string> devices, double activation_bytes);

  /// Adds one measured step: the records of every world rank, clocks already aligned to rank 0
  /// within ±clock_error_us (so two ranks' times compare within twice the trace's bound).
  /// Only the pipeline replica d = 0, t = 0 is recorded (the other replicas run the same ops).
  /// Returns the error when a record is missing or does not match the plan.
  Status addStep(int step, const std::vector<RankStepRecord> &records, double clock_error_us);

  const Trace &trace() const { return trace_; }
  const std::vector<MeasuredStep> &steps() const { return steps_; }
  /// The live {"event":"step"} of one measured step: its metrics and its op records.
  StepEvent stepEvent(const MeasuredStep &metrics) const;
  nlohmann::json stepMetricsJson(const MeasuredStep &metrics) const;
  /// The plan's program simulated with its costs refit to this measurement (engine
  /// calibration: per-stage F, B, W, the F&B overlap, transfer times, and where the ranks share
  /// a device the slowdown while others compute): when it matches the measurement, the run
  /// followed the program without stalls of its own.
  std::optional<Evaluation> calibrated(const Costs &planned) const;

private:
  const Schedule &schedule_;
  const LoweredProgram &program_;
  double activation_bytes_;
  Trace trace_;
  std::vector<MeasuredStep> steps_;
  double origin_us_ = 0;
  bool has_origin_ = false;
};

} // namespace pipescope::backend
