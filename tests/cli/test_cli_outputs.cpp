// `pipescope simulate`'s outputs as a user meets them: devices and FIFOs written in place,
// symlinks kept, '-' for standard output, all outputs or none, a full disk or a closed pipe on
// standard output.
#include <QtTest>

#include <QFile>
#include <QFileInfo>
#include <QProcess>
#include <QRegularExpression>
#include <QTemporaryDir>

#include <string>

#include <sys/stat.h>

#include <nlohmann/json.hpp>

using nlohmann::json;

namespace {

struct Run {
  int exit_code = -1;
  QProcess::ExitStatus exit_status = QProcess::CrashExit;
  QString out, err;
};

Run pipescope(const QStringList &args) {
  QProcess process;
  process.start(QStringLiteral(PIPESCOPE_CLI), args);
  process.waitForFinished(120000);
  return {process.exitCode(), process.exitStatus(),
          QString::fromUtf8(process.readAllStandardOutput()),
          QString::fromUtf8(process.readAllStandardError())};
}

// A shell line with "$0" standing for pipescope, for redirections and pipes.
Run shell(const QString &line) {
  QProcess process;
  process.start("bash", {"-c", line, QStringLiteral(PIPESCOPE_CLI)});
  process.waitForFinished(120000);
  return {process.exitCode(), process.exitStatus(),
          QString::fromUtf8(process.readAllStandardOutput()),
          QString::fromUtf8(process.readAllStandardError())};
}

QByteArray contentOf(const QString &path) {
  QFile file(path);
  return file.open(QIODevice::ReadOnly) ? file.readAll() : QByteArray("<unreadable>");
}

} // namespace

class TestCliOutputs : public QObject {
  Q_OBJECT

private slots:
  void devNullStaysACharacterDevice() {
    const Run run = pipescope({"simulate", "--csv", "/dev/null", "--trace", "/dev/null"});
    QCOMPARE(run.exit_code, 0);
    struct stat info {};
    QCOMPARE(::lstat("/dev/null", &info), 0);
    QVERIFY(S_ISCHR(info.st_mode));
  }

  // The summary's explanations (why the bubble is not the closed form's, the communication, the
  // speed of light, the published runs it was checked against) wrap at 100 columns, each
  // continuation indented under its text; before, they ran to 265. A unit stays with its number.
  // The rank table's header was 126 columns over rows of 75, its memory column 17 columns left of
  // its label: now the label is short, the figures under it, and a row with its out-of-memory
  // flag stays within 110.
  void summaryLinesWrapAtAHundredColumns() {
    const Run run =
        pipescope({"simulate", "--schedule", "interleaved-1f1b", "--pp", "8", "--microbatches", "8",
                   "--virtual-stages", "4", "--model", "gpt3-175b", "--hardware", "h100-sxm",
                   "--dp", "4", "--tp", "8", "--gpus-per-node", "8"});
    QCOMPARE(run.exit_code, 0);
    const QStringList lines = run.out.split('\n');
    int continued = 0, rows = 0;
    qsizetype memory_column = -1;
    const QRegularExpression rank_row(QStringLiteral("^ *[0-9]+ ")),
        memory(QStringLiteral("[0-9]+\\.[0-9]{2} GiB / "));
    for (const QString &line : lines) {
      if (line.startsWith(QStringLiteral("rank  busy"))) {
        memory_column = line.indexOf(QStringLiteral("peak memory / capacity"));
        QVERIFY(memory_column > 0 && line.size() <= 100);
        continue;
      }
      if (rank_row.match(line).hasMatch()) {
        ++rows;
        QVERIFY2(line.size() <= 110, qPrintable(line));
        QCOMPARE(line.indexOf(memory), memory_column);
        QVERIFY(line.endsWith(QStringLiteral("OUT OF MEMORY"))); // 94 GiB on an 80 GB H100
        continue;
      }
      QVERIFY2(line.size() <= 102, qPrintable(line));
      QVERIFY2(!line.endsWith(QStringLiteral(" 0.0")) && !line.trimmed().startsWith('%'),
               qPrintable(line));
      if (line.startsWith(QString(19, ' ')) && line.at(19) != ' ') ++continued;
    }
    QVERIFY(run.out.contains(QStringLiteral("not here:")));
    QVERIFY(run.out.contains(QStringLiteral("checked against:")));
    QVERIFY(continued > 0); // the closed form's source or a departure took a second line
    QCOMPARE(rows, 8);
  }

  void aSymlinkedOutputStaysALink() {
    QTemporaryDir dir;
    const QString target = dir.filePath("schedule.csv");
    const QString link = dir.filePath("link.csv");
    QVERIFY(QFile(target).open(QIODevice::WriteOnly));
    QVERIFY(QFile::link("schedule.csv", link));
    const Run run = pipescope({"simulate", "--pp", "2", "--microbatches", "2", "--csv", link});
    QCOMPARE(run.exit_code, 0);
    QVERIFY(QFileInfo(link).isSymLink());
    QCOMPARE(QFileInfo(link).symLinkTarget(), QFileInfo(target).absoluteFilePath());
    QVERIFY(contentOf(target).startsWith("0F0,")); // the target got the schedule
  }

  void dashIsStandardOutput_data() {
    QTest::addColumn<QString>("flag");
    QTest::addColumn<QString>("expected_start");
    QTest::newRow("--csv") << "--csv"
                           << "0F0,";
    QTest::newRow("--trace") << "--trace"
                             << "{\"format\":\"pipescope.trace\"";
    QTest::newRow("--chrome-trace") << "--chrome-trace"
                                    << "{\"displayTimeUnit\"";
    QTest::newRow("--save-plan") << "--save-plan"
                                 << "{";
  }
  void dashIsStandardOutput() {
    QFETCH(QString, flag);
    QFETCH(QString, expected_start);
    const Run run = pipescope({"simulate", flag, "-"});
    QCOMPARE(run.exit_code, 0);
    QVERIFY2(run.out.startsWith(expected_start), qPrintable(run.out.left(80)));
    QVERIFY(run.err.contains("makespan")); // the summary moved out of the data's way
    if (flag != "--csv") QVERIFY(json::parse(run.out.toStdString()).is_object());
  }

  void twoOutputsOnStandardOutputAreRefused() {
    const Run run = pipescope({"simulate", "--csv", "-", "--json"});
    QCOMPARE(run.exit_code, 2);
    QVERIFY(run.err.contains("standard output"));
    QVERIFY(run.out.isEmpty());
  }

  void aFailedOutputLeavesNoneOfThem_data() {
    QTest::addColumn<QString>("failing");
    QTest::addColumn<QString>("reason");
    QTest::newRow("a full device") << "/dev/full"
                                   << "No space left on device";
    QTest::newRow("a missing folder") << "@DIR@missing/x.csv"
                                      << "No such file or directory";
  }
  void aFailedOutputLeavesNoneOfThem() {
    QFETCH(QString, failing);
    QFETCH(QString, reason);
    QTemporaryDir dir;
    failing.replace("@DIR@", dir.path() + "/");
    const QString trace = dir.filePath("trace.json");
    const QString chrome = dir.filePath("chrome.json");
    {
      QFile old(trace);
      QVERIFY(old.open(QIODevice::WriteOnly));
      old.write("earlier");
    }
    const Run run =
        pipescope({"simulate", "--trace", trace, "--chrome-trace", chrome, "--csv", failing});
    QCOMPARE(run.exit_code, 2);
    QVERIFY2(run.err.contains(failing) && run.err.contains(reason), qPrintable(run.err));
    QCOMPARE(run.err.count('\n'), 1); // one message
    QCOMPARE(contentOf(trace), QByteArray("earlier"));
    QVERIFY(!QFileInfo::exists(chrome));
    QCOMPARE(QDir(dir.path()).entryList(QDir::AllEntries | QDir::Hidden | QDir::NoDotAndDotDot),
             QStringList{"trace.json"}); // no temporaries left
  }

  void allOutputsAppearTogether() {
    QTemporaryDir dir;
    const Run run = pipescope({"simulate", "--trace", dir.filePath("t.json"), "--chrome-trace",
                               dir.filePath("c.json.gz"), "--csv", dir.filePath("s.csv"),
                               "--save-plan", dir.filePath("p.json")});
    QCOMPARE(run.exit_code, 0);
    for (const char *name : {"t.json", "c.json.gz", "s.csv", "p.json"})
      QVERIFY2(QFileInfo(dir.filePath(name)).size() > 0, name);
    const QByteArray gz = contentOf(dir.filePath("c.json.gz"));
    QCOMPARE(static_cast<unsigned char>(gz[0]), 0x1f);
    QCOMPARE(static_cast<unsigned char>(gz[1]), 0x8b);
    const json trace = json::parse(contentOf(dir.filePath("t.json")).toStdString());
    QCOMPARE(trace["ops"].size(), std::size_t{64}); // 1F1B, P=4, M=8
  }

  void standardOutputOnAFullDisk_data() {
    QTest::addColumn<QString>("options");
    QTest::newRow("text summary") << "";
    QTest::newRow("--json") << "--json";
    QTest::newRow("--json --ops") << "--json --ops";
    QTest::newRow("--trace -") << "--trace -";
  }
  void standardOutputOnAFullDisk() {
    QFETCH(QString, options);
    const Run run = shell("\"$0\" simulate " + options + " > /dev/full");
    QCOMPARE(run.exit_status, QProcess::NormalExit);
    QCOMPARE(run.exit_code, 2);
    QVERIFY2(run.err.endsWith("pipescope: cannot write to standard output: No space left on "
                              "device\n"),
             qPrintable(run.err));
    QCOMPARE(run.err.count("cannot write"), 1);
  }

  void aClosedPipeIsAQuietEnd() {
    // About 2 MB of ops: far more than a pipe holds, so pipescope is still writing when head
    // leaves. A SIGPIPE death would make pipefail report 141.
    const Run run = shell("set -o pipefail; \"$0\" simulate --json --ops --pp 16 "
                          "--microbatches 1024 | head -c 100 > /dev/null");
    QCOMPARE(run.exit_code, 0);
    QVERIFY2(run.err.isEmpty(), qPrintable(run.err));
  }

  void jsonOpsStreamedAreComplete() {
    const Run run = pipescope({"simulate", "--json", "--ops", "--schedule", "dualpipev", "--pp",
                               "4", "--microbatches", "10"});
    QCOMPARE(run.exit_code, 0);
    const json out = json::parse(run.out.toStdString());
    QCOMPARE(out["ops"].size(), out["ops_count"].get<std::size_t>());
    bool pair = false;
    for (const auto &op : out["ops"]) {
      QVERIFY(op["end"].get<double>() >= op["start"].get<double>());
      pair = pair || op.contains("backward_stage");
    }
    QVERIFY(pair); // overlapped pairs carry their backward half
    QVERIFY(out.contains("makespan") && out.contains("ranks"));
  }
};

QTEST_GUILESS_MAIN(TestCliOutputs)
#include "test_cli_outputs.moc"
