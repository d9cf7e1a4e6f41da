#pragma once
// A run of the shown plan and what comes of it, without a widget (DESIGN.md §8 "Run"): the
// backend process, the measurement (streamed step by step or imported from a file), its errors
// against the prediction, calibration and revert. The Run tab shows it and binds its controls to
// it; tests drive it without a window. Nothing here blocks: the launcher runs as a child process
// and everything that changes is a signal.
#include <QObject>
#include <QStringList>
#include <memory>
#include <optional>

#include "engine/bubbles.h"
#include "engine/calibration.h"
#include "gui/explorer/explorer_snapshot.h"
#include "gui/run/backend_process.h"
#include "gui/run/measurement.h"

class QTemporaryDir;

namespace pipescope::gui {

/// How a status message or a log line reads: the widgets pick the colours.
enum class RunTone {
  Neutral, ///< plain
  Busy,    ///< in progress, the command line
  Ok,      ///< done
  Warning, ///< cancelled, a problem that did not stop the run
  Error,   ///< failed, refused
  Quiet,   ///< the launcher's stderr and unclassified output
};

/// What a run is started with (the Run tab's controls).
struct RunRequest {
  LaunchTarget target = LaunchTarget::Cpu;
  QString command_template; ///< with {backend}, {plan}, ... placeholders
  int warmup_steps = 1;
  int measured_steps = 3;
};

class RunSession : public QObject {
  Q_OBJECT
public:
  explicit RunSession(QObject *parent = nullptr);
  ~RunSession() override;

  /// The prediction the window shows; the errors are recomputed against it.
  void setSnapshot(const SnapshotPointer &snapshot);
  const SnapshotPointer &snapshot() const { return snapshot_; }
  /// The backend executable runs use; found at start (findBackendExecutable) or set here.
  void setBackendPath(const QString &path);
  QString backendPath() const { return backend_path_; }

  // Running.
  /// Writes the shown plan with its lowered program and starts the request's command. False
  /// (with the reason in the status) when it cannot start.
  bool start(const RunRequest &request);
  /// Stops every process of the run (BackendProcess::cancel).
  void cancel();
  bool running() const;
  BackendProcess *process() const { return process_; }
  /// Where the current (or last) run writes its plan and trace.
  QString runDirectory() const;
  const RunProgress &progress() const { return progress_; }
  /// "idle", "running: step 2 of 4", "done", "failed", "cancelled", "not started".
  QString progressLabel() const { return progress_label_; }
  /// Whether the last run ended without an error (its progress is then complete).
  bool succeeded() const { return succeeded_; }

  // The measurement.
  /// Takes a measured trace (imported from a file). Refused, with the reason, when it is of
  /// another plan than the one shown.
  Status importTrace(const MeasuredTraceFile &file);
  /// Says in the status why a trace file could not be read.
  void reportImportFailure(const QString &message);
  bool hasMeasurement() const { return measurement_ && !measurement_->empty(); }
  const Measurement *measurement() const { return measurement_.get(); }
  /// Whether the measurement is of the schedule shown now (it is drawn only then).
  bool measurementApplies() const;
  /// A step of the measurement aligned at its start, when it applies; step -1 = the latest.
  std::shared_ptr<const Evaluation> measuredStep(int step = -1) const;
  /// Every idle interval of a measured step with its cause, and its critical path
  /// (engine/bubbles.h), when the measurement applies; step -1 = the latest. Computed once per
  /// step and kept until the measurement or the prediction changes; null when it cannot be made.
  std::shared_ptr<const BubbleAnalysis> measuredBubbles(int step = -1) const;
  /// The errors of the measurement against the shown prediction (when it applies).
  const std::optional<TraceComparison> &comparison() const { return comparison_; }
  /// One line under the tables: how many steps, in which unit, or why nothing is shown.
  QString measurementNote() const;

  // Calibration.
  /// Refits F, B, W per stage, the overlap and the transfers to the measurement; planReplaced
  /// follows with the calibrated plan. False (with the reason) when there is nothing to fit.
  bool calibrate();
  /// Returns to the plan before calibration.
  void revertCalibration();
  /// Whether the shown prediction uses the calibrated costs (the tables show before and after).
  bool showingCalibration() const;
  /// The comparison before calibration, while showingCalibration().
  const std::optional<TraceComparison> &comparisonBeforeCalibration() const;
  bool canCalibrate() const { return !running() && comparison_.has_value(); }

  // The status line.
  QString statusHtml() const { return status_html_; }
  RunTone statusTone() const { return status_tone_; }
  /// The status without markup.
  QString statusText() const;

signals:
  /// The status line changed.
  void statusChanged();
  /// A line for the log; `clear` empties the log first (a new run).
  void logLine(const QString &text, pipescope::gui::RunTone tone);
  void logCleared();
  /// Progress or its label changed.
  void progressChanged();
  /// The measurement or whether it applies changed: redraw the overlay.
  void measurementChanged();
  /// The comparison (or the calibration shown) changed: refill the tables.
  void comparisonChanged();
  /// Calibrate or revert replaced the plan; the window shows it.
  void planReplaced(const pipescope::Plan &plan);
  /// The run started or ended.
  void runningChanged(bool running);

private:
  void onEvent(const BackendEvent &event);
  void onFinished(int exit_code, bool crashed, bool cancelled);
  void onFailedToStart(const QString &message);
  void updateComparison();
  void setStatus(const QString &html, RunTone tone);
  void log(const QString &text, RunTone tone = RunTone::Neutral);
  void setProgressLabel(const QString &label);
  /// Refuses a start with the reason in the status; returns false.
  bool refuse(const QString &html);

  SnapshotPointer snapshot_;
  QString backend_path_;

  BackendProcess *process_ = nullptr;
  std::unique_ptr<QTemporaryDir> run_directory_;
  QString run_trace_path_;
  RunProgress progress_;
  QString progress_label_;
  bool succeeded_ = false;
  QStringList errors_;
  QString run_device_;

  std::unique_ptr<Measurement> measurement_;
  std::optional<Trace> predicted_trace_; ///< the shown prediction as a trace (cached per snapshot)
  /// measuredBubbles' last answer and what it was made from.
  struct BubbleCache {
    const Evaluation *prediction = nullptr;
    const Measurement *measurement = nullptr;
    int step = -1;
    std::size_t ops = 0;
    std::shared_ptr<const BubbleAnalysis> analysis;
  };
  mutable BubbleCache bubble_cache_;
  std::optional<TraceComparison> comparison_;
  struct Calibration {
    Plan uncalibrated;
    Costs costs; ///< the calibrated costs, to know whether they are still shown
  };
  std::optional<Calibration> calibration_;
  std::optional<TraceComparison> before_calibration_;
  bool calibration_shown_ = false;

  QString status_html_;
  RunTone status_tone_ = RunTone::Neutral;
};

} // namespace pipescope::gui
