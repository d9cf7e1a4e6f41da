#pragma once
// The run protocol (DESIGN.md §6, §7): what pipescope-backend prints while it runs a plan, and the
// op record that its step lines and every trace file share. Each event and the op record have
// exactly one writer and one reader, here; the backend writes through them, the trace files use
// the op record, the explorer reads the lines back with them, and the tests build their lines
// with them, so the format cannot drift between its ends.
//
// The event stream: stdout of pipescope-backend is JSON lines, one object per line, flushed as it
// happens (a launcher may interleave its own text lines; readers skip what does not start with
// '{'). Every object has "event" naming its type:
//
//   {"event":"check", ...}     the one-time kernel check against the naive reference (rank 0)
//   {"event":"start", ...}     the run: device, launch, world size, plan, schedule, warm-up and
//                              measured steps, the workload, the simulated metrics
//   {"event":"progress", ...}  a warm-up step finished
//   {"event":"step", ...}      a measured step finished: its metrics and every op of it, in the
//                              trace's op record format (rank 0, after gathering)
//   {"event":"warning","rank":R,"message":"..."}
//   {"event":"error","rank":R,"message":"...","waiting_for_rank":Q}
//   {"event":"done","trace":"PATH", ...}  the measured trace is complete at PATH
//
// Readers check every field they read with JsonFields (a wrong type or an impossible value is an
// error naming the field's JSON pointer) and ignore fields they do not know; an event name they do
// not know reads as an UnknownEvent, so a newer backend's extra events do not stop an older
// viewer.
//
// The op record (one element of a step line's "ops" and of a trace file's "ops" array):
//
//   {"rank":0,"step":0,"index":3,"kind":"F","stage":0,"microbatch":2,"start_us":10.0,
//    "end_us":12.5,"lane":0}                       plus "overlapped":true for a pair's two parts
//
// kind is the op's letter (F, I, W, B). An overlapped F&B pair is two records with the same start
// and end, each marked "overlapped". step, index, lane and overlapped may be absent in files
// written by hand (read as 0, 0, 0 and false, or the caller's defaults).
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/result.h"
#include "engine/trace_file.h"

namespace pipescope {

/// Largest time or byte count a record may hold (about 31 years in microseconds): beyond it a
/// figure is a corrupt value, not a measurement.
inline constexpr double kMaxRecordedValue = 1e15;

// ---------------------------------------------------------------------------------------------
// The trace op record

/// Appends `op` as one JSON object (no separator, no newline) to `out`. Written as text, not
/// through nlohmann::json, so a trace or a step of a million ops costs no document.
void appendTraceOpRecord(std::string &out, const TraceOp &op);
/// The same record as a JSON value (for callers that build documents; parses appendTraceOpRecord).
nlohmann::json traceOpRecord(const TraceOp &op);
/// Reads one op record; `pointer` is where it sits ("/ops/12"), named by every error. Fields the
/// record omits keep their values from `defaults` (step, index, lane, overlapped).
Result<TraceOp> readTraceOpRecord(const nlohmann::json &record, const std::string &pointer,
                                  const TraceOp &defaults = {});

// ---------------------------------------------------------------------------------------------
// The events

/// Step time and bubbles, as one object ("simulated", "measured", "calibrated").
struct RunMetrics {
  double makespan_us = 0;
  double bubble_fraction = 0;
  double bubble_ratio = 0;

  friend bool operator==(const RunMetrics &, const RunMetrics &) = default;
};

/// {"event":"check"}: the device kernels against the naive reference, before the run.
struct CheckEvent {
  int rank = 0;
  std::string what;
  double max_relative_error = 0;
  bool ok = true;

  friend bool operator==(const CheckEvent &, const CheckEvent &) = default;
};

/// {"event":"start"}: what runs, where, and what the simulation predicts.
struct StartEvent {
  std::string device;  ///< cpu, gpu-shared, cuda
  std::string launch;  ///< mpirun, srun, torchrun, single
  std::string channel; ///< the control channel: mpi, tcp, none
  int world_size = 1;
  std::string plan_path;
  std::string schedule;
  int pp = 1, microbatches = 1, virtual_stages = 1;
  int mesh_dp = 1, mesh_tp = 1, mesh_pp = 1;
  int warmup_steps = 0, measured_steps = 0;
  /// The backend's workload block, as the trace's backend.workload (an object; its
  /// "expected_time_factor" is checked when present).
  nlohmann::json workload = nlohmann::json::object();
  RunMetrics simulated;

  /// workload.expected_time_factor: device microseconds per planned microsecond (0 = not said).
  double expectedTimeFactor() const;

  friend bool operator==(const StartEvent &, const StartEvent &) = default;
};

/// {"event":"progress"}: one warm-up step finished.
struct ProgressEvent {
  std::string phase = "warmup";
  int step = 0;
  int of = 0; ///< steps in the phase
  double wall_us = 0;

  friend bool operator==(const ProgressEvent &, const ProgressEvent &) = default;
};

/// {"event":"step"}: one measured step, its metrics and every op record of it on rank 0's clock.
struct StepEvent {
  int step = 0;
  int of = 0; ///< measured steps of the run
  /// The step's makespan and bubbles, written flat ("makespan_us", "bubble_fraction",
  /// "bubble_ratio"); a line may carry the ops only.
  std::optional<RunMetrics> metrics;
  double gradient_sync_us = 0;
  std::vector<double> busy_us; ///< per pipeline rank
  double clock_error_us = 0;   ///< ± bound of the alignment of this step's clocks
  std::vector<TraceOp> ops;

  /// Reading with OpRecords::SkipBad: how many records were left out, and the first one's error.
  std::size_t skipped_ops = 0;
  std::optional<Error> first_skipped;

  friend bool operator==(const StepEvent &, const StepEvent &) = default;
};

/// {"event":"warning"}.
struct WarningEvent {
  int rank = -1; ///< -1: not said (not written)
  std::string message;

  friend bool operator==(const WarningEvent &, const WarningEvent &) = default;
};

/// {"event":"error"}: the run failed on `rank`; the process exits non-zero.
struct ErrorEvent {
  int rank = -1; ///< -1: not said (not written)
  std::string message;
  int waiting_for_rank = -1; ///< the rank it waited for when stopped, -1 when none (not written)

  friend bool operator==(const ErrorEvent &, const ErrorEvent &) = default;
};

/// {"event":"done"}: the measured trace is complete.
struct DoneEvent {
  std::string trace_path;
  int steps = 0;
  RunMetrics measured, simulated;
  double expected_makespan_us = 0; ///< simulated makespan × the workload's time factor
  std::optional<RunMetrics> calibrated;
  double clock_error_us = 0, mean_op_us = 0, timing_overhead_fraction = 0;
  nlohmann::json throughput = nlohmann::json::object(); ///< as in the trace's backend block

  friend bool operator==(const DoneEvent &, const DoneEvent &) = default;
};

/// An event this reader does not know (read, never written by the run).
struct UnknownEvent {
  std::string name;

  friend bool operator==(const UnknownEvent &, const UnknownEvent &) = default;
};

using RunEvent = std::variant<CheckEvent, StartEvent, ProgressEvent, StepEvent, WarningEvent,
                              ErrorEvent, DoneEvent, UnknownEvent>;

/// The value of "event" for this event ("start", "step", ...).
std::string runEventName(const RunEvent &event);

/// The event's line: one JSON object, without the newline. Non-finite numbers are written as null
/// (and so read back as absent); invalid UTF-8 in texts is replaced.
std::string runEventLine(const RunEvent &event);

/// What a reader does with a bad op record of a step line.
enum class OpRecords {
  Strict,  ///< the whole line is refused with the record's error
  SkipBad, ///< the record is left out and counted (StepEvent::skipped_ops), for live views
};

/// Reads one event object. Errors name the field's JSON pointer ("/ops/3/kind: ...").
Result<RunEvent> readRunEvent(const nlohmann::json &object,
                              OpRecords op_records = OpRecords::Strict);
/// Parses one line (within the JSON limits of json_io.h) and reads it.
Result<RunEvent> readRunEventLine(std::string_view line, OpRecords op_records = OpRecords::Strict);

} // namespace pipescope
