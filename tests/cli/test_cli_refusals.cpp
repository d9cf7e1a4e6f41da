// `pipescope` refuses what it cannot honestly report: impossible costs and results (in files as
// on the command line), bad time factors and measurements, and options that would be silently
// ignored. Each row: the arguments, the exit code (2), a substring stderr must contain, and
// whether stdout stays empty. Every refusal is one line on stderr.
#include <QtTest>

#include <QProcess>
#include <QTemporaryDir>

#include <nlohmann/json.hpp>

#include "tests/cli/cli_process.h"

using nlohmann::json;

namespace {

using cli_test::pipescope;
using cli_test::Run;

void writeFile(const QString &path, const std::string &text) {
  QFile file(path);
  if (!file.open(QIODevice::WriteOnly)) qFatal("cannot write %s", qPrintable(path));
  file.write(text.data(), static_cast<qint64>(text.size()));
}

json readJson(const QString &path) {
  QFile file(path);
  if (!file.open(QIODevice::ReadOnly)) qFatal("cannot read %s", qPrintable(path));
  return json::parse(file.readAll().toStdString());
}

std::string plan(const std::string &schedule, const json &costs) {
  return json{{"format", "pipescope.plan"},
              {"version", 1},
              {"schedule", {{"name", schedule}, {"pp", 4}, {"microbatches", 8}}},
              {"costs", costs}}
      .dump();
}

} // namespace

class TestCliRefusals : public QObject {
  Q_OBJECT

  QTemporaryDir dir_;
  QString path(const QString &name) const { return dir_.filePath(name); }

private slots:
  void initTestCase() {
    QVERIFY(dir_.isValid());
    writeFile(path("tiny-bandwidth.plan"),
              plan("1f1b", {{"p2p_bandwidth", 1e-300}, {"activation_bytes", 4e6}}));
    writeFile(path("huge-transfer.plan"),
              plan("1f1b", {{"boundary_transfer", json::array({1.7e308, 1.7e308, 1.7e308, 0})}}));
    writeFile(path("short-pair.plan"),
              plan("dualpipe", {{"forward", 1}, {"backward", 2}, {"overlapped", 1}}));
    writeFile(path("negative.plan"), plan("1f1b", {{"forward", -1}}));
    writeFile(path("custom.csv"), "0F0,0B0\n");
    // An H100-like hardware file with one field added or changed.
    const auto hardware = [](const char *field, const json &value) {
      json file{{"format", "pipescope.hardware"},
                {"version", 1},
                {"peak_tflops", 989},
                {"memory_gib", 80},
                {"intra_node_gbps", 450},
                {"inter_node_gbps", 50},
                {"gpus_per_node", 8}};
      file[field] = value;
      return file.dump();
    };
    writeFile(path("falling-curve.json"),
              hardware("gemm_efficiency", {{{"size", 1024}, {"efficiency", 0.6}},
                                           {{"size", 4096}, {"efficiency", 0.5}}}));
    writeFile(path("contention-above-one.json"), hardware("collective_gemm_slowdown", 1.5));
    writeFile(path("slow-link.json"), hardware("intra_node_gbps", 1e-300));
    // Measured traces, made from a simulated one as a backend would write them.
    const Run simulated = pipescope(
        {"simulate", "--pp", "2", "--microbatches", "4", "--trace", path("simulated.trace")});
    QCOMPARE(simulated.exit_code, 0);
    json trace = readJson(path("simulated.trace"));
    trace["source"] = "measured";
    for (const double factor : {0.0, -2.0}) {
      trace["backend"] = {{"workload", {{"expected_time_factor", factor}}}};
      writeFile(path(QStringLiteral("factor%1.trace").arg(factor)), trace.dump());
    }
    trace.erase("backend");
    for (auto &op : trace["ops"])
      op["end_us"] = op["start_us"]; // every op 0 us long, at distinct times
    writeFile(path("all-zero.trace"), trace.dump());
  }

  void refusedWithTheReason_data() {
    QTest::addColumn<QStringList>("args");
    QTest::addColumn<int>("code");
    QTest::addColumn<QString>("expected");
    QTest::addColumn<bool>("stdout_empty");
    const QString d = dir_.path() + QStringLiteral("/");

    // Impossible costs in files, exactly as on the command line.
    QTest::newRow("validate: tiny bandwidth")
        << QStringList{"validate", d + "tiny-bandwidth.plan"} << 2
        << "/costs/p2p_bandwidth: expected 0 (transfers cost only the latency) or from 0.001"
        << true;
    QTest::newRow("validate: huge transfer") << QStringList{"validate", d + "huge-transfer.plan"}
                                             << 2 << "/costs/boundary_transfer/0" << true;
    QTest::newRow("validate: pair shorter than B")
        << QStringList{"validate", d + "short-pair.plan"} << 2
        << "/costs/overlapped: the F&B pair time (1 us) must be from max(F, B) = 2" << true;
    QTest::newRow("validate: negative F")
        << QStringList{"validate", d + "negative.plan"} << 2 << "/costs/forward: expected" << true;
    QTest::newRow("simulate --plan: tiny bandwidth")
        << QStringList{"simulate", "--plan", d + "tiny-bandwidth.plan"} << 2
        << "/costs/p2p_bandwidth" << true;
    QTest::newRow("simulate: tiny bandwidth")
        << QStringList{"simulate", "--p2p-bandwidth", "1e-300", "--activation-bytes", "4e6"} << 2
        << "--p2p-bandwidth: expected 0 (transfers cost only the latency) or from 0.001" << true;
    QTest::newRow("simulate: pair shorter than B")
        << QStringList{"simulate", "--schedule", "dualpipe", "--overlapped", "1"} << 2
        << "--overlapped: the F&B pair time (1 us) must be from max(F, B) = 2" << true;
    QTest::newRow("simulate: pair longer than 2(F+B)")
        << QStringList{"simulate", "--schedule", "dualpipe", "--overlapped", "7"} << 2
        << "to 2(F + B) = 6 us" << true;
    QTest::newRow("simulate: huge F") << QStringList{"simulate", "--forward", "1e300"} << 2
                                      << "--forward: expected a finite number" << true;
    QTest::newRow("simulate: NaN F")
        << QStringList{"simulate", "--forward", "nan"} << 2 << "--forward expects a number" << true;
    QTest::newRow("table: negative B") << QStringList{"table", "--backward", "-1"} << 2
                                       << "--backward: expected a finite number" << true;
    QTest::newRow("hardware file: tiny link")
        << QStringList{"simulate", "--model", "llama3-8b", "--hardware", d + "slow-link.json"} << 2
        << "/intra_node_gbps" << true;

    // Time factors and measurements.
    QTest::newRow("compare: time factor 0")
        << QStringList{"compare", "--measured", d + "factor0.trace"} << 2
        << "/backend/workload/expected_time_factor: expected a positive, finite number" << true;
    QTest::newRow("compare: time factor -2")
        << QStringList{"compare", "--measured", d + "factor-2.trace"} << 2 << "expected_time_factor"
        << true;
    QTest::newRow("compare: all-zero calibration")
        << QStringList{"compare",     "--measured",  d + "all-zero.trace",
                       "--calibrate", "--save-plan", d + "calibrated.plan"}
        << 2 << "cannot calibrate: stage 0's forward (F) would calibrate to 0" << true;

    // Options that would be silently ignored.
    QTest::newRow("zb-v with V=3")
        << QStringList{"simulate", "--schedule", "zb-v", "--virtual-stages", "3"} << 2
        << "--virtual-stages 3 does not apply to zb-v" << true;
    QTest::newRow("dualpipe with V=4")
        << QStringList{"simulate", "--schedule", "dualpipe", "--virtual-stages", "4"} << 2
        << "fixes V = 2" << true;
    QTest::newRow("custom with schedule")
        << QStringList{"simulate", "--custom", d + "custom.csv", "--schedule", "gpipe"} << 2
        << "--schedule does not apply with --custom" << true;
    QTest::newRow("custom with pp")
        << QStringList{"simulate", "--custom", d + "custom.csv", "--pp", "4"} << 2
        << "--pp does not apply with --custom" << true;
    QTest::newRow("ops without json") << QStringList{"simulate", "--ops"} << 2
                                      << "--ops lists every op in the JSON output" << true;
    QTest::newRow("microbatch group with 1f1b")
        << QStringList{"simulate", "--schedule", "1f1b", "--microbatch-group", "4"} << 2
        << "--microbatch-group does not apply to 1f1b" << true;
    QTest::newRow("activation bytes without bandwidth")
        << QStringList{"simulate", "--activation-bytes", "4e6"} << 2
        << "--activation-bytes does not apply without a bandwidth" << true;
    QTest::newRow("activation bytes with bandwidth 0")
        << QStringList{"simulate", "--activation-bytes", "4e6", "--p2p-bandwidth", "0"} << 2
        << "--activation-bytes does not apply without a bandwidth" << true;
    QTest::newRow("overlapped without pairs")
        << QStringList{"simulate", "--schedule", "1f1b", "--overlapped", "3"} << 2
        << "--overlapped does not apply to 1f1b" << true;
    QTest::newRow("costs with a model")
        << QStringList{"simulate", "--model",   "llama3-8b", "--hardware",
                       "h100-sxm", "--forward", "3"}
        << 2 << "--forward does not apply with --model and --hardware" << true;
    QTest::newRow("empty schedules")
        << QStringList{"table", "--schedules", ""} << 2 << "--schedules lists no schedule" << true;
    QTest::newRow("only commas") << QStringList{"table", "--schedules", ",,"} << 2
                                 << "--schedules lists no schedule" << true;
    QTest::newRow("table V without interleaving")
        << QStringList{"table", "--schedules", "gpipe,1f1b", "--virtual-stages", "3"} << 2
        << "--virtual-stages does not apply to gpipe,1f1b" << true;
    QTest::newRow("compare markdown and json")
        << QStringList{"compare", "--measured", d + "simulated.trace", "--markdown", "--json"} << 2
        << "--markdown formats the text tables and does not apply with --json" << true;

    // Mixture-of-experts, context parallelism and hardware curves (issue #13).
    const QStringList mixtral{"simulate", "--model", "mixtral-8x7b",   "--hardware", "h100-sxm",
                              "--pp",     "2",       "--microbatches", "4"};
    QTest::newRow("simulate: EP not dividing the experts")
        << (mixtral + QStringList{"--dp", "6", "--ep", "6"}) << 2
        << "experts (8) are not divisible by the mesh's ep = 6" << true;
    QTest::newRow("simulate: EP not dividing dp x cp")
        << (mixtral + QStringList{"--dp", "3", "--cp", "2", "--ep", "4"}) << 2
        << "ep = 4 does not divide dp × cp = 3 × 2 = 6" << true;
    QTest::newRow("simulate: CP not dividing the sequence")
        << (mixtral + QStringList{"--dp", "2", "--cp", "3"}) << 2
        << "sequence_length (4096) is not divisible by 2 × cp = 6 (mesh cp = 3)" << true;
    QTest::newRow("simulate: EP without experts")
        << QStringList{"simulate", "--model", "llama3-8b", "--hardware", "h100-sxm",
                       "--dp",     "2",       "--ep",      "2"}
        << 2 << "mesh: ep = 2 but model 'llama3-8b' has no experts" << true;
    QTest::newRow("simulate: three-name rank order with CP")
        << (mixtral + QStringList{"--dp", "2", "--cp", "2", "--rank-order", "tp-pp-dp"}) << 2
        << "rank order 'tp-pp-dp' does not place cp, but cp = 2; name all four dimensions" << true;
    QTest::newRow("simulate: world too large")
        << (mixtral + QStringList{"--dp", "65536", "--cp", "1024"}) << 2
        << "GPUs (dp × cp × tp × pp); pipescope models at most 1048576" << true;
    QTest::newRow("simulate: falling GEMM curve")
        << QStringList{"simulate", "--model", "llama3-8b", "--hardware", d + "falling-curve.json"}
        << 2 << "/gemm_efficiency/1/efficiency: the curve must not fall with size" << true;
    QTest::newRow("simulate: collective slowdown above 1")
        << QStringList{"simulate", "--model", "llama3-8b", "--hardware",
                       d + "contention-above-one.json"}
        << 2 << "/collective_gemm_slowdown" << true;
    QTest::newRow("simulate: FP8 on an A100")
        << QStringList{"simulate", "--model", "llama3-8b", "--hardware", "a100-80gb", "--fp8"} << 2
        << "gemm_precision \"fp8\" but hardware 'a100-80gb': has no FP8 tensor cores" << true;
    QTest::newRow("simulate: unknown GEMM precision")
        << QStringList{"simulate", "--model",          "llama3-8b", "--hardware",
                       "h100-sxm", "--gemm-precision", "fp4"}
        << 2 << "--gemm-precision: GEMM precision 'fp4' is not known; use bf16 or fp8" << true;
    QTest::newRow("simulate: --fp8 without a model")
        << QStringList{"simulate", "--fp8"} << 2 << "--fp8 needs --model and --hardware" << true;
    QTest::newRow("simulate: unknown recompute module")
        << QStringList{"simulate",           "--model",  "llama3-8b",
                       "--hardware",         "h100-sxm", "--recompute-modules",
                       "layernorm,attention"}
        << 2
        << "--recompute-modules: recompute module 'attention' is not known; use layernorm, "
           "mla_up_proj, mlp, moe_act, comma-separated (core_attn is recompute selective)"
        << true;
    QTest::newRow("simulate: recompute modules under full recomputation")
        << QStringList{"simulate",    "--model", "llama3-8b",           "--hardware", "h100-sxm",
                       "--recompute", "full",    "--recompute-modules", "mlp"}
        << 2
        << "--recompute-modules go with --recompute none or selective (Megatron's selective "
           "granularity), not full"
        << true;
    QTest::newRow("simulate: --no-swiglu-fusion without a model")
        << QStringList{"simulate", "--no-swiglu-fusion"} << 2
        << "--no-swiglu-fusion needs --model and --hardware" << true;

    // `calibrate`: what it cannot fit, and what the fix is.
    QTest::newRow("calibrate: rows on three GPU types")
        << QStringList{"calibrate", "--published", "all"} << 2
        << "one hardware file is fitted at a time: pick the rows of one with --rows (SET/ID "
           "where sets share ids), or give --hardware H"
        << true;
    QTest::newRow("calibrate: FP8 level without FP8 rows")
        << QStringList{"calibrate", "--published", "megatron-core-h100", "--fit", "fp8"} << 2
        << "no FP8 row to fit the FP8 level on" << true;
    QTest::newRow("calibrate: both levels on FP8 rows alone")
        << QStringList{"calibrate", "--published", "nemo-h100", "--fit", "level,fp8"} << 2
        << "no row left to fit the BF16 level on: every row runs FP8 GEMMs" << true;
    QTest::newRow("calibrate: host time without MoE rows")
        << QStringList{"calibrate", "--published", "megatron-core-h100", "--fit", "moe-host"} << 2
        << "no MoE row to fit the MoE layers' host time on" << true;
    QTest::newRow("calibrate: FP8 rows on an A100")
        << QStringList{"calibrate", "--published", "nemo-h100", "--hardware", "a100-80gb"} << 2
        << "row gpt3-5b runs FP8 GEMMs, but a100-80gb has no FP8 peak" << true;
    QTest::newRow("calibrate: unknown fit")
        << QStringList{"calibrate", "--published", "megatron-core-h100", "--fit", "speed"} << 2
        << "--fit takes level, fp8, moe-host, overhead and step, comma-separated, each once; "
           "got 'speed'"
        << true;
    QTest::newRow("calibrate: step overhead on FP8 rows the FP8 level takes")
        << QStringList{"calibrate", "--published", "nemo-h100", "--fit", "fp8,step"} << 2
        << "no row left to fit the step overhead on (it is fitted on the level's rows, those no "
           "other figure takes): every row runs FP8 GEMMs; leave fp8 or moe-host out of --fit"
        << true;
    QTest::newRow("calibrate: layer overhead on FP8 rows the FP8 level takes")
        << QStringList{"calibrate", "--published", "nemo-h100", "--fit", "fp8,overhead"} << 2
        << "no row left to fit the layer overhead on (it is fitted on the level's rows, those no "
           "other figure takes): every row runs FP8 GEMMs; leave fp8 or moe-host out of --fit"
        << true;
    QTest::newRow("calibrate: unknown row")
        << QStringList{"calibrate", "--published", "megatron-core-h100", "--rows", "gpt-2"} << 2
        << "--rows names 'gpt-2', which is not a row of megatron-core-h100" << true;
    QTest::newRow("calibrate: memory-only rows")
        << QStringList{"calibrate", "--published", "megatron-lm-ci-h100"} << 2
        << "no row of megatron-lm-ci-h100 has a measured step time" << true;
    QTest::newRow("calibrate: hardware file to standard output")
        << QStringList{"calibrate", "--published", "megatron-core-h100", "--save-hardware", "-"}
        << 2 << "--save-hardware needs a file name" << true;
    QTest::newRow("calibrate: no rows given")
        << QStringList{"calibrate"} << 2 << "give the measured runs with --published SET" << true;

    // Usage errors of validate go to stderr.
    QTest::newRow("validate without file")
        << QStringList{"validate"} << 2 << "validate needs the FILE to check" << true;
    QTest::newRow("validate with two files")
        << QStringList{"validate", d + "negative.plan", d + "short-pair.plan"} << 2
        << "validate takes one FILE, got 2 arguments" << true;
    QTest::newRow("validate with an option")
        << QStringList{"validate", "--bogus"} << 2 << "unknown option --bogus" << true;
  }
  void refusedWithTheReason() {
    QFETCH(QStringList, args);
    QFETCH(int, code);
    QFETCH(QString, expected);
    QFETCH(bool, stdout_empty);
    const Run run = pipescope(args);
    const QString describe = QStringLiteral("exit %1\nstdout:\n%2\nstderr:\n%3")
                                 .arg(run.exit_code)
                                 .arg(run.out.left(2000), run.err.left(2000));
    QVERIFY2(run.exit_code == code, qPrintable(describe));
    QVERIFY2(run.err.startsWith(QStringLiteral("pipescope: ")), qPrintable(describe));
    QVERIFY2(run.err.contains(expected), qPrintable(describe));
    QVERIFY2(run.err.count('\n') == 1, qPrintable(describe)); // one line
    QVERIFY2(run.out.isEmpty() == stdout_empty, qPrintable(describe));
  }

  // Nothing is written when the refusal comes after the files were named.
  void refusedCalibrationWritesNoPlan() {
    const Run run = pipescope({"compare", "--measured", path("all-zero.trace"), "--calibrate",
                               "--save-plan", path("calibrated.plan")});
    QCOMPARE(run.exit_code, 2);
    QVERIFY(!QFile::exists(path("calibrated.plan")));
  }

  // The same options are accepted where they apply, so the refusals above are about the
  // combination, not the option.
  void acceptedWhereTheyApply_data() {
    QTest::addColumn<QStringList>("args");
    QTest::newRow("zb-v with V=2")
        << QStringList{"simulate", "--schedule", "zb-v", "--virtual-stages", "2"};
    QTest::newRow("ops with json") << QStringList{"simulate", "--ops", "--json"};
    QTest::newRow("group with interleaving") << QStringList{"simulate",
                                                            "--schedule",
                                                            "interleaved-1f1b",
                                                            "--virtual-stages",
                                                            "2",
                                                            "--microbatches",
                                                            "8",
                                                            "--microbatch-group",
                                                            "8"};
    QTest::newRow("bytes with bandwidth")
        << QStringList{"simulate", "--activation-bytes", "4e6", "--p2p-bandwidth", "0.001"};
    QTest::newRow("pair in range")
        << QStringList{"simulate", "--schedule", "dualpipe", "--overlapped", "2.5"};
    QTest::newRow("table with interleaving")
        << QStringList{"table", "--schedules", "gpipe,interleaved-1f1b", "--virtual-stages", "2"};
  }
  void acceptedWhereTheyApply() {
    QFETCH(QStringList, args);
    const Run run = pipescope(args);
    QVERIFY2(run.exit_code == 0, qPrintable(run.err));
    QVERIFY(!run.out.isEmpty());
    QVERIFY(run.err.isEmpty());
  }
};

QTEST_GUILESS_MAIN(TestCliRefusals)
#include "test_cli_refusals.moc"
