#pragma once
// The Run tab (DESIGN.md §8 "Run"): pick a target, run the shown plan on pipescope-backend through
// QProcess, follow its progress, cancel it, read its errors; hold the measurement (streamed step
// by step, or imported from a file) and its errors against the prediction; calibrate the costs
// to it. The window draws the measurement over the timeline; this panel owns the data and the
// tables. Nothing here blocks: the launcher runs as a child process and reports by signal.
#include <QWidget>
#include <memory>
#include <optional>

#include "engine/calibration.h"
#include "gui/explorer/explorer_snapshot.h"
#include "gui/run/backend_process.h"
#include "gui/run/measurement.h"

class QComboBox;
class QLabel;
class QLineEdit;
class QPlainTextEdit;
class QProgressBar;
class QPushButton;
class QSpinBox;
class QTableWidget;
class QTemporaryDir;
class QToolButton;

namespace pipescope::gui {

class RunPanel : public QWidget {
  Q_OBJECT
public:
  /// With `use_settings`, the target, steps and edited command templates persist in QSettings.
  explicit RunPanel(bool use_settings, QWidget *parent = nullptr);
  ~RunPanel() override;

  /// The prediction the window shows; the errors are recomputed against it.
  void setSnapshot(const SnapshotPointer &snapshot);

  // Targets and commands.
  void setTarget(LaunchTarget target);
  LaunchTarget target() const;
  /// The command template of the current target (what the line shows).
  QString commandTemplate() const;
  void setCommandTemplate(const QString &command_template);
  void setSteps(int warmup, int measured);
  /// The backend executable runs use; found at start (findBackendExecutable) or set here.
  void setBackendPath(const QString &path);
  QString backendPath() const { return backend_path_; }

  // Running.
  /// Writes the shown plan with its lowered program and starts the target's command. False (with
  /// the reason in the panel) when it cannot start.
  bool startRun();
  /// Stops every process of the run (BackendProcess::cancel).
  void cancelRun();
  bool running() const;
  BackendProcess *process() const { return process_; }
  /// Where the current (or last) run writes its plan and trace.
  QString runDirectory() const;

  // The measurement.
  /// Takes a measured trace (imported from a file). Refused, with the reason, when it is of
  /// another plan than the one shown.
  Status importTrace(const MeasuredTraceFile &file);
  /// Says in the panel why a trace file could not be read.
  void showImportFailure(const QString &message);
  bool hasMeasurement() const { return measurement_ && !measurement_->empty(); }
  const Measurement *measurement() const { return measurement_.get(); }
  /// Whether the measurement is of the schedule shown now (it is drawn only then).
  bool measurementApplies() const;
  /// A step of the measurement aligned at its start, when it applies; step -1 = the latest.
  std::shared_ptr<const Evaluation> measuredStep(int step = -1) const;
  /// The errors of the measurement against the shown prediction (when it applies).
  const std::optional<TraceComparison> &comparison() const { return comparison_; }

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

  // What a person sees, for tests.
  QProgressBar *progressBar() const { return progress_bar_; }
  QTableWidget *stepTable() const { return step_table_; }
  QTableWidget *kindTable() const { return kind_table_; }
  QComboBox *targetBox() const { return target_box_; }
  QPushButton *runButton() const { return run_button_; }
  QPushButton *cancelButton() const { return cancel_button_; }
  QPushButton *calibrateButton() const { return calibrate_button_; }
  QString statusText() const;
  QString logText() const;
  const RunProgress &progress() const { return progress_; }

signals:
  /// The measurement or whether it applies changed: redraw the overlay.
  void measurementChanged();
  /// Calibrate or revert replaced the plan; the window shows it.
  void planReplaced(const pipescope::Plan &plan);
  /// The run started or ended.
  void runningChanged(bool running);

private:
  void onEvent(const BackendEvent &event);
  void onFinished(int exit_code, bool crashed, bool cancelled);
  void updateComparison();
  void fillTables();
  void updateButtons();
  void updateProgress();
  void setStatus(const QString &html, const QString &tone);
  void appendLog(const QString &text, const QColor &color = QColor());
  void loadTemplate();
  void storeTemplate();
  void updateBackendNote();

  bool use_settings_ = true;
  SnapshotPointer snapshot_;
  QString backend_path_;

  // Run state.
  BackendProcess *process_ = nullptr;
  std::unique_ptr<QTemporaryDir> run_directory_;
  QString run_trace_path_;
  RunProgress progress_;
  QStringList errors_;
  QString run_device_;

  // Measurement and errors.
  std::unique_ptr<Measurement> measurement_;
  std::optional<Trace> predicted_trace_; ///< the shown prediction as a trace (cached per snapshot)
  std::optional<TraceComparison> comparison_;
  struct Calibration {
    Plan uncalibrated;
    std::string costs_json; ///< the calibrated costs, to know whether they are still shown
  };
  std::optional<Calibration> calibration_;
  std::optional<TraceComparison> before_calibration_;
  bool calibration_shown_ = false;

  // Widgets.
  QComboBox *target_box_ = nullptr;
  QSpinBox *warmup_box_ = nullptr, *steps_box_ = nullptr;
  QPushButton *run_button_ = nullptr, *cancel_button_ = nullptr;
  QPushButton *calibrate_button_ = nullptr, *revert_button_ = nullptr;
  QProgressBar *progress_bar_ = nullptr;
  QLineEdit *command_edit_ = nullptr;
  QToolButton *reset_command_ = nullptr;
  QLabel *status_ = nullptr;
  QLabel *backend_note_ = nullptr;
  QLabel *table_note_ = nullptr;
  QTableWidget *step_table_ = nullptr, *kind_table_ = nullptr;
  QPlainTextEdit *log_ = nullptr;
};

} // namespace pipescope::gui
