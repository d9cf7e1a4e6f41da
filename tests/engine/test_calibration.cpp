// Comparing a measurement with a prediction, and refitting the cost model to a measurement.
// The "measurements" here are simulations under other, known costs, so the refit has an exact
// answer to find.
#include <QtTest>

#include "engine/calibration.h"
#include "engine/trace_matching.h"

using namespace pipescope;

namespace {

Trace simulatedTrace(const ScheduleRequest &request, const Costs &costs, int step = 0) {
  Plan plan;
  plan.request = request;
  plan.mesh.pp = request.pp;
  plan.costs = costs;
  auto evaluation = evaluatePlan(plan);
  if (!evaluation) qFatal("%s", evaluation.error().message.c_str());
  Trace trace = traceFromEvaluation(plan, *evaluation);
  for (auto &op : trace.ops)
    op.step = step;
  return trace;
}

Costs trueCosts() {
  Costs costs;
  costs.forward_us = 1.3;
  costs.backward_us = 2.9;
  costs.weight_us = 1.1;
  costs.p2p_latency_us = 0.4;
  return costs;
}

/// A committed measured run (tests/data/measured) in planned time, and the plan whose costs are
/// refit to it (no model: the calibrated costs are the costs).
struct CalibratedRun {
  Trace measured;
  Plan calibrated;
};

Result<CalibratedRun> calibrateCommittedRun(const QString &file) {
  auto loaded =
      loadMeasuredTrace(std::string(PIPESCOPE_TEST_DATA) + "/measured/" + file.toStdString());
  if (!loaded) return loaded.error();
  const Plan &plan = loaded->trace.plan;
  auto evaluation = evaluatePlan(plan);
  if (!evaluation) return evaluation.error();
  CalibratedRun run{inPlannedTime(loaded->trace, loaded->time_factor), plan};
  auto current = planCosts(plan, evaluation->schedule.placement);
  if (!current) return current.error();
  auto refit = calibrateCosts(evaluation->schedule, run.measured, *current);
  if (!refit) return refit.error();
  run.calibrated.model.reset();
  run.calibrated.costs = *refit;
  return run;
}

/// The plan's prediction against the measurement.
Result<TraceComparison> compareWithPrediction(const Plan &plan, const Trace &measured) {
  auto evaluation = evaluatePlan(plan);
  if (!evaluation) return evaluation.error();
  return compareTraces(traceFromEvaluation(plan, *evaluation), measured);
}

} // namespace

class TestCalibration : public QObject {
  Q_OBJECT

private slots:
  void identicalTracesHaveNoError() {
    const Trace trace = simulatedTrace({"1f1b", 4, 8, 1, 0}, Costs{});
    const auto comparison = compareTraces(trace, trace);
    QCOMPARE(comparison.makespan_relative_error, 0.0);
    QCOMPARE(comparison.unmatched_ops, 0);
    QCOMPARE(comparison.matched_ops, int(trace.ops.size()));
    for (const auto &kind : comparison.kinds)
      QCOMPARE(kind.worst_relative_error, 0.0);
  }

  void errorsArePerKindAndForTheStep() {
    const Trace predicted = simulatedTrace({"zb-h1", 4, 8, 1, 0}, Costs{});
    const Trace measured = simulatedTrace({"zb-h1", 4, 8, 1, 0}, trueCosts());
    const auto comparison = compareTraces(predicted, measured);
    QVERIFY(comparison.makespan_relative_error > 0);
    QCOMPARE(int(comparison.kinds.size()), 3); // F, I, W
    for (const auto &kind : comparison.kinds) {
      const double expected = kind.kind == OpKind::Forward     ? 0.3
                              : kind.kind == OpKind::InputGrad ? 0.8
                                                               : 0.1;
      QVERIFY2(std::abs(kind.median_signed_error - expected) < 1e-9,
               qPrintable(QString("%1: %2").arg(int(kind.kind)).arg(kind.median_signed_error)));
    }
  }

  void medianStepOfSeveral() {
    Trace measured = simulatedTrace({"1f1b", 4, 8, 1, 0}, Costs{}, 0);
    Costs slower;
    slower.forward_us = 2;
    for (int step = 1; step <= 2; ++step) {
      Trace other = simulatedTrace({"1f1b", 4, 8, 1, 0}, step == 1 ? slower : Costs{}, step);
      measured.ops.insert(measured.ops.end(), other.ops.begin(), other.ops.end());
    }
    const auto steps = traceStepMetrics(measured);
    QCOMPARE(int(steps.size()), 3);
    QCOMPARE(steps[0].makespan_us, 33.0);
    QVERIFY(steps[1].makespan_us > 33.0);
    const auto comparison = compareTraces(simulatedTrace({"1f1b", 4, 8, 1, 0}, Costs{}), measured);
    QCOMPARE(comparison.measured.makespan_us, 33.0);
  }

  // Refitting to a measurement under other costs and re-predicting reproduces the measurement.
  void calibrationRecoversTheMeasuredCosts_data() {
    QTest::addColumn<QString>("name");
    QTest::addColumn<int>("chunks");
    QTest::newRow("1f1b") << "1f1b" << 1;
    QTest::newRow("interleaved") << "interleaved-1f1b" << 2;
    QTest::newRow("zb-h1") << "zb-h1" << 1;
    QTest::newRow("zb-v") << "zb-v" << 1;
    QTest::newRow("dualpipev") << "dualpipev" << 1;
  }
  void calibrationRecoversTheMeasuredCosts() {
    QFETCH(QString, name);
    QFETCH(int, chunks);
    const ScheduleRequest request{name.toStdString(), 4, 8, chunks, 0};
    Costs truth = trueCosts();
    truth.overlapped_us = 3.4; // only dualpipev has pairs
    const Trace measured = simulatedTrace(request, truth);
    const Trace before = simulatedTrace(request, Costs{});
    auto schedule = generateSchedule(request);
    QVERIFY(schedule);
    auto calibrated = calibrateCosts(*schedule, measured, Costs{});
    QVERIFY2(calibrated, calibrated ? "" : calibrated.error().message.c_str());
    const Trace after = simulatedTrace(request, *calibrated);
    const auto error_before = compareTraces(before, measured);
    const auto error_after = compareTraces(after, measured);
    QVERIFY(std::abs(error_before.makespan_relative_error) > 0.05);
    QVERIFY2(std::abs(error_after.makespan_relative_error) < 1e-9,
             qPrintable(QString("after calibration: %1").arg(error_after.makespan_relative_error)));
    for (const auto &kind : error_after.kinds)
      QVERIFY(kind.worst_relative_error < 1e-9);
  }

  // Ranks that share a device: a "measurement" simulated with known slowdown factors (ops run
  // faster while fewer other ranks compute) is fitted back, the calibrated costs carry it, and
  // simulating them reproduces the measured step; separate devices (no slowdown) fit none.
  void contentionBetweenRanksIsFittedAndSimulated() {
    Plan plan;
    plan.request = {"1f1b", 4, 16, 1, 0};
    plan.mesh.pp = 4;
    plan.costs = trueCosts();
    auto evaluation = evaluatePlan(plan);
    QVERIFY(evaluation);
    Plan contended_plan = plan;
    contended_plan.costs.concurrency_slowdown = {0.7, 0.8, 0.9, 1.0};
    auto contended = evaluatePlan(contended_plan);
    QVERIFY(contended);
    // Ramps run faster; the steady state keeps the costs' times.
    QVERIFY(contended->simulation.makespan_us < evaluation->simulation.makespan_us);
    // Five measured steps, as a run records them (the fit needs 3 ops at a count).
    const Trace one_step = traceFromEvaluation(contended_plan, *contended);
    Trace measured = one_step;
    measured.ops.clear();
    for (int step = 0; step < 5; ++step)
      for (TraceOp op : one_step.ops) {
        op.step = step;
        measured.ops.push_back(op);
      }

    const ConcurrencySlowdown fit = fitConcurrencySlowdown(measured, 4);
    QVERIFY(fit.matters());
    QCOMPARE(int(fit.factor.size()), 4);
    QCOMPARE(fit.factor[3], 1.0);
    for (std::size_t n = 0; n < 3; ++n)
      QVERIFY2(std::abs(fit.factor[n] - contended_plan.costs.concurrency_slowdown[n]) < 0.05,
               qPrintable(QString("factor %1: %2").arg(n).arg(fit.factor[n])));
    auto refit = calibrateCosts(evaluation->schedule, measured, plan.costs);
    QVERIFY(refit);
    QCOMPARE(refit->concurrency_slowdown, fit.factor);
    Plan calibrated = plan;
    calibrated.costs = *refit;
    auto again = evaluatePlan(calibrated);
    QVERIFY(again);
    QVERIFY2(std::abs(again->simulation.makespan_us / contended->simulation.makespan_us - 1) < 0.01,
             qPrintable(QString::number(again->simulation.makespan_us /
                                        contended->simulation.makespan_us)));
    // The plan file keeps it.
    auto json = planToJson(calibrated);
    auto read = planFromJson(json);
    QVERIFY(read);
    QCOMPARE(read->costs.concurrency_slowdown, refit->concurrency_slowdown);

    // Ops slower while fewer others compute is no contention (noise, not sharing): none fitted.
    Plan inverted = plan;
    inverted.costs.concurrency_slowdown = {1.5, 1.3, 1.1, 1.0};
    auto inverted_run = evaluatePlan(inverted);
    QVERIFY(inverted_run);
    Trace inverted_trace = traceFromEvaluation(inverted, *inverted_run);
    const std::vector<TraceOp> first_step = inverted_trace.ops;
    for (const auto &op : first_step)
      for (int step = 1; step < 5; ++step) {
        TraceOp copy = op;
        copy.step = step;
        inverted_trace.ops.push_back(copy);
      }
    QVERIFY(!fitConcurrencySlowdown(inverted_trace, 4).matters());

    // Without contention: nothing that matters, no slowdown in the calibrated costs.
    const Trace separate = traceFromEvaluation(plan, *evaluation);
    QVERIFY(!fitConcurrencySlowdown(separate, 4).matters());
    auto plain = calibrateCosts(evaluation->schedule, separate, plan.costs);
    QVERIFY(plain && plain->concurrency_slowdown.empty());
    // A scale that does not cover every op is refused, not read past its end; a factor out of
    // range is refused by the costs' check.
    SimulationOptions options;
    options.op_duration_scale = {{1.0}};
    QVERIFY(!simulate(evaluation->schedule, evaluation->program, evaluation->times, options));
    Costs bad = plan.costs;
    bad.concurrency_slowdown = {0.5, -1.0};
    QVERIFY(!bad.check(4));
  }

  // Real runs on one H100 (gpu-shared, four green-context partitions, tests/data/measured): the
  // partitions slow each other down, calibration sees it, and its prediction comes within 1 % and
  // 1 bubble point of the measured step, which the same costs without the slowdown do not.
  void contentionOnARealSharedGpu_data() {
    QTest::addColumn<QString>("file");
    QTest::newRow("1f1b") << "gpu-shared-h100-1f1b-p4-m16.json.gz";
    QTest::newRow("zb-v") << "gpu-shared-h100-zb-v-p4-m16.json.gz";
  }
  void contentionOnARealSharedGpu() {
    QFETCH(QString, file);
    auto run = calibrateCommittedRun(file);
    QVERIFY2(run, run ? "" : run.error().message.c_str());
    const auto &factor = run->calibrated.costs.concurrency_slowdown;
    QCOMPARE(int(factor.size()), 4);
    QVERIFY2(factor[0] > 0.6 && factor[0] < 0.9 && factor[0] <= factor[2] && factor[3] == 1.0,
             qPrintable(QString::number(factor[0])));
    auto after = compareWithPrediction(run->calibrated, run->measured);
    QVERIFY(after);
    QVERIFY2(std::abs(after->makespan_relative_error) < 0.01,
             qPrintable(QString::number(after->makespan_relative_error)));
    QVERIFY(std::abs(after->bubble_fraction_difference) < 0.01);
    QVERIFY(std::abs(after->bubble_ratio_difference) < 0.01);
    Plan without = run->calibrated;
    without.costs.concurrency_slowdown.clear();
    auto plain = compareWithPrediction(without, run->measured);
    QVERIFY(plain);
    QVERIFY2(std::abs(plain->makespan_relative_error) > 0.015,
             qPrintable(QString::number(plain->makespan_relative_error)));
  }

  // DualPipeV on one H100 (tests/data/measured): its overlapped pairs, two streams in one
  // partition, took about 1.06 x (F + B). Calibration keeps that (a pair may take up to
  // 2(F + B)) and comes within 1 % and 1 bubble point. With CUDA's default 8 work queues for its
  // 12 streams, unrelated streams shared queues and pairs and copies stalled behind each other
  // (up to 3.7 x a pair): per-stage medians do not absorb such stalls, so the prediction stays
  // far off, as it should: the stalls are not the schedule's.
  void overlappedPairsOnARealSharedGpu_data() {
    QTest::addColumn<QString>("file");
    QTest::addColumn<double>("lowest_error");
    QTest::addColumn<double>("highest_error");
    QTest::newRow("32 work queues") << "gpu-shared-h100-dualpipev-p4-m16.json.gz" << -0.01 << 0.01;
    // Two measured steps: each warm-up op's count is seen twice, enough to fit its factor.
    QTest::newRow("M = 32, two steps")
        << "gpu-shared-h100-dualpipev-p4-m32.json.gz" << -0.01 << 0.01;
    QTest::newRow("8 work queues: stalls")
        << "gpu-shared-h100-dualpipev-8queues-p4-m16.json.gz" << 0.10 << 1.0;
  }
  void overlappedPairsOnARealSharedGpu() {
    QFETCH(QString, file);
    QFETCH(double, lowest_error);
    QFETCH(double, highest_error);
    auto run = calibrateCommittedRun(file);
    QVERIFY2(run, run ? "" : run.error().message.c_str());
    const Costs &refit = run->calibrated.costs;
    QVERIFY2(
        refit.overlapped_us > refit.forward_us + refit.backward_us,
        qPrintable(QString::number(refit.overlapped_us / (refit.forward_us + refit.backward_us))));
    auto after = compareWithPrediction(run->calibrated, run->measured);
    QVERIFY(after);
    QVERIFY2(after->makespan_relative_error > lowest_error &&
                 after->makespan_relative_error < highest_error,
             qPrintable(QString::number(after->makespan_relative_error)));
    if (highest_error < 0.05) {
      QVERIFY(std::abs(after->bubble_fraction_difference) < 0.01);
      QVERIFY(std::abs(after->bubble_ratio_difference) < 0.01);
    }
  }

  void foreignTracesAreRefused() {
    const Trace measured = simulatedTrace({"interleaved-1f1b", 4, 8, 2, 0}, Costs{});
    auto schedule = generateSchedule({"1f1b", 4, 8, 1, 0});
    const auto refused = calibrateCosts(*schedule, measured, Costs{});
    QVERIFY(!refused);
    QVERIFY(refused.error().message.find("does not belong to this schedule") != std::string::npos);
    Trace empty;
    QVERIFY(!calibrateCosts(*schedule, empty, Costs{}));
  }
};

QTEST_APPLESS_MAIN(TestCalibration)
#include "test_calibration.moc"
