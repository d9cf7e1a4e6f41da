#pragma once
// The Run tab (DESIGN.md §8 "Run"): the controls and views of a RunSession, which holds the run,
// the measurement, the comparison and the calibration. This panel lays them out, keeps the
// target, steps and edited command templates in QSettings, and binds the session's signals to
// the widgets; the error tables are QTableViews over the session's item models.
#include <QWidget>

#include "gui/run/comparison_models.h"
#include "gui/run/run_session.h"

class QComboBox;
class QLabel;
class QLineEdit;
class QPlainTextEdit;
class QProgressBar;
class QPushButton;
class QSpinBox;
class QTableView;
class QToolButton;

namespace pipescope::gui {

class RunPanel : public QWidget {
  Q_OBJECT
public:
  /// With `use_settings`, the target, steps and edited command templates persist in QSettings.
  explicit RunPanel(bool use_settings, QWidget *parent = nullptr);
  ~RunPanel() override;

  /// The run, the measurement and the calibration the panel shows.
  RunSession *session() const { return session_; }

  /// The prediction the window shows; the errors are recomputed against it.
  void setSnapshot(const SnapshotPointer &snapshot);

  // Targets and commands.
  void setTarget(LaunchTarget target);
  LaunchTarget target() const;
  /// The command template of the current target (what the line shows).
  QString commandTemplate() const;
  void setCommandTemplate(const QString &command_template);
  void setSteps(int warmup, int measured);
  void setBackendPath(const QString &path);
  QString backendPath() const { return session_->backendPath(); }

  // Running (the session's, with this panel's target, command and steps).
  bool startRun();
  void cancelRun() { session_->cancel(); }
  bool running() const { return session_->running(); }
  BackendProcess *process() const { return session_->process(); }
  QString runDirectory() const { return session_->runDirectory(); }

  // The measurement and the calibration: the session's.
  Status importTrace(const MeasuredTraceFile &file) { return session_->importTrace(file); }
  void showImportFailure(const QString &message) { session_->reportImportFailure(message); }
  bool hasMeasurement() const { return session_->hasMeasurement(); }
  const Measurement *measurement() const { return session_->measurement(); }
  bool measurementApplies() const { return session_->measurementApplies(); }
  std::shared_ptr<const Evaluation> measuredStep(int step = -1) const {
    return session_->measuredStep(step);
  }
  const std::optional<TraceComparison> &comparison() const { return session_->comparison(); }
  bool calibrate() { return session_->calibrate(); }
  void revertCalibration() { session_->revertCalibration(); }
  bool showingCalibration() const { return session_->showingCalibration(); }
  const std::optional<TraceComparison> &comparisonBeforeCalibration() const {
    return session_->comparisonBeforeCalibration();
  }

  // What a person sees, for tests.
  QProgressBar *progressBar() const { return progress_bar_; }
  QTableView *stepTable() const { return step_table_; }
  QTableView *kindTable() const { return kind_table_; }
  QComboBox *targetBox() const { return target_box_; }
  QPushButton *runButton() const { return run_button_; }
  QPushButton *cancelButton() const { return cancel_button_; }
  QPushButton *calibrateButton() const { return calibrate_button_; }
  QString statusText() const { return session_->statusText(); }
  QString logText() const;
  const RunProgress &progress() const { return session_->progress(); }

signals:
  /// The measurement or whether it applies changed: redraw the overlay.
  void measurementChanged();
  /// Calibrate or revert replaced the plan; the window shows it.
  void planReplaced(const pipescope::Plan &plan);
  /// The run started or ended.
  void runningChanged(bool running);

private:
  QLayout *buildRunRow();
  QLayout *buildCommandRow();
  QWidget *buildTables(QWidget *parent);
  QWidget *buildLog(QWidget *parent);
  void bindSession();
  void restoreSettings();
  void showStatus();
  void showProgress();
  void showComparison();
  void appendLog(const QString &text, RunTone tone);
  void updateButtons();
  void loadTemplate();
  void storeTemplate();
  void updateBackendNote();

  bool use_settings_ = true;
  RunSession *session_ = nullptr;
  StepErrorModel *step_model_ = nullptr;
  KindErrorModel *kind_model_ = nullptr;

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
  QTableView *step_table_ = nullptr, *kind_table_ = nullptr;
  QPlainTextEdit *log_ = nullptr;
};

} // namespace pipescope::gui
