#include "gui/widgets/search_panel.h"

#include <QComboBox>
#include <QCoreApplication>
#include <QCursor>
#include <QDoubleSpinBox>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QListWidget>
#include <QMenu>
#include <QPointer>
#include <QProgressBar>
#include <QPushButton>
#include <QScrollArea>
#include <QScrollBar>
#include <QSpinBox>
#include <QSplitter>
#include <QTableWidget>
#include <QTimer>
#include <QVBoxLayout>
#include <QtConcurrent/QtConcurrentRun>
#include <algorithm>
#include <map>

#include "engine/model/moe.h"
#include "engine/model/speed_of_light.h"
#include "gui/charts/charts.h"
#include "gui/explorer/labels.h"
#include "gui/timeline/palette.h"
#include "gui/widgets/schedule_family_list.h"

namespace pipescope::gui {

namespace {

QString tableToolTip() {
  return QCoreApplication::translate("SearchPanel",
                                     "The top K, best first; double-click a row to load it");
}

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
/// The ranked table's columns: mesh, schedule, tokens/s, step, memory, M, b, recompute, ZeRO and
/// how many configurations are as fast.

QString scheduleText(const SearchPlan &plan) {
  QString text = QString::fromStdString(plan.schedule.name);
  if (plan.schedule.chunks > 1) text += QStringLiteral(" V=%1").arg(plan.schedule.chunks);
  if (plan.training.balance_layers)
    text += QCoreApplication::translate("SearchPanel", " (balanced)");
  return text;
}

QString meshText(const SearchPlan &plan) {
  QString text =
      QStringLiteral("dp%1 tp%2 pp%3").arg(plan.mesh.dp).arg(plan.mesh.tp).arg(plan.mesh.pp);
  if (plan.mesh.ep > 1) text += QStringLiteral(" ep%1").arg(plan.mesh.ep);
  if (plan.mesh.cp > 1) text += QStringLiteral(" cp%1").arg(plan.mesh.cp);
  return text;
}

// What hovering a point shows: the configuration, then what it achieves.
QString planDetails(const SearchPlan &plan, int rank) {
  const QString training =
      QStringLiteral("%1%2%3%4")
          .arg(QString::fromUtf8(recomputeName(plan.training.recompute).data()),
               plan.training.zero_stage > 0
                   ? QStringLiteral(", ZeRO-%1").arg(plan.training.zero_stage)
                   : QString(),
               plan.training.sequence_parallel ? QStringLiteral(", SP") : QString(),
               plan.training.balance_layers
                   ? QCoreApplication::translate("SearchPanel",
                                                 ", layers balanced over the stages (%1)")
                         .arg(QString::fromStdString(plan.megatron_layout).toHtmlEscaped())
                   : QString());
  return QCoreApplication::translate(
             "SearchPanel",
             "<b>%1</b>%2<br>mesh %3 (%4)<br>schedule %5, V = %6<br>M = %7, microbatch size %8"
             "<br>recompute %9<br>step %10 ms, bubble %11 %<br>%12 tokens/s, MFU %13 % of the "
             "16-bit peak<br>"
             "peak memory %14 / %15 GiB")
      .arg(rank > 0 ? QStringLiteral("#%1").arg(rank) : QString(),
           rank > 0 ? QString()
                    : QCoreApplication::translate("SearchPanel",
                                                  "on the Pareto front (not in the top K)"),
           meshText(plan).toHtmlEscaped(), QString::fromStdString(plan.mesh.orderName()),
           QString::fromStdString(plan.schedule.name))
      .arg(plan.schedule.chunks)
      .arg(plan.schedule.microbatches)
      .arg(plan.microbatch_size)
      .arg(training)
      .arg(plan.step_time_s * 1e3, 0, 'f', 1)
      .arg(plan.bubble_fraction * 100, 0, 'f', 1)
      .arg(plan.tokens_per_s, 0, 'f', 0)
      .arg(plan.mfu * 100, 0, 'f', 1)
      .arg(plan.peak_memory / kGiB, 0, 'f', 1)
      .arg(plan.capacity / kGiB, 0, 'f', 0);
}

int familyIndex(const std::string &name) {
  const auto &families = scheduleFamilies();
  for (std::size_t index = 0; index < families.size(); ++index)
    if (families[index].name == name) return static_cast<int>(index);
  return static_cast<int>(families.size());
}

} // namespace

SearchPanel::SearchPanel(QWidget *parent) : QWidget(parent) {
  setObjectName(QStringLiteral("search_panel"));
  auto *layout = new QHBoxLayout(this);
  layout->setContentsMargins(4, 4, 4, 4);

  // The inputs' column: the fields, then the status in a box of its own that scrolls, so a
  // search's summary of several lines is never cut off mid-sentence where the tab is short (a
  // laptop's 1224 x 800 window leaves the bottom tabs about 500 px).
  auto *inputs = new QWidget(this);
  auto *column = new QVBoxLayout(inputs);
  column->setContentsMargins(0, 0, 0, 0);
  auto *fields = new QWidget(inputs);
  auto *form = new QFormLayout(fields);
  form->setContentsMargins(0, 0, 0, 0);
  model_ = new QComboBox(inputs);
  for (const auto &name : modelPresetNames())
    model_->addItem(QString::fromStdString(name));
  hardware_ = new QComboBox(inputs);
  for (const auto &name : hardwarePresetNames())
    hardware_->addItem(QString::fromStdString(name));
  model_->setCurrentText(QStringLiteral("llama3-8b"));
  hardware_->setCurrentText(QStringLiteral("h100-sxm"));
  gpus_ = new QSpinBox(inputs);
  gpus_->setRange(1, kMaxWorldSize);
  gpus_->setValue(16);
  gpus_->setToolTip(tr("GPUs to use, all of them: every mesh DP \u00d7 TP \u00d7 PP of this size"));
  global_batch_ = new QSpinBox(inputs);
  global_batch_->setRange(0, 1 << 30);
  global_batch_->setSpecialValueText(tr("one per GPU"));
  global_batch_->setToolTip(tr("Sequences per step: DP \u00d7 M \u00d7 microbatch size"));
  sequence_ = new QSpinBox(inputs);
  sequence_->setRange(0, 1 << 24);
  sequence_->setSpecialValueText(tr("the model's"));
  sequence_->setSingleStep(1024);
  memory_limit_ = new QDoubleSpinBox(inputs);
  memory_limit_->setRange(0, 1e6);
  memory_limit_->setDecimals(1);
  memory_limit_->setSuffix(QStringLiteral(" GiB"));
  memory_limit_->setSpecialValueText(tr("the GPU's memory"));
  memory_limit_->setToolTip(tr("Per GPU: plans over it are pruned before simulating"));
  schedules_ = makeScheduleFamilyList(inputs, [](const ScheduleFamily &) { return true; });
  schedules_->setMaximumHeight(120);
  schedules_->setToolTip(tr("Families to try (none checked: every family)"));
  top_ = new QSpinBox(inputs);
  top_->setRange(1, 1000);
  top_->setValue(10);
  top_->setToolTip(tr("Plans kept in the ranking (the Pareto front is kept besides)"));
  form->addRow(tr("model"), model_);
  form->addRow(tr("hardware"), hardware_);
  form->addRow(tr("GPUs"), gpus_);
  form->addRow(tr("global batch"), global_batch_);
  form->addRow(tr("sequence"), sequence_);
  form->addRow(tr("memory limit"), memory_limit_);
  form->addRow(tr("schedules"), schedules_);
  form->addRow(tr("top K"), top_);
  run_ = new QPushButton(tr("Run search"), inputs);
  run_->setObjectName(QStringLiteral("search_run"));
  form->addRow(run_);
  progress_ = new QProgressBar(inputs);
  progress_->setRange(0, 1000);
  progress_->setValue(0);
  progress_->setTextVisible(true);
  progress_->setFormat(QStringLiteral("%p %"));
  form->addRow(progress_);
  column->addWidget(fields);
  auto *status_area = new QScrollArea(inputs);
  status_area->setObjectName(QStringLiteral("search_status"));
  status_area->setWidgetResizable(true);
  status_area->setFrameShape(QFrame::NoFrame);
  status_area->setHorizontalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
  status_ = new QLabel(status_area);
  status_->setWordWrap(true);
  status_->setAlignment(Qt::AlignLeft | Qt::AlignTop);
  status_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  status_area->setWidget(status_);
  // Three lines at least: a one-line message whole, a longer one with its scroll bar.
  status_area->setMinimumHeight(3 * status_->fontMetrics().lineSpacing() + 8);
  column->addWidget(status_area, 1);
  inputs->setMinimumWidth(240);
  inputs->setMaximumWidth(300);
  layout->addWidget(inputs);

  results_ = new QSplitter(Qt::Horizontal, this);
  QSplitter *results = results_;
  chart_ = new SearchScatterChart(results);
  table_ = new QTableWidget(results);
  table_->setColumnCount(kColumnCount);
  table_->setHorizontalHeaderLabels({tr("tokens/s"), tr("step ms"), tr("mesh"), tr("schedule"),
                                     tr("peak GiB"), tr("M"), tr("b"), tr("recompute"), tr("ZeRO"),
                                     tr("as fast")});
  table_->horizontalHeaderItem(kAsFast)->setToolTip(
      tr("Other configurations with this row's step time (to the nanosecond): the "
         "row is the one of them with the least memory. Double-click to load one"));
  table_->setSelectionBehavior(QAbstractItemView::SelectRows);
  table_->setSelectionMode(QAbstractItemView::SingleSelection);
  table_->setEditTriggers(QAbstractItemView::NoEditTriggers);
  table_->verticalHeader()->setDefaultSectionSize(20);
  table_->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
  // The schedule names are the longest cells ("interleaved-1f1b V=4 (balanced)"): the one
  // column that gives way, elided, where the window is a little too narrow for all of them.
  table_->horizontalHeader()->setSectionResizeMode(kSchedule, QHeaderView::Interactive);
  // Elided in the middle (on one line: wrapped, a cell shows only its first words), a schedule
  // keeps its family and its "(balanced)" mark.
  table_->setWordWrap(false);
  table_->setTextElideMode(Qt::ElideMiddle);
  table_->setToolTip(tableToolTip());
  results->addWidget(chart_);
  results->addWidget(table_);
  // Empty until a search has ranked something: hidden till then, so the chart takes the width
  // (beside it, at 1224 px, an empty table was squeezed to a scrolling 70 px sliver).
  table_->hide();
  results->setStretchFactor(0, 1);
  results->setStretchFactor(1, 1);
  layout->addWidget(results, 1);

  connect(run_, &QPushButton::clicked, this, [this] {
    if (running())
      cancelSearch();
    else
      startSearch();
  });
  connect(&watcher_, &QFutureWatcher<void>::finished, this, &SearchPanel::finished);
  connect(chart_, &SearchScatterChart::pointClicked, this, &SearchPanel::loadShownPlan);
  connect(table_, &QTableWidget::cellDoubleClicked, this, [this](int row, int column) {
    // The "as fast" cell offers the configurations it counts; any other cell loads the row.
    if (column == kAsFast)
      if (QMenu *menu = alikeMenu(row)) {
        menu->popup(QCursor::pos());
        return;
      }
    loadShownPlan(row);
  });
  connect(results_, &QSplitter::splitterMoved, this, [this] { user_sized_ = true; });
  setRunning(false);
}

void SearchPanel::showEvent(QShowEvent *event) {
  QWidget::showEvent(event);
  // The chart and the table share the width evenly (sizes apply once the splitter has its
  // width): the table's mesh and schedule columns stay readable beside the chart.
  if (sized_) return;
  sized_ = true;
  QTimer::singleShot(0, this, [this] {
    const int half = results_->width() / 2;
    results_->setSizes({half, results_->width() - half});
  });
}

SearchPanel::~SearchPanel() {
  if (cancel_) cancel_->store(true);
  watcher_.waitForFinished();
}

void SearchPanel::takeSettingsFrom(const Plan &plan) {
  if (running()) return;
  // The run's numerics follow the controls whenever they change (no input here to keep).
  gemm_precision_ = plan.model ? plan.model->training.gemm_precision : GemmPrecision::Bf16;
  collective_algorithm_ =
      plan.model ? plan.model->training.collective_algorithm : CollectiveAlgorithm::Auto;
  moe_dispatcher_ = plan.model ? plan.model->training.moe_dispatcher : std::string("alltoall");
  moe_dispatcher_sms_ = plan.model ? plan.model->training.moe_dispatcher_sms : 0;
  moe_layer_host_us_ = plan.model ? plan.model->training.moe_layer_host_us : -1;
  if (plan.model)
    plan_hardware_ = plan.model->hardware;
  else
    plan_hardware_.reset();
  hardware_->setToolTip(plan_hardware_ && plan_hardware_->calibration
                            ? tr("%1 as the explorer has it: calibrated on %2 by pipescope "
                                 "calibrate (its curves and host time, not the preset's)")
                                  .arg(QString::fromStdString(plan_hardware_->name),
                                       QString::fromStdString(plan_hardware_->calibration->sets))
                            : QString());
  tp_comm_overlap_ = plan.model && plan.model->training.tp_comm_overlap;
  tp_backward_overlap_ = plan.model && plan.model->training.tp_backward_overlap;
  fp32_gradients_ = plan.model && plan.model->training.fp32_gradients;
  // Only settings the controls changed since last time replace the inputs: edits made here
  // survive a visit to another tab.
  const QString key =
      QStringLiteral("%1/%2/%3/%4/%5")
          .arg(plan.mesh.dp * plan.mesh.cp * plan.mesh.tp * plan.request.pp)
          .arg(plan.model ? QString::fromStdString(plan.model->model.name) : QString(),
               plan.model ? QString::fromStdString(plan.model->hardware.name) : QString())
          .arg(plan.model ? plan.model->model.sequence_length : 0)
          .arg(plan.model ? plan.model->hardware.memory_gib : 0);
  if (key == taken_from_) return;
  taken_from_ = key;
  gpus_->setValue(std::max(1, plan.mesh.dp * plan.mesh.cp * plan.mesh.tp * plan.request.pp));
  if (!plan.model) return;
  const auto select = [](QComboBox *box, const std::string &name) {
    if (name.empty()) return;
    if (box->findText(QString::fromStdString(name)) < 0) box->addItem(QString::fromStdString(name));
    box->setCurrentText(QString::fromStdString(name));
  };
  select(model_, plan.model->model.name);
  select(hardware_, plan.model->hardware.name);
  sequence_->setValue(plan.model->model.sequence_length);
  // The controls' device memory is the limit the person set there.
  memory_limit_->setValue(plan.model->hardware.memory_gib);
}

void SearchPanel::setSchedules(const std::vector<std::string> &names) {
  QStringList list;
  for (const std::string &name : names)
    list << QString::fromStdString(name);
  checkScheduleFamilies(schedules_, list);
}

Result<SearchRequest> SearchPanel::request() const {
  SearchRequest request;
  auto model = loadModelSpec(model_->currentText().toStdString());
  if (!model) return model.error();
  // The explorer's hardware where the box shows its name (a calibrated file keeps its preset's
  // name and differs from it), else the preset chosen here.
  const std::string hardware_name = hardware_->currentText().toStdString();
  auto hardware = plan_hardware_ && plan_hardware_->name == hardware_name
                      ? Result<HardwareSpec>(*plan_hardware_)
                      : loadHardwareSpec(hardware_name);
  if (!hardware) return hardware.error();
  request.model = std::move(*model);
  request.hardware = std::move(*hardware);
  request.gpus = gpus_->value();
  request.global_batch = global_batch_->value();
  if (sequence_->value() > 0) request.model.sequence_length = sequence_->value();
  request.memory_limit_gib = memory_limit_->value();
  for (const QString &name : checkedScheduleFamilies(schedules_))
    request.schedules.push_back(name.toStdString());
  request.top = top_->value();
  // FP8 only where this hardware has it (the controls fall back the same way).
  request.gemm_precision =
      hasFp8TensorCores(request.hardware) ? gemm_precision_ : GemmPrecision::Bf16;
  request.collective_algorithm = collective_algorithm_;
  request.moe_dispatcher = moe_dispatcher_;
  request.moe_dispatcher_sms = moe_dispatcher_sms_;
  request.moe_layer_host_us = moe_layer_host_us_;
  request.tp_comm_overlap = tp_comm_overlap_;
  request.tp_backward_overlap = tp_backward_overlap_;
  request.fp32_gradients = fp32_gradients_;
  if (auto status = checkSearchRequest(request); !status) return status.error();
  return request;
}

bool SearchPanel::startSearch() {
  if (running()) return false;
  auto request = this->request();
  if (!request) {
    status_->setStyleSheet(palette::toneStyleSheet(palette::Tone::Error));
    status_->setText(QString::fromStdString(request.error().message));
    return false;
  }
  running_request_ = *request;
  cancel_ = std::make_shared<std::atomic<bool>>(false);
  outcome_ = std::make_shared<std::optional<Result<SearchResult>>>();
  progress_->setValue(0);
  status_->setStyleSheet(palette::toneStyleSheet(palette::Tone::Busy));
  status_->setText(tr("Searching %1 on %2 GPUs\u2026")
                       .arg(QString::fromStdString(request->model.name))
                       .arg(request->gpus));
  busy_ = true;
  setRunning(true);
  // The planner calls progress from the thread that runs it (this worker) and polls cancel from
  // every worker; progress is handed to the UI thread, which only ever reads copies.
  QPointer<SearchPanel> self(this);
  SearchCallbacks callbacks;
  callbacks.progress = [self](const SearchProgress &progress) {
    QMetaObject::invokeMethod(
        self.data(),
        [self, progress] {
          if (self) self->showProgress(progress);
        },
        Qt::QueuedConnection);
  };
  auto cancel = cancel_;
  callbacks.cancelled = [cancel] { return cancel->load(); };
  auto outcome = outcome_;
  watcher_.setFuture(QtConcurrent::run(
      [request = *request, callbacks, outcome] { *outcome = runSearch(request, callbacks); }));
  return true;
}

void SearchPanel::cancelSearch() {
  if (cancel_) cancel_->store(true);
  if (running()) status_->setText(tr("Cancelling: keeping what was simulated\u2026"));
}

bool SearchPanel::running() const {
  return busy_;
}

void SearchPanel::waitForSearch() {
  while (running())
    QCoreApplication::processEvents(QEventLoop::AllEvents | QEventLoop::WaitForMoreEvents, 50);
}

void SearchPanel::showProgress(const SearchProgress &progress) {
  if (!running()) return;
  if (progress.structures_total > 0)
    progress_->setValue(static_cast<int>(1000.0 * static_cast<double>(progress.structures_done) /
                                         static_cast<double>(progress.structures_total)));
  status_->setText(tr("Searching: %1 configurations, %2 simulated, best %3 tokens/s")
                       .arg(progress.space)
                       .arg(progress.evaluated)
                       .arg(progress.best_tokens_per_s, 0, 'f', 0));
}

void SearchPanel::setRunning(bool running) {
  run_->setText(running ? tr("Cancel") : tr("Run search"));
  for (QWidget *input : std::initializer_list<QWidget *>{
           model_, hardware_, gpus_, global_batch_, sequence_, memory_limit_, schedules_, top_})
    input->setEnabled(!running);
  emit runningChanged(running);
}

void SearchPanel::finished() {
  busy_ = false;
  setRunning(false);
  if (!outcome_ || !outcome_->has_value()) return;
  Result<SearchResult> &outcome = **outcome_;
  if (!outcome) {
    status_->setStyleSheet(palette::toneStyleSheet(palette::Tone::Error));
    status_->setText(QString::fromStdString(outcome.error().message));
    progress_->setValue(0);
    return;
  }
  result_ = std::move(*outcome);
  shown_request_ = running_request_;
  if (!result_->cancelled) progress_->setValue(progress_->maximum());
  status_->setStyleSheet(
      palette::toneStyleSheet(result_->cancelled ? palette::Tone::Warning : palette::Tone::Ok));
  status_->setText(
      (result_->cancelled ? tr("Cancelled: the best of what was simulated. ") : QString()) +
      tr("%1 configurations, %2 simulated, %3 pruned by memory, in %4 s.")
          .arg(result_->space)
          .arg(result_->evaluated)
          .arg(result_->pruned_by_memory)
          .arg(result_->seconds, 0, 'f', 2) +
      validatedAccuracyNote() + speedOfLightNote() +
      tr(" Click a point or double-click a row to load that plan."));
  showResult();
}

// #1 against its speed of light (one more evaluation, of one plan): how much faster kernels and
// links could make the best layout at most.
QString SearchPanel::speedOfLightNote() const {
  if (!result_ || !shown_request_ || result_->plans.empty()) return {};
  const SearchPlan &best = result_->plans.front();
  auto fastest = speedOfLightStepS(searchPlanToPlan(*shown_request_, best));
  if (!fastest) return {};
  return tr(" #1 is %1\u00d7 its speed of light (%2 with every kernel at the GPU's peak and every "
            "link at its line rate): the most faster hardware could gain on it.")
      .arg(QString::number(best.step_time_s / *fastest, 'f', 2))
      .arg(formatDuration(*fastest * 1e6));
}

ValidatedAccuracy SearchPanel::shownAccuracy() const {
  const SearchRequest &request = *shown_request_;
  return validatedAccuracy(request.hardware, request.gemm_precision, isMoe(request.model));
}

// How far the model was from published runs like these, and how many runners-up are closer to
// #1 than that: the table shades them, as the model cannot say they are slower.
QString SearchPanel::validatedAccuracyNote() const {
  if (!result_ || !shown_request_ || result_->plans.empty()) return {};
  const ValidatedAccuracy accuracy = shownAccuracy();
  if (accuracy.step.runs == 0)
    return tr(" No published run on %1 checks these predictions.")
        .arg(QString::fromStdString(accuracy.hardware));
  const double best = result_->plans.front().step_time_s;
  int within = 0;
  for (std::size_t k = 1; k < result_->plans.size(); ++k)
    within += withinValidatedError(result_->plans[k].step_time_s, best, accuracy) ? 1 : 0;
  QString note =
      accuracy.calibrated
          ? tr(" On the %1 measured runs the hardware file was calibrated on, each held out, the "
               "model was off by %2 mean")
                .arg(accuracy.step.runs)
                .arg(formatPercent(accuracy.step.mean()))
          : (accuracy.step.runs == 1
                 ? tr(" On the 1 published run like these (%2) the model was off by %3")
                 : tr(" On %1 published runs like these (%2) the model was off by %3 mean"))
                .arg(accuracy.step.runs)
                .arg(QString::fromStdString(accuracy.scope), formatPercent(accuracy.step.mean()));
  if (!accuracy.differs_from_preset.empty()) {
    QStringList fields;
    for (const auto &field : accuracy.differs_from_preset)
      fields << QString::fromStdString(field);
    note += tr(" (runs of the preset; this hardware file differs in %1, which they did not check)")
                .arg(fields.join(QStringLiteral(", ")));
  }
  if (within > 0)
    note += (within == 1 ? tr("; 1 runner-up (shaded) is closer to #1 than that, so not known "
                              "to be slower")
                         : tr("; %1 runners-up (shaded) are closer to #1 than that, so not known "
                              "to be slower")
                               .arg(within));
  return note + QLatin1Char('.');
}

void SearchPanel::showResult() {
  shown_ = result_->plans;
  shown_.reserve(result_->plans.size() + result_->pareto.size());
  for (const auto &plan : result_->pareto)
    if (std::none_of(shown_.begin(), shown_.end(),
                     [&](const SearchPlan &shown) { return shown.order == plan.order; }))
      shown_.push_back(plan);
  std::map<int, ScatterGroup> groups; // by family index: the registry's order and colours
  for (std::size_t index = 0; index < shown_.size(); ++index) {
    const SearchPlan &plan = shown_[index];
    const int family = familyIndex(plan.schedule.name);
    ScatterGroup &group = groups[family];
    if (group.name.isEmpty()) {
      const ScheduleFamily *found = findScheduleFamily(plan.schedule.name);
      group.name =
          found ? QString::fromStdString(found->title) : QString::fromStdString(plan.schedule.name);
      group.color = palette::scheduleSeries(family);
    }
    const int rank = index < result_->plans.size() ? static_cast<int>(index) + 1 : 0;
    group.points.push_back({QPointF(plan.peak_memory / kGiB, plan.tokens_per_s),
                            planDetails(plan, rank), static_cast<int>(index)});
  }
  std::vector<ScatterGroup> ordered;
  ordered.reserve(groups.size());
  for (auto &[family, group] : groups)
    ordered.push_back(std::move(group));
  std::vector<QPointF> front;
  front.reserve(result_->pareto.size());
  for (const auto &plan : result_->pareto)
    front.emplace_back(plan.peak_memory / kGiB, plan.tokens_per_s);
  const SearchRequest &request = *shown_request_;
  const double limit =
      request.memory_limit_gib > 0 ? request.memory_limit_gib : request.hardware.memory_gib;
  chart_->setResults(
      ordered, front, limit,
      tr("%1 \u00b7 %2 \u00d7 %3%4 \u00b7 top %5")
          .arg(QString::fromStdString(request.model.name))
          .arg(request.gpus)
          .arg(QString::fromStdString(request.hardware.name))
          .arg(request.gemm_precision == GemmPrecision::Fp8 ? tr(" (fp8 GEMMs)") : QString())
          .arg(result_->plans.size()));
  const ValidatedAccuracy accuracy = shownAccuracy();
  table_->setRowCount(static_cast<int>(result_->plans.size()));
  table_->setVisible(!result_->plans.empty());
  for (int row = 0; row < static_cast<int>(result_->plans.size()); ++row) {
    const SearchPlan &plan = result_->plans[static_cast<std::size_t>(row)];
    const QString cells[kColumnCount] = {
        QString::number(plan.tokens_per_s, 'f', 0),
        QString::number(plan.step_time_s * 1e3, 'f', 1),
        meshText(plan),
        scheduleText(plan),
        QString::number(plan.peak_memory / kGiB, 'f', 1),
        QString::number(plan.schedule.microbatches),
        QString::number(plan.microbatch_size),
        QString::fromUtf8(recomputeName(plan.training.recompute).data()),
        QString::number(plan.training.zero_stage),
        plan.alike_count > 0 ? QStringLiteral("+%1").arg(plan.alike_count) : QString()};
    const bool within =
        row > 0 &&
        withinValidatedError(plan.step_time_s, result_->plans.front().step_time_s, accuracy);
    QString tooltip = planDetails(plan, row + 1);
    if (within)
      tooltip += tr("\nWithin the model's mean error (%1) of #1: not known to be slower.")
                     .arg(formatPercent(accuracy.step.mean()));
    if (plan.alike_count > 0)
      tooltip += tr("\nAs fast: %1").arg(QString::fromStdString(alikeSummary(plan)));
    for (int column = 0; column < kColumnCount; ++column) {
      auto *item = new QTableWidgetItem(cells[column]);
      const bool text = column == kMesh || column == kSchedule || column == kRecompute;
      if (!text) item->setTextAlignment(Qt::AlignRight | Qt::AlignVCenter);
      item->setToolTip(tooltip);
      if (within) item->setBackground(palette::withinErrorShade());
      table_->setItem(row, column, item);
    }
  }
  fitTableWidth();
}

void SearchPanel::fitTableWidth() {
  if (user_sized_ || table_->rowCount() == 0) return;
  for (int column = 0; column < kColumnCount; ++column)
    table_->setColumnHidden(column, false);
  table_->setToolTip(tableToolTip());
  table_->resizeColumnsToContents();
  // Sizes from hints: the headers' own widths are stale until the next layout pass.
  const int needed = table_->verticalHeader()->sizeHint().width() +
                     table_->horizontalHeader()->length() + 2 * table_->frameWidth() +
                     table_->verticalScrollBar()->sizeHint().width();
  constexpr int kChartMinimum = 380; // its axes, title and legend stay legible
  const QSize area = results_->size();
  if (area.width() <= 0) return;
  if (area.width() >= needed + kChartMinimum) {
    results_->setOrientation(Qt::Horizontal);
    results_->setSizes({area.width() - needed, needed});
    return;
  }
  // Too narrow for both side by side: the chart above, the table below at the height of its
  // rows (at most half), so every column stays readable.
  const int rows_height = table_->horizontalHeader()->sizeHint().height() +
                          table_->verticalHeader()->length() + 2 * table_->frameWidth() +
                          table_->horizontalScrollBar()->sizeHint().height();
  const int table = std::min(rows_height, area.height() / 2);
  results_->setOrientation(Qt::Vertical);
  results_->setSizes({area.height() - table, table});
  // Still a little too narrow: the schedule column gives the difference (its cells elide; each
  // row's tooltip names the schedule in full), down to a width that still tells them apart.
  constexpr int kScheduleMinimum = 140;
  int overflow = needed - area.width();
  if (overflow <= 0) return;
  const int schedule = table_->columnWidth(kSchedule);
  const int narrowed = std::max(std::min(kScheduleMinimum, schedule), schedule - overflow);
  table_->setColumnWidth(kSchedule, narrowed);
  overflow -= schedule - narrowed;
  // Narrower still (a laptop's 1224 px): the configuration's lesser columns go, last first, so
  // the ranking scrolls sideways by a column or two rather than by six; each row's tooltip keeps
  // all of them. What their going frees beyond the overflow goes back to the schedule column.
  QStringList hidden;
  for (int column : {kAsFast, kZeroStage, kMicrobatchSize, kRecompute, kMicrobatches}) {
    if (overflow <= 0) break;
    overflow -= table_->columnWidth(column);
    table_->setColumnHidden(column, true);
    hidden.prepend(table_->horizontalHeaderItem(column)->text());
  }
  if (overflow < 0) table_->setColumnWidth(kSchedule, std::min(schedule, narrowed - overflow));
  if (!hidden.isEmpty())
    table_->setToolTip(tr("%1\nNot shown at this width: %2 (in each row's tooltip; widen the "
                          "window to see them)")
                           .arg(tableToolTip(), hidden.join(QStringLiteral(", "))));
}

void SearchPanel::resizeEvent(QResizeEvent *event) {
  QWidget::resizeEvent(event);
  fitTableWidth();
}

QMenu *SearchPanel::alikeMenu(int row) {
  if (!result_ || !shown_request_ || row < 0 || row >= static_cast<int>(result_->plans.size()))
    return nullptr;
  const SearchPlan &ranked = result_->plans[static_cast<std::size_t>(row)];
  if (ranked.alike.empty()) return nullptr;
  if (alike_menu_) alike_menu_->deleteLater();
  alike_menu_ = new QMenu(this);
  QAction *title =
      alike_menu_->addAction(ranked.alike_count > ranked.alike.size()
                                 ? tr("As fast as #%1: the %2 with the least memory of %3")
                                       .arg(row + 1)
                                       .arg(ranked.alike.size())
                                       .arg(ranked.alike_count)
                                 : tr("As fast as #%1").arg(row + 1));
  title->setEnabled(false);
  for (const SearchPlan &alike : ranked.alike) {
    QString text = QStringLiteral("%1 \u00b7 %2 \u00b7 %3 \u00b7 M = %4, b = %5 \u00b7 %6")
                       .arg(meshText(alike), scheduleText(alike),
                            QString::fromStdString(alike.mesh.orderName()))
                       .arg(alike.schedule.microbatches)
                       .arg(alike.microbatch_size)
                       .arg(QString::fromUtf8(recomputeName(alike.training.recompute).data()));
    if (alike.training.zero_stage > 0)
      text += QStringLiteral(", ZeRO-%1").arg(alike.training.zero_stage);
    text += QStringLiteral(" \u00b7 %1 GiB").arg(alike.peak_memory / kGiB, 0, 'f', 1);
    const Plan plan = searchPlanToPlan(*shown_request_, alike);
    connect(alike_menu_->addAction(text), &QAction::triggered, this,
            [this, plan] { emit planChosen(plan); });
  }
  return alike_menu_;
}

void SearchPanel::loadShownPlan(int index) {
  if (!shown_request_ || index < 0 || index >= static_cast<int>(shown_.size())) return;
  chart_->setChosen(index);
  if (index < table_->rowCount()) table_->selectRow(index);
  emit planChosen(searchPlanToPlan(*shown_request_, shown_[static_cast<std::size_t>(index)]));
}

} // namespace pipescope::gui
