#pragma once
// A measured trace against the plan it claims to measure (DESIGN.md §6, §7): which op of the
// schedule each record is, whether the trace is of this schedule at all, and its times in planned
// microseconds. The explorer's Run tab and `pipescope compare` share these.
#include <cstdint>
#include <string>
#include <unordered_map>

#include "engine/schedule.h"
#include "engine/trace_file.h"

namespace pipescope {

/// (rank, kind, stage, microbatch) -> position in schedule.ranks[rank]. An overlapped pair
/// answers to its forward part (kind F) and to its backward part (kind B).
class ScheduleOpIndex {
public:
  ScheduleOpIndex() = default;
  explicit ScheduleOpIndex(const Schedule &schedule);
  /// The op's position in its rank's list, or -1 when the schedule has no such op.
  int positionOf(const TraceOp &op) const;

private:
  std::unordered_map<std::uint64_t, int> positions_;
};

/// "1F1B, P=4, M=8" (and ", V=2" when V > 1); custom schedules by their name.
std::string describeSchedule(const Schedule &schedule);
/// The same for what a plan asks for, before generation.
std::string describePlanRequest(const Plan &plan);

/// Whether every op of the trace belongs to the schedule (same rank, kind, stage, microbatch) and
/// every step holds all of the schedule's ops. The error says which op or step does not, and
/// what the trace measured; the caller adds how to fix it in its own terms.
Status checkTraceMatchesSchedule(const Trace &trace, const Schedule &schedule);

/// A measured trace file with what pipescope-backend writes beside the trace itself.
struct MeasuredTraceFile {
  Trace trace;
  /// Device microseconds per planned microsecond (backend.workload.expected_time_factor); 0
  /// when the file does not say.
  double time_factor = 0;
};
/// Reads a pipescope.trace; the error names the file and the field.
Result<MeasuredTraceFile> loadMeasuredTrace(const std::string &path);

/// The trace with every time divided by `time_factor` (device time to planned time).
Trace inPlannedTime(Trace trace, double time_factor);

} // namespace pipescope
