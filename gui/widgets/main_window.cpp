#include "gui/widgets/main_window.h"

#include "gui/explorer/playback.h"

#include <QAction>
#include <QApplication>
#include <QCloseEvent>
#include <QComboBox>
#include <QDockWidget>
#include <QFile>
#include <QFileInfo>
#include <QHBoxLayout>
#include <QImage>
#include <QLabel>
#include <QMenuBar>
#include <QPainter>
#include <QRegularExpression>
#include <QResizeEvent>
#include <QScrollArea>
#include <QScrollBar>
#include <QSettings>
#include <QSignalBlocker>
#include <QSplitter>
#include <QStatusBar>
#include <QTabWidget>
#include <QTextDocument>
#include <QToolButton>
#include <QVBoxLayout>
#include <algorithm>
#include <tuple>

#include "engine/output_file.h"
#include "engine/trace_file.h"
#include "gui/charts/charts.h"
#include "gui/run/measurement.h"
#include "gui/timeline/palette.h"
#include "gui/timeline/svg_export.h"
#include "gui/widgets/compare_view.h"
#include "gui/widgets/controls_panel.h"
#include "gui/widgets/document_actions.h"
#include "gui/widgets/explain_panel.h"
#include "gui/widgets/layer_editor.h"
#include "gui/widgets/memory_time_view.h"
#include "gui/widgets/mesh_widget.h"
#include "gui/widgets/metrics_panel.h"
#include "gui/widgets/run_panel.h"
#include "gui/widgets/search_panel.h"
#include "gui/widgets/timeline_widget.h"

namespace pipescope::gui {

namespace {

const QString kLastPlanKey = QStringLiteral("session/last_plan");
const QString kGeometryKey = QStringLiteral("window/geometry");
const QString kStateKey = QStringLiteral("window/state");

// A dock's scroll area as wide as its content would like to be. QScrollArea's own hint is a
// fixed guess (267 px), so the settings dock opened at its 290 px minimum, where the settings'
// long rows ("recompute" with its modules button, "MoE dispatch") wrap under their labels
// although the dock may grow to 340 px.
class DockScrollArea : public QScrollArea {
public:
  using QScrollArea::QScrollArea;
  QSize sizeHint() const override {
    QSize hint = QScrollArea::sizeHint();
    if (widget())
      hint.setWidth(widget()->sizeHint().width() + verticalScrollBar()->sizeHint().width() +
                    2 * frameWidth());
    return hint;
  }
};

QScrollArea *scrolling(QWidget *content, QWidget *parent) {
  auto *area = new DockScrollArea(parent);
  area->setWidget(content);
  area->setWidgetResizable(true);
  area->setFrameShape(QFrame::NoFrame);
  area->setHorizontalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
  area->verticalScrollBar()->setStyleSheet(QStringLiteral(
      "QScrollBar:vertical { background: #f0f0f2; width: 12px; margin: 0; }"
      "QScrollBar::handle:vertical { background: #c2c4ca; min-height: 28px; margin: 0 2px; }"
      "QScrollBar::handle:vertical:hover { background: #a9acb3; }"
      "QScrollBar::add-line:vertical, QScrollBar::sub-line:vertical { height: 0; }"
      "QScrollBar::add-page:vertical, QScrollBar::sub-page:vertical { background: none; }"));
  return area;
}

// A hover tooltip's rich text as one status-bar line.
QString plainText(const QString &rich) {
  QString plain = rich;
  plain.replace(QStringLiteral("<br>"), QStringLiteral(" \u00b7 "));
  plain.remove(QRegularExpression(QStringLiteral("<[^>]*>")));
  plain.replace(QStringLiteral("&nbsp;"), QStringLiteral(" "));
  return plain;
}

} // namespace

MainWindow::MainWindow(const MainWindowOptions &options, QWidget *parent)
    : QMainWindow(parent), options_(options) {
  setWindowTitle(tr("pipescope"));
  zoom_ = new ZoomStack(this);
  playback_ = new Playback(this);
  buildDocks();
  setCentralWidget(buildCentralArea());
  busy_label_ = new QLabel(this);
  statusBar()->addPermanentWidget(busy_label_);
  connectViews();
  buildDocumentActions();
  buildMenus();
  resize(1280, 800);
  setPlan(restoreSession());
}

// The settings on the left, the metrics on the right.
void MainWindow::buildDocks() {
  controls_ = new ControlsPanel;
  controls_->setObjectName(QStringLiteral("controls"));
  auto *controls_dock = new QDockWidget(tr("Settings"), this);
  controls_dock->setObjectName(QStringLiteral("settings_dock"));
  controls_dock->setWidget(scrolling(controls_, controls_dock));
  // Closable, and listed in the View menu: with both docks the window is at least 1224 px
  // wide, more than half of a 1920 px screen.
  controls_dock->setFeatures(QDockWidget::DockWidgetMovable | QDockWidget::DockWidgetClosable);
  controls_dock->setMinimumWidth(290);
  controls_dock->setMaximumWidth(340);
  addDockWidget(Qt::LeftDockWidgetArea, controls_dock);

  metrics_ = new MetricsPanel;
  metrics_->setObjectName(QStringLiteral("metrics"));
  auto *metrics_dock = new QDockWidget(tr("Metrics"), this);
  metrics_dock->setObjectName(QStringLiteral("metrics_dock"));
  metrics_dock->setWidget(scrolling(metrics_, metrics_dock));
  metrics_dock->setFeatures(QDockWidget::DockWidgetMovable | QDockWidget::DockWidgetClosable);
  metrics_dock->setMinimumWidth(270);
  metrics_dock->setMaximumWidth(330);
  addDockWidget(Qt::RightDockWidgetArea, metrics_dock);
  settings_dock_ = controls_dock;
  metrics_dock_ = metrics_dock;
}

// The timeline over the bottom tabs (memory, mesh, explain, compare, run, search).
QWidget *MainWindow::buildCentralArea() {
  auto *splitter = new QSplitter(Qt::Vertical, this);
  auto *top = new QWidget(splitter);
  auto *top_layout = new QVBoxLayout(top);
  top_layout->setContentsMargins(4, 4, 4, 0);
  top_layout->setSpacing(4);
  banner_ = new QLabel(top);
  banner_->setObjectName(QStringLiteral("error_banner"));
  banner_->setWordWrap(true);
  banner_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  banner_->setStyleSheet(palette::toneStyleSheet(palette::Tone::Error, 6));
  banner_->hide();
  top_layout->addWidget(banner_);
  top_layout->addWidget(buildTransportBar());
  timeline_ = new TimelineWidget(top);
  timeline_->setObjectName(QStringLiteral("timeline"));
  timeline_->setZoomStack(zoom_);
  top_layout->addWidget(timeline_, 1);

  tabs_ = new QTabWidget(splitter);
  tabs_->setDocumentMode(true);
  auto *memory_tab = new QSplitter(Qt::Horizontal, tabs_);
  memory_bars_ = new MemoryBarsChart(memory_tab);
  memory_time_ = new MemoryTimeView(memory_tab);
  memory_tab->addWidget(memory_bars_);
  memory_tab->addWidget(memory_time_);
  memory_tab->setStretchFactor(0, 1);
  memory_tab->setStretchFactor(1, 1);
  memory_tab->setSizes({400, 400});
  memory_time_->setZoomStack(zoom_);
  tabs_->addTab(memory_tab, tr("Memory"));
  mesh_ = new MeshWidget(tabs_);
  tabs_->addTab(mesh_, tr("Mesh"));
  explain_ = new ExplainPanel(tabs_);
  tabs_->addTab(explain_, tr("Explain"));
  compare_ = new CompareView(tabs_);
  tabs_->addTab(compare_, tr("Compare"));
  run_panel_ = new RunPanel(options_.use_settings, tabs_);
  run_panel_->setObjectName(QStringLiteral("run_panel"));
  tabs_->addTab(run_panel_, tr("Run"));
  search_ = new SearchPanel(tabs_);
  tabs_->addTab(search_, tr("Search"));
  splitter->addWidget(top);
  splitter->addWidget(tabs_);
  splitter->setStretchFactor(0, 3);
  splitter->setStretchFactor(1, 2);
  splitter->setSizes({440, 300});
  // Stacked schedules need height: the Compare tab takes most of it while it is open.
  // The Run tab's tables and log too.
  connect(tabs_, &QTabWidget::currentChanged, this, [this, splitter](int index) {
    const int total = splitter->height();
    const bool tall = tabs_->widget(index) == compare_ || tabs_->widget(index) == run_panel_ ||
                      tabs_->widget(index) == search_;
    // The search starts from the model, hardware and GPUs in the controls (and follows them while
    // it is open: requestEvaluation).
    if (tabs_->widget(index) == search_) search_->takeSettingsFrom(controls_->plan());
    splitter->setSizes(
        {tall ? total * 2 / 5 : total * 3 / 5, tall ? total * 3 / 5 : total * 2 / 5});
  });

  return splitter;
}

// What each view follows: the controls, the run, the search, the evaluator, zoom and playback.
void MainWindow::connectViews() {
  connect(controls_, &ControlsPanel::planEdited, this,
          [this](const Plan &plan) { requestEvaluation(withoutStaleCalibration(plan)); });
  connect(run_panel_, &RunPanel::measurementChanged, this, [this] {
    updateMeasuredControls();
    rebuildTimeline(false);
    updateLegend();
  });
  connect(run_panel_, &RunPanel::planReplaced, this, [this](const Plan &plan) { setPlan(plan); });
  connect(search_, &SearchPanel::planChosen, this, [this](const Plan &plan) { setPlan(plan); });
  connect(run_panel_, &RunPanel::runningChanged, this, [this](bool running) {
    run_action_->setEnabled(!running);
    cancel_action_->setEnabled(running);
    // A run in progress is worth watching: show its tab and the live overlay.
    if (running) tabs_->setCurrentWidget(run_panel_);
  });
  connect(&evaluator_, &ExplorerEvaluator::snapshotReady, this, &MainWindow::showSnapshot);
  connect(&evaluator_, &ExplorerEvaluator::busyChanged, this,
          [this](bool busy) { busy_label_->setText(busy ? tr("simulating\u2026") : QString()); });
  connect(zoom_, &ZoomStack::zoomChanged, compare_, &CompareView::followZoom);
  connect(timeline_, &TimelineWidget::hoverTextChanged, this,
          [this](const QString &text) { statusBar()->showMessage(plainText(text)); });
  connect(mesh_, &MeshWidget::hoverTextChanged, this,
          [this](const QString &text) { statusBar()->showMessage(plainText(text)); });
  connect(playback_, &Playback::playheadChanged, this, [this](double time_us) {
    timeline_->setPlayhead(time_us);
    memory_time_->setPlayhead(time_us);
    updateTransportLabel();
  });
  connect(playback_, &Playback::playheadSettled, this, &MainWindow::updateMemoryBars);
  connect(playback_, &Playback::playingChanged, this, [this](bool playing) {
    play_button_->setText(playing ? tr("\u23f8 Pause") : tr("\u25b6 Play"));
  });
}

// Open, save, exports, imports and recent files (DocumentActions), and what follows from them.
void MainWindow::buildDocumentActions() {
  DocumentActions::Parts parts;
  parts.dialog_parent = this;
  parts.controls = controls_;
  parts.timeline = timeline_;
  parts.run_panel = run_panel_;
  parts.shown = [this] { return shown_; };
  documents_ = new DocumentActions(parts, options_.use_settings, this);
  connect(documents_, &DocumentActions::planOpened, this, &MainWindow::setPlan);
  connect(documents_, &DocumentActions::publishedRunChosen, this, &MainWindow::openPublishedRun);
  connect(documents_, &DocumentActions::failed, this, &MainWindow::showError);
  connect(documents_, &DocumentActions::message, statusBar(), &QStatusBar::showMessage);
  connect(documents_, &DocumentActions::importStarted, this,
          [this] { tabs_->setCurrentWidget(run_panel_); });
  // A real run brings its own plan (its schedule, P, M, V and the run's median op times): show
  // that plan, and draw the run over its prediction once the snapshot is ready.
  connect(documents_, &DocumentActions::realRunImported, this, [this](const ImportedRun &run) {
    MeasuredTraceFile file;
    file.trace = run.trace;
    pending_run_ = std::move(file);
    setPlan(run.trace.plan);
  });
}

// The plan to open with: the one shown when the window last closed, else the example.
Plan MainWindow::restoreSession() {
  Plan plan = examplePlan();
  if (options_.use_settings) {
    QSettings settings;
    if (settings.contains(kGeometryKey))
      restoreGeometry(settings.value(kGeometryKey).toByteArray());
    if (settings.contains(kStateKey)) restoreState(settings.value(kStateKey).toByteArray());
    const QString last = settings.value(kLastPlanKey).toString();
    if (!last.isEmpty()) {
      if (auto json = parseJsonLimited(last.toStdString()); json.ok())
        if (auto remembered = planFromJson(*json); remembered.ok()) plan = std::move(*remembered);
    }
  }
  return plan;
}

MainWindow::~MainWindow() = default;

QWidget *MainWindow::buildTransportBar() {
  auto *bar = new QWidget;
  auto *layout = new QHBoxLayout(bar);
  layout->setContentsMargins(0, 0, 0, 0);
  layout->setSpacing(4);
  auto tool = [bar, layout](const QString &text, const QString &tip) {
    auto *button = new QToolButton(bar);
    button->setText(text);
    button->setToolTip(tip);
    button->setAutoRaise(true);
    layout->addWidget(button);
    return button;
  };
  play_button_ = tool(tr("\u25b6 Play"), tr("Play: a playhead sweeps the step (Space)"));
  play_button_->setObjectName(QStringLiteral("play"));
  connect(play_button_, &QToolButton::clicked, this, [this] { setPlaying(!playing()); });
  auto *stop =
      tool(tr("\u25a0"), tr("Stop and clear the playhead; memory bars return to the peak"));
  connect(stop, &QToolButton::clicked, playback_, &Playback::stop);
  auto *back = tool(tr("|\u25c0"), tr("Step back to the previous op start or end (,)"));
  connect(back, &QToolButton::clicked, this, [this] { stepPlayhead(-1); });
  auto *forward = tool(tr("\u25b6|"), tr("Step to the next op start or end (.)"));
  connect(forward, &QToolButton::clicked, this, [this] { stepPlayhead(1); });
  speed_box_ = new QComboBox(bar);
  for (double speed : {0.25, 0.5, 1.0, 2.0, 4.0})
    speed_box_->addItem(QStringLiteral("%1\u00d7").arg(speed), speed);
  speed_box_->setCurrentIndex(2);
  speed_box_->setToolTip(
      tr("Playback speed: at 1\u00d7 one step plays in %1 s").arg(Playback::kPlaySeconds));
  connect(speed_box_, &QComboBox::currentIndexChanged, this,
          [this] { playback_->setSpeed(speed_box_->currentData().toDouble()); });
  layout->addWidget(speed_box_);
  transport_label_ = new QLabel(bar);
  // Room for the step ("step 999.99 ms") without re-laying out the bar on every new plan; the
  // measurement's two boxes need the rest of the bar at 1280 px.
  transport_label_->setMinimumWidth(transport_label_->fontMetrics().horizontalAdvance(
                                        tr("step %1").arg(QStringLiteral("999.99 ms"))) +
                                    4);
  layout->addWidget(transport_label_);
  layout->addSpacing(8);
  auto *zoom_out = tool(tr("\u2212"), zoom_->zoomOutAction()->toolTip());
  connect(zoom_out, &QToolButton::clicked, zoom_, &ZoomStack::zoomOut);
  auto *zoom_in = tool(tr("+"), zoom_->zoomInAction()->toolTip());
  connect(zoom_in, &QToolButton::clicked, zoom_, &ZoomStack::zoomIn);
  auto *fit = tool(tr("Fit"), zoom_->resetZoomAction()->toolTip());
  connect(fit, &QToolButton::clicked, zoom_, &ZoomStack::resetZoom);
  layout->addStretch(1);
  // How a measurement is drawn; shown only while one fits the schedule on screen.
  measured_controls_ = new QWidget(bar);
  auto *measured_layout = new QHBoxLayout(measured_controls_);
  measured_layout->setContentsMargins(0, 0, 0, 0);
  measured_layout->setSpacing(4);
  overlay_box_ = new QComboBox(measured_controls_);
  overlay_box_->setObjectName(QStringLiteral("overlay_mode"));
  overlay_box_->addItem(tr("Overlay"), static_cast<int>(OverlayMode::Overlay));
  overlay_box_->addItem(tr("Side by side"), static_cast<int>(OverlayMode::SideBySide));
  overlay_box_->addItem(tr("Prediction only"), static_cast<int>(OverlayMode::Hidden));
  overlay_box_->setToolTip(tr("Draw the measured step over the predicted ops (outlined), below "
                              "them on the same axis, or not at all"));
  measured_layout->addWidget(overlay_box_);
  measured_step_box_ = new QComboBox(measured_controls_);
  measured_step_box_->setObjectName(QStringLiteral("measured_step"));
  measured_step_box_->setToolTip(tr("Which measured step to draw, aligned at its own start"));
  measured_layout->addWidget(measured_step_box_);
  // They may shrink (eliding their text) but never widen the window.
  for (QComboBox *box : {overlay_box_, measured_step_box_}) {
    box->setSizeAdjustPolicy(QComboBox::AdjustToContents);
    box->setMinimumWidth(72);
  }
  layout->addWidget(measured_controls_);
  measured_controls_->hide();
  connect(overlay_box_, &QComboBox::currentIndexChanged, this, [this] {
    rebuildTimeline(false);
    updateLegend();
  });
  connect(measured_step_box_, &QComboBox::currentIndexChanged, this,
          [this] { rebuildTimeline(false); });
  // The legend gets its own line under the buttons: what each letter means must stay readable.
  auto *column = new QWidget;
  auto *column_layout = new QVBoxLayout(column);
  column_layout->setContentsMargins(0, 0, 0, 0);
  column_layout->setSpacing(2);
  column_layout->addWidget(bar);
  legend_ = new QLabel(column);
  legend_->setTextFormat(Qt::RichText);
  legend_->setObjectName(QStringLiteral("legend"));
  // The legend must never widen the window. On a narrow one it wraps between its colours onto a
  // second line instead of cutting off what the last ones mean (DualPipeV with a run and its
  // critical path drawn lost "F&B overlapped pair" at 1280 px); the mouse hint after them stays
  // only while it fits on their line, else it is the legend's tooltip (updateLegend).
  legend_->setSizePolicy(QSizePolicy::Ignored, QSizePolicy::Preferred);
  legend_->setMinimumWidth(0);
  legend_->installEventFilter(this);
  column_layout->addWidget(legend_);
  return column;
}

void MainWindow::buildMenus() {
  auto add = [this](QMenu *menu, const QString &text, const QKeySequence &keys, auto slot) {
    QAction *action = menu->addAction(text);
    action->setShortcut(keys);
    action->setShortcutContext(Qt::WindowShortcut);
    connect(action, &QAction::triggered, this, slot);
    addAction(action);
    return action;
  };
  QMenu *file = menuBar()->addMenu(tr("&File"));
  documents_->addToMenu(file, this);
  file->addSeparator();
  add(file, tr("&Quit"), QKeySequence::Quit, [this] { close(); });

  QMenu *run = menuBar()->addMenu(tr("&Run"));
  run_action_ = add(run, tr("&Run on the target"), QKeySequence(tr("Ctrl+R")), [this] {
    tabs_->setCurrentWidget(run_panel_);
    run_panel_->startRun();
  });
  cancel_action_ = add(run, tr("&Cancel the run"), QKeySequence(tr("Ctrl+Shift+R")),
                       [this] { run_panel_->cancelRun(); });
  cancel_action_->setEnabled(false);
  calibrate_action_ = add(run, tr("C&alibrate to the measurement"), QKeySequence(), [this] {
    tabs_->setCurrentWidget(run_panel_);
    run_panel_->calibrate();
  });

  QMenu *view = menuBar()->addMenu(tr("&View"));
  add(view, tr("&Play / pause"), QKeySequence(Qt::Key_Space), [this] { setPlaying(!playing()); });
  add(view, tr("Step &forward"), QKeySequence(Qt::Key_Period), [this] { stepPlayhead(1); });
  add(view, tr("Step &back"), QKeySequence(Qt::Key_Comma), [this] { stepPlayhead(-1); });
  add(view, tr("S&top"), QKeySequence(tr("Ctrl+.")), [this] { stopPlayback(); });
  view->addSeparator();
  critical_path_action_ = add(view, tr("&Critical path"), QKeySequence(tr("Ctrl+K")),
                              [this](bool checked) { setCriticalPathShown(checked); });
  critical_path_action_->setCheckable(true);
  critical_path_action_->setToolTip(
      tr("Highlight the step's critical path: the chain of ops (and the waits between them) "
         "whose durations sum to the makespan"));
  view->addSeparator();
  for (QAction *action : {zoom_->zoomInAction(), zoom_->zoomOutAction(), zoom_->resetZoomAction(),
                          zoom_->zoomBackAction()}) {
    view->addAction(action);
    addAction(action);
  }
  view->addSeparator();
  // The side bars' keys of VS Code: Ctrl+B the left one, Ctrl+Alt+B the right one.
  for (const auto &[dock, text, keys] :
       {std::tuple{settings_dock_, tr("&Settings panel"), QKeySequence(tr("Ctrl+B"))},
        std::tuple{metrics_dock_, tr("&Metrics panel"), QKeySequence(tr("Ctrl+Alt+B"))}}) {
    QAction *toggle = dock->toggleViewAction();
    toggle->setText(text);
    toggle->setShortcut(keys);
    toggle->setShortcutContext(Qt::WindowShortcut);
    view->addAction(toggle);
    addAction(toggle);
  }
  view->addSeparator();
  add(view, tr("Load the &example plan"), QKeySequence(), [this] { setPlan(examplePlan()); });
}

void MainWindow::setPlan(const Plan &plan) {
  metrics_->setPublishedRun(std::nullopt);
  controls_->setPlan(plan);
  requestEvaluation(controls_->plan());
}

void MainWindow::openPublishedRun(const PublishedRun &run) {
  setPlan(validationCasePlan(run.row));
  // The plan as the controls hold it is what "the published settings" means from here on.
  metrics_->setPublishedRun(run, controls_->plan());
  statusBar()->showMessage(
      tr("Opened the published run %1 (%2)")
          .arg(QString::fromStdString(run.row.id), QString::fromStdString(run.set_title)));
}

void MainWindow::requestEvaluation(const Plan &plan) {
  evaluator_.request(plan);
  // An open Search tab follows the controls as it does when it opens (a hardware file opened
  // meanwhile, say); settings the controls did not change keep the tab's edits.
  if (tabs_ && tabs_->currentWidget() == search_) search_->takeSettingsFrom(controls_->plan());
}

QString MainWindow::errorMessage() const {
  return error_message_;
}

void MainWindow::showError(const QString &message) {
  error_message_ = message;
  QString stale;
  if (shown_ && !message.isEmpty()) {
    // Say what the views still show, so the old picture is never taken for the new settings.
    const auto &schedule = shown_->evaluation->schedule;
    const ScheduleFamily *family =
        shown_->plan.custom ? nullptr : findScheduleFamily(shown_->plan.request.name);
    stale = tr("<br><span style='color:%5'>The views below still show the last valid "
               "settings: %1, P=%2, M=%3, V=%4.</span>")
                .arg(family ? QString::fromStdString(family->title) : tr("custom"))
                .arg(schedule.pp())
                .arg(schedule.microbatches())
                .arg(schedule.chunks())
                .arg(palette::staleText().name());
  }
  banner_->setText(message.isEmpty()
                       ? QString()
                       : tr("<b>Cannot show these settings.</b> %1").arg(message.toHtmlEscaped()) +
                             stale);
  banner_->setVisible(!message.isEmpty());
}

void MainWindow::showSnapshot(const SnapshotPointer &snapshot) {
  if (!snapshot) return;
  if (!snapshot->ok()) {
    // The last good picture stays, dimmed by nothing but the banner that says why the new
    // settings cannot be shown.
    showError(snapshot->error);
    if (pending_run_) {
      pending_run_.reset();
      run_panel_->showImportFailure(
          tr("the run's plan cannot be evaluated: %1").arg(snapshot->error));
    }
    mesh_->setMesh(snapshot->plan.mesh);
    return;
  }
  showError(QString());
  const bool animate = options_.animate && !first_snapshot_;
  first_snapshot_ = false;
  shown_ = snapshot;
  const ScheduleFamily *family =
      snapshot->plan.custom ? nullptr : findScheduleFamily(snapshot->plan.request.name);
  const QString title = family ? QString::fromStdString(family->title) : tr("Custom");
  run_panel_->setSnapshot(snapshot);
  if (pending_run_) {
    // The imported run's plan is shown now: draw the run over it.
    const MeasuredTraceFile run = std::move(*pending_run_);
    pending_run_.reset();
    run_panel_->importTrace(run);
  }
  updateMeasuredControls();
  rebuildTimeline(animate);
  playback_->setSnapshot(snapshot);
  timeline_->setPlayhead(playback_->playhead());
  metrics_->setSnapshot(snapshot);
  memory_time_->setSnapshot(snapshot);
  memory_time_->setPlayhead(playback_->playhead());
  updateMemoryBars();
  mesh_->setMesh(snapshot->plan.mesh);
  if (snapshot->derivation) controls_->layerEditor()->showSplit(snapshot->derivation->model_layout);
  explain_->setSnapshot(snapshot);
  compare_->setPlan(snapshot->plan);
  updateLegend();
  updateTransportLabel();
  setWindowTitle(
      tr("pipescope \u2014 %1, P=%2, M=%3%4")
          .arg(title)
          .arg(snapshot->evaluation->schedule.pp())
          .arg(snapshot->evaluation->schedule.microbatches())
          .arg(snapshot->evaluation->schedule.chunks() > 1
                   ? QStringLiteral(", V=%1").arg(snapshot->evaluation->schedule.chunks())
                   : QString()));
}

void MainWindow::rebuildTimeline(bool animate) {
  if (!shown_) return;
  const ScheduleFamily *family =
      shown_->plan.custom ? nullptr : findScheduleFamily(shown_->plan.request.name);
  TimelineSection section;
  section.title = family ? QString::fromStdString(family->title) : tr("Custom");
  section.evaluation = shown_->evaluation;
  if (shown_->derivation) // shares the snapshot's breakdown, no copy
    section.cost_breakdown = std::shared_ptr<const std::vector<StageBreakdown>>(
        shown_, &shown_->derivation->stage_breakdown);
  if (shown_->plan.model)
    section.pair_compute_stretch =
        dispatcherSmShare(shown_->plan.model->hardware, shown_->plan.model->training);
  std::vector<TimelineSection> sections;
  const OverlayMode mode = overlayMode();
  const auto measured =
      mode == OverlayMode::Hidden ? nullptr : run_panel_->measuredStep(measuredStep());
  if (measured && mode == OverlayMode::Overlay) {
    section.measured = measured;
    section.measured_bubbles = run_panel_->session()->measuredBubbles(measuredStep());
    sections.push_back(section);
  } else if (measured && mode == OverlayMode::SideBySide) {
    const int step = measuredStep() < 0 ? run_panel_->measurement()->latestStep() : measuredStep();
    section.title = tr("Predicted \u2014 %1").arg(section.title);
    TimelineSection measured_section;
    measured_section.title = tr("Measured \u2014 step %1, aligned at its start").arg(step);
    measured_section.evaluation = measured;
    measured_section.measured_bubbles = run_panel_->session()->measuredBubbles(measuredStep());
    sections = {section, measured_section};
  } else {
    sections.push_back(section);
  }
  // Only a new prediction morphs; a new measured step or a mode switch shows at once.
  const bool same_layout = timeline_->model().sections().size() == sections.size();
  timeline_->setModel(TimelineModel(std::move(sections)), animate && same_layout);
}

void MainWindow::updateMeasuredControls() {
  const bool applies = run_panel_->measurementApplies();
  measured_controls_->setVisible(applies);
  documents_->exportMeasuredAction()->setEnabled(run_panel_->hasMeasurement());
  if (!applies) return;
  // Step list: "latest step" first (it follows a run live), then every step measured.
  const int selected =
      measured_step_box_->currentData().isValid() ? measured_step_box_->currentData().toInt() : -1;
  const auto steps = run_panel_->measurement()->steps();
  QSignalBlocker blocker(measured_step_box_);
  measured_step_box_->clear();
  measured_step_box_->addItem(tr("Latest"), -1);
  for (int step : steps)
    measured_step_box_->addItem(tr("Step %1").arg(step), step);
  const int index = measured_step_box_->findData(selected);
  measured_step_box_->setCurrentIndex(std::max(0, index));
}

void MainWindow::setOverlayMode(OverlayMode mode) {
  overlay_box_->setCurrentIndex(std::max(0, overlay_box_->findData(static_cast<int>(mode))));
}

OverlayMode MainWindow::overlayMode() const {
  return static_cast<OverlayMode>(overlay_box_->currentData().toInt());
}

void MainWindow::setMeasuredStep(int step) {
  const int index = measured_step_box_->findData(step);
  if (index >= 0) measured_step_box_->setCurrentIndex(index);
}

int MainWindow::measuredStep() const {
  return measured_step_box_->currentData().isValid() ? measured_step_box_->currentData().toInt()
                                                     : -1;
}

Plan MainWindow::withoutStaleCalibration(const Plan &edited) {
  if (!shown_ ||
      (edited.costs.stage_overrides.empty() && edited.costs.boundary_transfer_us.empty()))
    return edited;
  const Plan &before = shown_->plan;
  const bool same_stages = edited.custom.has_value() == before.custom.has_value() &&
                           edited.request.name == before.request.name &&
                           edited.request.pp == before.request.pp &&
                           edited.request.chunks == before.request.chunks;
  const bool same_times = edited.costs.forward_us == before.costs.forward_us &&
                          edited.costs.backward_us == before.costs.backward_us &&
                          edited.costs.weight_us == before.costs.weight_us &&
                          edited.costs.overlapped_us == before.costs.overlapped_us &&
                          edited.costs.p2p_latency_us == before.costs.p2p_latency_us &&
                          !edited.model;
  if (same_stages && same_times) return edited;
  // Per-stage times fit one stage layout, and an edited F, B or W means the person chose uniform
  // times again: either way the calibrated overrides go.
  Plan plan = edited;
  plan.costs.stage_overrides.clear();
  plan.costs.boundary_transfer_us.clear();
  // So does the lone input-grad op's extra the model derived: typed op times have none.
  plan.costs.input_grad_split_extra_us = 0;
  controls_->setPlan(plan);
  statusBar()->showMessage(
      tr("The calibrated per-stage costs were dropped: %1")
          .arg(same_stages ? tr("the op times were edited") : tr("they do not fit the new stages")),
      8000);
  return plan;
}

void MainWindow::updateMemoryBars() {
  if (!shown_) return;
  memory_bars_->setBars(memoryBarsFor(*shown_, playback_->playhead()));
}

void MainWindow::updateLegend() {
  if (!shown_) return;
  bool present[kOpKindCount] = {};
  for (const auto &ops : shown_->evaluation->schedule.ranks)
    for (const auto &op : ops)
      present[static_cast<int>(op.kind)] = true;
  // One entry per colour, its words held together so that a narrow legend wraps between
  // entries only.
  const auto entry = [](const QString &swatch_color, const QString &swatch, const QString &words,
                        const QString &title = QString()) {
    QString text = words.toHtmlEscaped();
    text.replace(QLatin1Char(' '), QStringLiteral("&nbsp;"));
    return QStringLiteral("<span style='color:%1; font-size:12pt'%2>%3</span>&nbsp;%4 &nbsp; ")
        .arg(swatch_color,
             title.isEmpty() ? QString() : QStringLiteral(" title='%1'").arg(title.toHtmlEscaped()),
             swatch, text);
  };
  QString colours;
  // First when shown: it is what was asked for.
  if (timeline_->criticalPathShown())
    colours += entry(palette::criticalPath().name(), QStringLiteral("\u25a1"), tr("critical path"));
  for (OpKind kind : {OpKind::Forward, OpKind::InputGrad, OpKind::WeightGrad, OpKind::FullBackward,
                      OpKind::OverlappedPair}) {
    if (!present[static_cast<int>(kind)]) continue;
    colours += entry(opKindColor(kind).name(), QStringLiteral("\u25a0"), opKindShortLegend(kind),
                     opKindLegend(kind));
  }
  if (timeline_->hasMeasuredOverlay())
    colours += entry(palette::predictedGhost().name(), QStringLiteral("\u25af"), tr("predicted")) +
               entry(palette::measuredSwatch().name(), QStringLiteral("\u25ae"), tr("measured"));
  colours += entry(palette::idleHatch().name(), QStringLiteral("\u25a8"), tr("idle (bubble)"));
  const QString hint = tr("wheel zoom \u00b7 drag pan \u00b7 click: path \u00b7 hover a bubble: "
                          "its cause");
  const QString hint_html = QStringLiteral("<span style='color:%1'>%2</span>")
                                .arg(palette::faintText().name(), hint.toHtmlEscaped());
  const int width = legend_->contentsRect().width();
  if (colours != legend_measured_colours_ || width != legend_measured_width_) {
    QTextDocument document;
    document.setDefaultFont(legend_->font());
    document.setDocumentMargin(0);
    document.setHtml(colours + hint_html);
    legend_hint_fits_ = document.idealWidth() <= width;
    document.setHtml(colours);
    legend_colours_fit_ = document.idealWidth() <= width;
    legend_measured_colours_ = colours;
    legend_measured_width_ = width;
  }
  // Wrapping only when the colours need it: a wrapping label lays its rich text out again at
  // every activation of the layout above the timeline, which a slider move causes (a seventh
  // more instructions a move at TP 8).
  // (Each setter relays the label out even for what it already has: set only changes.)
  if (legend_->wordWrap() == legend_colours_fit_) legend_->setWordWrap(!legend_colours_fit_);
  const QString text = legend_hint_fits_ ? colours + hint_html : colours;
  if (legend_->text() != text) legend_->setText(text);
  const QString tip = legend_hint_fits_ ? QString() : hint;
  if (legend_->toolTip() != tip) legend_->setToolTip(tip);
}

bool MainWindow::eventFilter(QObject *watched, QEvent *event) {
  if (watched == legend_ && event->type() == QEvent::Resize &&
      static_cast<QResizeEvent *>(event)->oldSize().width() != legend_->width())
    updateLegend();
  return QMainWindow::eventFilter(watched, event);
}

void MainWindow::setPlaying(bool playing) {
  playback_->setPlaying(playing);
}

bool MainWindow::playing() const {
  return playback_->playing();
}

void MainWindow::setPlayhead(double time_us) {
  playback_->setPlayhead(time_us);
}

double MainWindow::playhead() const {
  return playback_->playhead();
}

void MainWindow::stepPlayhead(int direction) {
  playback_->step(direction);
}

void MainWindow::stopPlayback() {
  playback_->stop();
}

void MainWindow::updateTransportLabel() {
  if (!shown_) return;
  const double makespan = shown_->evaluation->simulation.makespan_us;
  transport_label_->setText(
      std::isnan(playback_->playhead())
          ? tr("step %1").arg(formatDuration(makespan))
          : tr("t = %1 / %2").arg(formatDuration(playback_->playhead()), formatDuration(makespan)));
}

bool MainWindow::openPlan(const QString &path) {
  return documents_->openPlan(path);
}

bool MainWindow::savePlanTo(const QString &path) {
  return documents_->savePlanTo(path);
}

bool MainWindow::exportPng(const QString &path) {
  return documents_->exportPng(path);
}

bool MainWindow::exportSvg(const QString &path) {
  return documents_->exportSvg(path);
}

bool MainWindow::exportChromeTrace(const QString &path) {
  return documents_->exportChromeTrace(path);
}

bool MainWindow::importMeasuredTrace(const QString &path) {
  return documents_->importMeasuredTrace(path);
}

bool MainWindow::exportMeasuredChromeTrace(const QString &path) {
  return documents_->exportMeasuredChromeTrace(path);
}

bool MainWindow::importRealRun(const QStringList &paths) {
  bool imported = false;
  const auto connection = connect(documents_, &DocumentActions::realRunImportFinished, this,
                                  [&imported](bool ok) { imported = ok; });
  const bool started = documents_->startRealRunImport(paths);
  documents_->waitForRealRunImport();
  disconnect(connection);
  settle();
  return started && imported && run_panel_->measurementApplies();
}

void MainWindow::setCriticalPathShown(bool shown) {
  critical_path_action_->setChecked(shown);
  timeline_->setCriticalPathShown(shown);
  updateLegend();
}

bool MainWindow::criticalPathShown() const {
  return timeline_->criticalPathShown();
}

void MainWindow::storeSettings() {
  if (!options_.use_settings) return;
  QSettings settings;
  settings.setValue(kGeometryKey, saveGeometry());
  settings.setValue(kStateKey, saveState());
  settings.setValue(kLastPlanKey, QString::fromStdString(planToJson(controls_->plan()).dump()));
}

void MainWindow::closeEvent(QCloseEvent *event) {
  storeSettings();
  QMainWindow::closeEvent(event);
}

void MainWindow::settle() {
  evaluator_.waitForIdle();
  compare_->waitForIdle();
  metrics_->waitForSpeedOfLight();
  // What a person sees once a drag rests: rows fitted to their values.
  metrics_->fitRowsToValues();
  explain_->flush();
  timeline_->finishMorph();
  compare_->timeline()->finishMorph();
  QCoreApplication::processEvents();
}

QImage MainWindow::renderWindow() {
  settle();
  return grab().toImage();
}

} // namespace pipescope::gui
