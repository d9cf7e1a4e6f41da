// The one path from command-line options to a Plan (engine/plan_options.h) that `pipescope
// simulate` and pipescope-gui share: options apply on top of a base plan, and refusals name the
// option and what would apply.
#include <QtTest>

#include "engine/model/model_setup.h"
#include "engine/plan_options.h"

using namespace pipescope;

namespace {

OptionValues optionsOf(std::initializer_list<std::pair<const char *, const char *>> given) {
  OptionValues values;
  for (const auto &[name, value] : given)
    values.set(name, value);
  return values;
}

// A plan as the explorer holds it: interleaved, P=4, M=8, V=2, a 2 x 2 x 4 mesh.
Plan basePlan() {
  Plan plan;
  plan.request = {"interleaved-1f1b", 4, 8, 2, 0};
  plan.mesh.pp = 4;
  plan.mesh.dp = 2;
  plan.mesh.tp = 2;
  plan.costs.forward_us = 3;
  return plan;
}

} // namespace

class TestPlanOptions : public QObject {
  Q_OBJECT
private slots:
  void optionsApplyOnTopOfTheBase() {
    const Plan base = basePlan();
    auto unchanged = planFromOptions(OptionValues{}, &base);
    QVERIFY(unchanged);
    QCOMPARE(unchanged->request.name, base.request.name);
    QCOMPARE(unchanged->request.chunks, 2);
    QCOMPARE(unchanged->costs.forward_us, 3.0);

    auto changed = planFromOptions(
        optionsOf({{"pp", "8"}, {"microbatches", "16"}, {"backward", "5"}, {"dp", "1"}}), &base);
    QVERIFY2(changed, changed ? "" : changed.error().message.c_str());
    QCOMPARE(changed->request.pp, 8);
    QCOMPARE(changed->mesh.pp, 8); // the mesh follows P
    QCOMPARE(changed->request.microbatches, 16);
    QCOMPARE(changed->request.chunks, 2);      // kept from the base
    QCOMPARE(changed->costs.forward_us, 3.0);  // kept
    QCOMPARE(changed->costs.backward_us, 5.0); // given
    QCOMPARE(changed->mesh.dp, 1);
    QCOMPARE(changed->mesh.tp, 2);

    // Without a base: the defaults, P=4 and M=8 of 1F1B.
    auto defaults = planFromOptions(OptionValues{});
    QVERIFY(defaults);
    QCOMPARE(defaults->request.name, std::string("1f1b"));
    QCOMPARE(defaults->request.pp, 4);
    QCOMPARE(defaults->request.microbatches, 8);
  }

  void refusalsNameTheOption_data() {
    QTest::addColumn<QStringList>("options");
    QTest::addColumn<QString>("message");
    const auto row = [](const char *name, QStringList options, const char *message) {
      QTest::newRow(name) << options << QString::fromUtf8(message);
    };
    row("pp out of range", {QStringLiteral("pp"), QStringLiteral("0")},
        "--pp must be between 1 and 16384, got 0");
    row("pp not a number", {QStringLiteral("pp"), QStringLiteral("four")},
        "--pp expects an integer, got 'four'");
    row("forward not a number", {QStringLiteral("forward"), QStringLiteral("1x")},
        "--forward expects a number, got '1x'");
    row("model alone", {QStringLiteral("model"), QStringLiteral("llama3-8b")},
        "--model and --hardware go together");
    row("recompute without model", {QStringLiteral("recompute"), QStringLiteral("full")},
        "--recompute needs --model and --hardware");
    row("group on 1f1b",
        {QStringLiteral("schedule"), QStringLiteral("1f1b"), QStringLiteral("microbatch-group"),
         QStringLiteral("4"), QStringLiteral("virtual-stages"), QStringLiteral("1")},
        "--microbatch-group does not apply to 1f1b");
    row("V on a V-shape",
        {QStringLiteral("schedule"), QStringLiteral("zb-v"), QStringLiteral("virtual-stages"),
         QStringLiteral("3")},
        "--virtual-stages 3 does not apply to zb-v");
    row("bandwidth without bytes", {QStringLiteral("p2p-bandwidth"), QStringLiteral("100")},
        "--p2p-bandwidth needs --activation-bytes");
    row("bad rank order", {QStringLiteral("rank-order"), QStringLiteral("pp-pp-dp")}, "");
  }

  void refusalsNameTheOption() {
    QFETCH(QStringList, options);
    QFETCH(QString, message);
    OptionValues values;
    for (qsizetype i = 0; i + 1 < options.size(); i += 2)
      values.set(options[i].toStdString(), options[i + 1].toStdString());
    const Plan base = basePlan();
    auto plan = planFromOptions(values, &base);
    QVERIFY(!plan);
    QVERIFY2(plan.error().message.find(message.toStdString()) != std::string::npos,
             plan.error().message.c_str());
  }

  void aModelBaseRefusesExplicitCosts() {
    Plan base = basePlan();
    ModelSetup setup;
    setup.model = *loadModelSpec("llama3-8b");
    setup.hardware = *loadHardwareSpec("h100-sxm");
    base.model = setup;
    auto plan = planFromOptions(optionsOf({{"forward", "2"}}), &base);
    QVERIFY(!plan);
    QVERIFY2(plan.error().message.find("--forward does not apply with the plan's model") !=
                 std::string::npos,
             plan.error().message.c_str());
  }

  // --zero-stage sets the ZeRO stage; --zero1 stays stage 1 and refuses a different stage.
  void zeroStageAndLossOptions() {
    Plan base = basePlan();
    ModelSetup setup;
    setup.model = *loadModelSpec("llama3-8b");
    setup.hardware = *loadHardwareSpec("h100-sxm");
    base.model = setup;
    auto three =
        planFromOptions(optionsOf({{"zero-stage", "3"}, {"cross-entropy", "torch-fp32"}}), &base);
    QVERIFY2(three, three ? "" : three.error().message.c_str());
    QCOMPARE(three->model->training.zero_stage, 3);
    QCOMPARE(three->model->training.cross_entropy, std::string("torch-fp32"));
    auto one = planFromOptions(optionsOf({{"zero1", ""}}), &base);
    QVERIFY2(one, one ? "" : one.error().message.c_str());
    QCOMPARE(one->model->training.zero_stage, 1);
    const std::pair<OptionValues, std::string> refused[] = {
        {optionsOf({{"zero1", ""}, {"zero-stage", "3"}}), "--zero1 is --zero-stage 1"},
        {optionsOf({{"zero-stage", "4"}}), "--zero-stage"},
        {optionsOf({{"cross-entropy", "fused"}}), "--cross-entropy 'fused' is not known"},
    };
    for (const auto &[values, message] : refused) {
      auto plan = planFromOptions(values, &base);
      QVERIFY(!plan);
      QVERIFY2(plan.error().message.find(message) != std::string::npos,
               plan.error().message.c_str());
    }
  }
};

QTEST_APPLESS_MAIN(TestPlanOptions)
#include "test_plan_options.moc"
