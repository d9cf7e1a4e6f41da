#pragma once
// The measured side of a run, before any widget: a trace of one plan that grows step by step as
// the backend streams them (or arrives whole from a file), each step aligned at its own start so
// step k lies over the prediction on the same axis. Nothing here paints; the suite checks it
// directly.
#include <QString>
#include <map>
#include <memory>
#include <unordered_map>
#include <vector>

#include "engine/calibration.h"
#include "engine/evaluation.h"
#include "engine/trace_file.h"
#include "engine/trace_matching.h"

namespace pipescope::gui {

/// "1F1B, P=4, M=8" (and ", V=2" when V > 1).
QString scheduleLabel(const Schedule &schedule);

/// Whether every op of the trace belongs to the schedule (engine/trace_matching.h), with the
/// explorer's way to fix it: open the trace's plan, or set its settings.
Status checkTraceFitsShownSchedule(const Trace &trace, const Schedule &schedule);

/// Whether two schedules run the same ops in the same order on every rank.
bool sameSchedule(const Schedule &a, const Schedule &b);

class Measurement {
public:
  Measurement() = default;
  /// An empty measurement of `plan`, whose schedule is `schedule`. `time_factor`: device
  /// microseconds per planned microsecond.
  Measurement(Plan plan, Schedule schedule, double time_factor = 1);
  /// A whole trace (imported, or the file a run wrote), in device time. Refused when its ops do
  /// not belong to the schedule.
  static Result<Measurement> fromTrace(const Trace &trace, Schedule schedule, double time_factor);

  /// Adds, or replaces, one measured step (ops in device time, as the backend prints them).
  /// Refused, leaving the measurement as it was, when an op does not belong to the schedule.
  Status addStep(int step, const std::vector<TraceOp> &ops);
  /// Changes the device-to-plan factor (the backend says it in its start event).
  void setTimeFactor(double time_factor);

  bool empty() const { return device_trace_.ops.empty(); }
  const Schedule &schedule() const { return schedule_; }
  const Plan &plan() const { return device_trace_.plan; }
  /// In planned microseconds (device time / time factor): what the window draws and compares.
  const Trace &trace() const { return trace_; }
  /// As measured, in device microseconds: what Export writes.
  const Trace &deviceTrace() const { return device_trace_; }
  double timeFactor() const { return time_factor_; }
  /// Step numbers present, ascending.
  std::vector<int> steps() const;
  int latestStep() const { return step_ops_.empty() ? -1 : step_ops_.rbegin()->first; }
  /// Makespan of a step in device microseconds (0 when absent).
  double deviceMakespan(int step) const;

  /// One step aligned at its start, as an evaluation parallel to the schedule: op_times[r][i] is
  /// when schedule.ranks[r][i] ran (in planned microseconds from the step's first op start); an op
  /// the step lacks takes no time at its predecessor's end. Null when the step is absent.
  std::shared_ptr<const Evaluation> alignedStep(int step) const;

private:
  /// The rank-list position of a trace op in the schedule, or -1.
  int positionOf(const TraceOp &op) const;
  void rebuildTraces();

  Schedule schedule_;
  Trace device_trace_; ///< ops in device time
  Trace trace_;        ///< the same in plan time
  double time_factor_ = 1;
  std::map<int, std::vector<TraceOp>> step_ops_; ///< device time, by step
  ScheduleOpIndex positions_;
  mutable std::map<int, std::shared_ptr<const Evaluation>> aligned_;
};

/// "+3.2 %": a relative error with its sign.
QString formatSignedPercent(double fraction);
/// "+1.5 pts": a difference of two fractions in percentage points.
QString formatPointDifference(double fraction_difference);

} // namespace pipescope::gui
