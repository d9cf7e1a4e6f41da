// `pipescope search` and the uneven-stage options, run as a user runs them (issue #14): outputs,
// files, and exit 2 with one clear line for bad input.
#include <QtTest>

#include <QFile>
#include <QProcess>
#include <QTemporaryDir>

#include <cmath>
#include <csignal>
#include <set>
#include <string>

#include <signal.h>

#include <nlohmann/json.hpp>

#include "tests/cli/cli_process.h"

using nlohmann::json;

namespace {

using cli_test::pipescope;
using cli_test::Run;
using cli_test::unwrapped;

const QStringList kSmallSearch = {"search",
                                  "--model",
                                  "llama3-8b",
                                  "--hardware",
                                  "h100-sxm",
                                  "--gpus",
                                  "8",
                                  "--global-batch",
                                  "16",
                                  "--schedules",
                                  "1f1b,zb-h1,interleaved-1f1b",
                                  "--microbatch-sizes",
                                  "1,2"};

const QStringList kModel = {"--model", "llama3-8b", "--hardware", "h100-sxm"};

} // namespace

class TestCliSearch : public QObject {
  Q_OBJECT

private slots:
  void searchJsonListsRankedPlansWithinMemory() {
    const Run run =
        pipescope(kSmallSearch + QStringList{"--json", "--top", "4", "--memory-limit", "40"});
    QVERIFY2(run.exit_code == 0, qPrintable(run.err));
    const json out = json::parse(run.out.toStdString());
    for (const char *key : {"space", "evaluated", "seconds", "plans", "pareto"})
      QVERIFY2(out.contains(key), key);
    QVERIFY(out["space"].get<int>() >= out["evaluated"].get<int>());
    QVERIFY(out["evaluated"].get<int>() > 0);
    const auto &plans = out["plans"];
    QCOMPARE(plans.size(), std::size_t{4});
    for (std::size_t k = 0; k < plans.size(); ++k) {
      const auto &plan = plans[k];
      for (const char *key :
           {"mesh", "rank_order", "schedule", "virtual_stages", "microbatches", "microbatch_size",
            "recompute", "zero_stage", "gemm_precision", "collective_algorithm",
            "sequence_parallel", "step_time_s", "tokens_per_s", "memory_per_rank_bytes",
            "peak_memory_bytes", "capacity_bytes"})
        QVERIFY2(plan.contains(key), key);
      QVERIFY(plan["peak_memory_bytes"].get<double>() <= 40.0 * 1073741824.0);
      const auto &mesh = plan["mesh"];
      // CP is a mesh dimension: dp × cp × tp × pp uses the 8 GPUs, and the dp replicas see
      // distinct sequences (cp splits each).
      QVERIFY(mesh.contains("ep") && mesh.contains("cp"));
      QCOMPARE(mesh["dp"].get<int>() * mesh["cp"].get<int>() * mesh["tp"].get<int>() *
                   mesh["pp"].get<int>(),
               8);
      QCOMPARE(mesh["ep"].get<int>(), 1); // llama3-8b has no experts
      QCOMPARE(mesh["dp"].get<int>() * plan["microbatches"].get<int>() *
                   plan["microbatch_size"].get<int>(),
               16);
      if (k > 0) {
        QVERIFY(plan["tokens_per_s"].get<double>() <= plans[k - 1]["tokens_per_s"].get<double>());
        QVERIFY(plan.contains("why_slower"));
      }
    }
  }

  void textShowsTopRunnersUpAndParetoFront() {
    const Run run = pipescope(kSmallSearch + QStringList{"--top", "3"});
    QVERIFY2(run.exit_code == 0, qPrintable(run.err));
    QVERIFY(run.out.contains("why the runners-up lose to #1:"));
    QVERIFY(run.out.contains("#3: "));
    QVERIFY(run.out.contains("Pareto front (step time against peak memory):"));
    QVERIFY2(unwrapped(run.out).contains(QRegularExpression(
                 " #1 at its speed of light \\(every kernel at the GPU's peak, every link at "
                 "its line rate, nothing else\\): [0-9.]+ ms, so its [0-9.]+ ms step is "
                 "[0-9.]+x it")),
             qPrintable(run.out));
    // Not a terminal: no progress drawn on stderr.
    QVERIFY(run.err.isEmpty());
    // The prose around the tables wraps at 100 columns (it ran to 245); the tables' rows do not.
    const QRegularExpression table_line(QStringLiteral("^ +([0-9]|tokens/s)"));
    for (const QString &line : run.out.split('\n'))
      if (!table_line.match(line).hasMatch()) QVERIFY2(line.size() <= 102, qPrintable(line));
  }

  // The top K are K distinct step times: configurations as fast as a ranked plan (schedules that
  // run the same ops at pp = 1, orders that give the same links) are listed under it, in the JSON
  // with their own figures and in the CSV and the text as a count and what they change.
  void configurationsAsFastShareARankedRow() {
    QTemporaryDir dir;
    const QString csv_path = dir.filePath("plans.csv");
    const Run run =
        pipescope(kSmallSearch + QStringList{"--json", "--top", "6", "--csv", csv_path});
    QVERIFY2(run.exit_code == 0, qPrintable(run.err));
    const json plans = json::parse(run.out.toStdString())["plans"];
    QCOMPARE(plans.size(), std::size_t{6});
    const auto nanoseconds = [](const json &plan) {
      return std::llround(plan["step_time_s"].get<double>() * 1e9);
    };
    std::size_t alike_total = 0;
    for (std::size_t k = 0; k < plans.size(); ++k) {
      if (k > 0) QVERIFY(nanoseconds(plans[k]) > nanoseconds(plans[k - 1]));
      if (!plans[k].contains("alike_count")) continue;
      const auto &alike = plans[k]["alike"];
      alike_total += plans[k]["alike_count"].get<std::size_t>();
      QVERIFY(!alike.empty());
      QVERIFY(alike.size() <= plans[k]["alike_count"].get<std::size_t>());
      for (const auto &other : alike) {
        QCOMPARE(nanoseconds(other), nanoseconds(plans[k]));
        QVERIFY(other["peak_memory_bytes"].get<double>() >=
                plans[k]["peak_memory_bytes"].get<double>());
      }
    }
    QVERIFY(alike_total > 0); // pp = 1 makes 1f1b and zb-h1 alike at least
    QFile csv(csv_path);
    QVERIFY(csv.open(QIODevice::ReadOnly));
    const QStringList lines = QString::fromUtf8(csv.readAll()).trimmed().split('\n');
    QVERIFY(lines.front().endsWith(",alike_count"));
    std::size_t csv_total = 0;
    for (qsizetype i = 1; i < lines.size(); ++i)
      csv_total += lines[i].split(',').back().toULongLong();
    QCOMPARE(csv_total, alike_total);
    const Run text = pipescope(kSmallSearch + QStringList{"--top", "6"});
    QVERIFY2(text.out.contains("as fast as a ranked plan (the same step time to the nanosecond"),
             qPrintable(text.out));
    QVERIFY2(text.out.contains(" more"), qPrintable(text.out));
  }

  // --layer-split narrows the layer splits searched (both by default); each plan says which it
  // has in the JSON and the text, and the saved plan keeps it.
  void layerSplitIsSearchedAndSaved() {
    const QStringList pipeline = {"--pp", "8", "--schedules", "1f1b", "--top", "40"};
    const auto splitsOf = [&](const QStringList &extra) {
      const Run run = pipescope(kSmallSearch.mid(0, 9) + pipeline + QStringList{"--json"} + extra);
      if (run.exit_code != 0) qFatal("search failed: %s", qPrintable(run.err));
      const json out = json::parse(run.out.toStdString());
      std::set<bool> seen;
      for (const auto &plan : out["plans"])
        seen.insert(plan["balance_layers"].get<bool>());
      return seen;
    };
    QCOMPARE(splitsOf({"--layer-split", "even"}), (std::set<bool>{false}));
    QCOMPARE(splitsOf({"--layer-split", "balanced"}), (std::set<bool>{true}));
    QCOMPARE(splitsOf({}), (std::set<bool>{false, true}));
    QTemporaryDir dir;
    const QString plan_path = dir.filePath("best.json");
    const Run run =
        pipescope(kSmallSearch.mid(0, 9) +
                  QStringList{"--pp", "8", "--schedules", "1f1b", "--save-plan", plan_path});
    QVERIFY2(run.exit_code == 0, qPrintable(run.err));
    QVERIFY2(run.out.contains(" balanced\n"), qPrintable(run.out)); // the best, in the table
    QVERIFY2(run.out.contains("balanced layer splits (Megatron's --pipeline-model-parallel-layout):"
                              "\n  #1: E"),
             qPrintable(run.out));
    QFile saved(plan_path);
    QVERIFY(saved.open(QIODevice::ReadOnly));
    const json plan = json::parse(saved.readAll().toStdString());
    QCOMPARE(plan["training"]["balance_layers"].get<bool>(), true);
  }

  // The planner says how far the model was from published runs like the candidates, and which
  // runners-up are closer to #1 than that: exactly those whose step is within the mean error.
  void runnersUpWithinTheValidatedErrorAreMarked() {
    const Run run = pipescope(kSmallSearch + QStringList{"--json", "--top", "8"});
    QVERIFY2(run.exit_code == 0, qPrintable(run.err));
    const json out = json::parse(run.out.toStdString());
    const json &accuracy = out["validated_accuracy"];
    QCOMPARE(accuracy["scope"].get<std::string>(), std::string("h100-sxm, bf16, dense"));
    QVERIFY(accuracy["runs"].get<int>() > 0);
    const double mean = accuracy["mean_abs_step_error"].get<double>();
    const auto &plans = out["plans"];
    QVERIFY(!plans[0].contains("within_validated_error")); // #1 is the reference
    const double best = plans[0]["step_time_s"].get<double>();
    int within = 0;
    for (std::size_t k = 1; k < plans.size(); ++k) {
      const double step = plans[k]["step_time_s"].get<double>();
      QCOMPARE(plans[k]["within_validated_error"].get<bool>(), step <= best * (1 + mean));
      within += step <= best * (1 + mean) ? 1 : 0;
    }
    const Run text = pipescope(kSmallSearch + QStringList{"--top", "8"});
    QVERIFY2(text.out.contains(QStringLiteral("\nchecked against: on ")), qPrintable(text.out));
    if (within > 0)
      QVERIFY2(text.out.contains(QStringLiteral("%1 of the %2 runners-up are within ")
                                     .arg(within)
                                     .arg(plans.size() - 1)),
               qPrintable(text.out));
  }

  // --recompute-modules reaches every candidate that recomputes none or selectively (and none
  // under full recomputation), and the saved plan carries it.
  void recomputeModulesReachTheCandidates() {
    QTemporaryDir dir;
    const QString plan_path = dir.filePath("best.json");
    const Run run =
        pipescope(kSmallSearch + QStringList{"--json", "--top", "20", "--recompute-modules",
                                             "mlp,layernorm", "--save-plan", plan_path});
    QVERIFY2(run.exit_code == 0, qPrintable(run.err));
    const json out = json::parse(run.out.toStdString());
    int checked = 0;
    for (const auto &plan : out["plans"]) {
      const bool applies = plan["recompute"] != "full";
      QCOMPARE(plan["recompute_modules"],
               applies ? json::array({"layernorm", "mlp"}) : json::array());
      ++checked;
    }
    QVERIFY(checked > 0);
    QFile file(plan_path);
    QVERIFY(file.open(QIODevice::ReadOnly));
    const json saved = json::parse(file.readAll().toStdString());
    if (out["plans"][0]["recompute"] != "full")
      QCOMPARE(saved["training"]["recompute_modules"], json::array({"layernorm", "mlp"}));
  }

  // The saved best plan simulates to the step time the search reported; the CSV has the rows.
  void savedPlanReproducesTheSearch() {
    QTemporaryDir dir;
    const QString plan_path = dir.filePath("best.json"), csv_path = dir.filePath("plans.csv");
    const Run run = pipescope(kSmallSearch + QStringList{"--json", "--top", "3", "--save-plan",
                                                         plan_path, "--csv", csv_path});
    QVERIFY2(run.exit_code == 0, qPrintable(run.err));
    const json best = json::parse(run.out.toStdString())["plans"][0];
    const Run simulated = pipescope({"simulate", "--plan", plan_path, "--json"});
    QVERIFY2(simulated.exit_code == 0, qPrintable(simulated.err));
    const json result = json::parse(simulated.out.toStdString());
    QCOMPARE(result["step_time_s"].get<double>(), best["step_time_s"].get<double>());
    QCOMPARE(result["schedule"].get<std::string>(), best["schedule"].get<std::string>());
    // #1's speed of light is the saved plan's, below its step.
    const double fastest =
        json::parse(run.out.toStdString())["best_speed_of_light_step_s"].get<double>();
    QCOMPARE(result["speed_of_light_step_s"].get<double>(), fastest);
    QVERIFY(fastest < best["step_time_s"].get<double>());
    QFile csv(csv_path);
    QVERIFY(csv.open(QIODevice::ReadOnly));
    const QStringList lines = QString::fromUtf8(csv.readAll()).trimmed().split('\n');
    QCOMPARE(lines.size(), 4);
    QVERIFY(lines[0].startsWith("rank,tokens_per_s,step_time_s"));
  }

  void badInputIsRefusedWithWhatWouldWork_data() {
    QTest::addColumn<QStringList>("args");
    QTest::addColumn<QString>("expected");
    QTest::newRow("no mesh") << QStringList{"search",     "--model",        "llama3-8b",
                                            "--hardware", "h100-sxm",       "--gpus",
                                            "97",         "--global-batch", "128"}
                             << "97 GPUs admit no mesh";
    QTest::newRow("nothing fits") << kSmallSearch + QStringList{"--memory-limit", "2"}
                                  << "nothing fits in 2.0 GiB per GPU";
    QTest::newRow("limit beyond the device")
        << kSmallSearch + QStringList{"--memory-limit", "200"} << "--memory-limit must be";
    QTest::newRow("unknown schedule")
        << QStringList{"search", "--model", "llama3-8b",   "--hardware", "h100-sxm",
                       "--gpus", "8",       "--schedules", "zz"}
        << "unknown schedule 'zz'";
    QTest::newRow("zero stage out of range") << kSmallSearch + QStringList{"--zero-stage", "0,4"}
                                             << "--zero-stage must be between 0 and 3, got 4";
    QTest::newRow("zero stage not a number") << kSmallSearch + QStringList{"--zero-stage", "fsdp"}
                                             << "--zero-stage expects an integer, got 'fsdp'";
    QTest::newRow("zero stage twice")
        << kSmallSearch + QStringList{"--zero-stage", "3,1,3"} << "stage 3 is listed twice";
    QTest::newRow("zero1 and another stage")
        << kSmallSearch + QStringList{"--zero1", "--zero-stage", "2"}
        << "--zero1 is --zero-stage 1";
    QTest::newRow("fp8 without FP8 tensor cores")
        << QStringList{"search",    "--model", "llama3-8b", "--hardware",
                       "a100-80gb", "--gpus",  "8",         "--fp8"}
        << "--fp8: the a100-80gb has no FP8 tensor cores";
    QTest::newRow("unknown collective algorithm")
        << kSmallSearch + QStringList{"--collective-algorithm", "star"}
        << "--collective-algorithm:";
    QTest::newRow("unknown layer split")
        << kSmallSearch + QStringList{"--layer-split", "even,uneven"}
        << "--layer-split: 'uneven' is not a split; use even, balanced or both";
    QTest::newRow("layer split twice")
        << kSmallSearch + QStringList{"--layer-split", "balanced,balanced"}
        << "--layer-split: balanced is listed twice";
    QTest::newRow("no mesh with the listed tp")
        << kSmallSearch + QStringList{"--tp", "3"} << "(searched: --tp 3)";
    QTest::newRow("layout syntax") << QStringList{"simulate", "--pp", "4"} + kModel +
                                          QStringList{"--layout", "Et*8|t*8|(t*8|t*8L"}
                                   << "--layout: the group opened at column 10 is not closed";
    QTest::newRow("layout layer count") << QStringList{"simulate", "--pp", "4"} + kModel +
                                               QStringList{"--layout", "Et*8|t*8|t*8|t*9L"}
                                        << "33 transformer layers but the model has 32";
    QTest::newRow("layout stage count") << QStringList{"simulate", "--pp", "2"} + kModel +
                                               QStringList{"--layers-per-stage", "8,8,8,8"}
                                        << "P × V = 4";
    QTest::newRow("layout without a model")
        << QStringList{"simulate", "--pp", "4", "--layout", "Et|t|t|tL"} << "needs --model";
    QTest::newRow("two layouts") << QStringList{"simulate", "--pp", "4"} + kModel +
                                        QStringList{"--layers-per-stage", "8,8,8,8",
                                                    "--first-stage-less-layers", "1"}
                                 << "give one of them";
  }
  void badInputIsRefusedWithWhatWouldWork() {
    QFETCH(QStringList, args);
    QFETCH(QString, expected);
    const Run run = pipescope(args);
    QCOMPARE(run.exit_code, 2);
    QVERIFY2(run.err.contains(expected), qPrintable(run.err));
    QVERIFY2(run.err.count('\n') == 1, qPrintable(run.err)); // one line
    QVERIFY(run.out.isEmpty());
  }

  // --zero-stage LIST narrows the stages searched (stages above 0 only where dp × cp > 1; --zero1
  // is stage 1); --fp8 and --collective-algorithm reach every plan, in the JSON, the CSV, the
  // text and the saved plan, which simulates to the searched step time. --help lists them.
  void zeroStagesAndPassThroughOptions() {
    const auto plansOf = [](const QStringList &extra) {
      const Run run = pipescope(kSmallSearch + QStringList{"--json", "--top", "100000"} + extra);
      if (run.exit_code != 0) qFatal("search failed: %s", qPrintable(run.err));
      // The ranked plans and the configurations as fast as them (listed under "alike").
      const json out = json::parse(run.out.toStdString());
      json plans = json::array();
      for (const auto &plan : out["plans"]) {
        plans.push_back(plan);
        for (const auto &alike : plan.value("alike", json::array()))
          plans.push_back(alike);
      }
      return plans;
    };
    std::set<int> seen;
    for (const auto &plan : plansOf({"--zero-stage", "0,2"})) {
      const int stage = plan["zero_stage"].get<int>();
      QVERIFY(stage == 0 || stage == 2);
      if (plan["mesh"]["dp"].get<int>() * plan["mesh"]["cp"].get<int>() == 1) QCOMPARE(stage, 0);
      seen.insert(stage);
    }
    QCOMPARE(seen, (std::set<int>{0, 2}));
    for (const auto &plan : plansOf({"--zero1"}))
      QCOMPARE(plan["zero_stage"].get<int>(), 1);
    // By default every stage is searched.
    seen.clear();
    for (const auto &plan : plansOf({}))
      seen.insert(plan["zero_stage"].get<int>());
    QCOMPARE(seen, (std::set<int>{0, 1, 2, 3}));

    QTemporaryDir dir;
    const QString plan_path = dir.filePath("best.json"), csv_path = dir.filePath("plans.csv");
    const Run run =
        pipescope(kSmallSearch + QStringList{"--json", "--top", "3", "--zero-stage", "3", "--fp8",
                                             "--collective-algorithm", "ring", "--save-plan",
                                             plan_path, "--csv", csv_path});
    QVERIFY2(run.exit_code == 0, qPrintable(run.err));
    const json best = json::parse(run.out.toStdString())["plans"][0];
    QCOMPARE(best["zero_stage"].get<int>(), 3);
    QCOMPARE(best["gemm_precision"].get<std::string>(), std::string("fp8"));
    QCOMPARE(best["collective_algorithm"].get<std::string>(), std::string("ring"));
    const Run simulated = pipescope({"simulate", "--plan", plan_path, "--json"});
    QVERIFY2(simulated.exit_code == 0, qPrintable(simulated.err));
    QCOMPARE(json::parse(simulated.out.toStdString())["step_time_s"].get<double>(),
             best["step_time_s"].get<double>());
    QFile csv(csv_path);
    QVERIFY(csv.open(QIODevice::ReadOnly));
    const QStringList lines = QString::fromUtf8(csv.readAll()).trimmed().split('\n');
    const QStringList header = lines[0].split(',');
    const QStringList first = lines[1].split(',');
    QCOMPARE(first.size(), header.size());
    QCOMPARE(first[header.indexOf("zero_stage")], QString("3"));
    QCOMPARE(first[header.indexOf("gemm_precision")], QString("fp8"));
    QCOMPARE(first[header.indexOf("collective_algorithm")], QString("ring"));
    QVERIFY(!header.contains("zero1"));

    const Run text =
        pipescope(kSmallSearch + QStringList{"--top", "2", "--zero-stage", "2", "--fp8"});
    QVERIFY2(text.exit_code == 0, qPrintable(text.err));
    QVERIFY(text.out.contains("8 × h100-sxm (fp8 GEMMs):"));
    QVERIFY2(unwrapped(text.out).contains("MFU% is against the dense 16-bit peak (989 TFLOPS); "
                                          "against the FP8 peak (1979) it is 0.50 times as much"),
             qPrintable(text.out));
    QVERIFY(text.out.contains(" z2 "));
    const Run help = pipescope({"search", "--help"});
    for (const char *option : {"--zero-stage LIST", "--zero1", "--fp8", "--gemm-precision P",
                               "--collective-algorithm A", "--tp LIST", "--pp LIST"})
      QVERIFY2(help.out.contains(option), option);
  }

  // Ctrl-C stops the search: the process ends normally (not by the signal) with what it found,
  // marked as interrupted, or says that it had found nothing yet.
  void interruptKeepsWhatWasFound() {
    QProcess process;
    process.start(QStringLiteral(PIPESCOPE_CLI),
                  {"search", "--model", "llama3-405b", "--hardware", "h100-sxm", "--gpus", "16384",
                   "--global-batch", "65536", "--microbatch-sizes", "1,2,4,8,16",
                   "--virtual-stages", "2,3,4,6,8", "--json"});
    QVERIFY(process.waitForStarted());
    QTest::qWait(150);
    // Only a running child is signalled: kill(0, ...) would signal this test's process group.
    const auto pid = static_cast<pid_t>(process.processId());
    QVERIFY2(process.state() == QProcess::Running && pid > 0,
             "the search ended before it could be interrupted; give it a larger space");
    QCOMPARE(::kill(pid, SIGINT), 0);
    QVERIFY(process.waitForFinished(120000));
    QCOMPARE(process.exitStatus(), QProcess::NormalExit);
    const QString err = QString::fromUtf8(process.readAllStandardError());
    if (process.exitCode() == 2) {
      QVERIFY2(err.contains("interrupted before any plan was simulated"), qPrintable(err));
      return;
    }
    QCOMPARE(process.exitCode(), 0);
    const json out = json::parse(process.readAllStandardOutput().toStdString());
    QVERIFY(out["interrupted"].get<bool>());
    QVERIFY(err.contains("interrupted; showing the best of what was simulated"));
    QVERIFY(!out["plans"].empty());
  }

  // The same split three ways gives the same step; another split gives another.
  void layoutOptionsDriveTheSimulation() {
    const auto step = [](const QStringList &extra) {
      const Run run = pipescope(QStringList{"simulate", "--pp", "4", "--json"} + kModel + extra);
      if (run.exit_code != 0) qFatal("simulate failed: %s", qPrintable(run.err));
      return json::parse(run.out.toStdString())["step_time_s"].get<double>();
    };
    const double megatron = step({"--layout", "Et*7|(t*9|)*2t*7L"});
    QCOMPARE(step({"--layers-per-stage", "7,9,9,7"}), megatron);
    // torchtitan: first 2, last 2 fewer: 36 over 4 = 9 each, minus 2 at each end.
    QCOMPARE(step({"--first-stage-less-layers", "2", "--last-stage-less-layers", "2"}), megatron);
    QVERIFY(step({}) != megatron);
  }
};

QTEST_GUILESS_MAIN(TestCliSearch)
#include "test_cli_search.moc"
