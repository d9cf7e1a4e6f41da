// pipescope-gui run as a person or a CI job would, offscreen: a measured trace drawn into a
// screenshot (and another plan's refused), and the plan options, which are the CLI's.
#include <QFileInfo>
#include <QImage>
#include <QTemporaryDir>
#include <QtTest>

#include "engine/trace_file.h"
#include "gui/explorer/explorer_snapshot.h"
#include "tests/gui/run_test_support.h"
#include "tests/gui/window_test_support.h"

using namespace pipescope;
using namespace pipescope::gui;
using namespace pipescope::gui::testing;

class TestExecutable : public QObject {
  Q_OBJECT
private slots:
  void initTestCase() { useTestSettings("test_gui_executable"); }

  void theExecutableShowsAMeasuredTrace() {
    QTemporaryDir dir;
    const QString trace = dir.filePath(QStringLiteral("measured.json"));
    QVERIFY(saveTrace(trace.toStdString(), measuredTrace(examplePlan(), 2, 1)));
    const auto run = runExplorer;
    QString output;
    const QString shot = dir.filePath(QStringLiteral("side.png"));
    QCOMPARE(
        run({QStringLiteral("--screenshot"), shot, QStringLiteral("--measured"), trace,
             QStringLiteral("--overlay"), QStringLiteral("side"), QStringLiteral("--calibrate")},
            &output),
        0);
    QVERIFY2(!QImage(shot).isNull(), qPrintable(output));
    // A trace of another plan: a message and a non-zero exit, no picture.
    const QString refused = dir.filePath(QStringLiteral("refused.png"));
    QVERIFY(run({QStringLiteral("--screenshot"), refused, QStringLiteral("--measured"), trace,
                 QStringLiteral("--microbatches"), QStringLiteral("4")},
                &output) != 0);
    QVERIFY2(output.contains(QStringLiteral("another plan")), qPrintable(output));
    QVERIFY(!QFileInfo::exists(refused));
  }

  void theExecutablesPlanOptionsAreTheClis() {
    // The plan options go through the engine's planFromOptions, as `pipescope simulate`'s do:
    // the same refusals, word for word, and exit 2 with no picture.
    QTemporaryDir dir;
    const QString shot = dir.filePath(QStringLiteral("shot.png"));
    QString output;
    QCOMPARE(runExplorer({QStringLiteral("--screenshot"), shot, QStringLiteral("--pp"),
                          QStringLiteral("0")},
                         &output),
             2);
    QVERIFY2(output.contains(QStringLiteral("pipescope-gui: --pp must be between 1 and 16384, "
                                            "got 0")),
             qPrintable(output));
    QCOMPARE(runExplorer({QStringLiteral("--screenshot"), shot, QStringLiteral("--model"),
                          QStringLiteral("llama3-8b")},
                         &output),
             2);
    QVERIFY2(output.contains(QStringLiteral("--model and --hardware go together")),
             qPrintable(output));
    QVERIFY(!QFileInfo::exists(shot));
    // Accepted options set the plan up; --chunks is --virtual-stages.
    QCOMPARE(runExplorer({QStringLiteral("--screenshot"), shot, QStringLiteral("--schedule"),
                          QStringLiteral("interleaved-1f1b"), QStringLiteral("--chunks"),
                          QStringLiteral("2"), QStringLiteral("--pp"), QStringLiteral("2")},
                         &output),
             0);
    QVERIFY2(!QImage(shot).isNull(), qPrintable(output));
    QVERIFY2(!output.contains(QStringLiteral("the window shows")), qPrintable(output));
  }

  void theExecutableOpensAPublishedRun() {
    // --published SET/ID opens the row as File > Open published run does; a row or set that is
    // not shipped is one line naming what there is, exit 2, no picture.
    QTemporaryDir dir;
    const QString shot = dir.filePath(QStringLiteral("published.png"));
    QString output;
    for (const auto &[value, says] :
         {std::pair{"megatron-core-h100/gpt-2", "its rows are gpt-1.7b"},
          std::pair{"no-such-set/gpt-70b", "the shipped sets are"},
          std::pair{"gpt-70b", "expected SET/ID"}}) {
      QCOMPARE(runExplorer({QStringLiteral("--screenshot"), shot, QStringLiteral("--published"),
                            QString::fromLatin1(value)},
                           &output),
               2);
      QVERIFY2(output.contains(QString::fromLatin1(says)), qPrintable(output));
    }
    QVERIFY(!QFileInfo::exists(shot));
    QCOMPARE(runExplorer({QStringLiteral("--screenshot"), shot, QStringLiteral("--published"),
                          QStringLiteral("megatron-core-h100/gpt-70b")},
                         &output),
             0);
    QVERIFY2(!QImage(shot).isNull(), qPrintable(output));
  }
};

QTEST_MAIN(TestExecutable)
#include "test_executable.moc"
