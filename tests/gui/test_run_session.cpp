// The measurement and the run session without a window, as a model library is tested: each
// measured step aligned at its start, a trace of another plan refused, the measurement drawn over
// the prediction, and a session that imports, compares, calibrates and reverts.
#include <QImage>
#include <QSignalSpy>
#include <QtTest>

#include "engine/trace_file.h"
#include "gui/run/comparison_models.h"
#include "gui/run/measurement.h"
#include "gui/run/run_session.h"
#include "gui/widgets/timeline_widget.h"
#include "tests/gui/run_test_support.h"
#include "tests/gui/window_test_support.h"

using namespace pipescope;
using namespace pipescope::gui;
using namespace pipescope::gui::testing;

class TestRunSession : public QObject {
  Q_OBJECT
private slots:
  void initTestCase() { useTestSettings("test_gui_run_session"); }

  void alignsEachStepAtItsStart() {
    const Plan plan = examplePlan();
    const Evaluation prediction = evaluated(plan);
    const double factor = 4;
    const Trace trace = measuredTrace(plan, 3, factor);
    auto measurement = Measurement::fromTrace(trace, prediction.schedule, factor);
    QVERIFY(measurement);
    QCOMPARE(measurement->steps(), (std::vector<int>{0, 1, 2}));
    const Evaluation other = evaluated(otherCosts(plan));
    for (int step : {0, 2}) {
      const auto aligned = measurement->alignedStep(step);
      QVERIFY(aligned);
      // Parallel to the schedule, in planned time, starting at 0: the other-costs simulation.
      QCOMPARE(aligned->simulation.op_times.size(), other.simulation.op_times.size());
      for (std::size_t r = 0; r < other.simulation.op_times.size(); ++r)
        for (std::size_t i = 0; i < other.simulation.op_times[r].size(); ++i) {
          QVERIFY(std::abs(aligned->simulation.op_times[r][i].start_us -
                           other.simulation.op_times[r][i].start_us) < 1e-9);
          QVERIFY(std::abs(aligned->simulation.op_times[r][i].end_us -
                           other.simulation.op_times[r][i].end_us) < 1e-9);
        }
      QVERIFY(std::abs(aligned->simulation.makespan_us - other.simulation.makespan_us) < 1e-9);
      QVERIFY(std::abs(aligned->simulation.bubble_fraction - other.simulation.bubble_fraction) <
              1e-9);
    }
    QVERIFY(!measurement->alignedStep(7));
    QVERIFY(std::abs(measurement->deviceMakespan(1) - other.simulation.makespan_us * factor) <
            1e-9);
    // The plan-time trace is the device trace over the factor.
    QCOMPARE(measurement->trace().ops.size(), trace.ops.size());
    QVERIFY(std::abs(measurement->trace().ops.back().end_us * factor -
                     measurement->deviceTrace().ops.back().end_us) < 1e-9);
  }

  void refusesATraceOfAnotherPlan() {
    Plan plan = examplePlan();
    const Trace trace = measuredTrace(plan, 1, 1);
    Plan bigger = plan;
    bigger.request.microbatches = 4;
    const Evaluation four = evaluated(bigger);
    auto status = checkTraceFitsShownSchedule(trace, four.schedule);
    QVERIFY(!status);
    const QString message = QString::fromStdString(status.error().message);
    QVERIFY2(message.contains(QStringLiteral("another plan")), qPrintable(message));
    QVERIFY2(message.contains(QStringLiteral("M=8")) && message.contains(QStringLiteral("M=4")),
             qPrintable(message));
    QVERIFY2(message.contains(QStringLiteral("Open plan")), qPrintable(message));
    // A step with an op the schedule lacks leaves the measurement as it was.
    Measurement measurement(plan, evaluated(plan).schedule);
    std::vector<TraceOp> ops = trace.ops;
    QVERIFY(measurement.addStep(0, ops));
    ops.front().microbatch = 99;
    QVERIFY(!measurement.addStep(1, ops));
    QCOMPARE(measurement.steps(), std::vector<int>{0});
  }

  void drawsTheMeasurementOverThePrediction() {
    const Plan plan = examplePlan();
    auto prediction = std::make_shared<const Evaluation>(evaluated(plan));
    auto measurement = Measurement::fromTrace(measuredTrace(plan, 1, 1), prediction->schedule, 1);
    QVERIFY(measurement);
    const auto measured = measurement->alignedStep(0);
    TimelineSection section;
    section.evaluation = prediction;
    section.measured = measured;
    const TimelineModel model({section});
    // The axis reaches the longer of the two steps.
    QCOMPARE(model.endTime(),
             std::max(prediction->simulation.makespan_us, measured->simulation.makespan_us));
    QVERIFY(model.endTime() > prediction->simulation.makespan_us);
    const TimeMapping mapping(0, model.endTime(), 100, 1000);
    const DrawList predicted_items = buildDrawList(model, mapping);
    DrawListOptions options;
    options.measured = true;
    const DrawList measured_items = buildDrawList(model, mapping, options);
    QCOMPARE(measured_items.itemCount(), predicted_items.itemCount());
    // Same ops, measured places: item k of a row points at the op its predicted twin does.
    for (std::size_t k = 0; k < measured_items.items.size(); ++k) {
      const DrawItem &item = measured_items.items[k];
      QCOMPARE(item.first, predicted_items.items[k].first);
      const OpTiming *timing = model.measuredTiming(item.first);
      QVERIFY(timing);
      QVERIFY(std::abs(item.x0 - mapping.mapTimeToX(timing->start_us)) < 1e-3);
    }
    // A section without a measurement gives no measured items.
    const TimelineModel plain({TimelineSection{QStringLiteral("p"), prediction}});
    QCOMPARE(buildDrawList(plain, mapping, options).itemCount(), std::size_t{0});
    QVERIFY(!plain.measuredTiming({0, 0, 0}));

    // The widget paints both and hovers the measured bar with both timings.
    TimelineWidget widget;
    widget.resize(900, 300);
    widget.setModel(model, false);
    widget.show();
    QVERIFY(widget.hasMeasuredOverlay());
    QVERIFY(widget.measuredDrawList().itemCount() > 0);
    QImage image(widget.size(), QImage::Format_ARGB32);
    widget.render(&image);
    QSignalSpy hover(&widget, &TimelineWidget::hoverTextChanged);
    const QRectF rect = widget.opRect({0, 3, 10});
    QTest::mouseMove(&widget, rect.center().toPoint());
    QVERIFY(hover.size() >= 1);
    const QString text = hover.last().at(0).toString();
    QVERIFY2(text.contains(QStringLiteral("measured")) &&
                 text.contains(QStringLiteral("predicted")),
             qPrintable(text));
  }

  // The run session alone, as a model library is tested without widgets: import, compare,
  // calibrate (a new plan by signal), see before and after in the item models, revert.
  void aSessionCalibratesWithoutAWindow() {
    RunSession session;
    const Plan plan = examplePlan();
    session.setSnapshot(computeSnapshot(plan));
    StepErrorModel steps;
    KindErrorModel kinds;
    auto show = [&] {
      const auto &now = session.comparison();
      const auto &before = session.comparisonBeforeCalibration();
      steps.setComparisons(now ? &*now : nullptr, before ? &*before : nullptr);
      kinds.setComparisons(now ? &*now : nullptr, before ? &*before : nullptr);
    };
    connect(&session, &RunSession::comparisonChanged, this, show);
    QSignalSpy replaced(&session, &RunSession::planReplaced);
    QSignalSpy measurement_changed(&session, &RunSession::measurementChanged);
    QVERIFY(!session.calibrate()); // nothing to fit yet
    QCOMPARE(session.statusTone(), RunTone::Error);

    MeasuredTraceFile file;
    file.trace = measuredTrace(plan, 2, 1);
    file.time_factor = 1;
    QVERIFY(session.importTrace(file).ok());
    QCOMPARE(measurement_changed.count(), 1);
    QVERIFY(session.measurementApplies());
    const TraceComparison expected = compareTraces(
        traceFromEvaluation(plan, *session.snapshot()->evaluation), session.measurement()->trace());
    QCOMPARE(steps.columnCount(), 3);
    QCOMPARE(steps.data(steps.index(0, 2), Qt::DisplayRole).toString(),
             formatSignedPercent(expected.makespan_relative_error));
    QCOMPARE(kinds.rowCount(), static_cast<int>(expected.kinds.size()));

    QVERIFY(session.calibrate());
    QCOMPARE(replaced.count(), 1);
    const Plan calibrated = replaced.last().at(0).value<Plan>();
    QCOMPARE(calibrated.costs.stage_overrides.size(), std::size_t{4});
    session.setSnapshot(computeSnapshot(calibrated)); // what the window does with it
    QVERIFY(session.showingCalibration());
    QCOMPARE(steps.columnCount(), 5);
    QCOMPARE(kinds.columnCount(), 4);
    QVERIFY(std::abs(session.comparison()->makespan_relative_error) < 1e-3);

    session.revertCalibration();
    QCOMPARE(replaced.count(), 2);
    QCOMPARE(replaced.last().at(0).value<Plan>().costs.stage_overrides.size(), std::size_t{0});
  }
};

QTEST_MAIN(TestRunSession)
#include "test_run_session.moc"
