#pragma once
// Measured against predicted: the errors between two traces of the same plan, and a refit of the
// cost model (F, B, W per stage, the F&B overlap, transfer times) to a measured trace.
#include <string>
#include <vector>

#include "engine/costs.h"
#include "engine/schedule.h"
#include "engine/trace_file.h"

namespace pipescope {

/// Relative error of one op kind's durations, measured against predicted, over matched ops.
struct KindError {
  OpKind kind = OpKind::Forward;
  int count = 0;
  double median_relative_error = 0; ///< median of |measured - predicted| / predicted
  double worst_relative_error = 0;
  double median_signed_error = 0; ///< median of (measured - predicted) / predicted
};

/// One step's metrics from a trace (a simulated trace has one step, 0).
struct StepMetrics {
  int step = 0;
  double makespan_us = 0;
  double bubble_fraction = 0;
  double bubble_ratio = 0;
};

struct TraceComparison {
  StepMetrics predicted;
  StepMetrics measured;                  ///< the median step of the measured trace (by makespan)
  double makespan_relative_error = 0;    ///< (measured - predicted) / predicted
  double bubble_fraction_difference = 0; ///< measured - predicted, in fraction points
  double bubble_ratio_difference = 0;
  std::vector<KindError> kinds; ///< per op kind present in both traces
  int matched_ops = 0;
  int unmatched_ops = 0; ///< ops of the prediction missing from the measurement
};

/// Per-step metrics of a trace, in step order.
std::vector<StepMetrics> traceStepMetrics(const Trace &trace);

/// Compares a prediction with a measurement of the same plan; ops are matched by rank, kind,
/// stage and microbatch, and each measured op's duration is its median over the measured steps.
TraceComparison compareTraces(const Trace &predicted, const Trace &measured);

/// Refits the costs to a measurement of `schedule`: per-stage F, B = I + W and W from the
/// median durations of each stage's ops; the F&B overlap factor from overlapped pairs; and the
/// transfer time of each stage boundary from the gaps where a consumer waited for its input.
/// What the measurement does not show is kept from `current`.
Result<Costs> calibrateCosts(const Schedule &schedule, const Trace &measured, const Costs &current);

} // namespace pipescope
