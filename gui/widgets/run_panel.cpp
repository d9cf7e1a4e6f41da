#include "gui/widgets/run_panel.h"

#include <QComboBox>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QPlainTextEdit>
#include <QProgressBar>
#include <QPushButton>
#include <QSettings>
#include <QSpinBox>
#include <QSplitter>
#include <QTableView>
#include <QToolButton>
#include <QVBoxLayout>

#include "gui/timeline/palette.h"

namespace pipescope::gui {

namespace {

const QString kTargetKey = QStringLiteral("run/target");
const QString kWarmupKey = QStringLiteral("run/warmup");
const QString kStepsKey = QStringLiteral("run/steps");
QString templateKey(LaunchTarget target) {
  return QStringLiteral("run/template/") + launchTargetKey(target);
}

QTableView *makeTable(QAbstractItemModel *model, QWidget *parent, const QString &name) {
  auto *table = new QTableView(parent);
  table->setObjectName(name);
  table->setModel(model);
  table->setEditTriggers(QAbstractItemView::NoEditTriggers);
  table->setSelectionMode(QAbstractItemView::NoSelection);
  table->setFocusPolicy(Qt::NoFocus);
  table->verticalHeader()->setVisible(true);
  table->verticalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
  table->horizontalHeader()->setSectionResizeMode(QHeaderView::Stretch);
  table->setWordWrap(false);
  table->setAlternatingRowColors(true);
  return table;
}

palette::Tone paletteTone(RunTone tone) {
  switch (tone) {
  case RunTone::Busy: return palette::Tone::Busy;
  case RunTone::Ok: return palette::Tone::Ok;
  case RunTone::Warning: return palette::Tone::Warning;
  case RunTone::Error: return palette::Tone::Error;
  case RunTone::Neutral:
  case RunTone::Quiet: break;
  }
  return palette::Tone::Neutral;
}

} // namespace

RunPanel::RunPanel(bool use_settings, QWidget *parent)
    : QWidget(parent), use_settings_(use_settings) {
  session_ = new RunSession(this);
  step_model_ = new StepErrorModel(this);
  kind_model_ = new KindErrorModel(this);
  auto *layout = new QVBoxLayout(this);
  layout->setContentsMargins(6, 6, 6, 4);
  layout->setSpacing(4);
  layout->addLayout(buildRunRow());
  layout->addLayout(buildCommandRow());
  backend_note_ = new QLabel(this);
  backend_note_->setObjectName(QStringLiteral("run_backend_note"));
  backend_note_->setWordWrap(true);
  backend_note_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  backend_note_->setStyleSheet(palette::toneStyleSheet(palette::Tone::Warning));
  layout->addWidget(backend_note_);
  // How far, beside what is happening.
  auto *status_row = new QHBoxLayout;
  status_row->setSpacing(6);
  status_row->addWidget(progress_bar_, 0, Qt::AlignTop);
  status_row->addWidget(status_, 1);
  layout->addLayout(status_row);
  // The errors beside the log.
  auto *splitter = new QSplitter(Qt::Horizontal, this);
  splitter->addWidget(buildTables(splitter));
  splitter->addWidget(buildLog(splitter));
  splitter->setStretchFactor(0, 3);
  splitter->setStretchFactor(1, 1);
  splitter->setSizes({480, 200});
  layout->addWidget(splitter, 1);
  bindSession();
  restoreSettings();
}

RunPanel::~RunPanel() = default;

QLayout *RunPanel::buildRunRow() {
  // Where, how long, go, stop.
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
  row->addWidget(run_button_);
  cancel_button_ = new QPushButton(tr("Cancel"), this);
  cancel_button_->setObjectName(QStringLiteral("run_cancel"));
  cancel_button_->setToolTip(tr("Stop every process the run started"));
  row->addWidget(cancel_button_);
  row->addStretch(1);
  progress_bar_ = new QProgressBar(this);
  progress_bar_->setObjectName(QStringLiteral("run_progress"));
  progress_bar_->setRange(0, 1);
  progress_bar_->setValue(0);
  progress_bar_->setTextVisible(true);
  progress_bar_->setFixedWidth(230);
  status_ = new QLabel(this);
  status_->setObjectName(QStringLiteral("run_status"));
  status_->setWordWrap(true);
  status_->setTextFormat(Qt::RichText);
  status_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  return row;
}

QLayout *RunPanel::buildCommandRow() {
  auto *row = new QHBoxLayout;
  row->setSpacing(4);
  row->addWidget(new QLabel(tr("command"), this));
  command_edit_ = new QLineEdit(this);
  command_edit_->setObjectName(QStringLiteral("run_command"));
  command_edit_->setToolTip(tr("The launch command. Placeholders:<br>") +
                            launchPlaceholders().join(QStringLiteral("<br>")));
  row->addWidget(command_edit_, 1);
  reset_command_ = new QToolButton(this);
  reset_command_->setText(tr("Reset"));
  reset_command_->setToolTip(tr("Back to this target's default command"));
  row->addWidget(reset_command_);
  return row;
}

QWidget *RunPanel::buildTables(QWidget *parent) {
  auto *tables = new QWidget(parent);
  auto *layout = new QVBoxLayout(tables);
  layout->setContentsMargins(0, 0, 0, 0);
  layout->setSpacing(3);
  step_table_ = makeTable(step_model_, tables, QStringLiteral("run_step_errors"));
  kind_table_ = makeTable(kind_model_, tables, QStringLiteral("run_kind_errors"));
  layout->addWidget(step_table_, 3);
  layout->addWidget(kind_table_, 4);
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
  layout->addLayout(calibrate_row);
  return tables;
}

QWidget *RunPanel::buildLog(QWidget *parent) {
  log_ = new QPlainTextEdit(parent);
  log_->setObjectName(QStringLiteral("run_log"));
  log_->setReadOnly(true);
  log_->setMaximumBlockCount(5000);
  log_->setLineWrapMode(QPlainTextEdit::WidgetWidth);
  log_->setPlaceholderText(tr("The backend's progress, warnings, errors and stderr appear here."));
  QFont mono(QStringLiteral("monospace"));
  mono.setStyleHint(QFont::Monospace);
  mono.setPointSizeF(std::max(7.0, font().pointSizeF() - 1));
  log_->setFont(mono);
  return log_;
}

void RunPanel::bindSession() {
  connect(target_box_, &QComboBox::currentIndexChanged, this, [this] {
    loadTemplate();
    if (use_settings_) QSettings().setValue(kTargetKey, launchTargetKey(target()));
  });
  connect(command_edit_, &QLineEdit::editingFinished, this, &RunPanel::storeTemplate);
  connect(command_edit_, &QLineEdit::textChanged, this, &RunPanel::updateButtons);
  connect(reset_command_, &QToolButton::clicked, this, [this] {
    command_edit_->setText(defaultLaunchTemplate(target()));
    storeTemplate();
  });
  connect(run_button_, &QPushButton::clicked, this, [this] { startRun(); });
  connect(cancel_button_, &QPushButton::clicked, session_, &RunSession::cancel);
  connect(calibrate_button_, &QPushButton::clicked, session_, [this] { session_->calibrate(); });
  connect(revert_button_, &QPushButton::clicked, session_, &RunSession::revertCalibration);
  connect(session_, &RunSession::statusChanged, this, &RunPanel::showStatus);
  connect(session_, &RunSession::progressChanged, this, &RunPanel::showProgress);
  connect(session_, &RunSession::comparisonChanged, this, &RunPanel::showComparison);
  connect(session_, &RunSession::logLine, this, &RunPanel::appendLog);
  connect(session_, &RunSession::logCleared, log_, &QPlainTextEdit::clear);
  connect(session_, &RunSession::measurementChanged, this, &RunPanel::measurementChanged);
  connect(session_, &RunSession::planReplaced, this, &RunPanel::planReplaced);
  connect(session_, &RunSession::runningChanged, this, [this](bool running) {
    showProgress();
    emit runningChanged(running);
  });
}

void RunPanel::restoreSettings() {
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
  showComparison();
  showProgress();
  showStatus();
}

void RunPanel::setSnapshot(const SnapshotPointer &snapshot) {
  session_->setSnapshot(snapshot);
  updateButtons();
}

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
  session_->setBackendPath(path);
  updateBackendNote();
  updateButtons();
}

bool RunPanel::startRun() {
  RunRequest request;
  request.target = target();
  request.command_template = command_edit_->text();
  request.warmup_steps = warmup_box_->value();
  request.measured_steps = steps_box_->value();
  if (!session_->start(request)) return false;
  storeTemplate();
  if (use_settings_) {
    QSettings settings;
    settings.setValue(kWarmupKey, request.warmup_steps);
    settings.setValue(kStepsKey, request.measured_steps);
  }
  updateButtons();
  return true;
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
  if (!session_->backendPath().isEmpty()) {
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

void RunPanel::showStatus() {
  status_->setStyleSheet(palette::toneStyleSheet(paletteTone(session_->statusTone())));
  status_->setText(session_->statusHtml());
}

void RunPanel::showProgress() {
  const RunProgress &progress = session_->progress();
  const int total = std::max(1, progress.total());
  progress_bar_->setRange(0, total);
  progress_bar_->setValue(session_->succeeded() ? total : std::min(progress.done(), total));
  progress_bar_->setFormat(session_->progressLabel());
  updateButtons();
}

void RunPanel::showComparison() {
  const auto &now = session_->comparison();
  const auto &before = session_->comparisonBeforeCalibration();
  step_model_->setComparisons(now ? &*now : nullptr, before ? &*before : nullptr);
  kind_model_->setComparisons(now ? &*now : nullptr, before ? &*before : nullptr);
  // A few rows only: size the tables to them so the space goes where it is used.
  for (QTableView *table : {step_table_, kind_table_}) {
    table->resizeRowsToContents();
    const int header = table->horizontalHeader()->sizeHint().height();
    int height = header + 2 * table->frameWidth() + 2;
    for (int row = 0; row < table->model()->rowCount(); ++row)
      height += table->rowHeight(row);
    table->setMaximumHeight(std::max(height, header + 24));
  }
  table_note_->setText(session_->measurementNote());
  updateButtons();
}

void RunPanel::updateButtons() {
  const bool busy = session_->running();
  const bool needs_backend = command_edit_->text().contains(QStringLiteral("{backend}"));
  const bool no_backend = needs_backend && session_->backendPath().isEmpty();
  run_button_->setEnabled(!busy && session_->snapshot() && !no_backend);
  run_button_->setToolTip(
      no_backend
          ? tr("pipescope-backend was not found; see the note above")
          : tr("Write the shown plan with its lowered program and run it on the target (Ctrl+R)"));
  cancel_button_->setEnabled(busy && !session_->process()->cancelling());
  target_box_->setEnabled(!busy);
  command_edit_->setEnabled(!busy);
  reset_command_->setEnabled(!busy);
  warmup_box_->setEnabled(!busy);
  steps_box_->setEnabled(!busy);
  calibrate_button_->setEnabled(session_->canCalibrate());
  revert_button_->setVisible(session_->showingCalibration());
}

QString RunPanel::logText() const {
  return log_->toPlainText();
}

void RunPanel::appendLog(const QString &text, RunTone tone) {
  const QColor color = tone == RunTone::Quiet     ? palette::faintText()
                       : tone == RunTone::Neutral ? QColor()
                       : tone == RunTone::Ok      ? palette::tone(palette::Tone::Ok).text
                                                  : palette::logColor(paletteTone(tone));
  const QString escaped = text.toHtmlEscaped();
  log_->appendHtml(
      !color.isValid()
          ? escaped
          : QStringLiteral("<span style='color:%1'>%2</span>").arg(color.name(), escaped));
}

} // namespace pipescope::gui
