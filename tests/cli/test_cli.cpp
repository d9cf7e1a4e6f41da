// The `pipescope` command line, run as a user runs it: outputs, files and exit codes.
#include <QtTest>

#include <QProcess>
#include <QTemporaryDir>

#include <cmath>
#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "tests/cli/cli_process.h"
#include "tests/write_file.h"

using nlohmann::json;

namespace {

using cli_test::pipescope;
using cli_test::Run;
using cli_test::unwrapped;

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
    QTest::newRow("negative time") << QStringList{"simulate", "--forward", "-2"}
                                   << "--forward: expected a finite number of microseconds from 0";
    QTest::newRow("bubbles without a trace") << QStringList{"bubbles"} << "give one trace file";
    QTest::newRow("bubbles, negative step")
        << QStringList{"bubbles", "/nonexistent/t.json", "--step", "-1"}
        << "--step must be between 0";
    QTest::newRow("bubbles, --top with --json")
        << QStringList{"bubbles", "/nonexistent/t.json", "--top", "3", "--json"}
        << "--json lists them all";
    QTest::newRow("bubbles, missing trace")
        << QStringList{"bubbles", "/nonexistent/t.json"} << "cannot open '/nonexistent/t.json'";
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
    QVERIFY(writeFile(csv, "0F0,0B0,0F1,0B1\n1F1,1B1,1F0,1B0\n"));
    const Run run = pipescope({"validate", csv});
    QCOMPARE(run.exit_code, 2);
    QVERIFY(run.err.startsWith(QStringLiteral("pipescope: ")));
    QVERIFY(run.err.contains(QStringLiteral("the schedule deadlocks")));
    QVERIFY(run.err.contains(QStringLiteral("[1F1]")));
  }

  // A "measurement" made by simulating slower ops (F=2, B=3, W=1.5) and stretching the times by
  // the run's time factor 10: compare must undo the factor, find every op kind off by the known
  // amount, and calibration must bring the prediction onto the measurement.
  void compareAndCalibrateAMeasuredTrace() {
    QTemporaryDir dir;
    const QString plan = dir.filePath(QStringLiteral("plan.json"));
    const QString slow = dir.filePath(QStringLiteral("slow.json"));
    const QString measured = dir.filePath(QStringLiteral("measured.json"));
    const QString calibrated = dir.filePath(QStringLiteral("calibrated.json"));
    const QStringList shape{"--schedule", "zb-h1", "--pp", "4", "--microbatches", "8"};
    const json predicted = simulateJson(shape + QStringList{"--save-plan", plan});
    const json truth = simulateJson(shape + QStringList{"--forward", "2", "--backward", "3",
                                                        "--weight", "1.5", "--trace", slow});
    QFile slow_file(slow);
    QVERIFY(slow_file.open(QIODevice::ReadOnly));
    json trace = json::parse(slow_file.readAll().toStdString());
    QFile plan_file(plan);
    QVERIFY(plan_file.open(QIODevice::ReadOnly));
    trace["plan"] = json::parse(plan_file.readAll().toStdString());
    trace["source"] = "measured";
    constexpr double kFactor = 10;
    for (auto *list : {&trace["ops"], &trace["comms"]})
      for (auto &record : *list) {
        record["start_us"] = record["start_us"].get<double>() * kFactor;
        record["end_us"] = record["end_us"].get<double>() * kFactor;
      }
    trace["backend"] = {{"workload", {{"expected_time_factor", kFactor}}}};
    QVERIFY(writeFile(measured, QByteArray::fromStdString(trace.dump())));

    const Run run = pipescope(
        {"compare", "--measured", measured, "--calibrate", "--save-plan", calibrated, "--json"});
    QVERIFY2(run.exit_code == 0, qPrintable(run.err));
    const json result = json::parse(run.out.toStdString());
    QCOMPARE(result["time_factor"].get<double>(), kFactor);
    const json &before = result["comparison"];
    const double truth_makespan = truth["makespan"].get<double>();
    const double predicted_makespan = predicted["makespan"].get<double>();
    QCOMPARE(before["measured"]["makespan_us"].get<double>(), truth_makespan);
    QCOMPARE(before["predicted"]["makespan_us"].get<double>(), predicted_makespan);
    QVERIFY(std::abs(before["makespan_relative_error"].get<double>() -
                     (truth_makespan - predicted_makespan) / predicted_makespan) < 1e-9);
    QCOMPARE(before["unmatched_ops"].get<int>(), 0);
    std::map<std::string, double> median;
    for (const auto &kind : before["kinds"])
      median[kind["kind"].get<std::string>()] = kind["median_signed_error"].get<double>();
    QVERIFY(std::abs(median["forward"] - 1.0) < 1e-9);     // 2 against 1
    QVERIFY(std::abs(median["input-grad"] - 0.5) < 1e-9);  // I = B - W: 1.5 against 1
    QVERIFY(std::abs(median["weight-grad"] - 0.5) < 1e-9); // 1.5 against 1
    const json &after = result["calibrated"];
    QVERIFY(std::abs(after["makespan_relative_error"].get<double>()) < 1e-9);
    for (const auto &kind : after["kinds"])
      QVERIFY(kind["worst_relative_error"].get<double>() < 1e-9);
    // The calibrated plan predicts the measurement by itself.
    QCOMPARE(simulateJson({"--plan", calibrated})["makespan"].get<double>(), truth_makespan);

    // The readable form names the schedule and the factor, and Markdown keeps its tables intact.
    const Run text = pipescope({"compare", "--measured", measured, "--markdown"});
    QCOMPARE(text.exit_code, 0);
    QVERIFY2(text.out.contains(QStringLiteral("ZB-H1, P=4, M=8")), qPrintable(text.out));
    QVERIFY2(text.out.contains(QStringLiteral("| step time")), qPrintable(text.out));
    QVERIFY2(text.out.contains(QStringLiteral("/ 10.0000")), qPrintable(text.out));
    // Typed costs have no gradient sync: nothing to say about a tail.
    QVERIFY2(!text.out.contains(QStringLiteral("ops' span")), qPrintable(text.out));
    // A model plan's run (DualPipeV on one H100) has one: the step compared is the ops' span,
    // and the text says how much simulate's step adds after the last op.
    const Run h100 = pipescope(
        {"compare", "--measured",
         QStringLiteral(PIPESCOPE_TEST_DATA "/measured/gpu-shared-h100-dualpipev-p4-m16.json.gz")});
    QVERIFY2(h100.exit_code == 0, qPrintable(h100.err));
    QVERIFY2(h100.out.contains(QRegularExpression(
                 QStringLiteral("ops' span, first op to last.*the plan's [0-9.]+ ms after"))),
             qPrintable(h100.out));

    // Another plan's trace: one line that says so and how to fix it.
    const QString other = dir.filePath(QStringLiteral("other.json"));
    simulateJson({"--schedule", "1f1b", "--pp", "4", "--microbatches", "8", "--save-plan", other});
    const Run refused = pipescope({"compare", "--measured", measured, "--plan", other});
    QCOMPARE(refused.exit_code, 2);
    QVERIFY2(refused.err.contains(QStringLiteral("another plan")), qPrintable(refused.err));
    QVERIFY2(refused.err.contains(QStringLiteral("--plan")), qPrintable(refused.err));
    QCOMPARE(refused.err.count('\n'), 1);
  }

  // `compare --published --row`: one published row and what its prediction is made of. The
  // explanation must add up: Megatron-Core's 32B runs PP 1 with 4 microbatches, so its step is
  // 4 × (F + I + W) of its one stage plus the exposed DP sync (and the optimizer step, well under
  // 1 %). Equal stages are one group in the text; a row that is not there, or --row without
  // --published, is refused naming the fix.
  void comparePublishedRowExplainsItsPrediction() {
    const Run run =
        pipescope({"compare", "--published", "megatron-core-h100", "--row", "gpt-32b", "--json"});
    QVERIFY2(run.exit_code == 0, qPrintable(run.err));
    const json result = json::parse(run.out.toStdString());
    QCOMPARE(result["rows"].size(), std::size_t{1});
    const json &row = result["rows"][0];
    QCOMPARE(row["id"].get<std::string>(), std::string("gpt-32b"));
    const json &explanation = row["explanation"];
    const json &stage = explanation["cost_breakdown"]["stages"][0];
    const double microbatch_us = stage["forward"]["total"].get<double>() +
                                 stage["input_grad"]["total"].get<double>() +
                                 stage["weight_grad"]["total"].get<double>();
    const json &dp = explanation["communication"]["dp"];
    QVERIFY(dp["exposed_time_s"].get<double>() > 0);
    QVERIFY(dp["exposed_time_s"].get<double>() <= dp["time_s"].get<double>());
    const double sum_s = 4 * microbatch_us * 1e-6 + dp["exposed_time_s"].get<double>();
    const double step_s = row["predicted_step_s"].get<double>();
    QVERIFY2(step_s >= sum_s && step_s < 1.01 * sum_s,
             qPrintable(QStringLiteral("step %1 s, parts %2 s").arg(step_s).arg(sum_s)));
    QVERIFY(explanation["mfu"].get<double>() > 0.2 && explanation["mfu"].get<double>() < 0.6);

    const Run text =
        pipescope({"compare", "--published", "deepseek-v3-h800", "--row", "deepseek-v3-pretrain"});
    QVERIFY2(text.exit_code == 0, qPrintable(text.err));
    QVERIFY2(text.out.contains(QStringLiteral("stages 1-12 (4 layers each)")),
             qPrintable(text.out));
    QVERIFY2(text.out.contains(QStringLiteral("EP all-to-all")), qPrintable(text.out));
    QVERIFY2(unwrapped(text.out).contains(QRegularExpression(
                 QStringLiteral("DP [0-9.]+ ms \\(inter-node, [0-9.]+ ms exposed\\)"))),
             qPrintable(text.out));
    QVERIFY(!text.out.contains(QStringLiteral("mean |error|")));

    const Run unknown = pipescope({"compare", "--published", "all", "--row", "gpt-2"});
    QCOMPARE(unknown.exit_code, 2);
    QVERIFY2(unknown.err.contains(QStringLiteral("gpt-32b")), qPrintable(unknown.err));
    QCOMPARE(unknown.err.count('\n'), 1);
    const Run alone = pipescope({"compare", "--row", "gpt-32b"});
    QCOMPARE(alone.exit_code, 2);
    QVERIFY2(alone.err.contains(QStringLiteral("--published")), qPrintable(alone.err));
  }

  // Every published row is predicted at its speed of light too: below its prediction, and the
  // summary over the rows that count is the rows' own measured / speed-of-light ratios (median,
  // lowest, highest); the one row measured below it is listed and marked in the table.
  // `compare --published all` prints each set's sources under the table, up to 1,900 characters a
  // set: as text they wrap at 100 columns, each continued two columns in; as Markdown (what
  // docs/validation.md's "All rows" is) each stays one line, for the renderer to wrap.
  void comparePublishedProseWrapsAsTextOnly() {
    const Run text = pipescope({"compare", "--published", "all"});
    QVERIFY2(text.exit_code == 0, qPrintable(text.err));
    const QStringList lines = text.out.split('\n');
    qsizetype prose = 0; // the table's rows end where the summary begins
    while (prose < lines.size() && !lines[prose].startsWith(QStringLiteral("iteration time over")))
      ++prose;
    QVERIFY(prose > 70 && prose < lines.size());
    int continued = 0;
    for (qsizetype i = prose; i < lines.size(); ++i) {
      QVERIFY2(lines[i].size() <= 102, qPrintable(lines[i]));
      if (lines[i].startsWith(QStringLiteral("  ")) && !lines[i].startsWith(QStringLiteral("   ")))
        ++continued;
    }
    QVERIFY(continued > 50);
    QVERIFY(unwrapped(text.out).contains(
        QStringLiteral(" nemo-h100: NeMo 24.07 pre-training on DGX-H100 in FP8 (NeMo performance "
                       "summary). NVIDIA/NeMo docs/source/performance/performance_summary.md")));
    const Run markdown = pipescope({"compare", "--published", "all", "--markdown"});
    QVERIFY2(markdown.exit_code == 0, qPrintable(markdown.err));
    QVERIFY(markdown.out.contains(QRegularExpression(
        QStringLiteral("\nnemo-h100: NeMo 24.07 pre-training on DGX-H100 in FP8 [^\n]{1000,}\n"))));
  }

  void comparePublishedAgainstTheSpeedOfLight() {
    const Run run = pipescope({"compare", "--published", "all", "--json"});
    QVERIFY2(run.exit_code == 0, qPrintable(run.err));
    const json result = json::parse(run.out.toStdString());
    std::vector<double> ratios;
    std::vector<std::string> below;
    for (const json &row : result["rows"]) {
      const double fastest = row["speed_of_light_step_s"].get<double>();
      QVERIFY(fastest > 0 && fastest < row["predicted_step_s"].get<double>());
      if (!row.contains("step_error")) {
        QVERIFY(!row.contains("measured_over_speed_of_light"));
        continue;
      }
      const double ratio = row["measured_over_speed_of_light"].get<double>();
      QVERIFY(std::abs(ratio - row["measured_step_s"].get<double>() / fastest) < 1e-12);
      if (ratio < 1) below.push_back(row["id"].get<std::string>());
      if (!row.contains("set_aside")) ratios.push_back(ratio);
    }
    std::sort(ratios.begin(), ratios.end());
    const json &summary = result["measured_over_speed_of_light"];
    QCOMPARE(summary["runs"].get<std::size_t>(), ratios.size());
    QCOMPARE(summary["lowest"].get<double>(), ratios.front());
    QCOMPARE(summary["highest"].get<double>(), ratios.back());
    const std::size_t n = ratios.size();
    QCOMPARE(summary["median"].get<double>(),
             n % 2 ? ratios[n / 2] : (ratios[n / 2 - 1] + ratios[n / 2]) / 2);
    QCOMPARE(below, std::vector<std::string>{"qwen3-235b-a22b-ep8-fsdp"});
    QCOMPARE(summary["below"].size(), std::size_t{1});
    QCOMPARE(summary["below"][0]["id"].get<std::string>(), below[0]);

    const Run text = pipescope({"compare", "--published", "megatron-moe-modelzoo-h100"});
    QVERIFY2(text.exit_code == 0, qPrintable(text.err));
    QVERIFY2(text.out.contains(QRegularExpression(QStringLiteral(
                 "qwen3-235b-a22b-ep8-fsdp +[0-9]+ +[0-9.]+ s +[0-9.]+ s +\\+[0-9.]+ % \\(below "
                 "speed of light\\)"))),
             qPrintable(text.out));
    QVERIFY2(
        unwrapped(text.out).contains(QRegularExpression(QStringLiteral(
            "measured over speed of light .*: median [0-9.]+x over 5 runs, lowest 0\\.9[0-9]x.*"
            "below it.*qwen3-235b-a22b-ep8-fsdp \\(17\\.600 s measured"))),
        qPrintable(text.out));
    const Run one = pipescope({"compare", "--published", "megatron-core-h100", "--row", "gpt-32b"});
    QVERIFY2(unwrapped(one.out).contains(QRegularExpression(
                 QStringLiteral(" speed of light: 0\\.[0-9]+ s .*measured 1\\.[0-9]+x it$"))),
             qPrintable(one.out));
  }

  // `compare --published all` gives each set's own mean and worst beside the overall ones: the
  // per-set figures add up to the overall mean, and a single set prints no per-set lines.
  void comparePublishedSummarizesEachSet() {
    const Run run = pipescope({"compare", "--published", "all", "--json"});
    QVERIFY2(run.exit_code == 0, qPrintable(run.err));
    const json result = json::parse(run.out.toStdString());
    std::map<std::string, std::pair<int, double>> from_rows; // set -> runs, worst
    double sum = 0;
    int runs = 0;
    std::vector<std::string> set_aside_rows; // timed, shown, not counted
    for (const json &row : result["rows"]) {
      if (!row.contains("step_error")) continue;
      if (row.contains("set_aside")) {
        set_aside_rows.push_back(row["set"].get<std::string>() + "/" +
                                 row["id"].get<std::string>());
        continue;
      }
      auto &[count, worst] = from_rows[row["set"].get<std::string>()];
      ++count;
      worst = std::max(worst, std::abs(row["step_error"].get<double>()));
      sum += std::abs(row["step_error"].get<double>());
      ++runs;
    }
    QCOMPARE(result["by_set"].size(), from_rows.size());
    double weighted = 0;
    for (const json &set : result["by_set"]) {
      const auto &[count, worst] = from_rows.at(set["set"].get<std::string>());
      QCOMPARE(set["runs"].get<int>(), count);
      QCOMPARE(set["worst_abs_step_error"].get<double>(), worst);
      weighted += set["mean_abs_step_error"].get<double>() * count;
    }
    QVERIFY(std::abs(weighted / runs - sum / runs) < 1e-12);
    QVERIFY(std::abs(result["mean_abs_step_error"].get<double>() - sum / runs) < 1e-12);
    // The rows set aside are listed apart, each with why.
    QCOMPARE(set_aside_rows,
             std::vector<std::string>{"megatron-bridge-h100/qwen3-30b-a3b-gbs512-pp2"});
    QCOMPARE(result["set_aside"].size(), std::size_t{1});
    QVERIFY(result["set_aside"][0]["set_aside"].get<std::string>().find("#1998") !=
            std::string::npos);

    const Run text = pipescope({"compare", "--published", "all"});
    QVERIFY2(text.out.contains(QRegularExpression(QStringLiteral(
                 "\n1 run set aside, not in the figures above \\(with them, over [0-9]+ runs: "
                 "mean \\|error\\| [0-9.]+ %, worst [0-9.]+ %\\):\n  "
                 "megatron-bridge-h100/qwen3-30b-a3b-gbs512-pp2 \\(-[0-9.]+ %\\): a regression"))),
             qPrintable(text.out));
    const Run one_row = pipescope(
        {"compare", "--published", "megatron-bridge-h100", "--row", "qwen3-30b-a3b-gbs512-pp2"});
    QVERIFY2(one_row.out.contains(QStringLiteral("\nset aside, not in the figures over rows: a "
                                                 "regression of its container")),
             qPrintable(one_row.out));
    QVERIFY2(text.out.contains(QRegularExpression(QStringLiteral("qwen3-30b-a3b-gbs512-pp2 +"
                                                                 "[0-9]+ +[0-9.]+ s +[0-9.]+ s +"
                                                                 "-[0-9.]+ % \\(set aside\\)"))),
             qPrintable(text.out));
    QVERIFY2(text.out.contains(QRegularExpression(
                 QStringLiteral("\\n  nemo-h100: 12 runs, mean \\|error\\| [0-9.]+ %, worst"))),
             qPrintable(text.out));
    QVERIFY2(text.out.contains(QStringLiteral("  deepseek-v3-h800: 1 run, ")),
             qPrintable(text.out));
    const Run one = pipescope({"compare", "--published", "nemo-h100"});
    QVERIFY2(one.exit_code == 0, qPrintable(one.err));
    QVERIFY(!one.out.contains(QStringLiteral("  nemo-h100: 12 runs")));
  }

  // A simulation with a model says how far the model was from the published runs like it:
  // for a Megatron-Core H100 BF16 plan, the very mean and worst `compare --published` gives
  // that set; an H200 plan has no published run, and says so.
  void simulateSaysHowFarPublishedRunsLikeItWere() {
    const Run table = pipescope({"compare", "--published", "megatron-core-h100", "--json"});
    QVERIFY2(table.exit_code == 0, qPrintable(table.err));
    const json published = json::parse(table.out.toStdString());
    QTemporaryDir dir;
    const QString plan = dir.filePath(QStringLiteral("gpt-70b.json"));
    QCOMPARE(pipescope({"compare", "--published", "megatron-core-h100", "--row", "gpt-70b",
                        "--save-plan", plan})
                 .exit_code,
             0);
    const json accuracy = simulateJson({"--plan", plan})["validated_accuracy"];
    QCOMPARE(accuracy["scope"].get<std::string>(), std::string("h100-sxm, bf16, dense"));
    QCOMPARE(accuracy["sets"], json::array({"megatron-core-h100"}));
    QCOMPARE(accuracy["runs"].get<int>(), 11);
    QVERIFY(std::abs(accuracy["mean_abs_step_error"].get<double>() -
                     published["mean_abs_step_error"].get<double>()) < 1e-12);
    QCOMPARE(accuracy["worst_abs_step_error"].get<double>(),
             published["worst_abs_step_error"].get<double>());
    const Run text = pipescope({"simulate", "--plan", plan});
    QVERIFY2(unwrapped(text.out).contains(
                 QStringLiteral(" checked against: on 11 published runs "
                                "(h100-sxm, bf16, dense: megatron-core-h100) the "
                                "predicted step time was off by ")),
             qPrintable(text.out));
    const Run unchecked =
        pipescope({"simulate", "--model", "llama3-8b", "--hardware", "h100-hbm2e-96gb"});
    QVERIFY2(
        unwrapped(unchecked.out)
            .contains(QStringLiteral("checked against: no published run on h100-hbm2e-96gb checks "
                                     "the step time: this prediction is unchecked")),
        qPrintable(unchecked.out));
    // Without a model there is no prediction of a real run to check.
    QVERIFY(!pipescope({"simulate"}).out.contains(QStringLiteral("checked against")));
  }

  // MFU counts model FLOPs against the dense 16-bit peak; an FP8 plan also gets it against the
  // FP8 peak (h100-sxm: 989 and 1979 TFLOPS), so 60 % "MFU" is not mistaken for 60 % of FP8.
  void fp8PlansGiveMfuAgainstBothPeaks() {
    const QStringList shape{"--model", "llama3-8b", "--hardware",     "h100-sxm",
                            "--pp",    "2",         "--microbatches", "8"};
    const json bf16 = simulateJson(shape);
    QVERIFY(bf16["mfu"].get<double>() > 0.2);
    QVERIFY(!bf16.contains("mfu_fp8"));
    const json fp8 = simulateJson(shape + QStringList{"--fp8"});
    const double mfu = fp8["mfu"], mfu_fp8 = fp8["mfu_fp8"];
    QVERIFY2(std::abs(mfu_fp8 - mfu * 989 / 1979) < 1e-12, fp8.dump().c_str());
    const Run text = pipescope(QStringList{"simulate"} + shape + QStringList{"--fp8"});
    const QString expected = QStringLiteral("MFU %1 % of the 16-bit peak, %2 % of the FP8 peak")
                                 .arg(100 * mfu, 0, 'f', 1)
                                 .arg(100 * mfu_fp8, 0, 'f', 1);
    QVERIFY2(text.out.contains(expected), qPrintable(text.out));
  }

  // `compare --published SET --row ID --save-plan FILE` writes the row's configuration as a
  // plan; simulating that plan predicts the row's step again. It needs one row, of one set, and
  // a file of its own (the table is on standard output).
  void comparePublishedRowSavesItsPlan() {
    QTemporaryDir dir;
    const QString plan = dir.filePath(QStringLiteral("gpt-70b.json"));
    const Run run = pipescope({"compare", "--published", "megatron-core-h100", "--row", "gpt-70b",
                               "--save-plan", plan, "--json"});
    QVERIFY2(run.exit_code == 0, qPrintable(run.err));
    const json result = json::parse(run.out.toStdString());
    QCOMPARE(result["saved_plan"].get<std::string>(), plan.toStdString());
    const double table_s = result["rows"][0]["predicted_step_s"].get<double>();
    const json simulated = simulateJson({"--plan", plan});
    QCOMPARE(simulated["pp"].get<int>(), 2);
    QCOMPARE(simulated["microbatches"].get<int>(), 8);
    const double simulated_s = simulated["step_time_s"].get<double>();
    QVERIFY2(std::abs(simulated_s / table_s - 1) < 1e-9,
             qPrintable(QStringLiteral("%1 s against %2 s").arg(simulated_s).arg(table_s)));
    // And its speed of light is the table's too.
    QVERIFY(std::abs(simulated["speed_of_light_step_s"].get<double>() /
                         result["rows"][0]["speed_of_light_step_s"].get<double>() -
                     1) < 1e-9);
    const Run summary = pipescope({"simulate", "--plan", plan});
    QVERIFY2(
        unwrapped(summary.out)
            .contains(QRegularExpression(QStringLiteral(
                " speed of light [0-9.]+ s \\(every kernel at the GPU's peak, every link at its "
                "line rate, nothing else\\): the step is [0-9.]+x it checked against"))),
        qPrintable(summary.out));

    const QString other = dir.filePath(QStringLiteral("other.json"));
    for (const QStringList &args :
         {QStringList{"compare", "--published", "megatron-core-h100", "--save-plan", other},
          QStringList{"compare", "--published", "all", "--row", "gpt-1.7b", "--save-plan", other},
          QStringList{"compare", "--published", "megatron-core-h100", "--row", "gpt-70b",
                      "--save-plan", "-"}}) {
      const Run refused = pipescope(args);
      QCOMPARE(refused.exit_code, 2);
      QCOMPARE(refused.err.count('\n'), 1);
      QVERIFY2(!QFile::exists(other), qPrintable(args.join(' ')));
    }
    const Run ambiguous =
        pipescope({"compare", "--published", "all", "--row", "gpt-1.7b", "--save-plan", other});
    QVERIFY2(ambiguous.err.contains(QStringLiteral("megatron-sc21-a100")),
             qPrintable(ambiguous.err));
  }

  // `pipescope megatron` on a Megatron-LM CI launch: the prediction equals the validation row's,
  // the plan it writes predicts the same step, and a launch it cannot read is one line, exit 2,
  // nothing written.
  void megatronReadsALaunchAndWritesItsPlan() {
    QTemporaryDir dir;
    const QString launch = QStringLiteral(
        PIPESCOPE_TEST_DATA "/megatron_ci/gpt3_7b_tp1_pp4_memory_speed.model_config.yaml");
    const QString plan = dir.filePath(QStringLiteral("launch.json"));
    const Run run = pipescope({"megatron", launch, "--gpus", "8", "--out", plan, "--json"});
    QVERIFY2(run.exit_code == 0, qPrintable(run.err));
    const json result = json::parse(run.out.toStdString());
    const json &prediction = result["prediction"];
    QCOMPARE(prediction["memory_gib_per_pipeline_rank"].size(), std::size_t{4});
    const Run row = pipescope(
        {"compare", "--published", "megatron-lm-ci-h100", "--row", "gpt3-7b-tp1-pp4", "--json"});
    QVERIFY2(row.exit_code == 0, qPrintable(row.err));
    const json published = json::parse(row.out.toStdString())["rows"][0];
    const double step_s = prediction["step_time_s"].get<double>();
    QVERIFY(std::abs(step_s / published["predicted_step_s"].get<double>() - 1) < 1e-9);
    QVERIFY(std::abs(prediction["memory_gib_per_pipeline_rank"][3].get<double>() -
                     published["predicted_memory_gib"].get<double>()) < 1e-9);
    const double simulated_s = simulateJson({"--plan", plan})["step_time_s"].get<double>();
    QVERIFY(std::abs(simulated_s / step_s - 1) < 1e-9);
    const Run text = pipescope({"megatron", launch, "--gpus", "8"});
    QVERIFY(text.out.contains(QStringLiteral("--deterministic-mode")));

    const QString other = dir.filePath(QStringLiteral("other.json"));
    const QString script = dir.filePath(QStringLiteral("train.sh"));
    QVERIFY(writeFile(script, "torchrun pretrain_gpt.py --num-layers 4 --hidden-size 1024 "
                              "--num-attention-heads 16 --seq-length 2048 --vocab-size 100 "
                              "--tensor-model-parallel-size 3\n"));
    for (const QStringList &args :
         {QStringList{"megatron", script, "--gpus", "8", "--out", other},
          QStringList{"megatron", dir.filePath(QStringLiteral("missing.sh")), "--gpus", "8"},
          QStringList{"megatron", launch, "--gpus", "8", "--out", "-"},
          QStringList{"megatron", launch}}) {
      const Run refused = pipescope(args);
      QCOMPARE(refused.exit_code, 2);
      QCOMPARE(refused.err.count('\n'), 1);
      QVERIFY2(!QFile::exists(other), qPrintable(args.join(' ')));
    }
  }

  // `pipescope bubbles` on a simulated trace (gzipped): per rank the causes sum to the idle
  // time, a simulation has no unexplained time, the critical path's ops and transfers sum to the
  // step; the text names a chain of waits; another plan or a file that is no trace is refused.
  void bubblesExplainsATrace() {
    QTemporaryDir dir;
    const QString trace = dir.filePath(QStringLiteral("trace.json.gz"));
    simulateJson({"--schedule", "1f1b", "--pp", "4", "--microbatches", "8", "--p2p-latency", "0.5",
                  "--trace", trace});
    const Run run = pipescope({"bubbles", trace, "--json"});
    QVERIFY2(run.exit_code == 0, qPrintable(run.err));
    const json result = json::parse(run.out.toStdString());
    QCOMPARE(result["source"].get<std::string>(), std::string("simulated"));
    QCOMPARE(result["schedule"].get<std::string>(), std::string("1F1B, P=4, M=8"));
    QCOMPARE(result["step"].get<int>(), 0);
    const double makespan = result["makespan_us"].get<double>();
    QCOMPARE(result["ranks"].size(), std::size_t(4));
    for (const auto &rank : result["ranks"]) {
      double causes = 0, intervals = 0;
      for (const auto &[name, value] : rank["causes"].items())
        causes += value.get<double>();
      for (const auto &interval : rank["intervals"])
        intervals += interval["end_us"].get<double>() - interval["start_us"].get<double>();
      const double idle = makespan - rank["busy_us"].get<double>();
      QVERIFY(std::abs(causes - idle) < 1e-9 && std::abs(intervals - idle) < 1e-9);
    }
    QCOMPARE(result["causes"]["unexplained"].get<double>(), 0.0);
    QVERIFY(result["causes"]["transfer"].get<double>() > 0);
    double length = 0, at = result["step_start_us"].get<double>();
    for (const auto &segment : result["critical_path"]) {
      QCOMPARE(segment["start_us"].get<double>(), at);
      at = segment["end_us"].get<double>();
      length += at - segment["start_us"].get<double>();
      const std::string type = segment["type"].get<std::string>();
      QVERIFY2(type == "compute" || type == "transfer", type.c_str());
      if (type == "compute")
        for (const char *key : {"rank", "kind", "stage", "microbatch"})
          QVERIFY2(segment.contains(key), key);
    }
    QVERIFY(std::abs(length - makespan) < 1e-9);

    const Run text = pipescope({"bubbles", trace, "--top", "3"});
    QCOMPARE(text.exit_code, 0);
    QVERIFY2(text.out.contains(QStringLiteral("fill: waits for B(1,0) on rank 1")),
             qPrintable(text.out));
    QVERIFY2(text.out.contains(QStringLiteral("started by F(0,0) on rank 0")),
             qPrintable(text.out));
    QVERIFY2(text.out.contains(QStringLiteral("Critical path: ")), qPrintable(text.out));
    // A long cause wraps at 100 columns, continued under its first word.
    for (const QString &line : text.out.split('\n'))
      QVERIFY2(line.size() <= 102, qPrintable(line));

    // Bad input: one line each, exit 2.
    const QString plan = dir.filePath(QStringLiteral("plan.json"));
    simulateJson({"--schedule", "zb-h1", "--pp", "4", "--microbatches", "8", "--save-plan", plan});
    const Run not_a_trace = pipescope({"bubbles", plan});
    QCOMPARE(not_a_trace.exit_code, 2);
    QVERIFY2(not_a_trace.err.contains(QStringLiteral("expected \"pipescope.trace\"")),
             qPrintable(not_a_trace.err));
    QCOMPARE(not_a_trace.err.count('\n'), 1);
    const Run other_plan = pipescope({"bubbles", trace, "--plan", plan});
    QCOMPARE(other_plan.exit_code, 2);
    QVERIFY2(other_plan.err.contains(QStringLiteral("another plan")), qPrintable(other_plan.err));
    QCOMPARE(other_plan.err.count('\n'), 1);
    const Run no_step = pipescope({"bubbles", trace, "--step", "3"});
    QCOMPARE(no_step.exit_code, 2);
    QVERIFY2(no_step.err.contains(QStringLiteral("no such step")), qPrintable(no_step.err));
  }

  void schedulesAndBenchRun() {
    const Run schedules = pipescope({"schedules"});
    QCOMPARE(schedules.exit_code, 0);
    for (const char *name : {"naive", "gpipe", "1f1b", "interleaved-1f1b", "zb-h1", "zb-h2", "zb-v",
                             "dualpipe", "dualpipev"})
      QVERIFY2(schedules.out.contains(QString::fromLatin1(name) + QStringLiteral(" — ")), name);
    // Each family's summary and source wrap at 100 columns (interleaved-1f1b's ran to 486).
    for (const QString &line : schedules.out.split('\n'))
      QVERIFY2(line.size() <= 102, qPrintable(line));
    QVERIFY(unwrapped(schedules.out)
                .contains(QStringLiteral(
                    "interleaved-1f1b — Interleaved 1F1B Each rank holds V model chunks")));
    const Run bench = pipescope({"bench", "--schedules", "1f1b", "--repeat", "1", "--json"});
    QCOMPARE(bench.exit_code, 0);
    QVERIFY(bench.out.contains(QStringLiteral("ops/s")));
  }
};

QTEST_GUILESS_MAIN(TestCli)
#include "test_cli.moc"
