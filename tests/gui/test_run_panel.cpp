// The window's Run panel against a fake backend (a shell script that streams the protocol's
// lines with pauses and writes a trace made with the engine): the overlay fills in live, progress
// advances, the errors table matches compareTraces, errors show, cancel stops the script and its
// child; importing draws the overlay and refuses another plan's trace; calibrating brings the
// step-time error to about zero. Where pipescope-backend and mpirun exist, one real cpu run of a
// 2-rank 1F1B plan.
#include <QComboBox>
#include <QFile>
#include <QImage>
#include <QLabel>
#include <QProcess>
#include <QProgressBar>
#include <QPushButton>
#include <QSpinBox>
#include <QStandardPaths>
#include <QTableView>
#include <QTemporaryDir>
#include <QtTest>

#include <cmath>
#include <nlohmann/json.hpp>

#include "engine/calibration.h"
#include "engine/plan_file.h"
#include "engine/run_events.h"
#include "engine/trace_file.h"
#include "gui/run/backend_process.h"
#include "gui/run/measurement.h"
#include "gui/widgets/controls_panel.h"
#include "gui/widgets/main_window.h"
#include "gui/widgets/metrics_panel.h"
#include "gui/widgets/run_panel.h"
#include "gui/widgets/timeline_widget.h"
#include "tests/gui/run_test_support.h"
#include "tests/gui/window_test_support.h"

using namespace pipescope;
using namespace pipescope::gui;
using namespace pipescope::gui::testing;
using nlohmann::json;

class TestRunPanel : public QObject {
  Q_OBJECT
private slots:
  void initTestCase() { useTestSettings("test_gui_run_panel"); }

  // --- a run against a fake backend ------------------------------------------------------------

  void aRunFillsInLive() {
    QTemporaryDir dir;
    QVERIFY(dir.isValid());
    MainWindow window(quietOptions());
    window.show();
    window.settle();
    const Plan plan = window.snapshot()->plan;
    const double factor = 2;
    const int steps = 3;
    const Trace trace = measuredTrace(plan, steps, factor);
    const FakeBackend fake = writeFakeBackend(dir, trace, steps, factor, 0.8);
    RunPanel *panel = window.runPanel();
    useFake(panel, fake);
    panel->setSteps(1, steps);
    QVERIFY(!window.timeline()->hasMeasuredOverlay());
    QVERIFY(panel->startRun());
    QVERIFY(panel->running());
    QVERIFY(!panel->runButton()->isEnabled());
    QVERIFY(panel->cancelButton()->isEnabled());
    QCOMPARE(window.tabs()->currentWidget(), static_cast<QWidget *>(panel));

    // Warm-up done: progress moves before any step is drawn.
    QTRY_VERIFY_WITH_TIMEOUT(panel->progressBar()->value() >= 1, 10000);
    QCOMPARE(panel->progressBar()->maximum(), 1 + steps);
    QVERIFY(!window.timeline()->hasMeasuredOverlay());

    // The first step line: its ops are drawn while the run goes on.
    QTRY_VERIFY_WITH_TIMEOUT(panel->measurement() && panel->measurement()->steps().size() == 1,
                             10000);
    QVERIFY(panel->running());
    window.settle();
    QVERIFY(window.timeline()->hasMeasuredOverlay());
    const Evaluation other = evaluated(otherCosts(plan));
    const TimelineModel &model = window.timeline()->model();
    QCOMPARE(model.sections().size(), std::size_t{1});
    QVERIFY(model.sections()[0].measured);
    const auto &shown = model.sections()[0].measured->simulation;
    QVERIFY(std::abs(shown.makespan_us - other.simulation.makespan_us) < 1e-9);
    QVERIFY(window.timeline()->measuredDrawList().itemCount() > 0);
    QCOMPARE(panel->progressBar()->value(), 2);
    QVERIFY(panel->progressBar()->value() < panel->progressBar()->maximum());

    // The errors table matches compareTraces on the steps so far.
    {
      Trace so_far = panel->measurement()->trace();
      const TraceComparison expected =
          compareTraces(traceFromEvaluation(plan, *window.snapshot()->evaluation), so_far);
      QCOMPARE(cell(panel->stepTable(), 0, 0), formatDuration(expected.measured.makespan_us));
      QCOMPARE(cell(panel->stepTable(), 0, 2),
               formatSignedPercent(expected.makespan_relative_error));
    }

    // Then the rest, and the end.
    QTRY_VERIFY_WITH_TIMEOUT(!panel->running(), 20000);
    QCOMPARE(panel->measurement()->steps().size(), std::size_t{steps});
    QCOMPARE(panel->progressBar()->value(), panel->progressBar()->maximum());
    QVERIFY2(panel->statusText().contains(QStringLiteral("Done")), qPrintable(panel->statusText()));
    QVERIFY(panel->logText().contains(QStringLiteral("a launcher line that is not JSON")));
    QVERIFY(panel->logText().contains(QStringLiteral("a line on stderr")));
    QVERIFY(panel->runButton()->isEnabled());

    // The table against the engine's comparison, in planned time (device time / factor).
    Trace planned = trace;
    for (auto &op : planned.ops) {
      op.start_us /= factor;
      op.end_us /= factor;
    }
    const TraceComparison expected =
        compareTraces(traceFromEvaluation(plan, *window.snapshot()->evaluation), planned);
    QTableView *table = panel->stepTable();
    QCOMPARE(cell(table, 0, 0), formatDuration(expected.measured.makespan_us));
    QCOMPARE(cell(table, 0, 1), formatDuration(expected.predicted.makespan_us));
    QCOMPARE(cell(table, 0, 2), formatSignedPercent(expected.makespan_relative_error));
    QCOMPARE(cell(table, 1, 0), formatPercent(expected.measured.bubble_fraction));
    QCOMPARE(cell(table, 1, 1), formatPercent(expected.predicted.bubble_fraction));
    QCOMPARE(cell(table, 1, 2), formatPointDifference(expected.bubble_fraction_difference));
    QCOMPARE(cell(table, 2, 0), formatPercent(expected.measured.bubble_ratio));
    QCOMPARE(cell(table, 2, 1), formatPercent(expected.predicted.bubble_ratio));
    QCOMPARE(cell(table, 2, 2), formatPointDifference(expected.bubble_ratio_difference));
    QCOMPARE(rowCount(panel->kindTable()), static_cast<int>(expected.kinds.size()));
    for (std::size_t row = 0; row < expected.kinds.size(); ++row) {
      QCOMPARE(cell(panel->kindTable(), static_cast<int>(row), 0),
               formatPercent(expected.kinds[row].median_relative_error));
      QCOMPARE(cell(panel->kindTable(), static_cast<int>(row), 1),
               formatPercent(expected.kinds[row].worst_relative_error));
      QVERIFY(panel->kindTable()
                  ->model()
                  ->headerData(static_cast<int>(row), Qt::Vertical)
                  .toString()
                  .contains(opKindShortLegend(expected.kinds[row].kind)));
    }
    QVERIFY(expected.makespan_relative_error > 0.05); // the other costs really differ

    // Side by side: the measured step below the prediction, on the same axis.
    window.setOverlayMode(OverlayMode::SideBySide);
    QCOMPARE(window.timeline()->model().sections().size(), std::size_t{2});
    QCOMPARE(window.timeline()->model().rowCount(), 8);
    QVERIFY(!window.timeline()->hasMeasuredOverlay());
    window.setMeasuredStep(0);
    QCOMPARE(window.measuredStep(), 0);
    window.setOverlayMode(OverlayMode::Hidden);
    QCOMPARE(window.timeline()->model().sections().size(), std::size_t{1});
    QVERIFY(!window.timeline()->hasMeasuredOverlay());
    window.setOverlayMode(OverlayMode::Overlay);
    QVERIFY(window.timeline()->hasMeasuredOverlay());

    // Another schedule hides the overlay; coming back shows it again.
    window.controls()->microbatches()->spinBox()->setValue(6);
    window.settle();
    QVERIFY(!window.timeline()->hasMeasuredOverlay());
    QVERIFY(!panel->measurementApplies());
    window.controls()->microbatches()->spinBox()->setValue(8);
    window.settle();
    QVERIFY(window.timeline()->hasMeasuredOverlay());

    // The background child the script left is gone with the run.
    const qint64 child = readPid(dir.filePath(QStringLiteral("child.pid")));
    QVERIFY(child > 0);
    QTRY_VERIFY_WITH_TIMEOUT(!alive(child), 5000);

    // Export the measurement as a Chrome trace: in device time, one event per op.
    const QString chrome = dir.filePath(QStringLiteral("chrome.json"));
    QVERIFY(window.exportMeasuredChromeTrace(chrome));
    auto text = readTextFile(chrome.toStdString());
    QVERIFY(text);
    auto parsed = json::parse(*text);
    QVERIFY(parsed.contains("traceEvents"));
    int complete = 0;
    for (const auto &event : parsed["traceEvents"])
      if (event.value("ph", "") == "X") ++complete;
    QVERIFY(complete >= static_cast<int>(trace.ops.size()));
  }

  void cancelStopsTheScriptAndItsChild() {
    QTemporaryDir dir;
    MainWindow window(quietOptions());
    window.show();
    window.settle();
    const Plan plan = window.snapshot()->plan;
    const Trace trace = measuredTrace(plan, 1, 1);
    // One step, then a long wait in the foreground, with a background child as well.
    const FakeBackend fake = writeFakeBackend(dir, trace, 1, 1, 0.2, "sleep 600\n");
    RunPanel *panel = window.runPanel();
    useFake(panel, fake);
    panel->process()->setKillTimeout(3000);
    QVERIFY(panel->startRun());
    QTRY_VERIFY_WITH_TIMEOUT(panel->measurement() && panel->measurement()->steps().size() == 1,
                             10000);
    const qint64 script = readPid(dir.filePath(QStringLiteral("script.pid")));
    const qint64 child = readPid(dir.filePath(QStringLiteral("child.pid")));
    QVERIFY(alive(script));
    QVERIFY(alive(child));
    QElapsedTimer clock;
    clock.start();
    panel->cancelRun();
    QTRY_VERIFY_WITH_TIMEOUT(!panel->running(), 8000);
    QTRY_VERIFY_WITH_TIMEOUT(!alive(script) && !alive(child), 5000);
    QVERIFY2(clock.elapsed() < 6000, qPrintable(QString::number(clock.elapsed())));
    // A killed process leaves /proc a moment after kill(2) returns: wait for the kernel.
    QTRY_VERIFY_WITH_TIMEOUT(BackendProcess::sessionMembers(script).isEmpty(), 5000);
    QVERIFY2(panel->statusText().contains(QStringLiteral("Cancelled")),
             qPrintable(panel->statusText()));
    QCOMPARE(panel->progressBar()->text().contains(QStringLiteral("cancelled")), true);
    // The step measured before the cancel stays drawn.
    QCOMPARE(panel->measurement()->steps().size(), std::size_t{1});
    window.settle();
    QVERIFY(window.timeline()->hasMeasuredOverlay());
  }

  void cancelReachesAProcessThatIgnoresTerm() {
    QTemporaryDir dir;
    const QString script = dir.filePath(QStringLiteral("stubborn.sh"));
    const QByteArray d = dir.path().toUtf8();
    writeFile(script,
              "#!/bin/sh\n"
              "trap '' TERM\n"
              "sh -c \"trap '' TERM; echo \\$\\$ > '" +
                  d +
                  "/grandchild.pid'; exec sleep 600\" &\n"
                  "echo $$ > '" +
                  d +
                  "/script.pid'\n"
                  "while true; do sleep 0.1; done\n",
              true);
    BackendProcess process;
    process.setKillTimeout(1200);
    QSignalSpy finished(&process, &BackendProcess::finished);
    process.start(script, {}, dir.path());
    QTRY_VERIFY_WITH_TIMEOUT(readPid(dir.filePath(QStringLiteral("grandchild.pid"))) > 0, 5000);
    const qint64 leader = readPid(dir.filePath(QStringLiteral("script.pid")));
    const qint64 grandchild = readPid(dir.filePath(QStringLiteral("grandchild.pid")));
    QTRY_VERIFY_WITH_TIMEOUT(alive(grandchild), 2000);
    process.cancel();
    QTRY_COMPARE_WITH_TIMEOUT(finished.size(), 1, 5000);
    QCOMPARE(finished.at(0).at(2).toBool(), true); // cancelled
    QTRY_VERIFY_WITH_TIMEOUT(!alive(leader) && !alive(grandchild), 3000);
  }

  void backendErrorsShowInTheWindow() {
    QTemporaryDir dir;
    MainWindow window(quietOptions());
    window.show();
    window.settle();
    const Trace trace = measuredTrace(window.snapshot()->plan, 1, 1);
    const FakeBackend fake = writeFakeBackend(
        dir, trace, 0, 1, 0.1,
        "printf '%s\\n' " +
            quoted(runEventLine(ErrorEvent{1, "rank 1 waited 120 s for rank 2: NCCL timeout"})) +
            "\n"
            "echo 'a failing launcher says goodbye' >&2\n"
            "exit 3\n");
    RunPanel *panel = window.runPanel();
    useFake(panel, fake);
    QVERIFY(panel->startRun());
    QTRY_VERIFY_WITH_TIMEOUT(!panel->running(), 10000);
    const QString status = panel->statusText();
    QVERIFY2(status.contains(QStringLiteral("rank 1")) &&
                 status.contains(QStringLiteral("NCCL timeout")),
             qPrintable(status));
    QVERIFY2(status.contains(QStringLiteral("status 3")), qPrintable(status));
    QVERIFY(panel->logText().contains(QStringLiteral("NCCL timeout")));
    QVERIFY(panel->logText().contains(QStringLiteral("a failing launcher says goodbye")));
    QVERIFY(panel->progressBar()->text().contains(QStringLiteral("failed")));
    QVERIFY(panel->runButton()->isEnabled());
  }

  void aLauncherThatCannotStartIsReported() {
    MainWindow window(quietOptions());
    window.show();
    window.settle();
    RunPanel *panel = window.runPanel();
    panel->setBackendPath(QStringLiteral("/bin/true"));
    panel->setTarget(LaunchTarget::Custom);
    panel->setCommandTemplate(QStringLiteral("/nonexistent/launcher-xyz --plan {plan}"));
    panel->startRun();
    QTRY_VERIFY_WITH_TIMEOUT(!panel->running(), 5000);
    QTRY_VERIFY_WITH_TIMEOUT(panel->statusText().contains(QStringLiteral("did not start")), 5000);
    QVERIFY(panel->statusText().contains(QStringLiteral("launcher-xyz")));

    // Without a backend, a template that needs one says so instead of running.
    panel->setBackendPath(QString());
    panel->setTarget(LaunchTarget::Cpu);
    QVERIFY(!panel->runButton()->isEnabled());
    QVERIFY(!panel->startRun());
    QVERIFY(panel->statusText().contains(QStringLiteral("pipescope-backend was not found")));
    auto *note = panel->findChild<QLabel *>(QStringLiteral("run_backend_note"));
    QVERIFY(note && note->isVisible() && note->text().contains(QStringLiteral("was not found")));
  }

  // --- import and calibrate ------------------------------------------------------------------

  void importDrawsTheOverlayAndRefusesAnotherPlan() {
    QTemporaryDir dir;
    MainWindow window(quietOptions());
    window.show();
    window.settle();
    const Plan plan = window.snapshot()->plan;
    const QString path = dir.filePath(QStringLiteral("measured.json"));
    QVERIFY(saveTrace(path.toStdString(), measuredTrace(plan, 2, 1)));
    QVERIFY(window.importMeasuredTrace(path));
    window.settle();
    QVERIFY(window.timeline()->hasMeasuredOverlay());
    QVERIFY(window.timeline()->measuredDrawList().itemCount() > 0);
    QCOMPARE(window.runPanel()->measurement()->steps().size(), std::size_t{2});
    QVERIFY(window.runPanel()->comparison().has_value());
    QVERIFY(!cell(window.runPanel()->stepTable(), 0, 0).isEmpty());

    // A trace of M = 4 is refused, and the one shown stays.
    Plan other = plan;
    other.request.microbatches = 4;
    const QString wrong = dir.filePath(QStringLiteral("other.json"));
    QVERIFY(saveTrace(wrong.toStdString(), measuredTrace(other, 1, 1)));
    QVERIFY(!window.importMeasuredTrace(wrong));
    QVERIFY2(window.runPanel()->statusText().contains(QStringLiteral("another plan")),
             qPrintable(window.runPanel()->statusText()));
    QCOMPARE(window.runPanel()->measurement()->steps().size(), std::size_t{2});
    QVERIFY(window.timeline()->hasMeasuredOverlay());

    // A file that is not a trace says which field is wrong.
    const QString broken = dir.filePath(QStringLiteral("broken.json"));
    writeFile(broken, R"({"format":"pipescope.trace","version":1,"source":"measured"})");
    QVERIFY(!window.importMeasuredTrace(broken));
    QVERIFY2(window.runPanel()->statusText().contains(QStringLiteral("Not imported")),
             qPrintable(window.runPanel()->statusText()));
  }

  void calibrateBringsTheStepErrorToZero() {
    QTemporaryDir dir;
    MainWindow window(quietOptions());
    window.show();
    window.settle();
    const Plan plan = window.snapshot()->plan;
    const QString path = dir.filePath(QStringLiteral("measured.json"));
    const double factor = 3;
    json file = traceToJson(measuredTrace(plan, 3, factor));
    file["backend"] = {{"workload", {{"expected_time_factor", factor}}}};
    writeFile(path, QByteArray::fromStdString(file.dump()));
    QVERIFY(window.importMeasuredTrace(path));
    RunPanel *panel = window.runPanel();
    QCOMPARE(panel->measurement()->timeFactor(), factor);
    const double before = panel->comparison()->makespan_relative_error;
    QVERIFY(std::abs(before) > 0.1);
    QVERIFY(panel->calibrateButton()->isEnabled());
    QVERIFY(panel->calibrate());
    window.settle();
    QVERIFY(panel->showingCalibration());
    const double after = panel->comparison()->makespan_relative_error;
    QVERIFY2(std::abs(after) < 1e-3, qPrintable(QString::number(after)));
    for (const auto &kind : panel->comparison()->kinds)
      QVERIFY(kind.worst_relative_error < 1e-6);
    QVERIFY(std::abs(panel->comparison()->bubble_fraction_difference) < 1e-3);
    // The plan now carries explicit per-stage costs, and the metrics follow the new prediction.
    const Plan &calibrated = window.snapshot()->plan;
    QCOMPARE(calibrated.costs.stage_overrides.size(), std::size_t{4});
    QVERIFY(!calibrated.model);
    QCOMPARE(window.metrics()->valueText(QStringLiteral("step_time")),
             formatDuration(window.snapshot()->evaluation->simulation.makespan_us));
    // The settings say that per-stage times stand in for the uniform F, B, W they still show.
    QVERIFY(window.controls()->stageCostsNote()->isVisibleTo(window.controls()));
    QVERIFY2(window.controls()->stageCostsNote()->text().contains(QStringLiteral("4 stages")),
             qPrintable(window.controls()->stageCostsNote()->text()));
    // Before and after side by side.
    QTableView *table = panel->stepTable();
    QCOMPARE(columnCount(table), 5);
    QCOMPARE(cell(table, 0, 2), formatSignedPercent(before));
    QCOMPARE(cell(table, 0, 4), formatSignedPercent(after));
    QCOMPARE(columnCount(panel->kindTable()), 4);
    QVERIFY(panel->comparisonBeforeCalibration().has_value());

    // Revert returns to the costs before, and the table to one prediction.
    panel->revertCalibration();
    window.settle();
    QVERIFY(!panel->showingCalibration());
    QVERIFY(window.snapshot()->plan.costs.stage_overrides.empty());
    QVERIFY(!window.controls()->stageCostsNote()->isVisibleTo(window.controls()));
    QCOMPARE(columnCount(panel->stepTable()), 3);
    QVERIFY(std::abs(panel->comparison()->makespan_relative_error - before) < 1e-12);

    // Calibrate again, then move P: the per-stage costs no longer fit and are dropped, not an
    // error.
    QVERIFY(panel->calibrate());
    window.settle();
    window.controls()->pipelineRanks()->spinBox()->setValue(3);
    window.settle();
    QVERIFY2(window.errorMessage().isEmpty(), qPrintable(window.errorMessage()));
    QCOMPARE(window.snapshot()->evaluation->schedule.pp(), 3);
    QVERIFY(window.snapshot()->plan.costs.stage_overrides.empty());
  }

  // --- the real backend, where it is built -----------------------------------------------------

  void runsTheRealBackendOnTheCpu() {
#ifndef PIPESCOPE_BACKEND_EXECUTABLE
    QSKIP("pipescope-backend is not built here with MPI (its cpu device needs it)");
#else
    const QString backend = QStringLiteral(PIPESCOPE_BACKEND_EXECUTABLE);
    if (!QFileInfo(backend).isExecutable()) QSKIP("the pipescope-backend executable is missing");
    if (QStandardPaths::findExecutable(QStringLiteral("mpirun")).isEmpty())
      QSKIP("mpirun is not on PATH");
    MainWindow window(quietOptions());
    window.show();
    window.settle();
    Plan plan = examplePlan();
    plan.request.pp = 2;
    plan.mesh.pp = 2;
    plan.request.microbatches = 4;
    window.setPlan(plan);
    window.settle();
    RunPanel *panel = window.runPanel();
    panel->setBackendPath(backend);
    panel->setTarget(LaunchTarget::Cpu);
    panel->setSteps(1, 2);
    QVERIFY2(panel->startRun(), qPrintable(panel->statusText()));
    QTRY_VERIFY_WITH_TIMEOUT(!panel->running(), 180000);
    QVERIFY2(panel->statusText().contains(QStringLiteral("Done")),
             qPrintable(panel->statusText() + QLatin1Char('\n') + panel->logText()));
    QCOMPARE(panel->measurement()->steps().size(), std::size_t{2});
    QVERIFY(panel->measurement()->timeFactor() > 0);
    window.settle();
    QVERIFY(window.timeline()->hasMeasuredOverlay());
    QVERIFY(panel->comparison().has_value());
    QVERIFY(std::isfinite(panel->comparison()->makespan_relative_error));
    QVERIFY(QFileInfo::exists(QDir(panel->runDirectory()).filePath(QStringLiteral("trace.json"))));
    // Calibrating to a real measurement re-predicts from it. How close the new prediction comes
    // depends on how steady this machine's op times were, which a test cannot promise (the
    // exact-recovery case is calibratesToAMeasurementUnderOtherCosts); here it must produce one.
    QVERIFY(panel->calibrate());
    window.settle();
    QVERIFY(panel->showingCalibration());
    QVERIFY(std::isfinite(panel->comparison()->makespan_relative_error));
#endif
  }
};

QTEST_MAIN(TestRunPanel)
#include "test_run_panel.moc"
