// The Search tab and the layer editor, offscreen: the planner runs on a worker and its results
// reach the chart, the table and (on a click) the explorer; cancel stops it; layouts edited in the
// controls re-simulate, and invalid ones are refused with the engine's message.
#include <QComboBox>
#include <QElapsedTimer>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QListWidget>
#include <QMenu>
#include <QProgressBar>
#include <QScrollArea>
#include <QScrollBar>
#include <QSpinBox>
#include <QSplitter>
#include <QTabWidget>
#include <QTableWidget>
#include <QtTest>
#include <algorithm>
#include <set>
#include <utility>

#include "engine/model/speed_of_light.h"
#include "engine/model/validated_accuracy.h"
#include "engine/plan_file.h"
#include "engine/planner/search.h"
#include "gui/charts/charts.h"
#include "gui/explorer/labels.h"
#include "gui/timeline/palette.h"
#include "gui/widgets/controls_panel.h"
#include "gui/widgets/layer_editor.h"
#include "gui/widgets/main_window.h"
#include "gui/widgets/search_panel.h"
#include "tests/gui/window_test_support.h"

using namespace pipescope;
using namespace pipescope::gui;
using namespace pipescope::gui::testing;

namespace {

// A small search: llama3-8b on `gpus` H100s, three families.
void setUpSmallSearch(SearchPanel *search, int gpus) {
  search->modelBox()->setCurrentText(QStringLiteral("llama3-8b"));
  search->hardwareBox()->setCurrentText(QStringLiteral("h100-sxm"));
  search->gpusBox()->setValue(gpus);
  search->memoryLimitBox()->setValue(0);
  search->setSchedules({"1f1b", "interleaved-1f1b", "zb-h1"});
  search->topBox()->setValue(8);
}

/// The small search on `gpus` GPUs, run to its end in a window showing the model plan.
bool runSmallSearch(MainWindow &window, int gpus) {
  window.setPlan(modelPlan());
  window.settle();
  SearchPanel *search = window.search();
  setUpSmallSearch(search, gpus);
  if (!search->startSearch()) return false;
  search->waitForSearch();
  return search->result().has_value();
}

} // namespace

class TestSearch : public QObject {
  Q_OBJECT
private slots:
  void searchShowsPointsAndFront();
  void everyColumnOfTheTableIsReadable();
  void theWholeStatusIsReadableOnAShortWindow();
  void clickingBestLoadsItsPlan();
  void anAsFastConfigurationLoads();
  void cancelStopsTheSearch();
  void badRequestIsExplained();
  void numericsFollowTheControls();
  void layerEditorAppliesLayout();
  void invalidLayoutKeepsThePlan();
  void layerEditorNeedsAModel();
  void chartAxesTellTheirTicksApart();
};

void TestSearch::searchShowsPointsAndFront() {
  MainWindow window(quietOptions());
  window.setPlan(modelPlan());
  window.settle();
  SearchPanel *search = window.search();
  QCOMPARE(window.tabs()->tabText(window.tabs()->indexOf(search)), QStringLiteral("Search"));
  // Opening the tab takes the controls' model, hardware and GPUs (DP x TP x PP = 1 x 1 x 4).
  window.tabs()->setCurrentWidget(search);
  QCOMPARE(search->gpusBox()->value(), 4);
  QCOMPARE(search->modelBox()->currentText(), QStringLiteral("llama3-8b"));
  // An edit made in the tab survives a visit to another tab.
  search->gpusBox()->setValue(24);
  window.tabs()->setCurrentIndex(0);
  window.tabs()->setCurrentWidget(search);
  QCOMPARE(search->gpusBox()->value(), 24);
  setUpSmallSearch(search, 32);
  auto request = search->request();
  QVERIFY2(request.ok(), request.ok() ? "" : request.error().message.c_str());
  QVERIFY(search->startSearch());
  search->waitForSearch();
  QVERIFY(!search->running());
  QVERIFY(search->result().has_value());
  const SearchResult &result = *search->result();
  QVERIFY(!result.cancelled);
  QCOMPARE(search->progressBar()->value(), search->progressBar()->maximum());

  // The same request through the engine directly: the panel shows the planner's answer.
  auto direct = runSearch(*request);
  QVERIFY(direct.ok());
  QCOMPARE(result.plans.size(), direct->plans.size());
  QCOMPARE(result.plans.front().tokens_per_s, direct->plans.front().tokens_per_s);
  QCOMPARE(result.plans.front().order, direct->plans.front().order);

  SearchScatterChart *chart = search->chart();
  QCOMPARE(chart->pointCount(), static_cast<int>(search->shownPlans().size()));
  QVERIFY(chart->pointCount() >= static_cast<int>(result.plans.size()));
  QVERIFY(!result.pareto.empty());
  QCOMPARE(chart->frontPointCount(), static_cast<int>(result.pareto.size()));
  // One series per schedule family shown, coloured from the palette by registry order.
  std::set<std::string> families;
  for (const auto &plan : search->shownPlans())
    families.insert(plan.schedule.name);
  QCOMPARE(chart->seriesCount(), static_cast<int>(families.size()));
  for (int index = 0; index < chart->seriesCount(); ++index) {
    int family_index = -1;
    for (std::size_t f = 0; f < scheduleFamilies().size(); ++f)
      if (QString::fromStdString(scheduleFamilies()[f].title) == chart->seriesName(index))
        family_index = static_cast<int>(f);
    QVERIFY2(family_index >= 0, qPrintable(chart->seriesName(index)));
    QCOMPARE(chart->seriesColor(index), palette::scheduleSeries(family_index));
  }
  QVERIFY(chart->xTitle().contains(QStringLiteral("peak memory")));
  QVERIFY(chart->yTitle().contains(QStringLiteral("tokens/s")));
  // Hover details name the configuration and what it achieves.
  const QString details = chart->detailsOf(0);
  const SearchPlan &best = result.plans.front();
  QVERIFY(details.contains(
      QStringLiteral("dp%1 tp%2 pp%3").arg(best.mesh.dp).arg(best.mesh.tp).arg(best.mesh.pp)));
  QVERIFY(details.contains(QStringLiteral("M = %1").arg(best.schedule.microbatches)));
  QVERIFY(details.contains(QStringLiteral("microbatch size %1").arg(best.microbatch_size)));
  QVERIFY(details.contains(QStringLiteral("tokens/s")));
  QVERIFY(details.contains(QStringLiteral("peak memory")));
  // The ranked table: the top K, best first.
  QCOMPARE(search->table()->rowCount(), static_cast<int>(result.plans.size()));
  QCOMPARE(search->table()->item(0, SearchPanel::kTokensPerSecond)->text(),
           QString::number(best.tokens_per_s, 'f', 0));
  // Its ZeRO column gives each plan's stage, as the hover details do.
  QCOMPARE(search->table()->horizontalHeaderItem(SearchPanel::kZeroStage)->text(),
           QStringLiteral("ZeRO"));
  for (int row = 0; row < search->table()->rowCount(); ++row) {
    const SearchPlan &plan = result.plans[static_cast<std::size_t>(row)];
    QCOMPARE(search->table()->item(row, SearchPanel::kZeroStage)->text(),
             QString::number(plan.training.zero_stage));
    // A balanced layer split says so beside the schedule.
    QCOMPARE(search->table()
                 ->item(row, SearchPanel::kSchedule)
                 ->text()
                 .endsWith(QStringLiteral(" (balanced)")),
             plan.training.balance_layers);
  }
  if (best.training.zero_stage > 0)
    QVERIFY(details.contains(QStringLiteral("ZeRO-%1").arg(best.training.zero_stage)));
  // The last column counts the configurations as fast as each row; its tooltip says what they
  // change.
  QCOMPARE(search->table()->horizontalHeaderItem(SearchPanel::kAsFast)->text(),
           QStringLiteral("as fast"));
  int rows_with_alike = 0;
  for (int row = 0; row < search->table()->rowCount(); ++row) {
    const SearchPlan &plan = result.plans[static_cast<std::size_t>(row)];
    const QTableWidgetItem *item = search->table()->item(row, SearchPanel::kAsFast);
    QCOMPARE(item->text(),
             plan.alike_count > 0 ? QStringLiteral("+%1").arg(plan.alike_count) : QString());
    if (plan.alike_count == 0) continue;
    ++rows_with_alike;
    QVERIFY2(item->toolTip().contains(QStringLiteral("As fast: %1 more").arg(plan.alike_count)),
             qPrintable(item->toolTip()));
  }
  QVERIFY(rows_with_alike > 0);
  // How far the model was from published runs like these, and the runners-up closer to #1 than
  // that shaded: exactly those the engine says are within the validated error.
  const ValidatedAccuracy accuracy =
      validatedAccuracy(request->hardware.name, request->gemm_precision, false);
  QVERIFY(accuracy.step.runs > 0);
  QVERIFY2(
      search->status()->text().contains(
          QStringLiteral("On %1 published runs like these (%2) the model was off by %3 mean")
              .arg(accuracy.step.runs)
              .arg(QString::fromStdString(accuracy.scope), formatPercent(accuracy.step.mean()))),
      qPrintable(search->status()->text()));
  // #1 against its speed of light, as the engine gives it for the plan #1 loads.
  auto fastest = speedOfLightStepS(searchPlanToPlan(*request, best));
  QVERIFY(fastest.ok() && *fastest < best.step_time_s);
  QVERIFY2(search->status()->text().contains(
               QStringLiteral(" #1 is %1\u00d7 its speed of light (%2 with every kernel")
                   .arg(QString::number(best.step_time_s / *fastest, 'f', 2))
                   .arg(formatDuration(*fastest * 1e6))),
           qPrintable(search->status()->text()));
  int shaded = 0;
  for (int row = 0; row < search->table()->rowCount(); ++row) {
    const bool within =
        row > 0 && withinValidatedError(result.plans[static_cast<std::size_t>(row)].step_time_s,
                                        best.step_time_s, accuracy);
    QCOMPARE(search->table()->item(row, 0)->background().color() == palette::withinErrorShade(),
             within);
    shaded += within ? 1 : 0;
  }
  if (shaded > 0)
    QVERIFY2(search->status()->text().contains(
                 shaded == 1 ? QStringLiteral("1 runner-up (shaded)")
                             : QStringLiteral("%1 runners-up (shaded)").arg(shaded)),
             qPrintable(search->status()->text()));
}

// The ranked table gets the width its columns need: beside the chart on a wide window, under it
// where side by side would leave no readable chart; either way no column is scrolled away. At a
// laptop's 1224 px the configuration's lesser columns give way (the tooltip says which), the
// ranking's own figures stay, and what still does not fit scrolls by fewer columns.
void TestSearch::everyColumnOfTheTableIsReadable() {
  for (const auto &[width, orientation] :
       {std::pair{1224, Qt::Vertical}, std::pair{1600, Qt::Vertical},
        std::pair{2600, Qt::Horizontal}}) {
    MainWindow window(quietOptions());
    window.setPlan(modelPlan());
    window.resize(width, 950);
    window.show();
    window.settle();
    SearchPanel *search = window.search();
    window.tabs()->setCurrentWidget(search);
    // Before a search there is nothing to rank: no empty table squeezed beside the chart.
    window.settle();
    QVERIFY(!search->table()->isVisible());
    QCOMPARE(search->chart()->width(), search->table()->parentWidget()->width());
    setUpSmallSearch(search, 32);
    QVERIFY(search->startSearch());
    search->waitForSearch();
    QCoreApplication::processEvents();
    QVERIFY(search->table()->isVisible());
    auto *splitter = qobject_cast<QSplitter *>(search->table()->parentWidget());
    QVERIFY(splitter);
    QCOMPARE(splitter->orientation(), orientation);
    QVERIFY(search->table()->width() > 0 && search->chart()->width() > 0);
    QTableWidget *table = search->table();
    int last = SearchPanel::kColumnCount - 1;
    while (last > 0 && table->isColumnHidden(last))
      --last;
    if (width > 1224) {
      QCOMPARE(table->horizontalScrollBar()->maximum(), 0);
      QVERIFY(table->horizontalHeader()->sectionViewportPosition(last) +
                  table->horizontalHeader()->sectionSize(last) <=
              table->viewport()->width());
    } else {
      // Too narrow even for the ranking's own figures: it scrolls, by fewer columns than it has.
      QVERIFY(table->horizontalScrollBar()->maximum() < last);
    }
    for (int column : {SearchPanel::kTokensPerSecond, SearchPanel::kStepMs, SearchPanel::kMesh,
                       SearchPanel::kSchedule, SearchPanel::kPeakGib})
      QVERIFY(!table->isColumnHidden(column));
    int hidden = 0;
    for (int column = 0; column < SearchPanel::kColumnCount; ++column)
      hidden += table->isColumnHidden(column) ? 1 : 0;
    if (width == 1224) {
      QVERIFY(hidden > 0);
      QVERIFY(table->toolTip().contains(QStringLiteral("Not shown at this width")));
      QVERIFY(table->toolTip().contains(table->horizontalHeaderItem(SearchPanel::kAsFast)->text()));
    } else {
      QCOMPARE(hidden, 0);
      QVERIFY(!table->toolTip().contains(QStringLiteral("Not shown")));
    }
    // The schedules list keeps its rows for names: a long title is elided, not scrolled to,
    // and its tooltip names it whole.
    QListWidget *schedules = search->scheduleList();
    QVERIFY(!schedules->horizontalScrollBar()->isVisible());
    QCOMPARE(schedules->textElideMode(), Qt::ElideMiddle);
    for (int row = 0; row < schedules->count(); ++row)
      QVERIFY(schedules->item(row)->toolTip().startsWith(schedules->item(row)->text() +
                                                         QStringLiteral(": ")));
  }
}

// A laptop's 1224 x 800 window leaves the bottom tabs about 500 px: the search's summary (several
// lines under the inputs) was squeezed into what the fields left and cut off mid-sentence. It
// now has a box of its own under the fields that scrolls, with the height its text needs.
void TestSearch::theWholeStatusIsReadableOnAShortWindow() {
  MainWindow window(quietOptions());
  window.resize(1224, 800);
  window.show();
  window.settle();
  window.tabs()->setCurrentWidget(window.search());
  QVERIFY(runSmallSearch(window, 32));
  QCoreApplication::processEvents();
  window.settle();
  QLabel *status = window.search()->status();
  QVERIFY(status->text().size() > 200);
  QVERIFY(status->height() >= status->heightForWidth(status->width()));
  auto *area = window.search()->findChild<QScrollArea *>(QStringLiteral("search_status"));
  QVERIFY(area);
  QVERIFY(area->isVisible() && area->height() >= 3 * status->fontMetrics().lineSpacing());
  // Scrolled to the end, the status's last line is in view.
  area->verticalScrollBar()->setValue(area->verticalScrollBar()->maximum());
  QCoreApplication::processEvents();
  const QPoint bottom = status->mapTo(area->viewport(), QPoint(0, status->height() - 1));
  QVERIFY(bottom.y() < area->viewport()->height());
}

void TestSearch::clickingBestLoadsItsPlan() {
  MainWindow window(quietOptions());
  QVERIFY(runSmallSearch(window, 16));
  SearchPanel *search = window.search();
  const SearchPlan best = search->result()->plans.front();
  // What a click on the best point does (the chart's clicked signal carries its plan index).
  emit search->chart()->pointClicked(0);
  window.settle();
  const Plan &shown = window.controls()->plan();
  QCOMPARE(shown.request.name, best.schedule.name);
  QCOMPARE(shown.request.pp, best.mesh.pp);
  QCOMPARE(shown.request.microbatches, best.schedule.microbatches);
  QCOMPARE(shown.request.chunks, best.schedule.chunks);
  QCOMPARE(shown.mesh.dp, best.mesh.dp);
  QCOMPARE(shown.mesh.tp, best.mesh.tp);
  QVERIFY(shown.model.has_value());
  QCOMPARE(shown.model->model.microbatch_size, best.microbatch_size);
  QCOMPARE(shown.model->training.recompute, best.training.recompute);
  QVERIFY(window.errorMessage().isEmpty());
  // The explorer's own simulation of the loaded plan gives the planner's figures.
  QVERIFY(window.snapshot() && window.snapshot()->report);
  QVERIFY(qAbs(window.snapshot()->report->tokens_per_s - best.tokens_per_s) <=
          1e-6 * best.tokens_per_s);
  QCOMPARE(window.snapshot()->plan.request.pp, best.mesh.pp);
}

// The "as fast" cell of a row offers the configurations it counts (the row's alike list, a
// disabled title first); choosing one loads that configuration, not the row's.
void TestSearch::anAsFastConfigurationLoads() {
  MainWindow window(quietOptions());
  QVERIFY(runSmallSearch(window, 16));
  SearchPanel *search = window.search();
  const auto &plans = search->result()->plans;
  const auto with_alike = std::find_if(plans.begin(), plans.end(),
                                       [](const SearchPlan &plan) { return !plan.alike.empty(); });
  QVERIFY(with_alike != plans.end());
  const int row = static_cast<int>(with_alike - plans.begin());
  const auto without_alike = std::find_if(
      plans.begin(), plans.end(), [](const SearchPlan &plan) { return plan.alike.empty(); });
  if (without_alike != plans.end())
    QVERIFY(!search->alikeMenu(static_cast<int>(without_alike - plans.begin())));
  QMenu *menu = search->alikeMenu(row);
  QVERIFY(menu);
  const QList<QAction *> actions = menu->actions();
  QCOMPARE(actions.size(), static_cast<qsizetype>(with_alike->alike.size()) + 1);
  QVERIFY(!actions.front()->isEnabled());
  const SearchPlan &chosen = with_alike->alike.back();
  QVERIFY(actions.back()->text().contains(QString::fromStdString(chosen.schedule.name)));
  actions.back()->trigger();
  window.settle();
  const Plan &shown = window.controls()->plan();
  QCOMPARE(shown.request.name, chosen.schedule.name);
  QCOMPARE(shown.request.chunks, chosen.schedule.chunks);
  QCOMPARE(shown.mesh.dp, chosen.mesh.dp);
  QCOMPARE(shown.mesh.cp, chosen.mesh.cp);
  QCOMPARE(shown.mesh.orderName(), chosen.mesh.orderName());
  QVERIFY(shown.model.has_value());
  QCOMPARE(shown.model->training.zero_stage, chosen.training.zero_stage);
  // As fast as its row: the explorer's own simulation gives the row's step.
  QVERIFY(window.snapshot() && window.snapshot()->report);
  QVERIFY(qAbs(window.snapshot()->report->step_time_s - with_alike->step_time_s) <=
          1e-6 * with_alike->step_time_s);
}

void TestSearch::cancelStopsTheSearch() {
  MainWindow window(quietOptions());
  SearchPanel *search = window.search();
  // A space large enough to take many seconds: llama3-70b on 1,024 GPUs, every family.
  search->modelBox()->setCurrentText(QStringLiteral("llama3-70b"));
  search->hardwareBox()->setCurrentText(QStringLiteral("h100-sxm"));
  search->gpusBox()->setValue(1024);
  search->memoryLimitBox()->setValue(0);
  search->setSchedules({});
  QVERIFY(search->startSearch());
  // The UI thread is free while it runs: the button cancels and the inputs are locked.
  QVERIFY(search->running());
  QVERIFY(!search->gpusBox()->isEnabled());
  QTest::qWait(300);
  QVERIFY(search->running());
  search->cancelSearch();
  search->waitForSearch();
  QVERIFY(!search->running());
  QVERIFY(search->gpusBox()->isEnabled());
  if (search->result()) {
    QVERIFY(search->result()->cancelled);
    QVERIFY(search->status()->text().startsWith(QStringLiteral("Cancelled")));
  } else {
    // Cancelled before anything fitted: the planner's message is shown instead.
    QVERIFY(!search->status()->text().isEmpty());
  }
}

void TestSearch::badRequestIsExplained() {
  MainWindow window(quietOptions());
  SearchPanel *search = window.search();
  setUpSmallSearch(search, 16);
  search->memoryLimitBox()->setValue(0.5); // nothing fits half a GiB
  QVERIFY(search->startSearch());
  search->waitForSearch();
  QVERIFY(!search->result().has_value());
  QVERIFY2(search->status()->text().contains(QStringLiteral("memory"), Qt::CaseInsensitive),
           qPrintable(search->status()->text()));
}

// The controls' GEMM precision and all-reduce algorithm reach every candidate (not searched), as
// `pipescope search --fp8 --collective-algorithm` pass them; FP8 only on hardware that has it.
void TestSearch::numericsFollowTheControls() {
  MainWindow window(quietOptions());
  Plan plan = modelPlan();
  QVERIFY(plan.model.has_value());
  plan.model->training.gemm_precision = GemmPrecision::Fp8;
  plan.model->training.collective_algorithm = CollectiveAlgorithm::Tree;
  window.setPlan(plan);
  window.settle();
  SearchPanel *search = window.search();
  window.tabs()->setCurrentWidget(search);
  setUpSmallSearch(search, 16);
  auto fp8 = search->request();
  QVERIFY2(fp8.ok(), fp8.ok() ? "" : fp8.error().message.c_str());
  QVERIFY(fp8->gemm_precision == GemmPrecision::Fp8);
  QVERIFY(fp8->collective_algorithm == CollectiveAlgorithm::Tree);
  search->hardwareBox()->setCurrentText(QStringLiteral("a100-80gb")); // no FP8 tensor cores
  auto a100 = search->request();
  QVERIFY2(a100.ok(), a100.ok() ? "" : a100.error().message.c_str());
  QVERIFY(a100->gemm_precision == GemmPrecision::Bf16);
  QVERIFY(a100->collective_algorithm == CollectiveAlgorithm::Tree);

  // The explorer's hardware file (a calibrated one keeps its preset's name) is what the search
  // runs on while the box shows that name, and what it quotes as the error to expect.
  Plan calibrated = modelPlan();
  for (auto &point : calibrated.model->hardware.gemm_efficiency)
    point.efficiency *= 0.8;
  calibrated.model->hardware.calibration = HardwareCalibration{4, 0.02, 0.05, 0.01, "my-runs"};
  window.setPlan(calibrated);
  window.settle();
  search->hardwareBox()->setCurrentText(QStringLiteral("h100-sxm")); // the tab's edit undone
  auto on_file = search->request();
  QVERIFY2(on_file.ok(), on_file.ok() ? "" : on_file.error().message.c_str());
  QVERIFY(on_file->hardware.calibration.has_value());
  QCOMPARE(on_file->hardware.gemm_efficiency.back().efficiency,
           calibrated.model->hardware.gemm_efficiency.back().efficiency);
  QVERIFY(validatedAccuracy(on_file->hardware, on_file->gemm_precision, false).calibrated);
  QVERIFY(search->hardwareBox()->toolTip().contains(QStringLiteral("my-runs")));
  search->hardwareBox()->setCurrentText(QStringLiteral("h200"));
  QVERIFY(!search->request()->hardware.calibration.has_value());
}

void TestSearch::layerEditorAppliesLayout() {
  MainWindow window(quietOptions());
  window.setPlan(modelPlan()); // llama3-8b (32 layers), P = 4, 1F1B
  window.settle();
  LayerEditor *editor = window.controls()->layerEditor();
  QVERIFY(editor->modeBox()->isEnabled());
  QCOMPARE(editor->mode(), LayerEditor::Mode::Even);
  QCOMPARE(editor->stageCount(), 4);
  QCOMPARE(editor->stageSpin(1)->value(), 8);
  const std::vector<double> even = window.snapshot()->evaluation->times.forward;
  QVERIFY(editor->applyLayoutText(QStringLiteral("Et*2|t*10|t*10|t*10L")));
  window.settle();
  QVERIFY(window.errorMessage().isEmpty());
  QCOMPARE(editor->mode(), LayerEditor::Mode::Custom);
  QVERIFY(editor->message()->isHidden());
  const Plan &plan = window.controls()->plan();
  QCOMPARE(layoutLayerCounts(plan.model->training.layout), (std::vector<int>{2, 10, 10, 10}));
  const std::vector<double> uneven = window.snapshot()->evaluation->times.forward;
  // Op times follow each stage's layers: stage 0 lost 6 of 8 layers, stage 1 gained 2.
  QVERIFY(uneven[0] < even[0] * 0.6);
  QVERIFY(uneven[1] > even[1] * 1.2);
  QVERIFY(qAbs(uneven[1] - uneven[2]) < 1e-9 * uneven[1]);
  // A spin box edit that keeps the total applies too.
  QVERIFY(!editor->setStageLayers(0, 4)); // 34 layers: refused until another stage gives two
  QVERIFY(editor->setStageLayers(3, 8));
  window.settle();
  QCOMPARE(layoutLayerCounts(window.controls()->plan().model->training.layout),
           (std::vector<int>{4, 10, 10, 8}));
  // Another P spreads the layout's 34 units (embedding, 32 layers, loss) over the new stages, as
  // Megatron's --account-for-embedding/loss-in-pipeline-split would: 17 a stage on P = 2; back on
  // P = 4, runs of 9, 9, 8, 8. The layer editor shows it as a custom layout.
  window.controls()->pipelineRanks()->spinBox()->setValue(2);
  window.settle();
  QVERIFY(window.errorMessage().isEmpty());
  QCOMPARE(formatMegatronLayout(window.controls()->plan().model->training.layout),
           std::string("Et*16|t*16L"));
  QCOMPARE(editor->mode(), LayerEditor::Mode::Custom);
  window.controls()->pipelineRanks()->spinBox()->setValue(4);
  window.settle();
  QCOMPARE(layoutLayerCounts(window.controls()->plan().model->training.layout),
           (std::vector<int>{8, 9, 8, 7}));
  QCOMPARE(editor->stageCount(), 4);
  // DualPipe runs the same P stages in both directions: the layout keeps its 4 stages there.
  QComboBox *schedule = window.controls()->scheduleBox();
  schedule->setCurrentIndex(schedule->findData(QStringLiteral("dualpipe")));
  window.settle();
  QVERIFY2(window.errorMessage().isEmpty(), qPrintable(window.errorMessage()));
  QCOMPARE(layoutLayerCounts(window.controls()->plan().model->training.layout),
           (std::vector<int>{8, 9, 8, 7}));
  schedule->setCurrentIndex(schedule->findData(QStringLiteral("1f1b")));
  window.settle();
  // Balanced: the engine's balanced split, no layout.
  editor->setMode(LayerEditor::Mode::Balanced);
  window.settle();
  QVERIFY(window.errorMessage().isEmpty());
  QVERIFY(window.controls()->plan().model->training.layout.empty());
  QVERIFY(window.controls()->plan().model->training.balance_layers);
  // Even again: the engine's split, no layout.
  editor->setMode(LayerEditor::Mode::Even);
  window.settle();
  QVERIFY(window.controls()->plan().model->training.layout.empty());
  QVERIFY(!window.controls()->plan().model->training.balance_layers);
  QCOMPARE(window.snapshot()->evaluation->times.forward, even);
}

void TestSearch::invalidLayoutKeepsThePlan() {
  MainWindow window(quietOptions());
  window.setPlan(modelPlan());
  window.settle();
  LayerEditor *editor = window.controls()->layerEditor();
  QVERIFY(editor->applyLayoutText(QStringLiteral("Et*6|t*10|t*10|t*6L")));
  window.settle();
  const SnapshotPointer before = window.snapshot();
  const LayerLayout layout_before = window.controls()->plan().model->training.layout;

  // 31 layers for a 32-layer model: the engine's own message, the plan unchanged.
  const QString wrong_total = QStringLiteral("Et*6|t*10|t*10|t*5L");
  auto parsed = parseMegatronLayout(wrong_total.toStdString());
  QVERIFY(parsed.ok());
  const Status expected = checkLayerLayout(*parsed, 32, 0, 4);
  QVERIFY(!expected.ok());
  QVERIFY(!editor->applyLayoutText(wrong_total));
  window.settle();
  QVERIFY(!editor->message()->isHidden());
  QCOMPARE(editor->message()->text(), QString::fromStdString(expected.error().message));
  QCOMPARE(window.controls()->plan().model->training.layout, layout_before);
  QCOMPARE(window.snapshot(), before);

  // A syntax error: the parser's message (with its column).
  const QString broken = QStringLiteral("Et*6|(t*10|t*10|t*6L");
  auto syntax = parseMegatronLayout(broken.toStdString());
  QVERIFY(!syntax.ok());
  QVERIFY(!editor->applyLayoutText(broken));
  QCOMPARE(editor->message()->text(), QString::fromStdString(syntax.error().message));
  QCOMPARE(window.controls()->plan().model->training.layout, layout_before);

  // A valid one clears the message.
  QVERIFY(editor->applyLayoutText(QStringLiteral("Et*8|t*8|t*8|t*8L")));
  QVERIFY(editor->message()->isHidden());
}

void TestSearch::layerEditorNeedsAModel() {
  MainWindow window(quietOptions());
  Plan plan = examplePlan();
  plan.model.reset();
  window.setPlan(plan);
  window.settle();
  LayerEditor *editor = window.controls()->layerEditor();
  QVERIFY(!editor->modeBox()->isEnabled());
  QVERIFY(!editor->layoutEdit()->isEnabled());
  QVERIFY(editor->toolTip().contains(QStringLiteral("model + hardware")));
  QVERIFY(!editor->applyLayoutText(QStringLiteral("Et*8|t*8|t*8|t*8L")));
  QVERIFY(editor->message()->text().contains(QStringLiteral("model + hardware")));
}

// Before a search the axes have no scale (they printed 0, 0, 0, 1, 1 from 0 to 1); after one,
// every tick prints differently, however small the range.
void TestSearch::chartAxesTellTheirTicksApart() {
  SearchScatterChart chart;
  chart.resize(400, 300);
  QVERIFY(chart.tickLabels(Qt::Horizontal).isEmpty());
  QVERIFY(chart.tickLabels(Qt::Vertical).isEmpty());
  const auto distinct = [](const QStringList &labels) {
    return !labels.isEmpty() && QSet<QString>(labels.begin(), labels.end()).size() == labels.size();
  };
  // A small model: under 2 GiB a GPU, tokens/s within 10 % of each other.
  ScatterGroup small{QStringLiteral("1F1B"), Qt::blue, {}};
  for (int i = 0; i < 5; ++i)
    small.points.push_back({QPointF(0.3 + 0.35 * i, 1000 + 25 * i), QString(), i});
  chart.setResults({small}, {}, 0, QStringLiteral("small"));
  const QStringList memory = chart.tickLabels(Qt::Horizontal);
  QVERIFY2(distinct(memory), qPrintable(memory.join(QLatin1Char(' '))));
  QVERIFY2(memory.last().contains(QLatin1Char('.')), qPrintable(memory.last()));
  QVERIFY2(distinct(chart.tickLabels(Qt::Vertical)),
           qPrintable(chart.tickLabels(Qt::Vertical).join(QLatin1Char(' '))));
  // A large one: whole GiB and tokens/s, no decimals to read past.
  ScatterGroup large{QStringLiteral("ZB-V"), Qt::red, {}};
  for (int i = 0; i < 5; ++i)
    large.points.push_back({QPointF(20 + 12 * i, 1.2e6 + 5e4 * i), QString(), i});
  chart.setResults({large}, {}, 79.6, QStringLiteral("large"));
  const QStringList gib = chart.tickLabels(Qt::Horizontal), tokens = chart.tickLabels(Qt::Vertical);
  QVERIFY2(distinct(gib) && !gib.join(QString()).contains(QLatin1Char('.')),
           qPrintable(gib.join(QLatin1Char(' '))));
  QVERIFY2(distinct(tokens) && !tokens.join(QString()).contains(QLatin1Char('.')),
           qPrintable(tokens.join(QLatin1Char(' '))));
  chart.clear();
  QVERIFY(chart.tickLabels(Qt::Horizontal).isEmpty());
}

QTEST_MAIN(TestSearch)
#include "test_search.moc"
