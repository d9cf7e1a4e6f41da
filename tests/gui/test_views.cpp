// The explorer's views, offscreen: the timeline's hit test, hover, highlight, zoom and pan; memory
// bars against the engine, with and without a model, and following the playhead; the mesh on
// hover; the explanation; the comparison of schedules; the timeline morphing between settings.
#include <QAbstractItemView>
#include <QComboBox>
#include <QDockWidget>
#include <QDoubleSpinBox>
#include <QLabel>
#include <QListWidget>
#include <QRadioButton>
#include <QScrollArea>
#include <QScrollBar>
#include <QSettings>
#include <QSlider>
#include <QSpinBox>
#include <QStandardPaths>
#include <QTabWidget>
#include <QTemporaryDir>
#include <QtTest>

#include "engine/model/layer_layout.h"
#include "engine/model/speed_of_light.h"
#include "engine/model/validated_accuracy.h"
#include "engine/model/validation.h"
#include "engine/plan_file.h"
#include "gui/charts/charts.h"
#include "gui/widgets/compare_view.h"
#include "gui/widgets/controls_panel.h"
#include "gui/widgets/explain_panel.h"
#include "gui/widgets/layer_editor.h"
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

} // namespace

class TestViews : public QObject {
  Q_OBJECT
private slots:
  void initTestCase() { useTestSettings("test_gui_views"); }

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

  void memoryBarsKeepTheirAxisWhileTheTallestBarStaysHigh() {
    MemoryBarsChart chart;
    MemoryBars bars;
    bars.bytes = true;
    bars.unit = QStringLiteral("GiB");
    bars.params = {10, 10};
    bars.grads = {5, 5};
    bars.optimizer = {20, 20};
    bars.activations = {40, 30};
    bars.over_capacity = {false, false};
    bars.capacity = 0;
    chart.setBars(bars);
    const double top = chart.valueAxisTop();
    QVERIFY(top >= 75 * 1.08 - 1e-9); // the tallest bar, 75 GiB, with room above it
    // Ticks 20 GiB apart print whole ("20", not "20.0"), each unlike the others.
    const QStringList labels = chart.valueAxisLabels();
    QVERIFY2(labels.size() >= 3, qPrintable(labels.join(QLatin1Char(' '))));
    QCOMPARE(labels.first(), QStringLiteral("0"));
    QCOMPARE(QSet<QString>(labels.begin(), labels.end()).size(), labels.size());
    for (const QString &label : labels)
      QVERIFY2(!label.contains(QLatin1Char('.')), qPrintable(labels.join(QLatin1Char(' '))));
    // A drag that moves the tallest bar a little keeps the axis (no relayout); the bars move.
    bars.activations = {36, 30};
    chart.setBars(bars);
    QCOMPARE(chart.valueAxisTop(), top);
    QCOMPARE(chart.shownValue(3, 0), 36.0);
    // Past the top, or far under it, the axis follows.
    bars.activations = {140, 30};
    chart.setBars(bars);
    QVERIFY(chart.valueAxisTop() >= 175 * 1.08 - 1e-9);
    bars.activations = {1, 1};
    chart.setBars(bars);
    QVERIFY(chart.valueAxisTop() < 0.6 * 175);
    QVERIFY(chart.valueAxisTop() >= 36 * 1.08 - 1e-9);
    // Nice numbers can put the axis far above the bar. GPipe at M = 128 asks 597 GiB (shown as
    // 600), at M = 129 602 GiB (shown as 1000): M = 128's 597 GiB again is no reason to relayout.
    bars.activations = {597.18 / 1.08 - 35, 30};
    chart.setBars(bars);
    bars.activations = {601.75 / 1.08 - 35, 30};
    chart.setBars(bars);
    const double nice_top = chart.valueAxisTop();
    const int sets = chart.valueAxisSets();
    QVERIFY(nice_top >= 601.75 - 1e-9);
    bars.activations = {597.18 / 1.08 - 35, 30};
    chart.setBars(bars);
    QCOMPARE(chart.valueAxisTop(), nice_top);
    QCOMPARE(chart.valueAxisSets(), sets);
    // Two ranks' numbers fit under their bars; a rank out of memory ("0 OOM") or 16 ranks do
    // not, and their labels stand upright, whole, instead of as "...".
    QVERIFY(!chart.rankLabelsUpright());
    bars.capacity = 20;
    bars.over_capacity = {true, false};
    chart.setBars(bars);
    QVERIFY(chart.rankLabelsUpright());
    QCOMPARE(chart.categories().first(), QStringLiteral("0 OOM"));
    bars.params.assign(16, 10);
    bars.grads.assign(16, 5);
    bars.optimizer.assign(16, 20);
    bars.activations.assign(16, 1);
    bars.over_capacity.assign(16, false);
    bars.capacity = 80;
    chart.setBars(bars);
    QVERIFY(chart.rankLabelsUpright());
    QCOMPARE(chart.categories().size(), 16);
    QCOMPARE(chart.categories().last(), QStringLiteral("15"));
  }

  void metricsCopyAsPlainText() {
    MainWindow window(quietOptions());
    window.show();
    window.setPlan(modelPlan());
    window.settle();
    MetricsPanel *metrics = window.metrics();
    const QString text = metrics->copyableText();
    // A line per shown row under its section, the values as the panel shows them, without markup.
    QVERIFY2(text.contains(QStringLiteral("Step\n")), qPrintable(text));
    QVERIFY2(text.contains(QStringLiteral("  step time: ") +
                           metrics->valueText(QStringLiteral("step_time")) + QLatin1Char('\n')),
             qPrintable(text));
    QVERIFY2(text.contains(QStringLiteral("  MFU: ") + metrics->valueText(QStringLiteral("mfu"))),
             qPrintable(text));
    QVERIFY(!text.contains(QLatin1Char('<')));
    // The formula row is rich text (a line break and a coloured source): copied as its words.
    QVERIFY(metrics->valueText(QStringLiteral("formula")).contains(QStringLiteral("<br>")));
    const QString formula = metrics->plainValueText(QStringLiteral("formula"));
    QVERIFY(!formula.contains(QLatin1Char('<')) && formula.contains(QStringLiteral("bubble_")));
    // The published row is hidden with no published run open: not copied.
    QVERIFY(!text.contains(QStringLiteral("published:")));
    QVERIFY(metrics->plainValueText(QStringLiteral("no_such_row")).isEmpty());
  }

  void metricsRowsHoldTheirHeightWhileADragChangesValues() {
    // Llama 3 70B at TP 8 on 16 ranks: between M = 128 and 144 the formula's agreement and the PP
    // communication wrap onto a different number of lines at this window size (measured with
    // pipescope-gui --bench), so every row below them would move on every move of a drag.
    MainWindow window(quietOptions());
    window.resize(1280, 800);
    window.show();
    Plan plan = modelPlan();
    auto model = loadModelSpec("llama3-70b");
    QVERIFY(model.ok());
    plan.model->model = *model;
    plan.mesh.tp = 8;
    plan.mesh.pp = 16;
    plan.request = ScheduleRequest{};
    plan.request.name = "v-half";
    plan.request.pp = 16;
    plan.request.microbatches = 128;
    plan.request.chunks = 2;
    window.setPlan(plan);
    window.settle();
    QVERIFY2(window.errorMessage().isEmpty(), qPrintable(window.errorMessage()));
    MetricsPanel *metrics = window.metrics();
    // From the first row under the speed of light (whose value arrives later, off the GUI
    // thread) to the last row: the span the two wrapping rows sit in.
    auto *first = metrics->findChild<QLabel *>(QStringLiteral("metric_bubble_fraction"));
    auto *last = metrics->findChild<QLabel *>(QStringLiteral("metric_evaluation_time"));
    QVERIFY(first && last);
    auto span = [&] { return last->y() - first->y(); };
    QSpinBox *spin = window.controls()->microbatches()->spinBox();
    auto move = [&](int microbatches) {
      spin->setValue(microbatches);
      window.evaluator()->waitForIdle();
      QCoreApplication::sendPostedEvents(nullptr, QEvent::LayoutRequest);
      QCoreApplication::processEvents();
      return span();
    };
    auto fitted = [&](int microbatches) {
      move(microbatches);
      metrics->fitRowsToValues();
      QCoreApplication::sendPostedEvents(nullptr, QEvent::LayoutRequest);
      QCoreApplication::processEvents();
      return span();
    };
    // Fitted to their values, the two settings take different heights...
    const int fitted_128 = fitted(128);
    const int fitted_144 = fitted(144);
    QVERIFY2(fitted_128 != fitted_144,
             "no row wraps differently between M = 128 and 144 any more: pick another pair");
    // ... but during a drag over both, the rows keep the taller of the two.
    const int tallest = std::max(fitted_128, fitted_144);
    for (int microbatches : {128, 144, 128, 144})
      QCOMPARE(move(microbatches), tallest);
    // Once the values rest, the rows fit them again: the panel does it itself after 0.4 s.
    QTRY_COMPARE_WITH_TIMEOUT(span(), fitted_144, 3000);
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
    // The plan's speed of light, as the engine gives it, and the step over it (worked out off
    // the GUI thread; settle waits for it).
    auto fastest = speedOfLightStepS(plan);
    QVERIFY(fastest.ok() && *fastest < report.step_time_s);
    QCOMPARE(window.metrics()->valueText(QStringLiteral("speed_of_light")),
             QStringLiteral("%1: the step is %2\u00d7 it")
                 .arg(formatDuration(*fastest * 1e6))
                 .arg(QString::number(report.step_time_s / *fastest, 'f', 2)));
    // What the published H100 BF16 dense runs say of this prediction: the engine's figures.
    const ValidatedAccuracy accuracy = validatedAccuracy(*plan.model);
    QVERIFY(accuracy.step.runs > 0);
    const QString checked = window.metrics()->valueText(QStringLiteral("validated"));
    QVERIFY2(checked.startsWith(
                 QStringLiteral("%1 mean, %2 worst error on %3 published runs")
                     .arg(formatPercent(accuracy.step.mean()), formatPercent(accuracy.step.worst))
                     .arg(accuracy.step.runs)),
             qPrintable(checked));
    QVERIFY(checked.contains(QStringLiteral("h100-sxm, bf16, dense")));
    // On the 96 GB HBM2e H100 no published run checks the step (torchtitan's rows there are
    // memory only), and the panel says so.
    Plan on_hbm2e = plan;
    auto hbm2e = loadHardwareSpec("h100-hbm2e-96gb");
    QVERIFY(hbm2e.ok());
    on_hbm2e.model->hardware = *hbm2e;
    window.setPlan(on_hbm2e);
    window.settle();
    QVERIFY2(window.metrics()
                 ->valueText(QStringLiteral("validated"))
                 .contains(QStringLiteral(
                     "no published run on h100-hbm2e-96gb: this prediction is unchecked")),
             qPrintable(window.metrics()->valueText(QStringLiteral("validated"))));
    window.setPlan(plan);
    window.settle();
    // No DP: no sync, nothing exposed.
    QCOMPARE(window.metrics()->valueText(QStringLiteral("communication_dp")),
             QStringLiteral("none"));
    // DP 2 with the sync overlapped: the panel says what of it the step pays, as the engine does.
    Plan data_parallel = plan;
    data_parallel.mesh.dp = 2;
    data_parallel.model->training.overlap_gradient_sync = true;
    window.setPlan(data_parallel);
    window.settle();
    auto dp_costs = planCosts(data_parallel, schedule->placement, &derivation);
    QVERIFY(dp_costs.ok());
    auto dp_evaluation = evaluateSchedule(*schedule, *dp_costs, options);
    QVERIFY(dp_evaluation.ok());
    const ModelReport dp_report =
        reportModel(*data_parallel.model, data_parallel.mesh, dp_evaluation->schedule, derivation,
                    dp_evaluation->simulation);
    QVERIFY(dp_report.dp.exposed_time_s < dp_report.dp.time_s);
    QVERIFY2(window.metrics()
                 ->valueText(QStringLiteral("communication_dp"))
                 .endsWith(QStringLiteral("; %1 exposed")
                               .arg(formatDuration(dp_report.dp.exposed_time_s * 1e6))),
             qPrintable(window.metrics()->valueText(QStringLiteral("communication_dp"))));
    window.setPlan(plan);
    window.settle();

    // A device too small for the model marks the ranks over capacity.
    window.controls()->deviceMemoryBox()->setValue(2);
    window.settle();
    QVERIFY(window.memoryBars()->title().contains(QStringLiteral("over capacity")));
    QVERIFY(window.memoryBars()->categories().first().contains(QStringLiteral("OOM")));
    QVERIFY(
        window.metrics()->valueText(QStringLiteral("memory_fit")).contains(QStringLiteral("no")));
  }

  // A model plan's hover says what the op's time is made of on its stage (GEMM, attention,
  // memory-bound, TP): the parts shown add up to the op's duration, and the engine's unrounded
  // parts to the simulated time exactly. A plan with typed-in costs keeps the plain hover.
  void hoverShowsWhatAModelOpIsMadeOf() {
    MainWindow window(quietOptions());
    window.show();
    Plan plan = modelPlan();
    plan.mesh.tp = 2; // a TP all-reduce in every layer
    window.setPlan(plan);
    window.settle();
    QVERIFY2(window.errorMessage().isEmpty(), qPrintable(window.errorMessage()));
    TimelineWidget *timeline = window.timeline();
    const auto &snapshot = *window.snapshot();
    QVERIFY(snapshot.derivation);
    const auto &ranks = snapshot.evaluation->schedule.ranks;
    int checked = 0;
    for (OpKind kind : {OpKind::Forward, OpKind::FullBackward}) {
      // The first such op on rank 1 (a middle stage: no embedding, no head).
      int index = 0;
      while (ranks[1][static_cast<std::size_t>(index)].kind != kind)
        ++index;
      const OpLocation location{0, 1, index};
      const Op &op = timeline->model().op(location);
      const OpTiming &timing = timeline->model().timing(location);
      const double duration = timing.end_us - timing.start_us;
      const auto parts = opBreakdown(snapshot.derivation->stage_breakdown, op);
      QVERIFY(parts);
      QVERIFY(qAbs(parts->total() - duration) <= 1e-9 * duration);
      const QString text = timeline->hoverTextAt(timeline->opRect(location).center().toPoint());
      // The last line: "F 9.87 ms = GEMM 7.1 + attention 1.2 + memory-bound 0.9 + TP comm 0.6".
      const QString line = text.section(QStringLiteral("<br>"), -1);
      static const QRegularExpression shape(
          QStringLiteral("^(F|B) ([0-9.]+) (ms|\u00b5s) = (.+)$"));
      const auto match = shape.match(line);
      QVERIFY2(match.hasMatch(), qPrintable(text));
      QCOMPARE(match.captured(1), QString::fromLatin1(opKindLetter(kind).data()));
      const double unit = match.captured(3) == QStringLiteral("ms") ? 1000 : 1;
      QVERIFY2(qAbs(match.captured(2).toDouble() * unit - duration) <= 0.005 * duration,
               qPrintable(line));
      double sum = 0;
      QStringList names;
      for (const QString &part : match.captured(4).split(QStringLiteral(" + "))) {
        const int space = part.lastIndexOf(QLatin1Char(' '));
        names << part.left(space);
        sum += part.mid(space + 1).toDouble() * unit;
      }
      for (const char *name : {"GEMM", "attention", "memory-bound", "TP comm"})
        QVERIFY2(names.contains(QString::fromLatin1(name)), qPrintable(line));
      // Each part is rounded to 3 significant digits.
      QVERIFY2(qAbs(sum - duration) <= 0.005 * duration, qPrintable(line));
      ++checked;
    }
    QCOMPARE(checked, 2);

    window.setPlan(examplePlan());
    window.settle();
    const QString plain =
        timeline->hoverTextAt(timeline->opRect(OpLocation{0, 1, 0}).center().toPoint());
    QVERIFY(plain.contains(QStringLiteral("duration")));
    QVERIFY2(!plain.contains(QStringLiteral(" = ")), qPrintable(plain));
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

  // Megatron-Core's 462B on 6,144 GPUs was an empty tab ("too many to draw one by one"): it is
  // one square per node, colored by pipeline rank, a node's hover standing for its first GPU.
  void aHugeMeshIsDrawnNodeByNode() {
    MainWindow window(quietOptions());
    window.resize(1280, 800);
    window.show();
    Plan plan = examplePlan();
    plan.request.pp = plan.mesh.pp = 16;
    plan.request.microbatches = 32;
    plan.mesh.dp = 48;
    plan.mesh.tp = 8;
    plan.mesh.gpus_per_node = 8;
    window.setPlan(plan);
    window.tabs()->setCurrentWidget(window.mesh());
    window.settle();
    MeshWidget *mesh = window.mesh();
    QCOMPARE(mesh->mesh().worldSize(), 6144);
    QVERIFY(mesh->drawsNodes());
    const QRectF node = mesh->gpuRect(1000); // node 125
    QCOMPARE(mesh->gpuRect(1007), node);
    QVERIFY(node.width() >= 4);
    QCOMPARE(mesh->gpuAt(node.center().toPoint()), 1000);
    QVERIFY(mesh->describeGpu(1000).contains(QStringLiteral("node 125</b>: GPUs 1000")));
    QImage image(mesh->size(), QImage::Format_ARGB32);
    mesh->render(&image);
    const int stage = mesh->mesh().coordsOf(1000).p;
    QCOMPARE(image.pixel(node.center().toPoint()),
             pipelineStageColor(stage, mesh->mesh().pp).rgb());
    // A small mesh keeps its GPUs.
    plan.mesh.dp = 2;
    plan.request.pp = plan.mesh.pp = 4;
    window.setPlan(plan);
    window.settle();
    QVERIFY(!mesh->drawsNodes());
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

  // With a model, "Try it" derives each variant's costs again and weighs the bubble against the
  // step, tokens/s per GPU and memory; a layer layout of the old stage count is spread over the
  // new one for P and V, as the sliders spread it (kept, the variant would be refused and not
  // shown).
  void tryItWithAModelWeighsTheStep() {
    auto model = loadModelSpec("llama3-8b");
    auto hardware = loadHardwareSpec("h100-sxm");
    QVERIFY(model.ok() && hardware.ok());
    Plan plan = examplePlan();
    plan.request = {"interleaved-1f1b", 4, 8, 2, 0};
    plan.mesh.pp = 4;
    plan.mesh.dp = 2;
    plan.model = ModelSetup{*model, *hardware, TrainingSetup{}};
    auto layout = parseMegatronLayout("Et*3|(t*4|)*6t*5L");
    QVERIFY(layout.ok());
    plan.model->training.layout = *layout;
    const SnapshotPointer snapshot = computeSnapshot(plan);
    QVERIFY2(snapshot->ok(), qPrintable(snapshot->error));
    const std::vector<SliderEffect> effects = sliderEffects(*snapshot);
    QCOMPARE(effects.size(), std::size_t{3});
    QCOMPARE(effects[0].control, QStringLiteral("M"));
    QCOMPARE(effects[1].control, QStringLiteral("P"));
    QCOMPARE(effects[2].control, QStringLiteral("V"));
    for (const SliderEffect &effect : effects) {
      QVERIFY(effect.with_model);
      QCOMPARE(effect.step_s_from, snapshot->report->step_time_s);
      QVERIFY(effect.tokens_per_gpu_from > 0 && effect.tokens_per_gpu_to > 0);
      QVERIFY(effect.peak_gib_from > 1 && effect.peak_gib_to > 1);
    }
    // Twice the microbatches: nearly twice the step, a smaller bubble, more tokens/s per GPU.
    QVERIFY(effects[0].step_s_to > 1.8 * effects[0].step_s_from);
    QVERIFY(effects[0].bubble_fraction_to < effects[0].bubble_fraction_from);
    QVERIFY(effects[0].tokens_per_gpu_to > effects[0].tokens_per_gpu_from);
    // Twice the ranks: each holds half the layers, so a shorter step and less memory.
    QVERIFY(effects[1].step_s_to < effects[1].step_s_from);
    QVERIFY(effects[1].peak_gib_to < effects[1].peak_gib_from);
    const QString text = explanationHtml(*snapshot);
    QVERIFY2(text.contains(QStringLiteral("tokens/s per GPU; the largest rank holds ")),
             qPrintable(text));
  }

  // A new explanation is laid out once: its scroll bar does not go away and come back with every
  // slider move, each time resizing the text's viewport and laying it all out again.
  void explainKeepsItsWidthWhileADragChangesIt() {
    MainWindow window(quietOptions());
    window.resize(1280, 800);
    window.show();
    window.settle();
    window.tabs()->setCurrentWidget(window.explain());
    window.settle();
    struct ResizeCounter : QObject {
      int resizes = 0;
      bool eventFilter(QObject *, QEvent *event) override {
        if (event->type() == QEvent::Resize) ++resizes;
        return false;
      }
    } counter;
    window.explain()->viewport()->installEventFilter(&counter);
    QSpinBox *spin = window.controls()->microbatches()->spinBox();
    const QString before = window.explain()->toPlainText();
    for (int microbatches : {9, 8, 12, 8}) {
      spin->setValue(microbatches);
      window.evaluator()->waitForIdle();
      QCoreApplication::sendPostedEvents(nullptr, QEvent::LayoutRequest);
      QCoreApplication::processEvents();
    }
    QCOMPARE(counter.resizes, 0);
    // The last move's text may still wait (ExplainPanel::minimumUpdateMs); it is laid out once
    // the drag rests.
    window.settle();
    QVERIFY(!window.explain()->hasPending());
    QCOMPARE(counter.resizes, 0);
    QVERIFY(window.explain()->toPlainText().contains(QStringLiteral("M = 8")));
    QCOMPARE(window.explain()->toPlainText(), before);
  }

  void legendDropsTheMouseHintBeforeAColour() {
    MainWindow window(quietOptions());
    window.resize(1280, 800);
    window.show();
    window.settle();
    auto *legend = window.findChild<QLabel *>(QStringLiteral("legend"));
    QVERIFY(legend);
    // At 1280 px the hint did not fit beside the colours and was cut ("... hover a bubble: its"):
    // it is the tooltip there, and every colour stays on the legend.
    QVERIFY(!legend->text().contains(QStringLiteral("wheel zoom")));
    QVERIFY(legend->toolTip().contains(QStringLiteral("wheel zoom")));
    QVERIFY(legend->text().contains(QStringLiteral("idle&nbsp;(bubble)")));
    window.resize(1920, 1080);
    window.settle();
    QTRY_VERIFY(legend->text().contains(QStringLiteral("wheel zoom")));
    QVERIFY(legend->toolTip().isEmpty());
  }

  void settingsFitTheirDock() {
    // The panel was 350 px wide in a dock of at most 340: its right edge (spin box arrows, the
    // end of every combo box) was cut at any window size.
    for (const QSize size : {QSize(1280, 800), QSize(1000, 700), QSize(1920, 1080)}) {
      MainWindow window(quietOptions());
      window.resize(size);
      window.show();
      window.settle();
      ControlsPanel *controls = window.controls();
      auto *area = qobject_cast<QScrollArea *>(controls->parentWidget()->parentWidget());
      QVERIFY(area);
      QVERIFY2(controls->width() <= area->viewport()->width(),
               qPrintable(QStringLiteral("%1 px of settings in %2 px at %3x%4")
                              .arg(controls->width())
                              .arg(area->viewport()->width())
                              .arg(size.width())
                              .arg(size.height())));
    }
    // A combo box that shrank still lists whole names.
    MainWindow window(quietOptions());
    auto *schedule = window.controls()->findChild<QComboBox *>(QStringLiteral("schedule"));
    QVERIFY(schedule);
    int widest = 0;
    for (int i = 0; i < schedule->count(); ++i)
      widest = std::max(widest, schedule->fontMetrics().horizontalAdvance(schedule->itemText(i)));
    QVERIFY(schedule->view()->minimumWidth() >= widest);
  }

  void settingsShowWhatThePlanUses() {
    // With a model the op-time fields (F = 1 µs, ...) and a dense model's MoE rows were shown
    // disabled, and the settings opened at the dock's 290 px minimum, where "recompute" and
    // "MoE dispatch" wrapped under their labels: the layer editor sat below a 1040 px window.
    MainWindow window(quietOptions());
    window.resize(1440, 1120);
    window.show();
    window.settle();
    ControlsPanel *controls = window.controls();
    QVERIFY(controls->forwardBox()->isVisible());     // op times: typed, so shown
    QVERIFY(controls->modelPresetBox()->isVisible()); // the model's settings, disabled
    QVERIFY(!controls->modelPresetBox()->isEnabled());
    controls->modelButton()->setChecked(true);
    window.settle();
    QVERIFY(!controls->forwardBox()->isVisible());
    QVERIFY(controls->modelPresetBox()->isEnabled());
    QCOMPARE(controls->modelPresetBox()->currentText(), QStringLiteral("llama3-8b"));
    for (QWidget *moe : std::initializer_list<QWidget *>{
             controls->moeDispatcherBox(), controls->dispatcherSmsBox(), controls->moeHostBox()})
      QVERIFY(!moe->isVisible());
    // Each label beside its field: the recompute box starts at its label's row.
    QLabel *label = nullptr;
    for (QLabel *candidate : controls->findChildren<QLabel *>())
      if (candidate->text() == QStringLiteral("recompute")) label = candidate;
    QVERIFY(label);
    const int label_top = label->mapTo(controls, QPoint(0, 0)).y();
    const int box_top = controls->recomputeBox()->mapTo(controls, QPoint(0, 0)).y();
    QVERIFY2(box_top < label_top + label->height(),
             qPrintable(QStringLiteral("recompute box at y %1 under its label at %2 (%3 px)")
                            .arg(box_top)
                            .arg(label_top)
                            .arg(label->height())));
    // The layer editor in view without scrolling.
    auto *area = qobject_cast<QScrollArea *>(controls->parentWidget()->parentWidget());
    QVERIFY(area);
    const QRect editor(controls->layerEditor()->mapTo(area->viewport(), QPoint(0, 0)),
                       controls->layerEditor()->size());
    QVERIFY2(area->viewport()->rect().contains(editor),
             qPrintable(QStringLiteral("layer editor at y %1-%2 in a %3 px viewport")
                            .arg(editor.top())
                            .arg(editor.bottom())
                            .arg(area->viewport()->height())));
    // An MoE model brings its rows.
    controls->modelPresetBox()->setCurrentText(QStringLiteral("mixtral-8x7b"));
    window.settle();
    for (QWidget *moe : std::initializer_list<QWidget *>{
             controls->moeDispatcherBox(), controls->dispatcherSmsBox(), controls->moeHostBox()})
      QVERIFY(moe->isVisible());
    controls->opTimesButton()->setChecked(true);
    window.settle();
    QVERIFY(controls->forwardBox()->isVisible());
  }

  void sidePanelsHideForANarrowScreen() {
    // Both docks make the window at least ~1224 px wide: more than half of a 1920 px screen.
    // View > Settings panel (Ctrl+B) and Metrics panel (Ctrl+Alt+B) hide and show each.
    MainWindow window(quietOptions());
    window.show();
    window.settle();
    const int both = window.minimumSizeHint().width();
    QAction *metrics = window.metricsDock()->toggleViewAction();
    QAction *settings = window.settingsDock()->toggleViewAction();
    QCOMPARE(metrics->shortcut(), QKeySequence(QStringLiteral("Ctrl+Alt+B")));
    QCOMPARE(settings->shortcut(), QKeySequence(QStringLiteral("Ctrl+B")));
    QVERIFY(window.actions().contains(metrics) && window.actions().contains(settings));
    QVERIFY(metrics->isChecked());
    metrics->trigger();
    window.settle();
    QVERIFY(window.metricsDock()->isHidden());
    const int without_metrics = window.minimumSizeHint().width();
    QVERIFY2(without_metrics <= both - window.metricsDock()->minimumWidth(),
             qPrintable(QStringLiteral("%1 px with both, %2 without the metrics")
                            .arg(both)
                            .arg(without_metrics)));
    settings->trigger();
    window.settle();
    QVERIFY(window.settingsDock()->isHidden());
    QVERIFY(window.minimumSizeHint().width() <= 960); // half of a 1920 px screen
    // The plan still evaluates and its metrics follow while hidden.
    window.controls()->microbatches()->spinBox()->setValue(12);
    window.settle();
    QCOMPARE(window.snapshot()->plan.request.microbatches, 12);
    metrics->trigger();
    settings->trigger();
    window.settle();
    QVERIFY(window.metricsDock()->isVisible() && window.settingsDock()->isVisible());
    QCOMPARE(window.controls()->microbatches()->spinBox()->value(), 12);
  }

  void timelineAxisLabelsStayInsideTheWidget() {
    MainWindow window(quietOptions());
    window.resize(1500, 950);
    window.show();
    window.controls()->pipelineRanks()->spinBox()->setValue(2);
    window.controls()->microbatches()->spinBox()->setValue(4);
    window.tabs()->setCurrentWidget(window.compare());
    window.settle();
    // The stacked schedules' axis runs to P = 2, M = 4's 1F1B step of 15 µs, a tick's time: its
    // label "15 µs" was cut to "1" at the right edge.
    TimelineWidget *timeline = window.compare()->timeline();
    int labels = 0;
    // Over many widths some tick falls near the right edge; its label is left out, not cut.
    for (int width = 420; width <= 900; width += 7) {
      timeline->resize(width, 200);
      QImage image(timeline->size(), QImage::Format_ARGB32);
      timeline->render(&image);
      for (const QRectF &rect : timeline->axisLabelRects()) {
        QVERIFY2(rect.right() <= width,
                 qPrintable(
                     QStringLiteral("a label to x = %1 at width %2").arg(rect.right()).arg(width)));
        ++labels;
      }
    }
    QVERIFY(labels > 100);
  }

  void explainFollowsADragAtMostEveryInterval() {
    MainWindow window(quietOptions());
    window.resize(1280, 800);
    window.show();
    ExplainPanel *explain = window.explain();
    QCOMPARE(explain->minimumUpdateMs(), ExplainPanel::kMinimumUpdateMs);
    // An interval no test machine outlasts, so that what waits does not depend on its speed.
    explain->setMinimumUpdateMs(3600 * 1000);
    window.tabs()->setCurrentWidget(explain); // shown: laid out now
    window.settle();
    QSpinBox *spin = window.controls()->microbatches()->spinBox();
    const auto move = [&](int microbatches) {
      spin->setValue(microbatches);
      window.evaluator()->waitForIdle();
      QCoreApplication::processEvents();
    };
    move(12);
    QVERIFY(explain->hasPending());
    QVERIFY(!explain->toPlainText().contains(QStringLiteral("M = 12")));
    move(16);
    QVERIFY(explain->hasPending());
    window.settle(); // the drag rests: the latest is laid out
    QVERIFY(!explain->hasPending());
    QVERIFY(explain->toPlainText().contains(QStringLiteral("M = 16")));
    // With a short interval the waiting text comes on its own, without a settle.
    explain->setMinimumUpdateMs(30);
    move(20);
    QTRY_VERIFY_WITH_TIMEOUT(!explain->hasPending(), 5000);
    QVERIFY(explain->toPlainText().contains(QStringLiteral("M = 20")));
    // A move after a rest longer than the interval starts its text at once, on a worker, and
    // shows it when written.
    QTest::qWait(60);
    move(24);
    QVERIFY(!explain->waitsForInterval());
    QTRY_VERIFY_WITH_TIMEOUT(explain->toPlainText().contains(QStringLiteral("M = 24")), 5000);
    QVERIFY(!explain->hasPending());
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

  // A published run with a Megatron layout (Qwen3-235B-A22B on PP 32 × VPP 3, the embedding and
  // loss a stage each: 96 stages) stacks against schedules of other stage counts: the layout is
  // spread over each one's stages, and the section says so. (It was refused: "it has 96 stages
  // but the schedule has 32 model stages".)
  void compareSpreadsALayoutOverEachSchedulesStages() {
    auto set = loadValidationSet("megatron-moe-modelzoo-h100");
    QVERIFY(set.ok());
    const auto row = std::find_if(set->cases.begin(), set->cases.end(), [](const auto &c) {
      return c.id == "qwen3-235b-a22b-ep8-a2a-pp32";
    });
    QVERIFY(row != set->cases.end());
    Plan plan = validationCasePlan(*row);
    QVERIFY(plan.model && plan.model->training.layout.size() == 96);
    plan.request.microbatches = 64; // enough for every family, a quicker simulation
    const ComparisonResult result = computeComparison(
        plan, {QStringLiteral("interleaved-1f1b"), QStringLiteral("1f1b"), QStringLiteral("zb-v")},
        false);
    QVERIFY2(result.refused.isEmpty(), qPrintable(result.refused.join(QStringLiteral("; "))));
    QCOMPARE(result.sections.size(), std::size_t{3});
    // Interleaved 1F1B at the plan's V = 3 keeps its 96 stages; 1F1B has 32, ZB-V 64.
    QVERIFY(!result.sections[0].title.contains(QStringLiteral("layout spread")));
    QVERIFY2(result.sections[1].title.contains(QStringLiteral("layout spread over its 32 stages")),
             qPrintable(result.sections[1].title));
    QVERIFY2(result.sections[2].title.contains(QStringLiteral("layout spread over its 64 stages")),
             qPrintable(result.sections[2].title));
    // A narrow tab draws the short figures: they keep it.
    QVERIFY(result.sections[1].short_figures.endsWith(QStringLiteral(", layout over 32")));
    // One model, three schedules: each rank of 1F1B holds three stages' work at once, so its
    // ops are about three times as long.
    const auto longestOp = [](const Evaluation &evaluation) {
      double longest = 0;
      for (const auto &rank : evaluation.simulation.op_times)
        for (const OpTiming &op : rank)
          longest = std::max(longest, op.end_us - op.start_us);
      return longest;
    };
    const double interleaved = longestOp(*result.sections[0].evaluation);
    const double one_f_one_b = longestOp(*result.sections[1].evaluation);
    QVERIFY2(one_f_one_b > 2.5 * interleaved && one_f_one_b < 4 * interleaved,
             qPrintable(QStringLiteral("%1 vs %2").arg(one_f_one_b).arg(interleaved)));
  }

  void compareFitsANarrowTab() {
    // At 1280 px the stacked timelines are about 270 px wide: "Interleaved 1F1B — step 22.50 µs,
    // bubble 20.0 % (V = 2)" was cut at the right, its figures lost; the family list scrolled
    // sideways to show "Combined 1F1B (EP all-to-all overlap)"; the curves' legend broke names
    // ("ZB-" / "H1").
    MainWindow window(quietOptions());
    window.resize(1280, 800);
    window.show();
    window.settle();
    window.tabs()->setCurrentWidget(window.compare());
    window.compare()->setCheckedFamilies(
        {QStringLiteral("1f1b"), QStringLiteral("interleaved-1f1b"), QStringLiteral("zb-h1")});
    window.settle();
    window.compare()->timeline()->repaint();
    const auto &sections = window.compare()->result().sections;
    const QStringList drawn = window.compare()->timeline()->drawnSectionTitles();
    QCOMPARE(drawn.size(), static_cast<qsizetype>(sections.size()));
    bool shortened = false;
    for (std::size_t i = 0; i < sections.size(); ++i) {
      const QString &title = drawn[static_cast<qsizetype>(i)];
      // Whole, or the name shortened before the figures: step, bubble and V kept.
      QVERIFY2(title == sections[i].title ||
                   title.endsWith(QStringLiteral(": ") + sections[i].short_figures),
               qPrintable(title));
      shortened = shortened || title != sections[i].title;
    }
    QVERIFY(shortened);
    QListWidget *families = window.compare()->familyList();
    QVERIFY(!families->horizontalScrollBar()->isVisible());
    QCOMPARE(families->textElideMode(), Qt::ElideMiddle);
    const QString legend = window.compare()->bubbleChart()->legend()->text();
    // Hyphens do not break ("all-to-" / "all overlap)" did, nowrap or not); a parenthesis may
    // take a line of its own.
    QVERIFY2(legend.contains(QStringLiteral("white-space:nowrap'><span style='color:")) &&
                 legend.contains(QStringLiteral("&nbsp;ZB\u2011H1</span>")) &&
                 legend.contains(QStringLiteral(
                     "&nbsp;Combined 1F1B</span> <span style='white-space:nowrap'>(EP "
                     "all\u2011to\u2011all overlap)</span>")) &&
                 !legend.contains(QStringLiteral("ZB-")),
             qPrintable(legend));
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
};

QTEST_MAIN(TestViews)
#include "test_views.moc"
