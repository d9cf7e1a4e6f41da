// Comparing a measurement with a prediction, and refitting the cost model to a measurement.
// The "measurements" here are simulations under other, known costs, so the refit has an exact
// answer to find.
#include <QtTest>

#include "engine/calibration.h"

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
