// `pipescope import` on the real PyTorch traces of tests/data/torch_runs: the summary, and that
// compare and its calibration accept what it writes; and its refusals of bad input (a program
// with no pipeline, a truncated file, ranks of two runs, a missing rank, duplicate or overlapping
// actions): one line on stderr, exit 2, nothing written.
#include <QtTest>

#include <QFile>
#include <QProcess>
#include <QTemporaryDir>

#include <algorithm>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "tests/cli/cli_process.h"

#include "engine/json_io.h"

using nlohmann::json;

namespace {

const QString kRuns = QStringLiteral(PIPESCOPE_TORCH_RUNS);

using cli_test::Run;
constexpr auto runCli = cli_test::pipescope;

json readTrace(const QString &path) {
  auto text = pipescope::readTextFile(path.toStdString());
  if (!text) qFatal("%s", text.error().message.c_str());
  return json::parse(*text);
}

void writeText(const QString &path, const std::string &text) {
  QFile file(path);
  if (!file.open(QIODevice::WriteOnly)) qFatal("cannot write %s", qPrintable(path));
  file.write(text.data(), static_cast<qint64>(text.size()));
}

QString rankFile(const QString &run, int rank) {
  return kRuns + "/" + run + "/rank" + QString::number(rank) + "_trace.json.gz";
}

// The PP compute events of one rank in one profiler step, in time order (indices into the list).
std::vector<std::size_t> computeEvents(const json &trace, int step) {
  double begin = 0, end = 0;
  for (const auto &e : trace["traceEvents"])
    if (e.value("name", "") == "ProfilerStep#" + std::to_string(step)) {
      begin = e["ts"];
      end = begin + e["dur"].get<double>();
    }
  std::vector<std::size_t> found;
  const auto &events = trace["traceEvents"];
  for (std::size_t i = 0; i < events.size(); ++i) {
    const std::string name = events[i].value("name", "");
    const bool compute = name.starts_with("PP:") && name.find("SEND") == std::string::npos &&
                         name.find("RECV") == std::string::npos &&
                         name.find("SHARD") == std::string::npos &&
                         name.find("REDUCE") == std::string::npos;
    if (compute && events[i]["ts"].get<double>() >= begin && events[i]["ts"].get<double>() <= end)
      found.push_back(i);
  }
  std::sort(found.begin(), found.end(), [&](std::size_t a, std::size_t b) {
    return events[a]["ts"].get<double>() < events[b]["ts"].get<double>();
  });
  return found;
}

} // namespace

class TestCliImport : public QObject {
  Q_OBJECT

  QTemporaryDir dir_;
  QString path(const QString &name) const { return dir_.filePath(name); }

private slots:
  void initTestCase() { QVERIFY(dir_.isValid()); }

  void summaryAndCompareAndCalibrate() {
    const QString out = path(QStringLiteral("zbv.json"));
    Run run = runCli({QStringLiteral("import"), kRuns + "/zb-v-p2-m4", QStringLiteral("--out"), out,
                      QStringLiteral("--json")});
    QCOMPARE(run.exit_code, 0);
    QVERIFY(run.err.isEmpty());
    const json summary = json::parse(run.out.toStdString());
    QCOMPARE(summary["pp"].get<int>(), 2);
    QCOMPARE(summary["microbatches"].get<int>(), 4);
    QCOMPARE(summary["virtual_stages"].get<int>(), 2);
    QCOMPARE(summary["placement"].get<std::string>(), std::string("v-shape"));
    QCOMPARE(summary["schedule"]["name"].get<std::string>(), std::string("zb-v"));
    QCOMPARE(summary["steps"], json::array({2, 3}));
    QCOMPARE(summary["ops"].get<int>(), 96);
    QCOMPARE(summary["clock_error_us"].get<double>(), 0.0);
    const json trace = readTrace(out);
    QCOMPARE(trace["format"].get<std::string>(), std::string("pipescope.trace"));
    QCOMPARE(trace["source"].get<std::string>(), std::string("measured"));
    QCOMPARE(trace["origin"]["tool"].get<std::string>(), std::string("PyTorch profiler (Kineto)"));
    QCOMPARE(trace["origin"]["files"].size(), std::size_t{2});

    run = runCli(
        {QStringLiteral("compare"), QStringLiteral("--measured"), out, QStringLiteral("--json")});
    QCOMPARE(run.exit_code, 0);
    const json compared = json::parse(run.out.toStdString());
    QCOMPARE(compared["steps"].get<int>(), 2);
    QCOMPARE(compared["comparison"]["unmatched_ops"].get<int>(), 0);
    run = runCli({QStringLiteral("compare"), QStringLiteral("--measured"), out,
                  QStringLiteral("--calibrate"), QStringLiteral("--save-plan"),
                  path(QStringLiteral("calibrated.plan"))});
    QCOMPARE(run.exit_code, 0);
    QVERIFY(QFile::exists(path(QStringLiteral("calibrated.plan"))));

    // One step, gzipped, and the text summary.
    const QString one = path(QStringLiteral("gpipe-step3.json.gz"));
    run = runCli({QStringLiteral("import"), rankFile(QStringLiteral("gpipe-p2-m4"), 0),
                  rankFile(QStringLiteral("gpipe-p2-m4"), 1), QStringLiteral("--step"),
                  QStringLiteral("3"), QStringLiteral("--out"), one, QStringLiteral("--progress")});
    QCOMPARE(run.exit_code, 0);
    QVERIFY(run.out.contains(QStringLiteral("schedule: gpipe (P=2, M=4, V=1")));
    QVERIFY(run.out.contains(QStringLiteral("steps: 3;")));
    QVERIFY(run.err.contains(QStringLiteral("reading")));
    const json step3 = readTrace(one);
    for (const auto &op : step3["ops"])
      QCOMPARE(op["step"].get<int>(), 3);
  }

  void refusals_data() {
    QTest::addColumn<QStringList>("inputs");
    QTest::addColumn<QString>("message");
    const auto copy = [&](const QString &run, int rank, const QString &name) {
      const QString target = path(name);
      QFile::remove(target);
      if (!QFile::copy(rankFile(run, rank), target))
        qFatal("cannot copy to %s", qPrintable(target));
      return target;
    };
    const QString i1f1b = QStringLiteral("interleaved-1f1b-p2-m4");

    QTest::newRow("no pipeline") << QStringList{kRuns + "/no-pipeline"}
                                 << QStringLiteral("no pipeline actions");
    QTest::newRow("Schedule1F1B records no actions")
        << QStringList{kRuns + "/1f1b-p2-m4"} << QStringLiteral("Schedule1F1B");

    json rank1 = readTrace(rankFile(i1f1b, 1));
    const std::string text = rank1.dump();
    writeText(path(QStringLiteral("truncated_rank1_trace.json")), text.substr(0, text.size() / 2));
    QTest::newRow("truncated") << QStringList{copy(i1f1b, 0,
                                                   QStringLiteral("t_rank0_trace.json.gz")),
                                              path(QStringLiteral("truncated_rank1_trace.json"))}
                               << QStringLiteral("truncated");

    QFile gzipped(rankFile(i1f1b, 1));
    if (!gzipped.open(QIODevice::ReadOnly))
      qFatal("cannot read %s", qPrintable(gzipped.fileName()));
    const QByteArray bytes = gzipped.readAll();
    writeText(path(QStringLiteral("cut_rank1_trace.json.gz")),
              bytes.left(bytes.size() / 2).toStdString());
    QTest::newRow("truncated gzip")
        << QStringList{copy(i1f1b, 0, QStringLiteral("g_rank0_trace.json.gz")),
                       path(QStringLiteral("cut_rank1_trace.json.gz"))}
        << QStringLiteral("cut short");

    QTest::newRow("two runs") << QStringList{copy(i1f1b, 0,
                                                  QStringLiteral("a_rank0_trace.json.gz")),
                                             copy(QStringLiteral("looped-bfs-p2-m4"), 1,
                                                  QStringLiteral("b_rank1_trace.json.gz"))}
                              << QStringLiteral("not of one run");
    QTest::newRow("two world sizes")
        << QStringList{copy(i1f1b, 0, QStringLiteral("c_rank0_trace.json.gz")),
                       copy(QStringLiteral("gpipe-p4-m4"), 1,
                            QStringLiteral("d_rank1_trace.json.gz"))}
        << QStringLiteral("two different runs");
    QTest::newRow("missing rank") << QStringList{rankFile(i1f1b, 0)}
                                  << QStringLiteral("rank 1 of the 2 ranks");
    QTest::newRow("same rank twice")
        << QStringList{rankFile(i1f1b, 0), copy(i1f1b, 0, QStringLiteral("e_rank0_trace.json.gz"))}
        << QStringLiteral("are both rank 0");

    json duplicated = readTrace(rankFile(i1f1b, 0));
    const auto compute = computeEvents(duplicated, 2);
    duplicated["traceEvents"].push_back(duplicated["traceEvents"][compute[1]]);
    writeText(path(QStringLiteral("dup_rank0_trace.json")), duplicated.dump());
    QTest::newRow("duplicate action")
        << QStringList{path(QStringLiteral("dup_rank0_trace.json")), rankFile(i1f1b, 1)}
        << QStringLiteral("repeats");

    json overlapping = readTrace(rankFile(i1f1b, 0));
    auto &events = overlapping["traceEvents"];
    const auto order = computeEvents(overlapping, 2);
    const json &before = events[order[1]];
    events[order[2]]["ts"] = before["ts"].get<double>() + before["dur"].get<double>() / 2;
    writeText(path(QStringLiteral("overlap_rank0_trace.json")), overlapping.dump());
    QTest::newRow("overlapping actions")
        << QStringList{path(QStringLiteral("overlap_rank0_trace.json")), rankFile(i1f1b, 1)}
        << QStringLiteral("overlap; a rank runs one pipeline action at a time");

    QTest::newRow("no such step") << QStringList{kRuns + "/zb-v-p2-m4", QStringLiteral("--step"),
                                                 QStringLiteral("7")}
                                  << QStringLiteral("the files hold steps 2, 3");
    QTest::newRow("Megatron content without --format")
        << QStringList{path(QStringLiteral("timers_trace.json"))}
        << QStringLiteral("use --format megatron");
    writeText(path(QStringLiteral("timers_trace.json")), R"({"forward-0-start": 1.5})");
  }
  void refusals() {
    QFETCH(QStringList, inputs);
    QFETCH(QString, message);
    const QString out = path(QStringLiteral("refused.json"));
    QFile::remove(out);
    const Run run = runCli(QStringList{QStringLiteral("import")} + inputs +
                           QStringList{QStringLiteral("--out"), out});
    QCOMPARE(run.exit_code, 2);
    QVERIFY2(run.err.contains(message), qPrintable(run.err));
    QVERIFY(run.err.startsWith(QStringLiteral("pipescope: ")));
    QCOMPARE(run.err.count(QLatin1Char('\n')), 1);
    QVERIFY(run.out.isEmpty());
    QVERIFY(!QFile::exists(out));
  }
};

QTEST_GUILESS_MAIN(TestCliImport)
#include "test_cli_import.moc"
