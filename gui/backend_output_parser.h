#pragma once
// What pipescope-backend prints, read back: its stdout is JSON lines (one event object per line,
// the run protocol of engine/run_events.h, read with its reader), possibly mixed with a
// launcher's own text (mpirun, srun) and cut into arbitrary chunks by the pipe. The parser turns
// chunks into events and never throws: a line it cannot read becomes a Text or Malformed event
// (with the reader's message naming the field) that the window logs. No Qt widgets here, so the
// suite drives it with real and broken lines directly.
#include <QByteArray>
#include <QString>
#include <optional>
#include <vector>

#include "engine/calibration.h"
#include "engine/trace_file.h"

namespace pipescope::gui {

enum class BackendEventType {
  Start,    ///< the run began: device, world size, planned warm-up and measured steps
  Check,    ///< the one-time kernel check
  Progress, ///< a warm-up (or other phase) step finished
  Step,     ///< a measured step finished; `ops` holds its op records
  Warning,
  Error,     ///< {"event":"error","rank":R,"message":...}
  Done,      ///< the run finished; `trace_path` names the measured trace
  Other,     ///< a well-formed event of a kind this window does not know (logged)
  Text,      ///< a line that is not JSON (a launcher's own output)
  Malformed, ///< a line that looks like JSON but is not a readable event
};

/// One line of the backend's output. Fields not in the line keep their defaults.
struct BackendEvent {
  BackendEventType type = BackendEventType::Text;
  QString name;    ///< the "event" value as printed ("step", "error", ...)
  QString text;    ///< the line itself for Text and Malformed; the message for Error/Warning
  QString problem; ///< Malformed: what is wrong; Step: records that were skipped, and why
  int rank = -1;   ///< Error/Warning: the rank that reported
  QString phase;   ///< Progress: "warmup", "measured", ...
  int step = -1;   ///< Progress/Step: the step number
  int of = 0;      ///< Progress/Step: how many steps the phase has (0 = not said)
  int warmup_steps = -1, measured_steps = -1; ///< Start
  int world_size = 0;                         ///< Start
  QString device;                             ///< Start
  /// Start (workload.expected_time_factor): device microseconds per planned microsecond.
  double time_factor = 0;
  QString trace_path;                 ///< Done
  std::vector<TraceOp> ops;           ///< Step: index = -1 when the record did not say
  std::optional<StepMetrics> metrics; ///< Step: makespan and bubbles, when printed
};

/// Splits a byte stream into lines and each line into an event.
class BackendOutputParser {
public:
  /// Appends a chunk of output; returns the events of every line it completed.
  std::vector<BackendEvent> feed(const QByteArray &chunk);
  /// The last line, when the output ended without a newline.
  std::vector<BackendEvent> finish();

  /// One line (without its newline); nothing for a blank line.
  static std::optional<BackendEvent> parseLine(const QByteArray &line);

  /// Longer lines are dropped with a Malformed event instead of growing without bound (a step of
  /// a million ops prints about 130 MB).
  static constexpr qsizetype kMaxLineBytes = qsizetype{512} << 20;
  void setMaxLineBytes(qsizetype bytes) { max_line_bytes_ = bytes; }

private:
  qsizetype max_line_bytes_ = kMaxLineBytes;
  QByteArray buffer_;
  bool discarding_ = false; ///< inside a line that passed kMaxLineBytes
  qsizetype discarded_ = 0;
};

/// How far a run is, from the events: warm-up steps, then measured steps.
class RunProgress {
public:
  /// What the command asked for, until the backend's start event says what it will do.
  void setPlanned(int warmup_steps, int measured_steps);
  void apply(const BackendEvent &event);
  int total() const { return warmup_steps_ + measured_steps_; }
  int done() const { return warmup_done_ + measured_done_; }
  int measuredDone() const { return measured_done_; }
  bool started() const { return started_; }
  bool finished() const { return finished_; }
  /// "starting up", "warm-up step 1 of 2", "measured step 3 of 5", "done".
  QString text() const;

private:
  int warmup_steps_ = 0, measured_steps_ = 0;
  int warmup_done_ = 0, measured_done_ = 0;
  bool started_ = false, finished_ = false;
};

} // namespace pipescope::gui
