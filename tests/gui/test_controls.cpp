// The explorer's controls, offscreen: it opens on the example plan; sliders and spin boxes drive
// the schedule, metrics and timeline; the schedule choice enables what applies and explains what
// does not; every schedule family is offered and runs; the model's training options reach the
// plan (FP8 only on GPUs that have it); impossible settings are explained; large settings evaluate
// off the GUI thread.
#include <QCheckBox>
#include <QComboBox>
#include <QDoubleSpinBox>
#include <QLabel>
#include <QMenu>
#include <QRadioButton>
#include <QRegularExpression>
#include <QSettings>
#include <QSlider>
#include <QSpinBox>
#include <QStandardItemModel>
#include <QStandardPaths>
#include <QTabWidget>
#include <QTemporaryDir>
#include <QToolButton>
#include <QtTest>
#include <cmath>

#include "engine/output_file.h"
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

Evaluation engineEvaluation(const Plan &plan) {
  auto schedule = planSchedule(plan);
  if (!schedule) qFatal("%s", schedule.error().message.c_str());
  auto costs = planCosts(plan, schedule->placement);
  if (!costs) qFatal("%s", costs.error().message.c_str());
  auto evaluation = evaluateSchedule(std::move(*schedule), *costs);
  if (!evaluation) qFatal("%s", evaluation.error().message.c_str());
  return std::move(*evaluation);
}

/// Shows the window with its costs from the model and hardware (the Model + hardware button), as
/// a person starts most checks; the controls, settled.
ControlsPanel *showWithModelCosts(MainWindow &window) {
  window.show();
  window.settle();
  ControlsPanel *controls = window.controls();
  controls->modelButton()->setChecked(true);
  window.settle();
  return controls;
}

} // namespace

class TestControls : public QObject {
  Q_OBJECT
private slots:
  void initTestCase() { useTestSettings("test_gui_controls"); }

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
    // 1F1B on P = 4: rank 0 holds P forwards at its peak.
    QCOMPARE(window.metrics()->valueText(QStringLiteral("peak_activations")),
             QStringLiteral("4 chunks = 4 microbatches (rank 0)"));
    window.controls()->pipelineRanks()->spinBox()->setValue(1);
    window.settle();
    QCOMPARE(window.metrics()->valueText(QStringLiteral("peak_activations")),
             QStringLiteral("1 chunk = 1 microbatch (rank 0)")); // was "1 chunks = 1 microbatches"

    // The spin box reaches past the slider, and P reshapes rows, mesh and memory bars.
    window.controls()->pipelineRanks()->spinBox()->setValue(6);
    window.settle();
    QCOMPARE(window.snapshot()->evaluation->schedule.pp(), 6);
    QCOMPARE(window.timeline()->model().rowCount(), 6);
    QCOMPARE(window.mesh()->mesh().pp, 6);
    QCOMPARE(window.memoryBars()->bars().rankCount(), 6);
  }

  void agreementNamesWhatThePlanBreaks() {
    // "differs from the formula by 6.24 points; the formula is exact only when uniform op
    // times, free transfers" listed every assumption; now the ones this plan breaks, with sizes.
    MainWindow window(quietOptions());
    showWithModelCosts(window);
    const QString agreement = window.metrics()->valueText(QStringLiteral("agreement"));
    QVERIFY2(agreement.contains(QStringLiteral("points: uneven stages, transfer times")) &&
                 agreement.endsWith(QStringLiteral("(Explain gives each one's share of the gap).")),
             qPrintable(agreement));
    QVERIFY2(!agreement.contains(QStringLiteral("exact only when")), qPrintable(agreement));
    // The Explain tab gives each one's share of the gap, and the shares add up to it (one at a
    // time, the bubble without each, they did not), then the bubble without each alone.
    window.tabs()->setCurrentWidget(window.explain());
    window.settle();
    const QString explained = window.explain()->toPlainText();
    QVERIFY2(explained.contains(QStringLiteral("transfers take up to ")) &&
                 explained.contains(QStringLiteral("without it alone the simulated bubble would "
                                                   "be ")) &&
                 explained.contains(QStringLiteral("The shares add up to the gap")),
             qPrintable(explained));
    const QRegularExpression gap_text(QStringLiteral("differs from the formula by ([0-9.]+) "));
    const QRegularExpression share_text(QStringLiteral("(adds|takes) ([0-9.]+) points"));
    const double gap = gap_text.match(explained).captured(1).toDouble();
    double shares = 0;
    int share_count = 0;
    for (auto it = share_text.globalMatch(explained); it.hasNext(); ++share_count) {
      const QRegularExpressionMatch share = it.next();
      shares +=
          (share.captured(1) == QStringLiteral("adds") ? 1 : -1) * share.captured(2).toDouble();
    }
    QVERIFY2(gap > 0.1 && share_count >= 2, qPrintable(explained));
    QVERIFY2(std::abs(shares - gap) <= 0.005 * (share_count + 1), qPrintable(explained));
    // One stage: only the optimizer step's tail is left between them.
    window.controls()->pipelineRanks()->spinBox()->setValue(1);
    window.settle();
    QCOMPARE(window.metrics()
                 ->valueText(QStringLiteral("agreement"))
                 .section(QStringLiteral("points: "), 1),
             QStringLiteral("the sync and optimizer tail (Explain says how much it moves the "
                            "bubble)."));
    // Op times, uniform and free: the formula is exact.
    window.controls()->opTimesButton()->setChecked(true);
    window.settle();
    QCOMPARE(window.metrics()->valueText(QStringLiteral("agreement")),
             QStringLiteral("The simulation matches the formula exactly."));
  }

  // What the shares leave over: nothing where only costs and the schedule's conditions are named
  // (Megatron's breadth-first groups keep the formula exact at free transfers), the formula's own
  // figure for DualPipeV at unequal F, I, W (it reads them; the re-simulation evens them).
  void explainSaysWhatTheSharesLeave() {
    Plan plan = examplePlan();
    plan.model.reset();
    plan.costs = Costs{};
    plan.costs.p2p_latency_us = 0.3;
    plan.request = {"interleaved-1f1b", 4, 10, 2, 5};
    plan.mesh.pp = 4;
    const QString grouped = explanationHtml(*computeSnapshot(plan));
    QVERIFY2(grouped.contains(QStringLiteral("G = 5, not P = 4")) &&
                 grouped.contains(QStringLiteral("adds 6.31 points")) &&
                 grouped.contains(QStringLiteral("The shares add up to the gap")),
             qPrintable(grouped));
    plan.costs.forward_us = 1.5;
    plan.costs.backward_us = 2.25;
    plan.costs.p2p_latency_us = 0.2;
    plan.request = {"dualpipev", 4, 8, 1, 0};
    const QString dualpipe = explanationHtml(*computeSnapshot(plan));
    QVERIFY2(dualpipe.contains(QStringLiteral("adds 8.16 points")) &&
                 dualpipe.contains(QStringLiteral("adds 2.09 points")) &&
                 dualpipe.contains(QStringLiteral("The shares add up to 10.25 points, the "
                                                  "simulated bubble less the 11.11 % it would "
                                                  "be")) &&
                 dualpipe.contains(QStringLiteral("That 11.11 % is 1.93 points below the "
                                                  "formula's 13.04 %: the formula's own figure")),
             qPrintable(dualpipe));
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

  void newSchedulesAreOfferedAndRun_data() {
    QTest::addColumn<QString>("name");
    QTest::addColumn<bool>("looped"); // looped schedules let V be chosen; the V shapes fix it at 2
    QTest::newRow("looped-bfs") << QStringLiteral("looped-bfs") << true;
    QTest::newRow("interleaved-zb") << QStringLiteral("interleaved-zb") << true;
    QTest::newRow("v-half") << QStringLiteral("v-half") << false;
    QTest::newRow("v-min") << QStringLiteral("v-min") << false;
  }

  // The schedules added with PyTorch's and the controllable-memory families are offered and run.
  void newSchedulesAreOfferedAndRun() {
    QFETCH(QString, name);
    QFETCH(bool, looped);
    MainWindow window(quietOptions());
    window.show();
    window.settle();
    auto *controls = window.controls();
    const int index = controls->scheduleBox()->findData(name);
    QVERIFY2(index >= 0, qPrintable(name));
    controls->scheduleBox()->setCurrentIndex(index);
    window.settle();
    QCOMPARE(window.snapshot()->plan.request.name, name.toStdString());
    QVERIFY2(window.snapshot()->evaluation, qPrintable(name));
    QCOMPARE(controls->chunks()->isEnabled(), looped);
    QVERIFY(!controls->microbatchGroup()->isEnabled());
    QCOMPARE(window.snapshot()->evaluation->schedule.chunks(), 2);
  }

  // CP and EP sliders set the plan's mesh: CP multiplies the world and switches the rank-order
  // picker to four-name orders; EP is enabled for an MoE model only and offers the sizes that
  // divide both the experts and dp × cp.
  void contextAndExpertSlidersChangeTheMesh() {
    MainWindow window(quietOptions());
    window.show();
    window.settle();
    auto *controls = window.controls();
    QVERIFY(!controls->expertParallel()->isEnabled()); // op times: no model, no experts
    QCOMPARE(controls->rankOrderBox()->count(), 6);
    controls->modelButton()->setChecked(true);
    window.settle();
    QVERIFY(!controls->expertParallel()->isEnabled()); // llama3-8b is dense
    QVERIFY(controls->expertParallel()->slider()->toolTip().contains(QStringLiteral("no experts")));
    controls->modelPresetBox()->setCurrentText(QStringLiteral("mixtral-8x7b"));
    window.settle();
    QVERIFY(controls->expertParallel()->isEnabled());
    QCOMPARE(controls->expertParallel()->choices(), (std::vector<int>{1})); // dp × cp = 1

    controls->dataParallel()->spinBox()->setValue(2);
    controls->contextParallel()->spinBox()->setValue(2);
    window.settle();
    QVERIFY2(window.errorMessage().isEmpty(), qPrintable(window.errorMessage()));
    const Plan *plan = &window.snapshot()->plan;
    QCOMPARE(plan->mesh.cp, 2);
    QCOMPARE(plan->mesh.worldSize(), 2 * 2 * 1 * 4);
    QCOMPARE(window.mesh()->mesh().worldSize(), 16);
    QCOMPARE(window.mesh()->mesh().cp, 2);
    QCOMPARE(controls->rankOrderBox()->count(), 24);
    QCOMPARE(controls->rankOrderBox()->currentText(), QStringLiteral("tp-cp-pp-dp"));
    QCOMPARE(controls->expertParallel()->choices(), (std::vector<int>{1, 2, 4}));

    controls->expertParallel()->slider()->setValue(2); // the third choice: 4
    window.settle();
    plan = &window.snapshot()->plan;
    QCOMPARE(plan->mesh.ep, 4);
    QCOMPARE(window.mesh()->mesh().ep, 4);
    QVERIFY2(window.errorMessage().isEmpty(), qPrintable(window.errorMessage()));
    // Each rank holds 2 of the 8 experts: fewer parameters than with every expert.
    const double sharded = window.snapshot()->derivation->rank_expert_parameters.front();

    controls->rankOrderBox()->setCurrentText(QStringLiteral("cp-dp-tp-pp"));
    window.settle();
    QCOMPARE(window.snapshot()->plan.mesh.orderName(), std::string("cp-dp-tp-pp"));
    QCOMPARE(window.mesh()->mesh().groupOf(MeshGroup::EP, 0), (std::vector<int>{0, 1, 2, 3}));

    // Fewer dp × cp ranks take EP down to what still divides them; a dense model to 1.
    controls->contextParallel()->spinBox()->setValue(1);
    window.settle();
    QCOMPARE(window.snapshot()->plan.mesh.ep, 2);
    QCOMPARE(controls->rankOrderBox()->count(), 6);
    QCOMPARE(controls->rankOrderBox()->currentText(), QStringLiteral("dp-tp-pp"));
    controls->expertParallel()->slider()->setValue(0);
    window.settle();
    QVERIFY(window.snapshot()->derivation->rank_expert_parameters.front() > 3 * sharded);
    controls->expertParallel()->slider()->setValue(1);

    // ETP below TP folds EP into the TP ranks too: with TP 2 and ETP 1, EP may reach dp × tp.
    controls->tensorParallel()->spinBox()->setValue(2);
    controls->sequenceParallelBox()->setChecked(true);
    window.settle();
    QVERIFY(controls->expertTensorParallel()->isEnabled());
    QCOMPARE(controls->expertTensorParallel()->choices(), (std::vector<int>{1, 2}));
    QCOMPARE(controls->expertTensorParallel()->value(), 2); // the default: as TP
    QCOMPARE(window.snapshot()->plan.mesh.etp, 0);
    QCOMPARE(controls->expertParallel()->choices(), (std::vector<int>{1, 2}));
    controls->expertTensorParallel()->slider()->setValue(0); // ETP 1
    window.settle();
    QVERIFY2(window.errorMessage().isEmpty(), qPrintable(window.errorMessage()));
    QCOMPARE(window.snapshot()->plan.mesh.etp, 1);
    QCOMPARE(controls->expertParallel()->choices(), (std::vector<int>{1, 2, 4}));
    controls->expertParallel()->slider()->setValue(2); // EP 4 = dp 2 × tp 2
    window.settle();
    QVERIFY2(window.errorMessage().isEmpty(), qPrintable(window.errorMessage()));
    QCOMPARE(window.snapshot()->plan.mesh.ep, 4);
    QCOMPARE(window.mesh()->mesh().groupOf(MeshGroup::EP, 0).size(), std::size_t{4});

    controls->modelPresetBox()->setCurrentText(QStringLiteral("llama3-8b"));
    window.settle();
    QCOMPARE(window.snapshot()->plan.mesh.ep, 1);
    QVERIFY(!controls->expertParallel()->isEnabled());
    QVERIFY(!controls->expertTensorParallel()->isEnabled());
  }

  void trainingOptionsChangeThePlan() {
    MainWindow window(quietOptions());
    window.show();
    window.settle();
    auto *controls = window.controls();
    controls->modelButton()->setChecked(true);
    controls->modelPresetBox()->setCurrentText(QStringLiteral("mixtral-8x7b"));
    controls->dataParallel()->spinBox()->setValue(2);
    window.settle();
    QVERIFY2(window.errorMessage().isEmpty(), qPrintable(window.errorMessage()));
    const auto training = [&]() -> const TrainingSetup & {
      return window.snapshot()->plan.model->training;
    };
    const auto choose = [&](QComboBox *box, const QVariant &data) {
      const int index = box->findData(data);
      QVERIFY(index >= 0);
      box->setCurrentIndex(index);
      window.settle();
      QVERIFY2(window.errorMessage().isEmpty(), qPrintable(window.errorMessage()));
    };
    QCOMPARE(training().zero_stage, 0);
    const double unsharded_optimizer = window.snapshot()->report->memory.front().optimizer;

    choose(controls->zeroStageBox(), 3);
    QCOMPARE(training().zero_stage, 3);
    // Stage 3 shards the optimizer state (and parameters) over the two DP ranks: the evaluation
    // follows the control.
    QVERIFY(window.snapshot()->report->memory.front().optimizer < 0.6 * unsharded_optimizer);
    choose(controls->zeroStageBox(), 1);
    QCOMPARE(training().zero_stage, 1);

    // FP8 dispatch applies to an MoE model under FP8 only; so do FP8 parameters.
    QVERIFY(!controls->fp8DispatchBox()->isEnabled());
    QVERIFY(controls->fp8DispatchBox()->toolTip().contains(QStringLiteral("fp8")));
    QVERIFY(controls->fp8ParamsBox()->isHidden());
    const double bf16_step = window.snapshot()->report->step_time_s;
    const double bf16_params = window.snapshot()->report->memory.front().params;
    choose(controls->gemmPrecisionBox(), static_cast<int>(GemmPrecision::Fp8));
    QCOMPARE(training().gemm_precision, GemmPrecision::Fp8);
    QVERIFY(window.snapshot()->report->step_time_s < bf16_step);
    // Transformer Engine's FP8 copies of the 16-bit weights, until the weights are FP8 themselves.
    QVERIFY(!training().fp8_params);
    QVERIFY(window.snapshot()->report->memory.front().params > 1.5 * bf16_params);
    QVERIFY(!controls->fp8ParamsBox()->isHidden());
    QVERIFY(controls->fp8ParamsBox()->toolTip().contains(QStringLiteral("plan field")));
    controls->fp8ParamsBox()->setChecked(true);
    window.settle();
    QVERIFY(training().fp8_params);
    QCOMPARE(window.snapshot()->report->memory.front().params, bf16_params);
    controls->fp8ParamsBox()->setChecked(false);
    window.settle();
    QVERIFY(controls->fp8DispatchBox()->isEnabled());
    QVERIFY(training().fp8_dispatch);
    controls->fp8DispatchBox()->setChecked(false);
    window.settle();
    QVERIFY(!training().fp8_dispatch);

    // The MoE dispatcher: DeepEP sends a token once per node and GPU, not once per expert.
    QVERIFY(controls->moeDispatcherBox()->isEnabled());
    QVERIFY(controls->moeDispatcherBox()->toolTip().contains(QStringLiteral("plan field")));
    QVERIFY(!controls->dispatcherSmsBox()->isEnabled()); // NCCL's kernels: not priced
    choose(controls->moeDispatcherBox(), QStringLiteral("deepep"));
    QCOMPARE(training().moe_dispatcher, std::string("deepep"));
    // DeepEP's SMs: the default stays unwritten; another count reaches the plan and the tip.
    QVERIFY(controls->dispatcherSmsBox()->isEnabled());
    QCOMPARE(controls->dispatcherSmsBox()->value(), 20);
    QCOMPARE(training().moe_dispatcher_sms, 0);
    QVERIFY2(controls->dispatcherSmsBox()->toolTip().contains(QStringLiteral("on 112 of 132 SMs")),
             qPrintable(controls->dispatcherSmsBox()->toolTip()));
    controls->dispatcherSmsBox()->setValue(32);
    window.settle();
    QCOMPARE(training().moe_dispatcher_sms, 32);
    QVERIFY2(controls->dispatcherSmsBox()->toolTip().contains(QStringLiteral("on 100 of 132 SMs")),
             qPrintable(controls->dispatcherSmsBox()->toolTip()));
    controls->dispatcherSmsBox()->setValue(20);
    window.settle();
    QCOMPARE(training().moe_dispatcher_sms, 0);
    choose(controls->moeDispatcherBox(), QStringLiteral("alltoall"));

    // The MoE layers' host time: 3.5 ms unwritten by default; 0 (CUDA graphs) reaches the plan
    // and shortens the step, and the default again leaves the field unwritten.
    QVERIFY(controls->moeHostBox()->isEnabled());
    QCOMPARE(controls->moeHostBox()->value(), 3.5);
    QVERIFY(training().moe_layer_host_us < 0);
    QVERIFY(controls->moeHostBox()->toolTip().contains(QStringLiteral("moe_layer_host_us")));
    const double with_host_step = window.snapshot()->report->step_time_s;
    controls->moeHostBox()->setValue(0);
    window.settle();
    QCOMPARE(training().moe_layer_host_us, 0.0);
    QVERIFY(window.snapshot()->report->step_time_s < with_host_step);
    controls->moeHostBox()->setValue(3.5);
    window.settle();
    QVERIFY(training().moe_layer_host_us < 0);

    choose(controls->collectiveAlgorithmBox(), static_cast<int>(CollectiveAlgorithm::Tree));
    QCOMPARE(training().collective_algorithm, CollectiveAlgorithm::Tree);
    // The unfused loss makes more passes over the logits: the same plan, a longer step.
    const double fused_step = window.snapshot()->report->step_time_s;
    choose(controls->crossEntropyBox(), QStringLiteral("vocab-parallel-unfused"));
    QCOMPARE(training().cross_entropy, std::string("vocab-parallel-unfused"));
    QVERIFY(window.snapshot()->report->step_time_s > fused_step);
    choose(controls->crossEntropyBox(), QStringLiteral("torch-fp32"));
    QCOMPARE(training().cross_entropy, std::string("torch-fp32"));
    // Megatron's recompute modules: the moe_act module drops the experts' activation outputs,
    // so the plan keeps fewer activations; the button names how many are on.
    QToolButton *modules = controls->recomputeModulesButton();
    QVERIFY(modules->isEnabled());
    QCOMPARE(modules->text(), QStringLiteral("modules"));
    QVERIFY(modules->toolTip().contains(QStringLiteral("plan field \"recompute_modules\"")));
    const double kept_activations = window.snapshot()->report->memory.front().activations_peak;
    for (QAction *action : modules->menu()->actions())
      if (action->text() == QStringLiteral("moe_act")) action->setChecked(true);
    window.settle();
    QCOMPARE(training().recompute_modules, std::vector<std::string>{"moe_act"});
    QCOMPARE(modules->text(), QStringLiteral("+1"));
    QVERIFY(window.snapshot()->report->memory.front().activations_peak < kept_activations);
    choose(controls->recomputeBox(), static_cast<int>(Recompute::Full));
    QCOMPARE(training().recompute, Recompute::Full);
    // Under full recomputation the modules do not apply: the button is off, the checks stay.
    QVERIFY(!modules->isEnabled());
    for (QAction *action : modules->menu()->actions())
      if (action->text() == QStringLiteral("moe_act")) action->setChecked(false);
    window.settle();
    QVERIFY(training().recompute_modules.empty());
    QVERIFY(!controls->tpCommOverlapBox()->isEnabled()); // no SP, nothing to overlap
    controls->sequenceParallelBox()->setChecked(true);
    window.settle();
    QVERIFY(training().sequence_parallel);
    QVERIFY(controls->tpCommOverlapBox()->isEnabled());
    controls->tpCommOverlapBox()->setChecked(true);
    window.settle();
    QVERIFY(training().tp_comm_overlap);
    QVERIFY(!training().tp_backward_overlap);
    controls->tpBackwardOverlapBox()->setChecked(true);
    window.settle();
    QVERIFY(training().tp_backward_overlap);
    const double bf16_grads = window.snapshot()->report->memory.front().grads;
    controls->fp32GradientsBox()->setChecked(true);
    window.settle();
    QVERIFY(training().fp32_gradients);
    QVERIFY(window.snapshot()->report->memory.front().grads > 1.9 * bf16_grads);
    controls->overlapGradientSyncBox()->setChecked(true);
    window.settle();
    QVERIFY(training().overlap_gradient_sync);
    for (QWidget *control : std::initializer_list<QWidget *>{
             controls->zeroStageBox(), controls->gemmPrecisionBox(),
             controls->collectiveAlgorithmBox(), controls->crossEntropyBox(),
             controls->sequenceParallelBox(), controls->overlapGradientSyncBox()})
      QVERIFY2(control->toolTip().contains(QStringLiteral("plan field")),
               qPrintable(control->toolTip()));

    // A dense model under FP8: no dispatch to quantize.
    controls->modelPresetBox()->setCurrentText(QStringLiteral("llama3-8b"));
    window.settle();
    QCOMPARE(training().gemm_precision, GemmPrecision::Fp8);
    QVERIFY(!controls->fp8DispatchBox()->isEnabled());
    QVERIFY(controls->fp8DispatchBox()->toolTip().contains(QStringLiteral("mixture-of-experts")));
    QVERIFY(!controls->moeDispatcherBox()->isEnabled());
  }

  // File > Open hardware file: a calibrated file joins the hardware box beside the presets, its
  // curves price the plan (and keep pricing it as other controls move), and the metrics quote
  // its own held-out error; a file that does not load changes nothing.
  void aHardwareFileJoinsThePresets() {
    QTemporaryDir dir;
    QVERIFY(dir.isValid());
    auto preset = loadHardwareSpec("h100-sxm");
    QVERIFY(preset.ok());
    HardwareSpec slower = *preset;
    for (auto &point : slower.gemm_efficiency)
      point.efficiency *= 0.8;
    for (auto &point : slower.gemm_efficiency_fp8)
      point.efficiency *= 0.8;
    slower.calibration = HardwareCalibration{3, 0.012, 0.021, -0.004, "my-runs"};
    slower.moe_layer_host_us = 6000; // a host time fitted to MoE runs
    const QString path = dir.filePath(QStringLiteral("my-h100.json"));
    QVERIFY(writeTextFile(path.toStdString(), toJson(slower).dump(2)).ok());

    MainWindow window(quietOptions());
    auto *controls = showWithModelCosts(window);
    const double preset_step = window.snapshot()->evaluation->simulation.makespan_us;
    const int items = controls->hardwarePresetBox()->count();

    QVERIFY(controls->addHardwareFile(path).ok());
    window.settle();
    QCOMPARE(controls->hardwarePresetBox()->count(), items + 1);
    QCOMPARE(controls->hardwarePresetBox()->currentText(),
             QStringLiteral("my-h100.json (h100-sxm, calibrated)"));
    const auto step_on = [&] { return window.snapshot()->evaluation->simulation.makespan_us; };
    QVERIFY(window.snapshot()->plan.model->hardware.calibration.has_value());
    QVERIFY2(step_on() > preset_step * 1.05, "the file's slower GEMMs price the plan");
    // The MoE host box shows the file's host time as the default, which plans leave unwritten.
    QCOMPARE(controls->moeHostBox()->value(), 6.0);
    QCOMPARE(window.snapshot()->plan.model->training.moe_layer_host_us, -1.0);
    QVERIFY2(window.metrics()
                 ->valueText(QStringLiteral("validated"))
                 .startsWith(QStringLiteral(
                     "1.20 % mean, 2.10 % worst error on 3 measured runs, each held out")),
             qPrintable(window.metrics()->valueText(QStringLiteral("validated"))));

    // Other controls keep the file's hardware; another preset and back again reload it.
    controls->microbatches()->setValue(controls->microbatches()->value() + 1);
    window.settle();
    QVERIFY(window.snapshot()->plan.model->hardware.calibration.has_value());
    controls->hardwarePresetBox()->setCurrentText(QStringLiteral("h200"));
    window.settle();
    QVERIFY(!window.snapshot()->plan.model->hardware.calibration.has_value());
    QCOMPARE(controls->moeHostBox()->value(), 3.5); // back to pipescope's default
    QVERIFY(controls->addHardwareFile(path).ok());  // the same file: selected, not added twice
    window.settle();
    QCOMPARE(controls->hardwarePresetBox()->count(), items + 1);
    QVERIFY(window.snapshot()->plan.model->hardware.calibration.has_value());

    // An uncalibrated file that prices steps otherwise than its preset (an overhead set by
    // hand): the preset's runs are quoted, with what they did not check.
    HardwareSpec by_hand = *preset;
    by_hand.layer_overhead_us = 300;
    by_hand.step_overhead_us = 50000;
    const QString by_hand_path = dir.filePath(QStringLiteral("by-hand.json"));
    QVERIFY(writeTextFile(by_hand_path.toStdString(), toJson(by_hand).dump(2)).ok());
    QVERIFY(controls->addHardwareFile(by_hand_path).ok());
    window.settle();
    QVERIFY2(window.metrics()
                 ->valueText(QStringLiteral("validated"))
                 .contains(QStringLiteral("runs of the preset; this file differs in "
                                          "layer_overhead_us, step_overhead_us")),
             qPrintable(window.metrics()->valueText(QStringLiteral("validated"))));
    // The step's fixed overhead shows in the step time.
    QVERIFY2(window.metrics()
                 ->valueText(QStringLiteral("step_time"))
                 .contains(QStringLiteral(", of which 50.00 ms the step overhead")),
             qPrintable(window.metrics()->valueText(QStringLiteral("step_time"))));
    QVERIFY(controls->addHardwareFile(path).ok()); // the calibrated one again
    window.settle();

    // A file that is not a hardware file: the reason, and the box as it was.
    const QString bad = dir.filePath(QStringLiteral("plan.json"));
    QVERIFY(writeTextFile(bad.toStdString(), R"({"format": "pipescope.plan", "version": 1})").ok());
    const auto refused = controls->addHardwareFile(bad);
    QVERIFY(!refused.ok());
    QVERIFY2(QString::fromStdString(refused.error().message).contains(QStringLiteral("plan.json")),
             refused.error().message.c_str());
    QCOMPARE(controls->hardwarePresetBox()->count(), items + 2);
    QVERIFY(window.snapshot()->plan.model->hardware.calibration.has_value());
  }

  void fp8IsRefusedOnGpusWithoutIt() {
    MainWindow window(quietOptions());
    auto *controls = showWithModelCosts(window);
    auto *items = qobject_cast<QStandardItemModel *>(controls->gemmPrecisionBox()->model());
    QVERIFY(items);
    const int fp8_index =
        controls->gemmPrecisionBox()->findData(static_cast<int>(GemmPrecision::Fp8));
    QVERIFY(items->item(fp8_index)->isEnabled()); // h100-sxm has FP8 tensor cores
    controls->gemmPrecisionBox()->setCurrentIndex(fp8_index);
    window.settle();
    QCOMPARE(window.snapshot()->plan.model->training.gemm_precision, GemmPrecision::Fp8);

    // Switching to the A100 falls back to bf16 (not to the engine's refusal) and says why.
    controls->hardwarePresetBox()->setCurrentText(QStringLiteral("a100-80gb"));
    window.settle();
    QVERIFY2(window.errorMessage().isEmpty(), qPrintable(window.errorMessage()));
    QCOMPARE(window.snapshot()->plan.model->hardware.name, std::string("a100-80gb"));
    QCOMPARE(window.snapshot()->plan.model->training.gemm_precision, GemmPrecision::Bf16);
    QCOMPARE(controls->gemmPrecisionBox()->currentData().toInt(),
             static_cast<int>(GemmPrecision::Bf16));
    QVERIFY(!items->item(fp8_index)->isEnabled());
    QVERIFY(items->item(fp8_index)->toolTip().contains(QStringLiteral("a100-80gb")));
    QVERIFY(controls->gemmPrecisionBox()->toolTip().contains(QStringLiteral("no FP8")));

    controls->hardwarePresetBox()->setCurrentText(QStringLiteral("h200"));
    window.settle();
    QVERIFY(items->item(fp8_index)->isEnabled());
    QVERIFY(!controls->gemmPrecisionBox()->toolTip().contains(QStringLiteral("no FP8")));
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
};

QTEST_MAIN(TestControls)
#include "test_controls.moc"
