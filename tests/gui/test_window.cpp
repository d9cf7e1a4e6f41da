// The explorer window, offscreen: controls drive the schedule, metrics, timeline, memory bars
// and mesh; impossible settings are explained; files round-trip; playback moves the bars.
#include <QComboBox>
#include <QDoubleSpinBox>
#include <QLabel>
#include <QRadioButton>
#include <QSettings>
#include <QSlider>
#include <QSpinBox>
#include <QStandardPaths>
#include <QTabWidget>
#include <QTemporaryDir>
#include <QtTest>

#include "engine/plan_file.h"
#include "gui/charts/charts.h"
#include "gui/widgets/compare_view.h"
#include "gui/widgets/controls_panel.h"
#include "gui/widgets/explain_panel.h"
#include "gui/widgets/main_window.h"
#include "gui/widgets/mesh_widget.h"
#include "gui/widgets/metrics_panel.h"
#include "gui/widgets/timeline_widget.h"
#include "tests/gui/window_test_support.h"

using namespace pipescope;
using namespace pipescope::gui;
using namespace pipescope::gui::testing;

namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

Evaluation engineEvaluation(const Plan &plan) {
  auto schedule = planSchedule(plan);
  if (!schedule) qFatal("%s", schedule.error().message.c_str());
  auto costs = planCosts(plan, schedule->placement);
  if (!costs) qFatal("%s", costs.error().message.c_str());
  auto evaluation = evaluateSchedule(std::move(*schedule), *costs);
  if (!evaluation) qFatal("%s", evaluation.error().message.c_str());
  return std::move(*evaluation);
}

} // namespace

class TestWindow : public QObject {
  Q_OBJECT
private slots:
  void initTestCase() {
    QStandardPaths::setTestModeEnabled(true);
    QCoreApplication::setOrganizationName(QStringLiteral("pipescope-tests"));
    QCoreApplication::setApplicationName(QStringLiteral("test_gui_window"));
    QSettings().clear();
  }

  void opensOnTheExamplePlan() {
    MainWindow window(quietOptions());
    window.show();
    window.settle();
    QVERIFY(window.width() >= 1280 && window.height() >= 800);
    QVERIFY(window.snapshot());
    const Plan &plan = window.snapshot()->plan;
    QCOMPARE(plan.request.name, std::string("1f1b"));
    QCOMPARE(plan.request.pp, 4);
    QCOMPARE(plan.request.microbatches, 8);
    QCOMPARE(window.timeline()->model().rowCount(), 4);
    QVERIFY(window.errorMessage().isEmpty());
  }

  void sliderUpdatesScheduleMetricsAndTimeline() {
    MainWindow window(quietOptions());
    window.show();
    window.settle();
    const std::size_t items_before = window.timeline()->drawList().itemCount();
    window.controls()->microbatches()->slider()->setValue(16);
    window.settle();
    const auto &snapshot = window.snapshot();
    QCOMPARE(snapshot->evaluation->schedule.microbatches(), 16);
    QCOMPARE(window.controls()->microbatches()->spinBox()->value(), 16);
    const Evaluation expected = engineEvaluation(snapshot->plan);
    QCOMPARE(window.metrics()->valueText(QStringLiteral("bubble_fraction")),
             formatPercent(expected.simulation.bubble_fraction));
    QCOMPARE(window.metrics()->valueText(QStringLiteral("bubble_ratio")),
             formatPercent(expected.simulation.bubble_ratio));
    QCOMPARE(window.metrics()->valueText(QStringLiteral("step_time")),
             formatDuration(expected.simulation.makespan_us));
    QVERIFY(expected.analytic.has_value());
    QCOMPARE(window.metrics()->valueText(QStringLiteral("bubble_fraction_analytic")),
             formatPercent(expected.analytic->bubble_fraction));
    QVERIFY(window.metrics()
                ->valueText(QStringLiteral("agreement"))
                .contains(QStringLiteral("matches")));
    QCOMPARE(window.timeline()->model().opCount(), expected.schedule.opCount());
    QCOMPARE(window.timeline()->mapping().fullEnd(), expected.simulation.makespan_us);
    QVERIFY(window.timeline()->drawList().itemCount() != items_before);

    // The spin box reaches past the slider, and P reshapes rows, mesh and memory bars.
    window.controls()->pipelineRanks()->spinBox()->setValue(6);
    window.settle();
    QCOMPARE(window.snapshot()->evaluation->schedule.pp(), 6);
    QCOMPARE(window.timeline()->model().rowCount(), 6);
    QCOMPARE(window.mesh()->mesh().pp, 6);
    QCOMPARE(window.memoryBars()->bars().rankCount(), 6);
  }

  void scheduleChoiceAppliesAndExplainsDisabledControls() {
    MainWindow window(quietOptions());
    window.show();
    window.settle();
    auto *controls = window.controls();
    QVERIFY(!controls->chunks()->isEnabled());
    QVERIFY(controls->chunks()->spinBox()->toolTip().contains(QStringLiteral("V = 1")));
    QVERIFY(!controls->microbatchGroup()->isEnabled());
    controls->scheduleBox()->setCurrentIndex(
        controls->scheduleBox()->findData(QStringLiteral("interleaved-1f1b")));
    window.settle();
    QVERIFY(controls->chunks()->isEnabled());
    QVERIFY(controls->microbatchGroup()->isEnabled());
    QCOMPARE(window.snapshot()->evaluation->schedule.chunks(), 2);
    QCOMPARE(window.snapshot()->plan.request.name, std::string("interleaved-1f1b"));
    controls->scheduleBox()->setCurrentIndex(
        controls->scheduleBox()->findData(QStringLiteral("zb-v")));
    window.settle();
    QVERIFY(!controls->chunks()->isEnabled());
    QVERIFY(controls->chunks()->spinBox()->toolTip().contains(QStringLiteral("V at 2")));
    QCOMPARE(window.snapshot()->evaluation->schedule.chunks(), 2);
    // Op-time controls are off under a model, with the reason.
    controls->modelButton()->setChecked(true);
    window.settle();
    QVERIFY(!controls->forwardBox()->isEnabled() ||
            !controls->forwardBox()->parentWidget()->isEnabled());
    QVERIFY(window.snapshot()->plan.model.has_value());
  }

  // The schedules added with PyTorch's and the controllable-memory families are offered and run.
  void newSchedulesAreOfferedAndRun() {
    MainWindow window(quietOptions());
    window.show();
    window.settle();
    auto *controls = window.controls();
    for (const char *name : {"looped-bfs", "interleaved-zb", "v-half", "v-min"}) {
      const int index = controls->scheduleBox()->findData(QString::fromLatin1(name));
      QVERIFY2(index >= 0, name);
      controls->scheduleBox()->setCurrentIndex(index);
      window.settle();
      QCOMPARE(window.snapshot()->plan.request.name, std::string(name));
      QVERIFY2(window.snapshot()->evaluation, name);
      const bool looped = name[0] != 'v';
      QCOMPARE(controls->chunks()->isEnabled(), looped);
      QVERIFY(!controls->microbatchGroup()->isEnabled());
      QCOMPARE(window.snapshot()->evaluation->schedule.chunks(), 2);
    }
  }

  void timelineHitTestAndClickHighlight() {
    MainWindow window(quietOptions());
    window.show();
    window.settle();
    TimelineWidget *timeline = window.timeline();
    const OpLocation location{0, 2, 5};
    const QRectF rect = timeline->opRect(location);
    QVERIFY(rect.width() > 4);
    const auto hit = timeline->opAt(rect.center().toPoint());
    QVERIFY(hit.has_value());
    QCOMPARE(*hit, location);
    // Hovering names the op: stage, microbatch, start, end and duration.
    QSignalSpy hover(timeline, &TimelineWidget::hoverTextChanged);
    QTest::mouseMove(timeline, rect.center().toPoint());
    QVERIFY(!hover.isEmpty());
    const QString text = hover.last().at(0).toString();
    const Op &op = timeline->model().op(location);
    const OpTiming &timing = timeline->model().timing(location);
    QVERIFY(
        text.contains(QStringLiteral("stage %1, microbatch %2").arg(op.stage).arg(op.microbatch)));
    QVERIFY(text.contains(formatDuration(timing.start_us)));
    QVERIFY(text.contains(formatDuration(timing.end_us)));
    QVERIFY(text.contains(QStringLiteral("duration ") +
                          formatDuration(timing.end_us - timing.start_us)));
    QTest::mouseClick(timeline, Qt::LeftButton, {}, rect.center().toPoint());
    QCOMPARE(timeline->highlightedMicrobatch(), timeline->model().op(location).microbatch);
    // Clicking empty space clears the highlight.
    QTest::mouseClick(timeline, Qt::LeftButton, {},
                      QPoint(TimelineWidget::kHeaderWidth + 2, timeline->height() - 2));
    QCOMPARE(timeline->highlightedMicrobatch(), -1);
  }

  void wheelZoomsAndDragPans() {
    MainWindow window(quietOptions());
    window.show();
    window.settle();
    TimelineWidget *timeline = window.timeline();
    const QPoint center = timeline->rect().center();
    QWheelEvent wheel(center, timeline->mapToGlobal(center), QPoint(), QPoint(0, 240), Qt::NoButton,
                      Qt::NoModifier, Qt::NoScrollPhase, false);
    QApplication::sendEvent(timeline, &wheel);
    QVERIFY(!timeline->mapping().isFitted());
    const double start = timeline->mapping().viewStart();
    QTest::mousePress(timeline, Qt::LeftButton, {}, center);
    QTest::mouseMove(timeline, center + QPoint(60, 0));
    QTest::mouseRelease(timeline, Qt::LeftButton, {}, center + QPoint(60, 0));
    QVERIFY(timeline->mapping().viewStart() < start);
    const TimeMapping panned = timeline->mapping();
    timeline->zoomStack()->resetZoom();
    QVERIFY(timeline->mapping().isFitted());
    // Zoom back returns to the view before the reset, then to the one before the wheel.
    timeline->zoomStack()->zoomBack();
    QCOMPARE(timeline->mapping().viewStart(), panned.viewStart());
    timeline->zoomStack()->zoomBack();
    QVERIFY(timeline->mapping().isFitted());
  }

  void memoryBarsMatchTheEngine() {
    MainWindow window(quietOptions());
    window.show();
    const Plan plan = modelPlan();
    window.setPlan(plan);
    window.settle();
    QVERIFY2(window.errorMessage().isEmpty(), qPrintable(window.errorMessage()));
    // The engine's own figures, computed independently of the window.
    auto schedule = planSchedule(plan);
    QVERIFY(schedule.ok());
    ModelDerivation derivation;
    auto costs = planCosts(plan, schedule->placement, &derivation);
    QVERIFY(costs.ok());
    SimulationOptions options;
    options.memory_timeline = true;
    options.stage_activation_bytes = derivation.stage_activation_bytes;
    auto evaluation = evaluateSchedule(*schedule, *costs, options);
    QVERIFY(evaluation.ok());
    const ModelReport report = reportModel(*plan.model, plan.mesh, evaluation->schedule, derivation,
                                           evaluation->simulation);
    MemoryBarsChart *bars = window.memoryBars();
    QCOMPARE(bars->bars().rankCount(), 4);
    for (int rank = 0; rank < 4; ++rank) {
      const auto &memory = report.memory[static_cast<std::size_t>(rank)];
      QCOMPARE(bars->shownValue(0, rank), memory.params / kGiB);
      QCOMPARE(bars->shownValue(1, rank), memory.grads / kGiB);
      QCOMPARE(bars->shownValue(2, rank), memory.optimizer / kGiB);
      QCOMPARE(bars->shownValue(3, rank), memory.activations_peak / kGiB);
    }
    QCOMPARE(bars->bars().capacity, report.memory[0].capacity / kGiB);
    QCOMPARE(window.metrics()->valueText(QStringLiteral("mfu")), formatPercent(report.mfu));

    // A device too small for the model marks the ranks over capacity.
    window.controls()->deviceMemoryBox()->setValue(2);
    window.settle();
    QVERIFY(window.memoryBars()->title().contains(QStringLiteral("over capacity")));
    QVERIFY(window.memoryBars()->categories().first().contains(QStringLiteral("OOM")));
    QVERIFY(
        window.metrics()->valueText(QStringLiteral("memory_fit")).contains(QStringLiteral("no")));
  }

  void activationBarsWithoutAModel() {
    MainWindow window(quietOptions());
    window.show();
    window.settle();
    const auto &simulation = window.snapshot()->evaluation->simulation;
    for (int rank = 0; rank < 4; ++rank)
      QCOMPARE(window.memoryBars()->shownValue(3, rank),
               simulation.ranks[static_cast<std::size_t>(rank)].peak_inflight_microbatches);
    // 1F1B: rank r holds min(P - r, M) microbatches at its peak.
    QCOMPARE(window.memoryBars()->shownValue(3, 0), 4.0);
    QCOMPARE(window.memoryBars()->shownValue(3, 3), 1.0);
  }

  void playheadMovesTheMemoryBars() {
    MainWindow window(quietOptions());
    window.show();
    window.settle();
    const auto &simulation = window.snapshot()->evaluation->simulation;
    window.stepPlayhead(1);
    QCOMPARE(window.playhead(), 0.0);
    const double time = simulation.makespan_us * 0.3;
    window.setPlayhead(time);
    QVERIFY(window.memoryBars()->bars().at_playhead);
    for (int rank = 0; rank < 4; ++rank)
      QCOMPARE(window.memoryBars()->shownValue(3, rank),
               activationsAt(simulation, rank, time, false));
    QCOMPARE(window.timeline()->playhead(), time);
    window.stepPlayhead(1);
    QVERIFY(window.playhead() > time);
    window.setPlaying(true);
    QVERIFY(window.playing());
    QTest::qWait(120);
    window.setPlaying(false);
    QVERIFY(!window.playing());
    window.stopPlayback();
    QVERIFY(!window.memoryBars()->bars().at_playhead);
  }

  void impossibleCombinationsAreExplained() {
    MainWindow window(quietOptions());
    window.show();
    window.settle();
    Plan plan = window.controls()->plan();
    plan.request.name = "interleaved-1f1b";
    plan.request.chunks = 2;
    plan.request.pp = 4;
    plan.request.microbatches = 2; // interleaving needs M >= P
    window.setPlan(plan);
    window.settle();
    const auto expected = checkScheduleRequest(plan.request);
    QVERIFY(!expected.ok());
    QCOMPARE(window.errorMessage(), QString::fromStdString(expected.error().message));
    QVERIFY(window.findChild<QLabel *>(QStringLiteral("error_banner"))->isVisible());
    // The last valid timeline stays on screen.
    QCOMPARE(window.timeline()->model().rowCount(), 4);
    QVERIFY(window.snapshot()->ok());

    plan.request.name = "dualpipe";
    plan.request.pp = 3; // DualPipe needs an even P
    plan.request.microbatches = 12;
    plan.mesh.pp = 3;
    window.setPlan(plan);
    window.settle();
    QVERIFY(!window.errorMessage().isEmpty());

    // Back to a valid setting: the message goes away.
    window.setPlan(examplePlan());
    window.settle();
    QVERIFY(window.errorMessage().isEmpty());
    QVERIFY(!window.findChild<QLabel *>(QStringLiteral("error_banner"))->isVisible());
  }

  void saveThenOpenRoundTripsAPlan() {
    QTemporaryDir directory;
    QVERIFY(directory.isValid());
    const QString path = directory.filePath(QStringLiteral("plan.json"));
    MainWindow window(quietOptions());
    window.show();
    Plan plan = examplePlan();
    plan.request.name = "zb-h1";
    plan.request.pp = 6;
    plan.request.microbatches = 12;
    plan.mesh.pp = 6;
    plan.mesh.dp = 2;
    plan.costs.forward_us = 1.5;
    window.setPlan(plan);
    window.settle();
    QVERIFY(window.savePlanTo(path));
    window.setPlan(examplePlan());
    window.settle();
    QCOMPARE(window.snapshot()->plan.request.pp, 4);
    QVERIFY(window.openPlan(path));
    window.settle();
    QCOMPARE(planToJson(window.controls()->plan()), planToJson(plan));
    QCOMPARE(window.snapshot()->plan.request.name, std::string("zb-h1"));
    QCOMPARE(window.controls()->pipelineRanks()->value(), 6);
    QCOMPARE(window.controls()->dataParallel()->value(), 2);
    // A bad file is refused with a message, not a crash.
    QFile bad(directory.filePath(QStringLiteral("bad.json")));
    QVERIFY(bad.open(QIODevice::WriteOnly));
    bad.write("{\"format\": \"pipescope.plan\", \"version\": 1, \"schedule\": 5}");
    bad.close();
    QVERIFY(!window.openPlan(bad.fileName()));
    QVERIFY(!window.errorMessage().isEmpty());
  }

  void exportsWriteFiles() {
    QTemporaryDir directory;
    MainWindow window(quietOptions());
    window.show();
    window.settle();
    const QString png = directory.filePath(QStringLiteral("timeline.png"));
    QVERIFY(window.exportPng(png));
    QImage image(png);
    QVERIFY(!image.isNull());
    QCOMPARE(image.size(), window.timeline()->size());
    const QString svg = directory.filePath(QStringLiteral("timeline.svg"));
    QVERIFY(window.exportSvg(svg));
    QFile svg_file(svg);
    QVERIFY(svg_file.open(QIODevice::ReadOnly));
    QVERIFY(svg_file.readAll().contains("<svg"));
    const QString trace = directory.filePath(QStringLiteral("trace.json"));
    QVERIFY(window.exportChromeTrace(trace));
    auto text = readTextFile(trace.toStdString());
    QVERIFY(text.ok());
    auto json = parseJsonLimited(*text);
    QVERIFY(json.ok());
    QVERIFY(json->contains("traceEvents"));
  }

  void largeSettingsEvaluateOffTheGuiThread() {
    MainWindow window(quietOptions());
    window.show();
    window.settle();
    window.evaluator()->setInlineOpLimit(100);
    Plan plan = examplePlan();
    plan.request.microbatches = 64;
    window.setPlan(plan);
    // The request returns at once; the window keeps the previous snapshot until the worker ends.
    QVERIFY(window.evaluator()->busy());
    QCOMPARE(window.snapshot()->plan.request.microbatches, 8);
    window.settle();
    QCOMPARE(window.snapshot()->plan.request.microbatches, 64);
    // Requests made while the worker runs collapse into the newest one.
    plan.request.microbatches = 70;
    window.setPlan(plan);
    plan.request.microbatches = 80;
    window.setPlan(plan);
    window.settle();
    QCOMPARE(window.snapshot()->plan.request.microbatches, 80);
  }

  void meshHoverShowsGroupsAndLinks() {
    MainWindow window(quietOptions());
    window.show();
    Plan plan = examplePlan();
    plan.mesh.dp = 2;
    plan.mesh.tp = 2;
    plan.mesh.gpus_per_node = 8;
    window.setPlan(plan);
    window.settle();
    window.tabs()->setCurrentWidget(window.mesh());
    MeshWidget *mesh = window.mesh();
    QCOMPARE(mesh->mesh().worldSize(), 16);
    const QRectF cell = mesh->gpuRect(5);
    QCOMPARE(mesh->gpuAt(cell.center().toPoint()), 5);
    const QString text = mesh->describeGpu(5);
    QVERIFY(text.contains(QStringLiteral("TP group")));
    QVERIFY(text.contains(QStringLiteral("PP group")));
    QVERIFY(text.contains(QStringLiteral("DP group")));
    // tp-pp-dp with 8 GPUs per node: TP and PP groups stay inside a node, DP crosses nodes.
    QVERIFY(text.contains(QStringLiteral("inter-node")));
    QVERIFY(text.contains(QStringLiteral("intra-node")));
  }

  void explainShowsTheFormulaAndItsSource() {
    MainWindow window(quietOptions());
    window.show();
    window.settle();
    const auto &analytic = window.snapshot()->evaluation->analytic;
    QVERIFY(analytic.has_value());
    window.tabs()->setCurrentWidget(window.explain());
    const QString text = window.explain()->toPlainText();
    QVERIFY(text.contains(QString::fromStdString(analytic->bubble_formula)));
    QVERIFY(text.contains(QStringLiteral("M = 8")));
    QVERIFY(!sliderEffects(*window.snapshot()).empty());
  }

  void compareStacksSchedulesAndDrawsBubbleCurves() {
    MainWindow window(quietOptions());
    window.show();
    window.settle();
    window.tabs()->setCurrentWidget(window.compare());
    window.compare()->setCheckedFamilies(
        {QStringLiteral("1f1b"), QStringLiteral("gpipe"), QStringLiteral("dualpipe")});
    window.settle();
    const auto &result = window.compare()->result();
    // DualPipe refuses M = 8 < 2P... or accepts it; either way each family is accounted for.
    QCOMPARE(static_cast<int>(result.sections.size()) + result.refused.size(), 3);
    QVERIFY(result.sections.size() >= 2);
    QCOMPARE(window.compare()->timeline()->model().rowCount(),
             static_cast<int>(result.sections.size()) * 4);
    QVERIFY(window.compare()->bubbleChart()->curveCount() >= 3);
    for (const auto &curve : result.curves)
      for (const auto &point : curve.points)
        QVERIFY(point.y() >= -1e-9 && point.y() <= 100);
  }

  void parameterChangeMorphsTheTimeline() {
    MainWindowOptions options = quietOptions();
    options.animate = true;
    MainWindow window(options);
    window.show();
    window.settle();
    QVERIFY(!window.timeline()->morphing());
    window.controls()->microbatches()->spinBox()->setValue(10);
    // The new layout arrives at once and morphs from the old one for about a quarter second.
    QCOMPARE(window.snapshot()->plan.request.microbatches, 10);
    QVERIFY(window.timeline()->morphing());
    const auto during = window.timeline()->drawList();
    QCOMPARE(during.itemCount(), window.timeline()->model().opCount());
    QTRY_VERIFY_WITH_TIMEOUT(!window.timeline()->morphing(), 2000);
  }

  void settingsRememberThePlan() {
    QSettings().clear();
    MainWindowOptions options = quietOptions();
    options.use_settings = true;
    {
      MainWindow window(options);
      window.show();
      Plan plan = examplePlan();
      plan.request.microbatches = 13;
      window.setPlan(plan);
      window.settle();
      window.close();
    }
    MainWindow restored(options);
    restored.settle();
    QCOMPARE(restored.snapshot()->plan.request.microbatches, 13);
    QSettings().clear();
  }
};

QTEST_MAIN(TestWindow)
#include "test_window.moc"
