#include "gui/widgets/run_panel.h"

#include <QComboBox>
#include <QDir>
#include <QFileInfo>
#include <QGridLayout>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QPlainTextEdit>
#include <QProgressBar>
#include <QPushButton>
#include <QRegularExpression>
#include <QSettings>
#include <QSpinBox>
#include <QSplitter>
#include <QTableWidget>
#include <QTemporaryDir>
#include <QToolButton>
#include <QVBoxLayout>
#include <cmath>

#include "gui/timeline/palette.h"
#include "gui/timeline/time_mapping.h"
#include "gui/timeline/timeline_model.h"
#include "gui/widgets/metrics_panel.h"

namespace pipescope::gui {

namespace {

const QString kTargetKey = QStringLiteral("run/target");
const QString kWarmupKey = QStringLiteral("run/warmup");
const QString kStepsKey = QStringLiteral("run/steps");
QString templateKey(LaunchTarget target) {
  return QStringLiteral("run/template/") + launchTargetKey(target);
}

std::string costsJson(const Plan &plan) {
  return planToJson(plan)["costs"].dump();
}

QTableWidget *makeTable(QWidget *parent, const QString &name) {
  auto *table = new QTableWidget(parent);
  table->setObjectName(name);
  table->setEditTriggers(QAbstractItemView::NoEditTriggers);
  table->setSelectionMode(QAbstractItemView::NoSelection);
  table->setFocusPolicy(Qt::NoFocus);
  table->verticalHeader()->setVisible(true);
  table->verticalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
  table->verticalHeader()->setDefaultAlignment(Qt::AlignLeft | Qt::AlignVCenter);
  table->horizontalHeader()->setSectionResizeMode(QHeaderView::Stretch);
  table->horizontalHeader()->setDefaultAlignment(Qt::AlignRight | Qt::AlignVCenter);
  table->setWordWrap(false);
  table->setAlternatingRowColors(true);
  return table;
}

void setCell(QTableWidget *table, int row, int column, const QString &text,
             const QString &tooltip = QString()) {
  auto *item = new QTableWidgetItem(text);
  item->setTextAlignment(Qt::AlignRight | Qt::AlignVCenter);
  if (!tooltip.isEmpty()) item->setToolTip(tooltip);
  table->setItem(row, column, item);
}

QString kindLabel(OpKind kind) {
  return opKindShortLegend(kind);
}

} // namespace

RunPanel::RunPanel(bool use_settings, QWidget *parent)
    : QWidget(parent), use_settings_(use_settings) {
  process_ = new BackendProcess(this);
  backend_path_ = findBackendExecutable();

  auto *layout = new QVBoxLayout(this);
  layout->setContentsMargins(6, 6, 6, 4);
  layout->setSpacing(4);

  // Row 1: where, how long, go, stop.
  auto *row = new QHBoxLayout;
  row->setSpacing(6);
  target_box_ = new QComboBox(this);
  target_box_->setObjectName(QStringLiteral("run_target"));
  for (int index = 0; index < kLaunchTargetCount; ++index)
    target_box_->addItem(launchTargetTitle(static_cast<LaunchTarget>(index)), index);
  target_box_->setToolTip(
      tr("Where the run executes. Each target starts from a command template you can edit below."));
  // The tab shares the window's width with the docks: never let a long title widen the window.
  target_box_->setSizeAdjustPolicy(QComboBox::AdjustToMinimumContentsLengthWithIcon);
  target_box_->setMinimumContentsLength(16);
  row->addWidget(target_box_);
  auto spin = [this, row](const QString &label, int minimum, int maximum, int value,
                          const QString &tip) {
    auto *name = new QLabel(label, this);
    name->setToolTip(tip);
    row->addWidget(name);
    auto *box = new QSpinBox(this);
    box->setRange(minimum, maximum);
    box->setValue(value);
    box->setToolTip(tip);
    row->addWidget(box);
    return box;
  };
  warmup_box_ = spin(tr("warm-up"), 0, 1000, 1, tr("Warm-up steps, run first and not recorded"));
  steps_box_ =
      spin(tr("steps"), 1, 10000, 3, tr("Measured steps; each one is drawn as it finishes"));
  run_button_ = new QPushButton(tr("\u25b6 Run"), this);
  run_button_->setObjectName(QStringLiteral("run_start"));
  run_button_->setToolTip(
      tr("Write the shown plan with its lowered program and run it on the target (Ctrl+R)"));
  row->addWidget(run_button_);
  cancel_button_ = new QPushButton(tr("Cancel"), this);
  cancel_button_->setObjectName(QStringLiteral("run_cancel"));
  cancel_button_->setToolTip(tr("Stop every process the run started"));
  row->addWidget(cancel_button_);
  progress_bar_ = new QProgressBar(this);
  progress_bar_->setObjectName(QStringLiteral("run_progress"));
  progress_bar_->setRange(0, 1);
  progress_bar_->setValue(0);
  progress_bar_->setTextVisible(true);
  progress_bar_->setFormat(tr("idle"));
  progress_bar_->setMinimumWidth(90);
  row->addStretch(1);
  layout->addLayout(row);

  // Row 2: the command, editable.
  auto *command_row = new QHBoxLayout;
  command_row->setSpacing(4);
  auto *command_label = new QLabel(tr("command"), this);
  command_row->addWidget(command_label);
  command_edit_ = new QLineEdit(this);
  command_edit_->setObjectName(QStringLiteral("run_command"));
  command_edit_->setToolTip(tr("The launch command. Placeholders:<br>") +
                            launchPlaceholders().join(QStringLiteral("<br>")));
  command_row->addWidget(command_edit_, 1);
  reset_command_ = new QToolButton(this);
  reset_command_->setText(tr("Reset"));
  reset_command_->setToolTip(tr("Back to this target's default command"));
  command_row->addWidget(reset_command_);
  layout->addLayout(command_row);

  backend_note_ = new QLabel(this);
  backend_note_->setObjectName(QStringLiteral("run_backend_note"));
  backend_note_->setWordWrap(true);
  backend_note_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  backend_note_->setStyleSheet(palette::toneStyleSheet(palette::Tone::Warning));
  layout->addWidget(backend_note_);
  status_ = new QLabel(this);
  status_->setObjectName(QStringLiteral("run_status"));
  status_->setWordWrap(true);
  status_->setTextFormat(Qt::RichText);
  status_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  // How far, beside what is happening.
  auto *status_row = new QHBoxLayout;
  status_row->setSpacing(6);
  progress_bar_->setFixedWidth(230);
  status_row->addWidget(progress_bar_, 0, Qt::AlignTop);
  status_row->addWidget(status_, 1);
  layout->addLayout(status_row);

  // The errors beside the log.
  auto *splitter = new QSplitter(Qt::Horizontal, this);
  auto *tables = new QWidget(splitter);
  auto *tables_layout = new QVBoxLayout(tables);
  tables_layout->setContentsMargins(0, 0, 0, 0);
  tables_layout->setSpacing(3);
  step_table_ = makeTable(tables, QStringLiteral("run_step_errors"));
  kind_table_ = makeTable(tables, QStringLiteral("run_kind_errors"));
  tables_layout->addWidget(step_table_, 3);
  tables_layout->addWidget(kind_table_, 4);
  auto *calibrate_row = new QHBoxLayout;
  calibrate_row->setSpacing(6);
  table_note_ = new QLabel(tables);
  table_note_->setObjectName(QStringLiteral("run_table_note"));
  table_note_->setWordWrap(true);
  table_note_->setStyleSheet(
      QStringLiteral("QLabel { color: %1; }").arg(palette::secondaryText().name()));
  calibrate_row->addWidget(table_note_, 1);
  calibrate_button_ = new QPushButton(tr("Calibrate"), tables);
  calibrate_button_->setObjectName(QStringLiteral("run_calibrate"));
  calibrate_button_->setToolTip(
      tr("Refit F, B, W per stage, the F&B overlap and the transfer times to the measurement, "
         "then predict again with them"));
  calibrate_row->addWidget(calibrate_button_);
  revert_button_ = new QPushButton(tr("Revert"), tables);
  revert_button_->setToolTip(tr("Back to the costs before calibration"));
  calibrate_row->addWidget(revert_button_);
  tables_layout->addLayout(calibrate_row);
  log_ = new QPlainTextEdit(splitter);
  log_->setObjectName(QStringLiteral("run_log"));
  log_->setReadOnly(true);
  log_->setMaximumBlockCount(5000);
  log_->setLineWrapMode(QPlainTextEdit::WidgetWidth);
  log_->setPlaceholderText(tr("The backend's progress, warnings, errors and stderr appear here."));
  QFont mono(QStringLiteral("monospace"));
  mono.setStyleHint(QFont::Monospace);
  mono.setPointSizeF(std::max(7.0, font().pointSizeF() - 1));
  log_->setFont(mono);
  splitter->addWidget(tables);
  splitter->addWidget(log_);
  splitter->setStretchFactor(0, 3);
  splitter->setStretchFactor(1, 1);
  splitter->setSizes({480, 200});
  layout->addWidget(splitter, 1);

  connect(target_box_, &QComboBox::currentIndexChanged, this, [this] {
    loadTemplate();
    if (use_settings_) QSettings().setValue(kTargetKey, launchTargetKey(target()));
  });
  connect(command_edit_, &QLineEdit::editingFinished, this, &RunPanel::storeTemplate);
  connect(reset_command_, &QToolButton::clicked, this, [this] {
    command_edit_->setText(defaultLaunchTemplate(target()));
    storeTemplate();
  });
  connect(run_button_, &QPushButton::clicked, this, [this] { startRun(); });
  connect(cancel_button_, &QPushButton::clicked, this, &RunPanel::cancelRun);
  connect(calibrate_button_, &QPushButton::clicked, this, [this] { calibrate(); });
  connect(revert_button_, &QPushButton::clicked, this, &RunPanel::revertCalibration);
  connect(process_, &BackendProcess::eventReceived, this, &RunPanel::onEvent);
  connect(process_, &BackendProcess::stderrLine, this,
          [this](const QString &line) { appendLog(line, palette::faintText()); });
  connect(process_, &BackendProcess::finished, this, &RunPanel::onFinished);
  connect(process_, &BackendProcess::failedToStart, this, [this](const QString &message) {
    setStatus(tr("<b>The run did not start.</b> %1").arg(message.toHtmlEscaped()),
              QStringLiteral("error"));
    appendLog(message, palette::logColor(palette::Tone::Error));
    progress_bar_->setFormat(tr("not started"));
    updateButtons();
    emit runningChanged(false);
  });

  if (use_settings_) {
    QSettings settings;
    const QString key = settings.value(kTargetKey).toString();
    for (int index = 0; index < kLaunchTargetCount; ++index)
      if (launchTargetKey(static_cast<LaunchTarget>(index)) == key)
        target_box_->setCurrentIndex(index);
    warmup_box_->setValue(settings.value(kWarmupKey, 1).toInt());
    steps_box_->setValue(settings.value(kStepsKey, 3).toInt());
  }
  loadTemplate();
  updateBackendNote();
  fillTables();
  updateButtons();
  setStatus(tr("Run the shown plan on a target, or import a measured trace (File \u25b8 Import "
               "measured trace\u2026)."),
            QString());
}

RunPanel::~RunPanel() = default;

LaunchTarget RunPanel::target() const {
  return static_cast<LaunchTarget>(target_box_->currentData().toInt());
}

void RunPanel::setTarget(LaunchTarget target) {
  target_box_->setCurrentIndex(static_cast<int>(target));
}

QString RunPanel::commandTemplate() const {
  return command_edit_->text();
}

void RunPanel::setCommandTemplate(const QString &command_template) {
  command_edit_->setText(command_template);
  storeTemplate();
}

void RunPanel::setSteps(int warmup, int measured) {
  warmup_box_->setValue(warmup);
  steps_box_->setValue(measured);
}

void RunPanel::setBackendPath(const QString &path) {
  backend_path_ = path;
  updateBackendNote();
  updateButtons();
}

void RunPanel::loadTemplate() {
  const LaunchTarget current = target();
  QString text = defaultLaunchTemplate(current);
  if (use_settings_) text = QSettings().value(templateKey(current), text).toString();
  command_edit_->setText(text);
  command_edit_->setCursorPosition(0);
  QString tip;
  switch (current) {
  case LaunchTarget::Cpu:
    tip = tr("One process per pipeline rank on this machine (one pipeline replica, no TP or DP).");
    break;
  case LaunchTarget::SharedGpu:
    tip = tr("One process; every stage on one GPU with a stream and a share of the SMs each.");
    break;
  case LaunchTarget::LocalGpus:
    tip = tr("One process per GPU of the mesh (DP \u00d7 TP \u00d7 PP), NCCL between them.");
    break;
  case LaunchTarget::Slurm:
    tip = tr("srun across nodes. The plan and trace go to a temporary folder: set "
             "PIPESCOPE_RUN_DIR to a folder every node can read and write.");
    break;
  case LaunchTarget::Custom: tip = tr("Any launcher: write the command; it is remembered."); break;
  }
  target_box_->setToolTip(tip);
  updateButtons();
}

void RunPanel::storeTemplate() {
  if (!use_settings_) return;
  QSettings settings;
  if (command_edit_->text() == defaultLaunchTemplate(target()))
    settings.remove(templateKey(target()));
  else
    settings.setValue(templateKey(target()), command_edit_->text());
}

void RunPanel::updateBackendNote() {
  if (!backend_path_.isEmpty()) {
    backend_note_->hide();
    return;
  }
  backend_note_->setText(
      tr("<b>pipescope-backend was not found</b> (looked at %1). Build it with "
         "<tt>cmake --build BUILD --target pipescope-backend</tt> (it needs MPI), or set "
         "PIPESCOPE_BACKEND to its path. Importing a measured trace still works.")
          .arg(backendSearchLocations().join(QStringLiteral(", ")).toHtmlEscaped()));
  backend_note_->show();
}

QString RunPanel::runDirectory() const {
  return run_directory_ ? run_directory_->path() : QString();
}

bool RunPanel::running() const {
  return process_->running();
}

bool RunPanel::startRun() {
  if (running()) return false;
  if (!snapshot_ || !snapshot_->ok()) {
    setStatus(tr("<b>Nothing to run:</b> the settings cannot be evaluated."),
              QStringLiteral("error"));
    return false;
  }
  const Plan &plan = snapshot_->plan;
  const Evaluation &evaluation = *snapshot_->evaluation;
  const QString base = qEnvironmentVariable("PIPESCOPE_RUN_DIR", QDir::tempPath());
  auto directory =
      std::make_unique<QTemporaryDir>(QDir(base).filePath(QStringLiteral("pipescope-run-XXXXXX")));
  if (!directory->isValid()) {
    setStatus(tr("<b>The run did not start:</b> cannot make a folder in %1 (%2).")
                  .arg(base.toHtmlEscaped(), directory->errorString()),
              QStringLiteral("error"));
    return false;
  }
  const QString plan_path = directory->filePath(QStringLiteral("plan.json"));
  const QString trace_path = directory->filePath(QStringLiteral("trace.json"));
  if (auto status = savePlan(plan_path.toStdString(), plan, &evaluation.program); !status) {
    setStatus(tr("<b>The run did not start:</b> %1")
                  .arg(QString::fromStdString(status.error().message).toHtmlEscaped()),
              QStringLiteral("error"));
    return false;
  }
  LaunchValues values;
  values.backend = backend_path_;
  values.plan = plan_path;
  values.trace = trace_path;
  values.world = plan.mesh.worldSize();
  values.pp = plan.mesh.pp;
  values.gpus_per_node = plan.mesh.gpus_per_node;
  values.warmup = warmup_box_->value();
  values.steps = steps_box_->value();
  auto command = expandLaunchTemplate(command_edit_->text(), values);
  if (!command) {
    setStatus(tr("<b>The run did not start:</b> %1")
                  .arg(QString::fromStdString(command.error().message).toHtmlEscaped()),
              QStringLiteral("error"));
    return false;
  }
  storeTemplate();
  if (use_settings_) {
    QSettings settings;
    settings.setValue(kWarmupKey, warmup_box_->value());
    settings.setValue(kStepsKey, steps_box_->value());
  }

  run_directory_ = std::move(directory);
  run_trace_path_ = trace_path;
  errors_.clear();
  run_device_.clear();
  calibration_.reset();
  before_calibration_.reset();
  measurement_ = std::make_unique<Measurement>(plan, evaluation.schedule);
  progress_.setPlanned(values.warmup, values.steps);
  log_->clear();
  const QString program = command->takeFirst();
  appendLog(QStringLiteral("$ ") + program + QLatin1Char(' ') + command->join(QLatin1Char(' ')),
            palette::logColor(palette::Tone::Busy));
  setStatus(tr("Running %1 on %2\u2026")
                .arg(scheduleLabel(evaluation.schedule).toHtmlEscaped(),
                     launchTargetTitle(target()).toHtmlEscaped()),
            QStringLiteral("busy"));
  updateComparison();
  emit measurementChanged();
  // Before the start: a launcher that fails to start reports runningChanged(false) after this.
  emit runningChanged(true);
  process_->start(program, *command, run_directory_->path());
  updateProgress();
  updateButtons();
  return true;
}

void RunPanel::cancelRun() {
  if (!running()) return;
  appendLog(tr("cancelling: stopping every process of the run"),
            palette::logColor(palette::Tone::Warning));
  setStatus(tr("Cancelling\u2026"), QStringLiteral("busy"));
  process_->cancel();
  updateButtons();
}

void RunPanel::onEvent(const BackendEvent &event) {
  switch (event.type) {
  case BackendEventType::Start:
    run_device_ = event.device;
    if (event.time_factor > 0 && measurement_) measurement_->setTimeFactor(event.time_factor);
    appendLog(tr("started: device %1, %2 processes, %3 warm-up and %4 measured steps")
                  .arg(event.device.isEmpty() ? tr("?") : event.device)
                  .arg(event.world_size)
                  .arg(event.warmup_steps)
                  .arg(event.measured_steps));
    break;
  case BackendEventType::Check: appendLog(tr("kernel check passed: %1").arg(event.text)); break;
  case BackendEventType::Progress:
    appendLog(tr("%1 step %2 of %3 done")
                  .arg(event.phase.isEmpty() ? tr("warm-up") : event.phase)
                  .arg(event.step + 1)
                  .arg(event.of));
    break;
  case BackendEventType::Step: {
    if (!event.problem.isEmpty())
      appendLog(tr("step %1: %2").arg(event.step).arg(event.problem),
                palette::logColor(palette::Tone::Warning));
    if (!measurement_) break;
    if (auto status = measurement_->addStep(event.step, event.ops); !status) {
      appendLog(tr("step %1 not drawn: %2")
                    .arg(event.step)
                    .arg(QString::fromStdString(status.error().message)),
                palette::logColor(palette::Tone::Error));
      break;
    }
    appendLog(tr("measured step %1: %2 ops, step time %3 on the device")
                  .arg(event.step)
                  .arg(event.ops.size())
                  .arg(formatDuration(measurement_->deviceMakespan(event.step))));
    updateComparison();
    emit measurementChanged();
    break;
  }
  case BackendEventType::Warning:
    appendLog(tr("warning (rank %1): %2").arg(event.rank).arg(event.text),
              palette::logColor(palette::Tone::Warning));
    break;
  case BackendEventType::Error: {
    const QString line =
        event.rank >= 0 ? tr("rank %1: %2").arg(event.rank).arg(event.text) : event.text;
    errors_ << line;
    appendLog(tr("error, %1").arg(line), palette::logColor(palette::Tone::Error));
    QString html =
        tr("<b>The backend reported an error.</b> %1").arg(errors_.front().toHtmlEscaped());
    if (errors_.size() > 1) html += tr(" <i>(and %1 more in the log)</i>").arg(errors_.size() - 1);
    setStatus(html, QStringLiteral("error"));
    break;
  }
  case BackendEventType::Done: {
    appendLog(tr("done: trace written to %1").arg(event.trace_path));
    // The file is the full record (transfers, devices, clock error): it replaces the live steps.
    const QString path = event.trace_path.isEmpty() ? run_trace_path_ : event.trace_path;
    const QString resolved =
        QFileInfo(path).isAbsolute() || !run_directory_ ? path : run_directory_->filePath(path);
    auto file = loadMeasuredTrace(resolved.toStdString());
    if (file && measurement_) {
      // The live steps' factor (from the start event) stands when the file does not say one.
      const double factor = file->time_factor > 0 ? file->time_factor : measurement_->timeFactor();
      auto whole = Measurement::fromTrace(file->trace, measurement_->schedule(), factor);
      if (whole) {
        measurement_ = std::make_unique<Measurement>(std::move(*whole));
        updateComparison();
        emit measurementChanged();
      } else {
        appendLog(tr("the trace file does not match the run: %1")
                      .arg(QString::fromStdString(whole.error().message)),
                  palette::logColor(palette::Tone::Warning));
      }
    } else if (!file) {
      appendLog(
          tr("could not read the trace: %1").arg(QString::fromStdString(file.error().message)),
          palette::logColor(palette::Tone::Warning));
    }
    break;
  }
  case BackendEventType::Other: appendLog(event.text, palette::secondaryText()); break;
  case BackendEventType::Text: appendLog(event.text); break;
  case BackendEventType::Malformed:
    appendLog(tr("unreadable line from the backend (%1): %2").arg(event.problem, event.text),
              palette::logColor(palette::Tone::Warning));
    break;
  }
  progress_.apply(event);
  updateProgress();
}

void RunPanel::onFinished(int exit_code, bool crashed, bool cancelled) {
  const int steps = measurement_ ? static_cast<int>(measurement_->steps().size()) : 0;
  if (cancelled) {
    appendLog(tr("cancelled; every process of the run was stopped"),
              palette::logColor(palette::Tone::Warning));
    setStatus(
        tr("<b>Cancelled.</b> Every process of the run was stopped; %n measured step(s) kept.",
           nullptr, steps),
        QStringLiteral("warning"));
    progress_bar_->setFormat(tr("cancelled"));
  } else if (!errors_.isEmpty() || crashed || exit_code != 0) {
    const QString how = crashed ? tr("crashed") : tr("exited with status %1").arg(exit_code);
    appendLog(tr("the launcher %1").arg(how), palette::logColor(palette::Tone::Error));
    QString html = tr("<b>The run failed</b> (the launcher %1).").arg(how);
    if (!errors_.isEmpty())
      html += QLatin1Char(' ') + errors_.front().toHtmlEscaped();
    else
      html += tr(" See the log for its output.");
    if (errors_.size() > 1)
      html += tr(" <i>(and %1 more errors in the log)</i>").arg(errors_.size() - 1);
    if (steps > 0) html += tr(" %n measured step(s) kept.", nullptr, steps);
    setStatus(html, QStringLiteral("error"));
    progress_bar_->setFormat(tr("failed"));
  } else {
    setStatus(
        tr("<b>Done.</b> %n measured step(s)%1; the timeline shows the measurement over the "
           "prediction.",
           nullptr, steps)
            .arg(run_device_.isEmpty() ? QString() : tr(" on %1").arg(run_device_.toHtmlEscaped())),
        QStringLiteral("ok"));
    progress_bar_->setValue(progress_bar_->maximum());
    progress_bar_->setFormat(tr("done"));
  }
  updateButtons();
  emit runningChanged(false);
}

void RunPanel::updateProgress() {
  progress_bar_->setRange(0, std::max(1, progress_.total()));
  progress_bar_->setValue(std::min(progress_.done(), std::max(1, progress_.total())));
  if (running()) progress_bar_->setFormat(progress_.text());
}

void RunPanel::setSnapshot(const SnapshotPointer &snapshot) {
  if (!snapshot || !snapshot->ok()) return;
  snapshot_ = snapshot;
  predicted_trace_.reset();
  updateComparison();
  updateButtons();
}

bool RunPanel::measurementApplies() const {
  return hasMeasurement() && snapshot_ && snapshot_->ok() &&
         sameSchedule(measurement_->schedule(), snapshot_->evaluation->schedule);
}

std::shared_ptr<const Evaluation> RunPanel::measuredStep(int step) const {
  if (!measurementApplies()) return nullptr;
  return measurement_->alignedStep(step < 0 ? measurement_->latestStep() : step);
}

Status RunPanel::importTrace(const MeasuredTraceFile &file) {
  if (!snapshot_ || !snapshot_->ok())
    return makeError("there is no prediction to compare with: the settings cannot be evaluated");
  if (running())
    return makeError("a run is in progress; cancel it or wait for it to finish, then import");
  auto measurement =
      Measurement::fromTrace(file.trace, snapshot_->evaluation->schedule, file.time_factor);
  if (!measurement) {
    setStatus(tr("<b>Not imported.</b> %1")
                  .arg(QString::fromStdString(measurement.error().message).toHtmlEscaped()),
              QStringLiteral("error"));
    return measurement.error();
  }
  measurement_ = std::make_unique<Measurement>(std::move(*measurement));
  calibration_.reset();
  errors_.clear();
  const int steps = static_cast<int>(measurement_->steps().size());
  setStatus(tr("Imported a %1 trace of %2: %n step(s).", nullptr, steps)
                .arg(QString::fromStdString(file.trace.source).toHtmlEscaped(),
                     scheduleLabel(measurement_->schedule()).toHtmlEscaped()),
            QStringLiteral("ok"));
  updateComparison();
  updateButtons();
  emit measurementChanged();
  return Ok{};
}

void RunPanel::showImportFailure(const QString &message) {
  setStatus(tr("<b>Not imported.</b> %1").arg(message.toHtmlEscaped()), QStringLiteral("error"));
}

void RunPanel::updateComparison() {
  comparison_.reset();
  calibration_shown_ = false;
  if (measurementApplies()) {
    if (!predicted_trace_)
      predicted_trace_ = traceFromEvaluation(snapshot_->plan, *snapshot_->evaluation);
    comparison_ = compareTraces(*predicted_trace_, measurement_->trace());
    // The calibrated costs are shown until the person changes them.
    if (calibration_) {
      calibration_shown_ = costsJson(snapshot_->plan) == calibration_->costs_json;
      if (!calibration_shown_) {
        calibration_.reset();
        before_calibration_.reset();
      }
    }
  }
  fillTables();
}

bool RunPanel::showingCalibration() const {
  return calibration_shown_ && comparison_.has_value();
}

const std::optional<TraceComparison> &RunPanel::comparisonBeforeCalibration() const {
  static const std::optional<TraceComparison> none;
  return showingCalibration() ? before_calibration_ : none;
}

bool RunPanel::calibrate() {
  if (!measurementApplies() || !comparison_) {
    setStatus(
        tr("<b>Nothing to calibrate to:</b> run the plan or import a measured trace of it first."),
        QStringLiteral("error"));
    return false;
  }
  if (running()) return false;
  const Plan &plan = snapshot_->plan;
  const Schedule &schedule = snapshot_->evaluation->schedule;
  auto current = planCosts(plan, schedule.placement);
  if (!current) {
    setStatus(tr("<b>Not calibrated:</b> %1")
                  .arg(QString::fromStdString(current.error().message).toHtmlEscaped()),
              QStringLiteral("error"));
    return false;
  }
  auto calibrated = calibrateCosts(schedule, measurement_->trace(), *current);
  if (!calibrated) {
    setStatus(tr("<b>Not calibrated:</b> %1")
                  .arg(QString::fromStdString(calibrated.error().message).toHtmlEscaped()),
              QStringLiteral("error"));
    return false;
  }
  // Calibrated costs are explicit per-stage op times: a model's derivation would override them.
  Plan next = plan;
  const bool had_model = next.model.has_value();
  next.model.reset();
  next.costs = *calibrated;
  // Keep the first uncalibrated plan when calibrating again on top of a calibration.
  const Plan uncalibrated = calibration_ && calibration_shown_ ? calibration_->uncalibrated : plan;
  const TraceComparison before = calibration_ && calibration_shown_ && before_calibration_
                                     ? *before_calibration_
                                     : *comparison_;
  calibration_ = Calibration{uncalibrated, costsJson(next)};
  before_calibration_ = before;
  appendLog(tr("calibrated: per-stage F, B, W%1 refitted to %n measured step(s)", nullptr,
               static_cast<int>(measurement_->steps().size()))
                .arg(calibrated->boundary_transfer_us.empty() ? QString() : tr(", transfers")));
  setStatus(tr("<b>Calibrated.</b> The prediction now uses the measured per-stage op times%1 (they "
               "stand in for F, B, W in "
               "the settings until you edit those or Revert); the tables show the errors before "
               "and after.")
                .arg(had_model
                         ? tr(" instead of the model's derived costs (Revert returns to the model)")
                         : QString()),
            QStringLiteral("ok"));
  emit planReplaced(next);
  return true;
}

void RunPanel::revertCalibration() {
  if (!calibration_) return;
  const Plan plan = calibration_->uncalibrated;
  calibration_.reset();
  before_calibration_.reset();
  setStatus(tr("Back to the costs before calibration."), QString());
  emit planReplaced(plan);
}

void RunPanel::fillTables() {
  const bool calibrated = showingCalibration() && before_calibration_;
  const TraceComparison *now = comparison_ ? &*comparison_ : nullptr;
  const TraceComparison *before = calibrated ? &*before_calibration_ : nullptr;

  // Step metrics: measured, then each prediction with its error.
  QStringList step_headers{tr("Measured")};
  if (calibrated)
    step_headers << tr("Predicted\nbefore") << tr("Error\nbefore") << tr("Predicted\nafter")
                 << tr("Error\nafter");
  else
    step_headers << tr("Predicted") << tr("Error");
  step_table_->clear();
  step_table_->setColumnCount(static_cast<int>(step_headers.size()));
  step_table_->setHorizontalHeaderLabels(step_headers);
  step_table_->setRowCount(3);
  step_table_->setVerticalHeaderLabels(
      {tr("Step time"), tr("Bubble fraction"), tr("Bubble ratio")});
  step_table_->verticalHeaderItem(1)->setToolTip(
      tr("bubble_fraction = 1 \u2212 \u03a3 busy / (P\u00b7T): idle share of the step"));
  step_table_->verticalHeaderItem(2)->setToolTip(tr(
      "bubble_ratio = (P\u00b7T \u2212 \u03a3 busy) / \u03a3 busy: idle time per unit of compute"));
  if (now) {
    const auto fill = [this](int column, const TraceComparison &comparison, bool with_measured) {
      if (with_measured) {
        setCell(step_table_, 0, 0, formatDuration(comparison.measured.makespan_us),
                tr("The median measured step (by step time), in planned time"));
        setCell(step_table_, 1, 0, formatPercent(comparison.measured.bubble_fraction));
        setCell(step_table_, 2, 0, formatPercent(comparison.measured.bubble_ratio));
      }
      setCell(step_table_, 0, column, formatDuration(comparison.predicted.makespan_us));
      setCell(step_table_, 1, column, formatPercent(comparison.predicted.bubble_fraction));
      setCell(step_table_, 2, column, formatPercent(comparison.predicted.bubble_ratio));
      setCell(step_table_, 0, column + 1, formatSignedPercent(comparison.makespan_relative_error),
              tr("(measured \u2212 predicted) / predicted"));
      setCell(step_table_, 1, column + 1,
              formatPointDifference(comparison.bubble_fraction_difference),
              tr("measured \u2212 predicted, in percentage points"));
      setCell(step_table_, 2, column + 1, formatPointDifference(comparison.bubble_ratio_difference),
              tr("measured \u2212 predicted, in percentage points"));
    };
    if (before) {
      fill(1, *before, true);
      fill(3, *now, false);
    } else {
      fill(1, *now, true);
    }
  }

  // Per op kind: median and worst relative error of the durations.
  QStringList kind_headers;
  if (calibrated)
    kind_headers << tr("Median\nbefore") << tr("Worst\nbefore") << tr("Median\nafter")
                 << tr("Worst\nafter");
  else
    kind_headers << tr("Median |error|") << tr("Worst |error|");
  kind_table_->clear();
  kind_table_->setColumnCount(static_cast<int>(kind_headers.size()));
  kind_table_->setHorizontalHeaderLabels(kind_headers);
  for (int column = 0; column < kind_table_->columnCount(); ++column)
    kind_table_->horizontalHeaderItem(column)->setToolTip(
        tr("|measured \u2212 predicted| / predicted duration of each op, its median over the "
           "measured steps"));
  const std::vector<KindError> empty;
  const auto &kinds = now ? now->kinds : empty;
  kind_table_->setRowCount(static_cast<int>(kinds.size()));
  QStringList kind_rows;
  for (const auto &entry : kinds)
    kind_rows << tr("%1 (%n ops)", nullptr, entry.count).arg(kindLabel(entry.kind));
  kind_table_->setVerticalHeaderLabels(kind_rows);
  const auto fill_kinds = [this](int column, const TraceComparison &comparison) {
    for (std::size_t row = 0; row < comparison.kinds.size(); ++row) {
      const KindError &entry = comparison.kinds[row];
      const QString direction =
          tr("median signed error %1: measured %2 than predicted")
              .arg(formatSignedPercent(entry.median_signed_error),
                   entry.median_signed_error >= 0 ? tr("slower") : tr("faster"));
      setCell(kind_table_, static_cast<int>(row), column,
              formatPercent(entry.median_relative_error), direction);
      setCell(kind_table_, static_cast<int>(row), column + 1,
              formatPercent(entry.worst_relative_error),
              tr("the largest |measured \u2212 predicted| / predicted over the op's instances"));
    }
  };
  if (before) {
    fill_kinds(0, *before);
    fill_kinds(2, *now);
  } else if (now) {
    fill_kinds(0, *now);
  }
  // A few rows only: size the tables to them so the space goes where it is used.
  for (QTableWidget *table : {step_table_, kind_table_}) {
    table->resizeRowsToContents();
    int height = table->horizontalHeader()->sizeHint().height() + 2 * table->frameWidth() + 2;
    for (int row = 0; row < table->rowCount(); ++row)
      height += table->rowHeight(row);
    table->setMaximumHeight(std::max(height, table->horizontalHeader()->sizeHint().height() + 24));
  }

  QString note;
  if (!hasMeasurement()) {
    note = tr("No measurement yet.");
  } else if (!measurementApplies()) {
    note = tr("The measurement is of %1, not of the schedule shown: set those settings to see it.")
               .arg(scheduleLabel(measurement_->schedule()));
  } else {
    note = tr("%n step(s) measured", nullptr, static_cast<int>(measurement_->steps().size()));
    const double factor = measurement_->timeFactor();
    if (std::abs(factor - 1) > 1e-9) {
      // The backend sized its work so that a planned microsecond takes `factor` on the device.
      note += tr("; times in planned units: the device ran each planned \u00b5s as %1 (measured "
                 "step %2 on the device)")
                  .arg(formatDuration(factor),
                       formatDuration(measurement_->deviceMakespan(measurement_->latestStep())));
    }
    note += QLatin1Char('.');
  }
  table_note_->setText(note);
}

void RunPanel::updateButtons() {
  const bool busy = running();
  const bool needs_backend = command_edit_->text().contains(QStringLiteral("{backend}"));
  run_button_->setEnabled(!busy && snapshot_ && (!needs_backend || !backend_path_.isEmpty()));
  run_button_->setToolTip(
      needs_backend && backend_path_.isEmpty()
          ? tr("pipescope-backend was not found; see the note above")
          : tr("Write the shown plan with its lowered program and run it on the target (Ctrl+R)"));
  cancel_button_->setEnabled(busy && !process_->cancelling());
  target_box_->setEnabled(!busy);
  command_edit_->setEnabled(!busy);
  reset_command_->setEnabled(!busy);
  warmup_box_->setEnabled(!busy);
  steps_box_->setEnabled(!busy);
  calibrate_button_->setEnabled(!busy && comparison_.has_value());
  revert_button_->setVisible(calibration_.has_value() && calibration_shown_);
}

void RunPanel::setStatus(const QString &html, const QString &tone) {
  const palette::Tone which = tone == QStringLiteral("error")     ? palette::Tone::Error
                              : tone == QStringLiteral("warning") ? palette::Tone::Warning
                              : tone == QStringLiteral("ok")      ? palette::Tone::Ok
                              : tone == QStringLiteral("busy")    ? palette::Tone::Busy
                                                                  : palette::Tone::Neutral;
  status_->setStyleSheet(palette::toneStyleSheet(which));
  status_->setText(html);
}

QString RunPanel::statusText() const {
  QString plain = status_->text();
  plain.remove(QRegularExpression(QStringLiteral("<[^>]*>")));
  return plain;
}

QString RunPanel::logText() const {
  return log_->toPlainText();
}

void RunPanel::appendLog(const QString &text, const QColor &color) {
  const QString escaped = text.toHtmlEscaped();
  log_->appendHtml(
      !color.isValid()
          ? escaped
          : QStringLiteral("<span style='color:%1'>%2</span>").arg(color.name(), escaped));
}

} // namespace pipescope::gui
