// Hostile and huge numbers: the one bounds check every reader of costs goes through (the command
// line, plan files, calibration), and the check of every figure an evaluation or a model report
// would print or save. Nothing impossible is reported as valid.
#include <QtTest>

#include <cmath>
#include <limits>

#include <nlohmann/json.hpp>

#include "engine/calibration.h"
#include "engine/evaluation.h"
#include "engine/model/model_setup.h"
#include "engine/plan_file.h"

using namespace pipescope;
using nlohmann::json;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// The Costs member a row names by its plan-file key.
double *costField(Costs &costs, const QString &key) {
  if (key == "forward") return &costs.forward_us;
  if (key == "backward") return &costs.backward_us;
  if (key == "weight") return &costs.weight_us;
  if (key == "overlapped") return &costs.overlapped_us;
  if (key == "p2p_latency") return &costs.p2p_latency_us;
  if (key == "p2p_bandwidth") return &costs.p2p_bandwidth_gbps;
  if (key == "activation_bytes") return &costs.activation_bytes;
  if (key == "gradient_sync") return &costs.gradient_sync_us;
  return nullptr;
}

json planJson(const json &costs) {
  return {{"format", "pipescope.plan"},
          {"version", 1},
          {"schedule", {{"name", "dualpipe"}, {"pp", 4}, {"microbatches", 8}}},
          {"costs", costs}};
}

Evaluation goodEvaluation(const Costs &costs = {}) {
  auto evaluation = evaluate({"1f1b", 4, 8, 1, 0}, costs);
  if (!evaluation) qFatal("%s", evaluation.error().message.c_str());
  return std::move(*evaluation);
}

} // namespace

class TestBounds : public QObject {
  Q_OBJECT

private slots:
  // Each row: one field set to a value; the check refuses it naming the field the same way in
  // the engine, on the command line and in a plan file, and the plan reader refuses it too.
  void costBoundsAreOneCheck_data() {
    QTest::addColumn<QString>("key");
    QTest::addColumn<double>("value");
    QTest::addColumn<QString>("option"); // the command line's name
    QTest::addColumn<QString>("detail"); // what the message must also say
    QTest::newRow("negative F") << "forward" << -1.0 << "--forward"
                                << "from 0 to 1e+15";
    QTest::newRow("infinite F") << "forward" << kInf << "--forward"
                                << "got inf";
    QTest::newRow("NaN B") << "backward" << kNaN << "--backward"
                           << "got nan";
    QTest::newRow("huge W") << "weight" << 1e300 << "--weight"
                            << "from 0 to 1e+15";
    QTest::newRow("huge latency") << "p2p_latency" << 1e16 << "--p2p-latency"
                                  << "microseconds";
    QTest::newRow("tiny bandwidth") << "p2p_bandwidth" << 1e-300 << "--p2p-bandwidth"
                                    << "or from 0.001 to 1e+09 GB/s";
    QTest::newRow("negative bandwidth") << "p2p_bandwidth" << -5.0 << "--p2p-bandwidth"
                                        << "0.001";
    QTest::newRow("huge bytes") << "activation_bytes" << 1e20 << "--activation-bytes"
                                << "bytes";
    QTest::newRow("pair below B") << "overlapped" << 1.5 << "--overlapped"
                                  << "must be from max(F, B) = 2 to 2(F + B) = 6";
    QTest::newRow("pair above 2(F+B)") << "overlapped" << 6.5 << "--overlapped"
                                       << "2(F + B) = 6";
    QTest::newRow("negative sync") << "gradient_sync" << -1.0 << "/costs/gradient_sync"
                                   << "microseconds";
  }
  void costBoundsAreOneCheck() {
    QFETCH(QString, key);
    QFETCH(double, value);
    QFETCH(QString, option);
    QFETCH(QString, detail);
    Costs costs; // F = 1, B = 2, W = 1
    QVERIFY(costs.check(-1));
    *costField(costs, key) = value;

    const auto field = costs.check(-1, CostNaming::Field);
    QVERIFY(!field);
    QVERIFY2(field.error().message.starts_with(key.toStdString() + ":"),
             field.error().message.c_str());
    QVERIFY2(field.error().message.find(detail.toStdString()) != std::string::npos,
             field.error().message.c_str());
    const auto line = costs.check(-1, CostNaming::CommandLine);
    QVERIFY(!line);
    QVERIFY2(line.error().message.starts_with(option.toStdString() + ":"),
             line.error().message.c_str());
    const auto file = costs.check(-1, CostNaming::PlanFile);
    QVERIFY(!file);
    const std::string pointer = "/costs/" + key.toStdString();
    QVERIFY2(file.error().message.starts_with(pointer + ":"), file.error().message.c_str());

    // The plan reader goes through the same check (JSON has no inf or NaN: those rows stop at
    // the engine's check above).
    if (std::isfinite(value)) {
      json costs_json = {{"forward", 1}, {"backward", 2}, {"weight", 1}};
      costs_json[key.toStdString()] = value;
      if (key == "p2p_bandwidth") costs_json["activation_bytes"] = 4e6;
      auto plan = planFromJson(planJson(costs_json));
      QVERIFY(!plan);
      QVERIFY2(plan.error().message.starts_with(pointer + ":"), plan.error().message.c_str());
      // And evaluation refuses what a reader let through unchecked.
      Plan bypass;
      bypass.request = {"dualpipe", 4, 8, 1, 0};
      bypass.mesh.pp = 4;
      bypass.costs = costs;
      QVERIFY(!evaluatePlan(bypass));
    }
  }

  void boundaryValuesAreAccepted() {
    Costs costs;
    costs.overlapped_us = 2; // max(F, B)
    QVERIFY(costs.check(-1));
    costs.overlapped_us = 3; // F + B
    QVERIFY(costs.check(-1));
    costs.p2p_bandwidth_gbps = kMinLinkBandwidthGbps;
    costs.activation_bytes = kMaxActivationBytes;
    QVERIFY(costs.check(-1));
    // The slowest link with the largest transfer still gives a finite step.
    auto evaluation = evaluate({"dualpipe", 4, 8, 1, 0}, costs);
    QVERIFY2(evaluation, evaluation ? "" : evaluation.error().message.c_str());
    QVERIFY(std::isfinite(evaluation->simulation.makespan_us));
    QVERIFY(evaluation->simulation.bubble_fraction >= 0);
  }

  void perStageListsAreChecked_data() {
    QTest::addColumn<int>("which");
    QTest::addColumn<QString>("pointer");
    QTest::newRow("stage F negative") << 0 << "/costs/stage_overrides/1/forward";
    QTest::newRow("stage W above B") << 1 << "/costs/stage_overrides/1/weight";
    QTest::newRow("transfer huge") << 2 << "/costs/boundary_transfer/2";
    QTest::newRow("wrong count") << 3 << "/costs/boundary_transfer: has 2 entries";
    QTest::newRow("slowdown negative") << 4 << "/costs/concurrency_slowdown/1";
    QTest::newRow("slowdown not finite") << 5 << "/costs/concurrency_slowdown/0";
  }
  void perStageListsAreChecked() {
    QFETCH(int, which);
    QFETCH(QString, pointer);
    Costs costs;
    costs.stage_overrides.assign(4, StageCost{1, 2, 1});
    costs.boundary_transfer_us.assign(4, 0.5);
    QVERIFY(costs.check(4));
    if (which == 0) costs.stage_overrides[1].forward_us = -3;
    if (which == 1) costs.stage_overrides[1].weight_us = 5;
    if (which == 2) costs.boundary_transfer_us[2] = 1.7e308;
    if (which == 3) costs.boundary_transfer_us.resize(2);
    if (which == 4) costs.concurrency_slowdown = {0.8, -0.5, 1.0};
    if (which == 5) costs.concurrency_slowdown = {std::numeric_limits<double>::infinity()};
    const auto status = costs.check(4, CostNaming::PlanFile);
    QVERIFY(!status);
    QVERIFY2(status.error().message.starts_with(pointer.toStdString()),
             status.error().message.c_str());
  }

  // A huge per-stage transfer in a plan file used to sum to an infinite makespan that validate
  // called valid; now the file is refused at the field.
  void hugeTransferPlanIsRefused() {
    json costs = {{"boundary_transfer", json::array({1.7e308, 1.7e308, 1.7e308, 1.7e308, 1.7e308,
                                                     1.7e308, 1.7e308, 1.7e308})}};
    auto plan = planFromJson(planJson(costs));
    QVERIFY(!plan);
    QVERIFY2(plan.error().message.find("/costs/boundary_transfer/0") != std::string::npos,
             plan.error().message.c_str());
  }

  // A plan file's slowdown must be numbers; a string is refused at its index.
  void slowdownOfTheWrongTypeIsRefused() {
    auto plan = planFromJson(planJson({{"concurrency_slowdown", json::array({0.8, "fast"})}}));
    QVERIFY(!plan);
    QVERIFY2(plan.error().message.find("/costs/concurrency_slowdown/1") != std::string::npos,
             plan.error().message.c_str());
  }

  void hardwareLinksShareTheBounds() {
    auto hardware = hardwareSpecFromJson({{"peak_tflops", 989},
                                          {"memory_gib", 80},
                                          {"intra_node_gbps", 450},
                                          {"inter_node_gbps", 1e-300},
                                          {"gpus_per_node", 8}},
                                         "/hardware");
    QVERIFY(!hardware);
    QVERIFY2(hardware.error().message.find("/hardware/inter_node_gbps") != std::string::npos,
             hardware.error().message.c_str());
  }

  // Each row breaks one figure of a good evaluation; the check names it.
  void resultFiguresAreChecked_data() {
    QTest::addColumn<int>("which");
    QTest::addColumn<QString>("expected");
    QTest::newRow("infinite makespan") << 0 << "the makespan is infinite";
    QTest::newRow("negative makespan") << 1 << "cannot take negative time";
    QTest::newRow("NaN busy") << 2 << "rank 1: busy";
    QTest::newRow("negative bubble") << 3 << "the bubble (fraction -0.25";
    QTest::newRow("infinite ratio") << 4 << "ratio inf";
    QTest::newRow("negative idle") << 5 << "rank 0: busy";
    QTest::newRow("analytic NaN") << 6 << "the closed form";
  }
  void resultFiguresAreChecked() {
    QFETCH(int, which);
    QFETCH(QString, expected);
    Evaluation e = goodEvaluation();
    QVERIFY(checkEvaluationFigures(e, Costs{}));
    auto &sim = e.simulation;
    switch (which) {
    case 0: sim.makespan_us = kInf; break;
    case 1: sim.makespan_us = -1; break;
    case 2: sim.ranks[1].busy_us = kNaN; break;
    case 3: sim.bubble_fraction = -0.25; break;
    case 4: sim.bubble_ratio = kInf; break;
    case 5: sim.ranks[0].idle_us = -2; break;
    case 6: e.analytic->makespan_us = kNaN; break;
    }
    const auto status = checkEvaluationFigures(e, Costs{});
    QVERIFY(!status);
    QVERIFY2(status.error().message.find(expected.toStdString()) != std::string::npos,
             status.error().message.c_str());
  }

  // An infinite makespan is explained by the cost that caused it, with the bound that works.
  void infiniteMakespanNamesTheBandwidth() {
    Evaluation e = goodEvaluation();
    Costs costs;
    costs.p2p_bandwidth_gbps = 1e-300;
    costs.activation_bytes = 4e6;
    e.simulation.makespan_us = kInf;
    const auto status = checkEvaluationFigures(e, costs);
    QVERIFY(!status);
    const std::string &message = status.error().message;
    QVERIFY2(message.find("the p2p bandwidth 1e-300 GB/s makes a 4e+06-byte transfer take") !=
                     std::string::npos &&
                 message.find("use a bandwidth of at least") != std::string::npos,
             message.c_str());
  }

  // DualPipe's closed form goes negative for W > (F&B + B)/3; the reported bubble stays >= 0
  // and the evaluation goes through.
  void dualPipeClosedFormIsNeverNegative() {
    Costs costs;
    costs.forward_us = 1;
    costs.backward_us = 2;
    costs.weight_us = 2;
    auto evaluation = evaluate({"dualpipe", 4, 8, 1, 0}, costs);
    QVERIFY2(evaluation, evaluation ? "" : evaluation.error().message.c_str());
    QVERIFY(evaluation->analytic);
    QVERIFY(evaluation->analytic->bubble_fraction >= 0);
    QVERIFY(evaluation->analytic->makespan_us >= 8 * 3);
  }

  void modelReportIsChecked_data() {
    QTest::addColumn<int>("which");
    QTest::addColumn<QString>("expected");
    QTest::newRow("zero step") << 0 << "the step time is 0 s";
    QTest::newRow("infinite tokens") << 1 << "tokens/s (inf)";
    QTest::newRow("NaN memory") << 2 << "rank 0: a memory figure is nan";
    QTest::newRow("negative comm") << 3 << "communication of -1 bytes";
  }
  void modelReportIsChecked() {
    QFETCH(int, which);
    QFETCH(QString, expected);
    Plan plan;
    plan.request = {"1f1b", 4, 8, 1, 0};
    plan.mesh.pp = 4;
    ModelSetup setup;
    auto model = loadModelSpec("llama3-8b");
    auto hardware = loadHardwareSpec("h100-sxm");
    QVERIFY(model && hardware);
    setup.model = *model;
    setup.hardware = *hardware;
    plan.model = setup;
    ModelDerivation derivation;
    auto evaluation = evaluatePlan(plan, {}, &derivation);
    QVERIFY(evaluation);
    ModelReport report =
        reportModel(setup, plan.mesh, evaluation->schedule, derivation, evaluation->simulation);
    QVERIFY(checkModelReport(report));
    switch (which) {
    case 0: report.step_time_s = 0; break;
    case 1: report.tokens_per_s = kInf; break;
    case 2: report.memory[0].activations_peak = kNaN; break;
    case 3: report.pp.bytes = -1; break;
    }
    const auto status = checkModelReport(report);
    QVERIFY(!status);
    QVERIFY2(status.error().message.find(expected.toStdString()) != std::string::npos,
             status.error().message.c_str());
  }

  // A measurement whose ops last 0 us would calibrate into a plan with zero costs that the
  // backend refuses; calibration refuses it and says why.
  void calibrationRefusesZeroLengthMeasurements_data() {
    QTest::addColumn<QString>("schedule");
    QTest::newRow("1f1b") << "1f1b";
    QTest::newRow("zb-h1") << "zb-h1";
  }
  void calibrationRefusesZeroLengthMeasurements() {
    QFETCH(QString, schedule);
    Plan plan;
    plan.request = {schedule.toStdString(), 4, 8, 1, 0};
    plan.mesh.pp = 4;
    auto evaluation = evaluatePlan(plan);
    QVERIFY(evaluation);
    Trace measured = traceFromEvaluation(plan, *evaluation);
    auto ok = calibrateCosts(evaluation->schedule, measured, plan.costs);
    QVERIFY2(ok, ok ? "" : ok.error().message.c_str()); // the untouched trace calibrates
    for (auto &op : measured.ops)
      op.end_us = op.start_us; // every op measured as 0 us, at distinct times
    auto refused = calibrateCosts(evaluation->schedule, measured, plan.costs);
    QVERIFY(!refused);
    QVERIFY2(refused.error().message.find("would calibrate to 0") != std::string::npos &&
                 refused.error().message.find("measure again") != std::string::npos,
             refused.error().message.c_str());
  }

  // A pair measured slower than twice F + B is held at 2(F + B), so the calibrated costs pass
  // the check; one measured slower than F + B but within that (halves that slow each other
  // down) keeps its measured time.
  void calibratedPairStaysInItsRange_data() {
    QTest::addColumn<double>("stretch");
    QTest::addColumn<double>("expected_factor");
    QTest::newRow("10x: held at 2(F + B)") << 10.0 << 2.0;
    QTest::newRow("1.06x: kept") << 1.06 << 1.06;
  }
  void calibratedPairStaysInItsRange() {
    QFETCH(double, stretch);
    QFETCH(double, expected_factor);
    Plan plan;
    plan.request = {"dualpipe", 4, 8, 1, 0};
    plan.mesh.pp = 4;
    auto evaluation = evaluatePlan(plan);
    QVERIFY(evaluation);
    Trace measured = traceFromEvaluation(plan, *evaluation);
    for (auto &op : measured.ops)
      if (op.overlapped) op.end_us = op.start_us + stretch * (op.end_us - op.start_us);
    auto calibrated = calibrateCosts(evaluation->schedule, measured, plan.costs);
    QVERIFY2(calibrated, calibrated ? "" : calibrated.error().message.c_str());
    QVERIFY(calibrated->check(evaluation->schedule.placement.stageCount()));
    QVERIFY2(
        std::abs(calibrated->overlapped_us / (calibrated->forward_us + calibrated->backward_us) -
                 expected_factor) < 1e-9,
        qPrintable(QString::number(calibrated->overlapped_us)));
  }
};

QTEST_GUILESS_MAIN(TestBounds)
#include "test_bounds.moc"
