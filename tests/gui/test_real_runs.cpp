// Real training runs in the explorer, offscreen: File > Import real run on the committed PyTorch
// traces (tests/data/torch_runs, torch 2.15.0) loads each run's plan and draws the run over its
// prediction with the errors tables, Calibrate works on it, a run the importer refuses says why,
// and Cancel leaves the window as it was. Bubble causes: hovering an idle interval of a 1F1B plan
// names what the rank waits for; the critical path's ops sum to the makespan. The executable's
// --import and --critical-path flags render a screenshot.
#include <QAction>
#include <QComboBox>
#include <QLabel>
#include <QProcess>
#include <QRegularExpression>
#include <QSignalSpy>
#include <QStandardPaths>
#include <QTableView>
#include <QTemporaryDir>
#include <QtTest>

#include <nlohmann/json.hpp>

#include "engine/bubbles.h"
#include "engine/json_io.h"
#include "gui/run/run_session.h"
#include "gui/widgets/document_actions.h"
#include "gui/widgets/main_window.h"
#include "gui/widgets/run_panel.h"
#include "gui/widgets/timeline_widget.h"
#include "tests/gui/window_test_support.h"

using namespace pipescope;
using namespace pipescope::gui;
using namespace pipescope::gui::testing;
using nlohmann::json;

namespace {

const QString kRuns = QStringLiteral(PIPESCOPE_TORCH_RUNS);

// The window at its default size with one of tests/data/torch_runs drawn over its plan.
bool showRunAt1280(MainWindow &window, const QString &run) {
  window.resize(1280, 800);
  window.show();
  window.settle();
  const bool imported = window.importRealRun({kRuns + QLatin1Char('/') + run});
  window.settle();
  return imported;
}

json runDescription(const QString &run) {
  const QString path = kRuns + QLatin1Char('/') + run + QStringLiteral("/run.json");
  auto text = readTextFile(path.toStdString());
  if (!text) qFatal("%s", text.error().message.c_str());
  return json::parse(*text);
}

// The op count in a kind table's row header: "F forward (32 ops)" -> 32.
int opsInHeader(const QString &header) {
  const auto match = QRegularExpression(QStringLiteral("\\((\\d+) ops?\\)")).match(header);
  return match.hasMatch() ? match.captured(1).toInt() : -1;
}

} // namespace

class TestRealRuns : public QObject {
  Q_OBJECT
private slots:
  void initTestCase() { useTestSettings("test_gui_real_runs"); }

  // Each committed run with action labels: its plan is shown (P, M, V from run.json), the run is
  // drawn over the prediction, the Run tab's tables hold the errors and count the schedule's ops,
  // and Calibrate fits the plan to it.
  void importsEachTorchRun_data() {
    QTest::addColumn<QString>("run");
    for (const char *run : {"gpipe-p2-m4", "gpipe-p4-m4", "interleaved-1f1b-p2-m4",
                            "interleaved-1f1b-p4-m4", "looped-bfs-p2-m4", "interleaved-zb-p2-m4",
                            "zb-v-p2-m4", "dualpipev-p2-m4", "dualpipev-p4-m8"})
      QTest::newRow(run) << QString::fromLatin1(run);
  }
  void importsEachTorchRun() {
    QFETCH(QString, run);
    const json description = runDescription(run);
    MainWindow window(quietOptions());
    window.show();
    window.settle();
    QVERIFY2(window.importRealRun({QString(kRuns + QLatin1Char('/') + run)}),
             qPrintable(window.runPanel()->statusText()));
    const Schedule &schedule = window.snapshot()->evaluation->schedule;
    QCOMPARE(schedule.pp(), description["pp"].get<int>());
    QCOMPARE(schedule.microbatches(), description["microbatches"].get<int>());
    QCOMPARE(schedule.chunks(), description["virtual_stages"].get<int>());
    QVERIFY(window.runPanel()->measurementApplies());
    QCOMPARE(static_cast<int>(window.runPanel()->measurement()->steps().size()),
             description["profiled_steps"].get<int>());
    QVERIFY(window.timeline()->hasMeasuredOverlay());
    QVERIFY(window.timeline()->measuredDrawList().itemCount() > 0);
    QCOMPARE(window.tabs()->currentWidget(), static_cast<QWidget *>(window.runPanel()));

    // The errors tables: step time, bubble; one row per op kind whose counts sum to the ops.
    QVERIFY(window.runPanel()->comparison().has_value());
    QTableView *steps = window.runPanel()->stepTable();
    QVERIFY(steps->model()->rowCount() >= 1);
    QVERIFY(!steps->model()->data(steps->model()->index(0, 0)).toString().isEmpty());
    QTableView *kinds = window.runPanel()->kindTable();
    QVERIFY(kinds->model()->rowCount() >= 2);
    int counted = 0;
    for (int row = 0; row < kinds->model()->rowCount(); ++row) {
      const QString header = kinds->model()->headerData(row, Qt::Vertical).toString();
      const int ops = opsInHeader(header);
      QVERIFY2(ops > 0, qPrintable(header));
      counted += ops;
    }
    std::size_t records = 0; // an overlapped pair is measured as its two halves
    for (const auto &rank : schedule.ranks)
      for (const Op &op : rank)
        records += op.kind == OpKind::OverlappedPair ? 2 : 1;
    QCOMPARE(static_cast<std::size_t>(counted), records);

    // Side by side, hovering the measured step's longest idle interval names its cause there.
    window.setOverlayMode(OverlayMode::SideBySide);
    window.settle();
    const auto measured = window.runPanel()->session()->measuredBubbles();
    QVERIFY(measured);
    const IdleInterval *longest = nullptr;
    int longest_rank = -1;
    for (std::size_t r = 0; r < measured->ranks.size(); ++r)
      for (const IdleInterval &interval : measured->ranks[r].intervals)
        if (!longest || interval.durationUs() > longest->durationUs()) {
          longest = &interval;
          longest_rank = static_cast<int>(r);
        }
    QVERIFY(longest);
    TimelineWidget *timeline = window.timeline();
    QCOMPARE(timeline->model().sections().size(), std::size_t{2});
    const double middle = (longest->start_us + longest->end_us) / 2 - measured->step_start_us;
    const QPoint point(
        qRound(timeline->mapping().mapTimeToX(middle)),
        qRound(timeline->rowCenterY(timeline->model().sectionFirstRow(1) + longest_rank)));
    const QString hover = timeline->hoverTextAt(point);
    QVERIFY2(hover.contains(QStringLiteral("(measured)")), qPrintable(hover));
    QVERIFY2(hover.contains(QString::fromStdString(std::string(bubbleCauseName(longest->cause)))),
             qPrintable(hover));
    window.setOverlayMode(OverlayMode::Overlay);
    window.settle();

    QVERIFY2(window.runPanel()->calibrate(), qPrintable(window.runPanel()->statusText()));
    window.settle();
    QVERIFY(window.runPanel()->measurementApplies());
    QVERIFY(window.runPanel()->showingCalibration());
  }

  // A trace the importer refuses (PyTorch's single-stage 1F1B labels no actions): the Run tab
  // says why and the plan shown stays.
  void aRefusedRunSaysWhy() {
    MainWindow window(quietOptions());
    window.show();
    window.settle();
    const Plan before = window.snapshot()->plan;
    QVERIFY(!window.importRealRun({kRuns + QStringLiteral("/no-pipeline")}));
    QVERIFY2(window.runPanel()->statusText().contains(QStringLiteral("Not imported")),
             qPrintable(window.runPanel()->statusText()));
    QVERIFY(!window.runPanel()->hasMeasurement());
    QCOMPARE(window.snapshot()->plan.request.pp, before.request.pp);
    QCOMPARE(window.snapshot()->plan.request.microbatches, before.request.microbatches);
  }

  // Cancel: the import ends unimported, and nothing in the window changes.
  void cancelLeavesTheWindowUnchanged() {
    MainWindow window(quietOptions());
    window.show();
    window.settle();
    const Plan before = window.snapshot()->plan;
    const QString status = window.runPanel()->statusText();
    QSignalSpy finished(window.documents(), &DocumentActions::realRunImportFinished);
    QSignalSpy imported(window.documents(), &DocumentActions::realRunImported);
    QVERIFY(window.documents()->startRealRunImport({kRuns + QStringLiteral("/dualpipev-p4-m8")}));
    QVERIFY(window.documents()->importingRealRun());
    // A second import while one is under way is refused.
    QVERIFY(!window.documents()->startRealRunImport({kRuns + QStringLiteral("/gpipe-p2-m4")}));
    window.documents()->cancelRealRunImport();
    window.documents()->waitForRealRunImport();
    window.settle();
    QCOMPARE(finished.count(), 1);
    QCOMPARE(finished.first().first().toBool(), false);
    QCOMPARE(imported.count(), 0);
    QVERIFY(!window.documents()->importingRealRun());
    QVERIFY(!window.runPanel()->hasMeasurement());
    QCOMPARE(window.runPanel()->statusText(), status);
    QVERIFY(window.snapshot()->plan.costs == before.costs);
    QCOMPARE(window.snapshot()->plan.request.pp, before.request.pp);
    QCOMPARE(window.snapshot()->plan.request.microbatches, before.request.microbatches);
    // And the next import works.
    QVERIFY(window.importRealRun({kRuns + QStringLiteral("/gpipe-p2-m4")}));
  }

  // With a run drawn, the transport bar gains the overlay and step boxes; at the default window
  // size they got less than their width ("Latest step" cut to "Latest ste").
  void theMeasurementsBoxesFitTheBar() {
    MainWindow window(quietOptions());
    QVERIFY(showRunAt1280(window, QStringLiteral("gpipe-p2-m4")));
    for (const char *name : {"overlay_mode", "measured_step"}) {
      auto *box = window.findChild<QComboBox *>(QLatin1String(name));
      QVERIFY2(box && box->isVisible(), name);
      QVERIFY2(box->width() >= box->sizeHint().width(),
               qPrintable(QStringLiteral("%1: %2 of %3 px")
                              .arg(QLatin1String(name))
                              .arg(box->width())
                              .arg(box->sizeHint().width())));
    }
  }

  // DualPipeV's five colours with a run and its critical path drawn are more than one line at
  // 1280 px: the legend wraps between them instead of cutting off the last ("F&B overlapped").
  void aLongLegendWrapsBetweenItsColours() {
    MainWindow window(quietOptions());
    QVERIFY(showRunAt1280(window, QStringLiteral("dualpipev-p4-m8")));
    window.setCriticalPathShown(true);
    window.settle();
    auto *legend = window.findChild<QLabel *>(QStringLiteral("legend"));
    QVERIFY(legend);
    QVERIFY(legend->wordWrap());
    for (const char *entry :
         {"critical&nbsp;path", "overlapped&nbsp;pair", "measured", "idle&nbsp;(bubble)"})
      QVERIFY2(legend->text().contains(QLatin1String(entry)), entry);
    QVERIFY(!legend->text().contains(QStringLiteral("wheel zoom")));
  }

  // Hovering a bubble of the example 1F1B plan (P=4, M=8) names its cause: rank 3's leading idle
  // is fill, waiting for F(2,0) on rank 2, a chain started by F(0,0) on rank 0. Hovering an op
  // still describes the op.
  void hoverNamesTheBubblesCause() {
    MainWindow window(quietOptions());
    window.resize(1280, 800);
    window.show();
    window.settle();
    TimelineWidget *timeline = window.timeline();
    const auto analysis = explainBubbles(*window.snapshot()->evaluation);
    QVERIFY(analysis.ok());
    const IdleInterval &leading = analysis->ranks[3].intervals.front();
    QCOMPARE(leading.cause, BubbleCause::Fill);
    const double middle = (leading.start_us + leading.end_us) / 2;
    const QPoint point(qRound(timeline->mapping().mapTimeToX(middle)),
                       qRound(timeline->rowCenterY(3)));
    QSignalSpy hovered(timeline, &TimelineWidget::hoverTextChanged);
    QTest::mouseMove(timeline, point);
    QVERIFY(!hovered.isEmpty());
    const QString text = hovered.last().first().toString();
    QVERIFY2(text.contains(QStringLiteral("fill: waits for F(2,0) on rank 2")), qPrintable(text));
    QVERIFY2(text.contains(QStringLiteral("F(0,0) on rank 0")), qPrintable(text));
    QVERIFY2(text.contains(QStringLiteral("idle")), qPrintable(text));

    // The first op of rank 0 is an op, not a bubble.
    const auto &first = window.snapshot()->evaluation->simulation.op_times[0][0];
    const QPoint on_op(qRound(timeline->mapping().mapTimeToX((first.start_us + first.end_us) / 2)),
                       qRound(timeline->rowCenterY(0)));
    const QString op_text = timeline->hoverTextAt(on_op);
    QVERIFY2(!op_text.isEmpty() && !op_text.contains(QStringLiteral("idle")), qPrintable(op_text));
  }

  // The critical path's ops cover the step: with free transfers their durations sum to the
  // makespan, they run on every rank, and the toggle survives a new plan (recomputed for it).
  void criticalPathSumsToTheMakespan() {
    MainWindow window(quietOptions());
    window.show();
    window.settle();
    QVERIFY(!window.criticalPathShown());
    // View > Critical path (Ctrl+K) is the toggle.
    QAction *toggle = nullptr;
    for (QAction *action : window.actions())
      if (action->text() == QStringLiteral("&Critical path")) toggle = action;
    QVERIFY(toggle && toggle->isCheckable());
    toggle->trigger();
    QVERIFY(window.criticalPathShown());
    QVERIFY(window.timeline()->criticalPathShown());
    const auto check = [&window] {
      const auto &evaluation = *window.snapshot()->evaluation;
      const auto ops = window.timeline()->criticalPathOps(0);
      QVERIFY(!ops.empty());
      double sum = 0;
      std::vector<int> ranks(static_cast<std::size_t>(evaluation.schedule.pp()), 0);
      for (const auto &op : ops) {
        const auto &timing = window.timeline()->model().timing(op);
        sum += timing.end_us - timing.start_us;
        ranks[static_cast<std::size_t>(op.rank)] = 1;
      }
      QCOMPARE(sum, evaluation.simulation.makespan_us);
      QCOMPARE(std::count(ranks.begin(), ranks.end(), 1),
               static_cast<std::ptrdiff_t>(ranks.size()));
    };
    check();
    Plan plan = window.snapshot()->plan;
    plan.request.name = "gpipe";
    plan.request.microbatches = 6;
    window.setPlan(plan);
    window.settle();
    check();
    QVERIFY(!window.renderWindow().isNull());
    window.setCriticalPathShown(false);
    QVERIFY(!window.timeline()->criticalPathShown());
  }

  // The executable: --import draws a real run, --critical-path highlights; a run the importer
  // refuses exits non-zero with the reason and writes no picture.
  void theExecutableImportsARun() {
    QTemporaryDir dir;
    QString output;
    const QString shot = dir.filePath(QStringLiteral("imported.png"));
    QCOMPARE(runExplorer({QStringLiteral("--screenshot"), shot, QStringLiteral("--import"),
                          kRuns + QStringLiteral("/interleaved-1f1b-p2-m4"),
                          QStringLiteral("--critical-path"), QStringLiteral("--overlay"),
                          QStringLiteral("side")},
                         &output),
             0);
    QVERIFY2(!QImage(shot).isNull(), qPrintable(output));
    const QString refused = dir.filePath(QStringLiteral("refused.png"));
    QVERIFY(runExplorer({QStringLiteral("--screenshot"), refused, QStringLiteral("--import"),
                         kRuns + QStringLiteral("/no-pipeline")},
                        &output) != 0);
    QVERIFY2(output.contains(QStringLiteral("Not imported")), qPrintable(output));
    QVERIFY(!QFileInfo::exists(refused));
  }
};

QTEST_MAIN(TestRealRuns)
#include "test_real_runs.moc"
