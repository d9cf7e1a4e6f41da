// The `pipescope` command line, run as a user runs it: outputs, files and exit codes.
#include <QtTest>

#include <QProcess>
#include <QTemporaryDir>

#include <nlohmann/json.hpp>

using nlohmann::json;

namespace {

struct Run {
  int exit_code = -1;
  QString out, err;
};

Run pipescope(const QStringList &args) {
  QProcess process;
  process.start(QStringLiteral(PIPESCOPE_CLI), args);
  process.waitForFinished(120000);
  return {process.exitCode(), QString::fromUtf8(process.readAllStandardOutput()),
          QString::fromUtf8(process.readAllStandardError())};
}

json simulateJson(const QStringList &args) {
  const Run run =
      pipescope(QStringList{QStringLiteral("simulate"), QStringLiteral("--json")} + args);
  if (run.exit_code != 0) qFatal("simulate failed: %s", qPrintable(run.err));
  return json::parse(run.out.toStdString());
}

} // namespace

class TestCli : public QObject {
  Q_OBJECT

private slots:
  // Seed article 000's "GPipe Bubble Fraction: Effect of Micro-batch Count M" table, rows M,
  // columns P = 4, 8, 16, 32. Its P=16, M=32 cell (32.6 %) is a slip: (P-1)/(M+P-1) = 15/47 =
  // 31.9 %, which is what the simulation gives.
  void gpipeTableOfSeedArticleIsReproduced() {
    const Run run = pipescope({"table", "--schedules", "gpipe", "--format", "json"});
    QCOMPARE(run.exit_code, 0);
    const json tables = json::parse(run.out.toStdString());
    const int pps[] = {4, 8, 16, 32};
    const int ms[] = {4, 8, 16, 32, 64, 128};
    const double article[6][4] = {{42.9, 63.6, 78.9, 88.6}, {27.3, 46.7, 65.2, 79.5},
                                  {15.8, 30.4, 48.4, 66.0}, {8.6, 17.9, 32.6, 49.2},
                                  {4.5, 9.9, 19.0, 32.6},   {2.3, 5.2, 10.5, 19.5}};
    int compared = 0;
    for (const auto &cell : tables[0]["cells"]) {
      const int p = cell["pp"], m = cell["microbatches"];
      const int row = int(std::find(std::begin(ms), std::end(ms), m) - std::begin(ms));
      const int column = int(std::find(std::begin(pps), std::end(pps), p) - std::begin(pps));
      const double percent = cell["bubble_fraction"].get<double>() * 100;
      if (p == 16 && m == 32) {
        QVERIFY(std::abs(percent - 31.9) < 0.05);
        QVERIFY(std::abs(percent - article[row][column]) > 0.5); // the article's slip
      } else {
        QVERIFY2(std::abs(percent - article[row][column]) < 0.051,
                 qPrintable(QString("P=%1 M=%2: %3 vs %4")
                                .arg(p)
                                .arg(m)
                                .arg(percent)
                                .arg(article[row][column])));
      }
      QCOMPARE(cell["analytic"].get<double>(), cell["bubble_fraction"].get<double>());
      ++compared;
    }
    QCOMPARE(compared, 24);
    const Run text = pipescope({"table"});
    QVERIFY(text.out.contains(QStringLiteral("M=32          8.6     17.9     31.9     49.2")));
  }

  void tableFormats() {
    const Run csv = pipescope({"table", "--schedules", "1f1b,interleaved-1f1b", "--pp", "4",
                               "--microbatches", "8,16", "--format", "csv"});
    QCOMPARE(csv.exit_code, 0);
    QCOMPARE(csv.out.split('\n', Qt::SkipEmptyParts).size(), 5);
    QVERIFY(csv.out.startsWith(
        QStringLiteral("schedule,pp,microbatches,virtual_stages,bubble_fraction,analytic")));
  }

  void simulateJsonHasTheDocumentedKeys() {
    const json out =
        simulateJson({"--schedule", "zb-h1", "--pp", "4", "--microbatches", "8", "--ops"});
    for (const char *key : {"schedule", "pp", "microbatches", "virtual_stages", "makespan",
                            "bubble_fraction", "bubble_ratio", "analytic", "ranks", "ops"})
      QVERIFY2(out.contains(key), key);
    QCOMPARE(out["ranks"].size(), std::size_t(4));
    for (const char *key : {"busy", "idle", "peak_inflight", "peak_inflight_microbatches"})
      QVERIFY2(out["ranks"][0].contains(key), key);
    QCOMPARE(out["ops"].size(), std::size_t(4 * 8 * 3));
    for (const char *key : {"rank", "kind", "stage", "microbatch", "start", "end"})
      QVERIFY2(out["ops"][0].contains(key), key);
    QVERIFY(out["analytic"].contains("bubble_fraction"));
  }

  void defaultCostsAreUnitForwardAndDoubleBackward() {
    const json out = simulateJson({"--schedule", "1f1b", "--pp", "4", "--microbatches", "8"});
    QCOMPARE(out["makespan"].get<double>(), 33.0); // (M+P-1)(F+B) = 11 * 3
    const json slow =
        simulateJson({"--schedule", "1f1b", "--pp", "4", "--microbatches", "8", "--p2p-latency",
                      "1", "--p2p-bandwidth", "10", "--activation-bytes", "10000"});
    QVERIFY(slow["makespan"].get<double>() > 33.0);
    QVERIFY(slow["analytic"]["makespan"].get<double>() == 33.0);
  }

  void csvExportValidatesAndSimulatesTheSame() {
    QTemporaryDir dir;
    const QString csv = dir.filePath(QStringLiteral("zbv.csv"));
    const json original =
        simulateJson({"--schedule", "zb-v", "--pp", "4", "--microbatches", "8", "--csv", csv});
    const Run validate = pipescope({"validate", csv});
    QCOMPARE(validate.exit_code, 0);
    QVERIFY2(validate.out.contains(QStringLiteral("valid custom schedule")),
             qPrintable(validate.out));
    QVERIFY(validate.out.contains(QStringLiteral("v-shape placement")));
    const json custom = simulateJson({"--custom", csv});
    QCOMPARE(custom["makespan"].get<double>(), original["makespan"].get<double>());
    QVERIFY(custom["analytic"].is_null());
  }

  void savedPlanReproducesTheRun() {
    QTemporaryDir dir;
    const QString plan = dir.filePath(QStringLiteral("plan.json"));
    const json first =
        simulateJson({"--schedule", "interleaved-1f1b", "--pp", "4", "--microbatches", "8",
                      "--virtual-stages", "2", "--forward", "1.5", "--save-plan", plan});
    const json again = simulateJson({"--plan", plan});
    QCOMPARE(again["makespan"].get<double>(), first["makespan"].get<double>());
    QCOMPARE(again["schedule"].get<std::string>(), std::string("interleaved-1f1b"));
    QCOMPARE(pipescope({"validate", plan}).exit_code, 0);
    // Options after --plan override it.
    const json other =
        simulateJson({"--plan", plan, "--schedule", "gpipe", "--virtual-stages", "1"});
    QCOMPARE(other["schedule"].get<std::string>(), std::string("gpipe"));
  }

  void chromeTraceAndTraceFiles() {
    QTemporaryDir dir;
    const QString chrome = dir.filePath(QStringLiteral("c.json"));
    const QString trace = dir.filePath(QStringLiteral("t.json"));
    const Run run = pipescope({"simulate", "--schedule", "dualpipev", "--pp", "4", "--microbatches",
                               "8", "--chrome-trace", chrome, "--trace", trace});
    QCOMPARE(run.exit_code, 0);
    QFile file(chrome);
    QVERIFY(file.open(QIODevice::ReadOnly));
    const json events = json::parse(file.readAll().toStdString());
    QVERIFY(events["traceEvents"].size() > 100);
    QFile t(trace);
    QVERIFY(t.open(QIODevice::ReadOnly));
    QCOMPARE(json::parse(t.readAll().toStdString())["format"].get<std::string>(),
             std::string("pipescope.trace"));
  }

  void badUsageExitsTwoWithOneLine_data() {
    QTest::addColumn<QStringList>("args");
    QTest::addColumn<QString>("expected");
    QTest::newRow("no command") << QStringList{} << "usage";
    QTest::newRow("unknown command") << QStringList{"simulat"} << "unknown command 'simulat'";
    QTest::newRow("unknown schedule")
        << QStringList{"simulate", "--schedule", "zb-h3"} << "unknown schedule 'zb-h3'";
    QTest::newRow("not a number") << QStringList{"simulate", "--pp", "four"}
                                  << "--pp expects an integer, got 'four'";
    QTest::newRow("unknown option")
        << QStringList{"simulate", "--ppp", "4"} << "unknown option --ppp";
    QTest::newRow("missing value")
        << QStringList{"simulate", "--pp"} << "option --pp needs a value";
    QTest::newRow("impossible") << QStringList{"simulate", "--schedule",     "dualpipe", "--pp",
                                               "3",        "--microbatches", "6"}
                                << "dualpipe";
    QTest::newRow("absurd") << QStringList{"simulate", "--pp", "99999999"}
                            << "--pp must be between 1 and 16384";
    QTest::newRow("missing file") << QStringList{"validate", "/nonexistent/plan.json"}
                                  << "cannot open '/nonexistent/plan.json'";
    QTest::newRow("negative time")
        << QStringList{"simulate", "--forward", "-2"} << "--forward must be between 0";
    QTest::newRow("bandwidth without bytes") << QStringList{"simulate", "--p2p-bandwidth", "10"}
                                             << "--p2p-bandwidth needs --activation-bytes";
  }
  void badUsageExitsTwoWithOneLine() {
    QFETCH(QStringList, args);
    QFETCH(QString, expected);
    const Run run = pipescope(args);
    QCOMPARE(run.exit_code, 2);
    QVERIFY2(run.err.contains(expected), qPrintable(run.err));
    if (!args.isEmpty()) QCOMPARE(run.err.count('\n'), 1);
  }

  void deadlockedCustomScheduleShowsTheGrid() {
    QTemporaryDir dir;
    const QString csv = dir.filePath(QStringLiteral("dead.csv"));
    QFile file(csv);
    QVERIFY(file.open(QIODevice::WriteOnly));
    file.write("0F0,0B0,0F1,0B1\n1F1,1B1,1F0,1B0\n");
    file.close();
    const Run run = pipescope({"validate", csv});
    QCOMPARE(run.exit_code, 2);
    QVERIFY(run.err.startsWith(QStringLiteral("pipescope: ")));
    QVERIFY(run.err.contains(QStringLiteral("the schedule deadlocks")));
    QVERIFY(run.err.contains(QStringLiteral("[1F1]")));
  }

  void schedulesAndBenchRun() {
    const Run schedules = pipescope({"schedules"});
    QCOMPARE(schedules.exit_code, 0);
    for (const char *name : {"naive", "gpipe", "1f1b", "interleaved-1f1b", "zb-h1", "zb-h2", "zb-v",
                             "dualpipe", "dualpipev"})
      QVERIFY2(schedules.out.contains(QString::fromLatin1(name) + QStringLiteral(" — ")), name);
    const Run bench = pipescope({"bench", "--schedules", "1f1b", "--repeat", "1", "--json"});
    QCOMPARE(bench.exit_code, 0);
    QVERIFY(bench.out.contains(QStringLiteral("ops/s")));
  }
};

QTEST_GUILESS_MAIN(TestCli)
#include "test_cli.moc"
