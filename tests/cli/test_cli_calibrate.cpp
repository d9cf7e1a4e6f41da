// `pipescope calibrate`: the GEMM level fitted to measured steps. It must find a level it was
// given (rows made at a known level come back to it, with no error left), reproduce the shipped
// presets' levels from the rows docs/validation.md says they were fitted on, and write a hardware
// file that predicts the rows as its report says.
#include <QtTest>

#include <QFile>
#include <QTemporaryDir>

#include <cmath>
#include <string>

#include <nlohmann/json.hpp>

#include "tests/cli/cli_process.h"

using nlohmann::json;

namespace {

using cli_test::pipescope;
using cli_test::Run;

json readJson(const QString &path) {
  QFile file(path);
  if (!file.open(QIODevice::ReadOnly)) qFatal("cannot read %s", qPrintable(path));
  return json::parse(file.readAll().toStdString());
}

void writeJson(const QString &path, const json &value) {
  QFile file(path);
  if (!file.open(QIODevice::WriteOnly)) qFatal("cannot write %s", qPrintable(path));
  const std::string text = value.dump(2);
  file.write(text.data(), static_cast<qint64>(text.size()));
}

json runJson(const QStringList &args) {
  const Run run = pipescope(args);
  if (run.exit_code != 0) qFatal("pipescope failed: %s", qPrintable(run.err));
  return json::parse(run.out.toStdString());
}

const QString kResources = QStringLiteral(PIPESCOPE_RESOURCES);

/// The rows of a shipped validation set with these ids.
json shippedRows(const QString &set, const std::vector<std::string> &ids) {
  const json file = readJson(kResources + "/validation/" + set + ".json");
  json rows = json::array();
  for (const auto &row : file["rows"])
    if (std::find(ids.begin(), ids.end(), row["id"].get<std::string>()) != ids.end())
      rows.push_back(row);
  return rows;
}

json validationFile(const json &rows) {
  return {{"format", "pipescope.validation"},
          {"version", 1},
          {"title", "test rows"},
          {"source", "made by test_cli_calibrate"},
          {"rows", rows}};
}

/// h100-sxm with its curves (and flat factor) scaled to plateau `level`, as calibrate scales them.
json h100AtLevel(double level) {
  json hardware = readJson(kResources + "/presets/hardware/h100-sxm.json");
  const double factor = level / 0.56;
  for (const char *curve : {"gemm_efficiency", "gemm_efficiency_fp8"})
    for (auto &point : hardware[curve])
      point["efficiency"] = std::round(point["efficiency"].get<double>() * factor * 1e4) / 1e4;
  hardware["efficiency"] = level;
  return hardware;
}

/// Writes `rows` to `file` as a validation set run on `hardware_path`, each measured at what
/// pipescope predicts for it there: steps made at known figures.
void writeMadeRows(json &rows, const QString &hardware_path, const QString &file) {
  for (auto &row : rows)
    row["hardware"] = hardware_path.toStdString();
  writeJson(file, validationFile(rows));
  const json predicted = runJson({"compare", "--published", file, "--json"});
  for (std::size_t i = 0; i < rows.size(); ++i)
    rows[i]["measured"] = {{"step_time_s", predicted["rows"][i]["predicted_step_s"]}};
  writeJson(file, validationFile(rows));
}

} // namespace

class TestCliCalibrate : public QObject {
  Q_OBJECT

  QTemporaryDir dir_;
  QString path(const QString &name) const { return dir_.filePath(name); }

private slots:
  void initTestCase() { QVERIFY(dir_.isValid()); }

  // The fit's prose (the figures fitted, the rows left out and why) wraps at 100 columns under
  // the table's width; a Megatron-LM log read by `pipescope megatron` likewise, but for its model,
  // mesh and training objects, which stay one JSON line each.
  void proseWrapsAtAHundredColumns() {
    const Run fit = pipescope({"calibrate", "--published", "megatron-core-h100"});
    QVERIFY2(fit.exit_code == 0, qPrintable(fit.err));
    QVERIFY(fit.out.contains(QStringLiteral("\n  with it: 0.")));
    const Run log = pipescope({"megatron", QStringLiteral(PIPESCOPE_TEST_DATA) +
                                               "/megatron_h100_run/train_gpt_1.7b.log"});
    QVERIFY2(log.exit_code == 0, qPrintable(log.err));
    QVERIFY(log.out.contains(QStringLiteral("\n    to a multiple of 128")));
    for (const Run *run : {&fit, &log})
      for (const QString &line : run->out.split('\n'))
        if (!line.startsWith(QStringLiteral("  model ")) &&
            !line.startsWith(QStringLiteral("  training ")))
          QVERIFY2(line.size() <= 102, qPrintable(line));
  }

  // Steps predicted on h100-sxm's curve at level 0.62 (not the shipped 0.56) and with 6 ms of
  // host time per MoE layer (not the default 3.5) are the measurements; fitting h100-sxm to them
  // must find both, the level on the dense rows and the host time on the MoE rows, and leave no
  // error, every row held out included (each of the others alone determines the same figure).
  void findsTheFiguresTheStepsWereMadeAt() {
    json hardware = h100AtLevel(0.62);
    hardware["moe_layer_host_us"] = 6000;
    writeJson(path("h100-made.json"), hardware);

    json rows = shippedRows("megatron-core-h100",
                            {"gpt-1.7b", "gpt-16b", "gpt-70b", "gpt-177b-strong-4608"});
    for (const auto &row :
         shippedRows("megatron-bridge-h100", {"qwen3-30b-a3b-gbs1024-ep16", "deepseek-v3-gbs8192"}))
      rows.push_back(row);
    QCOMPARE(rows.size(), std::size_t{6});
    writeMadeRows(rows, path("h100-made.json"), path("made.json"));

    const json fit = runJson(
        {"calibrate", "--published", path("made.json"), "--hardware", "h100-sxm", "--json"});
    QCOMPARE(fit["fitted"], json::array({"level", "moe-host"})); // dense and MoE rows
    QCOMPARE(fit["level"]["before"].get<double>(), 0.56);
    QCOMPARE(fit["level"]["after"].get<double>(), 0.62);
    QCOMPARE(fit["level"]["rows"].get<int>(), 4);
    QCOMPARE(fit["moe_host_us"]["before"].get<double>(), 3500.0);
    QCOMPARE(fit["moe_host_us"]["after"].get<double>(), 6000.0);
    QCOMPARE(fit["moe_host_us"]["rows"].get<int>(), 2);
    QCOMPARE(fit["rows"].size(), std::size_t{6});
    for (const auto &row : fit["rows"]) {
      // The shipped figures are off on every row; the fitted ones on none.
      QVERIFY2(std::abs(row["error_before"].get<double>()) > 0.02, row.dump().c_str());
      QVERIFY2(std::abs(row["error_after"].get<double>()) < 1e-9, row.dump().c_str());
      QVERIFY2(std::abs(row["error_held_out"].get<double>()) < 1e-9, row.dump().c_str());
    }
    QVERIFY(fit["after"]["mean_abs_step_error"].get<double>() < 1e-9);
    // The FP8 curve moved with the level; the file carries the host time.
    QCOMPARE(fit["fp8_level"]["after"].get<double>(), 0.62);
    QCOMPARE(fit["hardware"]["moe_layer_host_us"].get<double>(), 6000.0);

    // The MoE rows alone fit the host time alone, at the shipped level.
    const json moe_only =
        runJson({"calibrate", "--published", path("made.json"), "--hardware", "h100-sxm", "--rows",
                 "qwen3-30b-a3b-gbs1024-ep16,deepseek-v3-gbs8192", "--json"});
    QCOMPARE(moe_only["fitted"], json::array({"moe-host"}));
    QCOMPARE(moe_only["level"]["after"].get<double>(), 0.56);
  }

  // Steps made at level 0.62 with a layer overhead of 500 us (the shipped curve is at 0.56 with
  // none), on rows of 4,096 to 32,768 tokens a microbatch: --fit level,overhead must find the
  // pair, which no level alone matches (a fixed time per layer weighs more on the smaller
  // microbatches), and the file it writes carries the overhead and says where it comes from.
  void findsTheLayerOverheadTheStepsWereMadeAt() {
    json hardware = h100AtLevel(0.62);
    hardware["layer_overhead_us"] = 500;
    writeJson(path("h100-overhead.json"), hardware);

    json rows = shippedRows("megatron-core-h100", {"gpt-1.7b", "gpt-7.1b"});
    json sc21 = shippedRows("megatron-sc21-a100", {"gpt-1.7b"});
    sc21[0]["id"] = "sc21-gpt-1.7b"; // 16 sequences of 2,048 a microbatch
    rows.push_back(sc21[0]);
    rows.push_back(shippedRows("nemo-h100", {"gpt3-5b"})[0]); // 4 of 2,048, FP8
    QCOMPARE(rows.size(), std::size_t{4});
    writeMadeRows(rows, path("h100-overhead.json"), path("overhead.json"));

    // The level alone cannot match them all.
    const json level = runJson({"calibrate", "--published", path("overhead.json"), "--hardware",
                                "h100-sxm", "--fit", "level", "--json"});
    QVERIFY2(level["after"]["worst_abs_step_error"].get<double>() > 0.01, level.dump().c_str());
    QCOMPARE(level["layer_overhead_us"]["after"].get<double>(), 0.0);

    const QString saved = path("h100-overhead-fit.json");
    const json fit =
        runJson({"calibrate", "--published", path("overhead.json"), "--hardware", "h100-sxm",
                 "--fit", "level,overhead", "--save-hardware", saved, "--json"});
    QCOMPARE(fit["fitted"], json::array({"level", "overhead"}));
    QCOMPARE(fit["level"]["after"].get<double>(), 0.62);
    QCOMPARE(fit["layer_overhead_us"]["before"].get<double>(), 0.0);
    QCOMPARE(fit["layer_overhead_us"]["after"].get<double>(), 500.0);
    QCOMPARE(fit["layer_overhead_us"]["rows"].get<int>(), 4);
    // Held out, the pair meets every row and the level alone does not.
    QVERIFY(fit["layer_overhead_us"]["held_out"]["mean_abs_step_error"].get<double>() < 1e-9);
    QCOMPARE(fit["layer_overhead_us"]["held_out_level_alone"]["runs"].get<int>(), 4);
    QVERIFY(fit["layer_overhead_us"]["held_out_level_alone"]["mean_abs_step_error"].get<double>() >
            0.005);
    QVERIFY(!level["layer_overhead_us"].contains("held_out_level_alone"));
    for (const auto &row : fit["rows"]) {
      QVERIFY2(std::abs(row["error_after"].get<double>()) < 1e-9, row.dump().c_str());
      // Any three of the rows, two token counts among them, give the same pair back.
      QVERIFY2(std::abs(row["error_held_out"].get<double>()) < 1e-9, row.dump().c_str());
    }
    const json file = readJson(saved);
    QCOMPARE(file["layer_overhead_us"].get<double>(), 500.0);
    QVERIFY2(file["notes"].get<std::string>().rfind("layer_overhead_us: 500 us per transformer "
                                                    "layer and microbatch, fitted by pipescope "
                                                    "calibrate",
                                                    0) == 0,
             file["notes"].dump().c_str());
    QVERIFY(file["gemm_efficiency_source"].get<std::string>().find(
                "beside a layer overhead of 500 us") != std::string::npos);

    // The overhead alone, at the level made: found too.
    hardware["layer_overhead_us"] = 0;
    writeJson(path("h100-level-made.json"), hardware);
    const json alone = runJson({"calibrate", "--published", path("overhead.json"), "--hardware",
                                path("h100-level-made.json"), "--fit", "overhead", "--json"});
    QCOMPARE(alone["fitted"], json::array({"overhead"}));
    QCOMPARE(alone["level"]["after"].get<double>(), 0.62);
    QCOMPARE(alone["layer_overhead_us"]["after"].get<double>(), 500.0);
  }

  // Steps made at level 0.62 with a step overhead of 150 ms (the shipped curve is at 0.56 with
  // none), on rows of 0.4 to 2.7 s: --fit level,step must find the pair, which no level alone
  // matches (a fixed time a step weighs more on the shorter steps), every row held out included;
  // the file it writes carries the overhead and says where it comes from; the overhead alone at
  // the level made is found too, and so are steps beside the layer overhead.
  void findsTheStepOverheadTheStepsWereMadeAt() {
    json hardware = h100AtLevel(0.62);
    hardware["step_overhead_us"] = 150000;
    writeJson(path("h100-step.json"), hardware);
    json rows = shippedRows("megatron-core-h100",
                            {"gpt-1.7b", "gpt-7.1b", "gpt-70b", "gpt-177b-strong-4608"});
    QCOMPARE(rows.size(), std::size_t{4});
    writeMadeRows(rows, path("h100-step.json"), path("step.json"));

    const json level = runJson({"calibrate", "--published", path("step.json"), "--hardware",
                                "h100-sxm", "--fit", "level", "--json"});
    QVERIFY2(level["after"]["worst_abs_step_error"].get<double>() > 0.01, level.dump().c_str());
    QCOMPARE(level["step_overhead_us"]["after"].get<double>(), 0.0);
    QVERIFY(!level["step_overhead_us"].contains("held_out_level_alone"));

    const QString saved = path("h100-step-fit.json");
    const json fit =
        runJson({"calibrate", "--published", path("step.json"), "--hardware", "h100-sxm", "--fit",
                 "level,step", "--save-hardware", saved, "--json"});
    QCOMPARE(fit["fitted"], json::array({"level", "step"}));
    QCOMPARE(fit["level"]["after"].get<double>(), 0.62);
    QCOMPARE(fit["step_overhead_us"]["before"].get<double>(), 0.0);
    QCOMPARE(fit["step_overhead_us"]["after"].get<double>(), 150000.0);
    QCOMPARE(fit["step_overhead_us"]["rows"].get<int>(), 4);
    QVERIFY(!fit["layer_overhead_us"].contains("held_out"));
    // Held out, the pair meets every row and the level alone does not.
    QVERIFY(fit["step_overhead_us"]["held_out"]["mean_abs_step_error"].get<double>() < 1e-6);
    QCOMPARE(fit["step_overhead_us"]["held_out_level_alone"]["runs"].get<int>(), 4);
    QVERIFY(fit["step_overhead_us"]["held_out_level_alone"]["mean_abs_step_error"].get<double>() >
            0.01);
    for (const auto &row : fit["rows"]) {
      QVERIFY2(std::abs(row["error_after"].get<double>()) < 1e-6, row.dump().c_str());
      QVERIFY2(std::abs(row["error_held_out"].get<double>()) < 1e-6, row.dump().c_str());
    }
    const json file = readJson(saved);
    QCOMPARE(file["step_overhead_us"].get<double>(), 150000.0);
    QVERIFY2(file["notes"].get<std::string>().rfind(
                 "step_overhead_us: 150.0 ms per step, fitted by pipescope calibrate", 0) == 0,
             file["notes"].dump().c_str());
    QVERIFY(file["gemm_efficiency_source"].get<std::string>().find(
                "beside a step overhead of 150.0 ms") != std::string::npos);
    // The saved file predicts the rows as the report says.
    json on_fit = readJson(path("step.json"))["rows"];
    for (auto &row : on_fit)
      row["hardware"] = saved.toStdString();
    writeJson(path("step-on-fit.json"), validationFile(on_fit));
    const json compared = runJson({"compare", "--published", path("step-on-fit.json"), "--json"});
    QVERIFY2(compared["mean_abs_step_error"].get<double>() < 1e-6, compared.dump().c_str());
    // simulate on the file says how much of its step the overhead is.
    const json simulated = runJson({"simulate", "--model", "llama3-8b", "--hardware", saved, "--dp",
                                    "2", "--pp", "4", "--json"});
    QCOMPARE(simulated["step_overhead_s"].get<double>(), 0.15);
    const Run simulated_text = pipescope(
        {"simulate", "--model", "llama3-8b", "--hardware", saved, "--dp", "2", "--pp", "4"});
    QVERIFY2(simulated_text.out.contains(QStringLiteral("of which the step overhead 150 ms")),
             qPrintable(simulated_text.out));

    // The overhead alone, at the level made: found too; the report's text says so.
    hardware["step_overhead_us"] = 0;
    writeJson(path("h100-step-level-made.json"), hardware);
    const json alone = runJson({"calibrate", "--published", path("step.json"), "--hardware",
                                path("h100-step-level-made.json"), "--fit", "step", "--json"});
    QCOMPARE(alone["fitted"], json::array({"step"}));
    QCOMPARE(alone["level"]["after"].get<double>(), 0.62);
    QCOMPARE(alone["step_overhead_us"]["after"].get<double>(), 150000.0);
    const Run text = pipescope({"calibrate", "--published", path("step.json"), "--hardware",
                                "h100-sxm", "--fit", "level,step"});
    QVERIFY2(text.exit_code == 0, qPrintable(text.err));
    QVERIFY2(text.out.contains(QStringLiteral("step overhead (once a step): 0.0 -> 150.0 ms, "
                                              "fitted on 4 rows with the level")),
             qPrintable(text.out));
    QVERIFY(text.out.contains(QStringLiteral("the level's rows held out, with the step overhead")));

    // Beside the layer overhead: the three figures fitted together meet every row too.
    const json both = runJson({"calibrate", "--published", path("step.json"), "--hardware",
                               "h100-sxm", "--fit", "level,overhead,step", "--json"});
    QCOMPARE(both["fitted"], json::array({"level", "overhead", "step"}));
    QVERIFY2(both["after"]["mean_abs_step_error"].get<double>() < 1e-6, both.dump().c_str());
    QCOMPARE(both["layer_overhead_us"]["held_out"], both["step_overhead_us"]["held_out"]);
    QCOMPARE(both["step_overhead_us"]["held_out_level_alone"]["runs"].get<int>(), 4);
    const Run both_text = pipescope({"calibrate", "--published", path("step.json"), "--hardware",
                                     "h100-sxm", "--fit", "level,overhead,step"});
    QVERIFY2(
        both_text.out.contains(QStringLiteral("the level's rows held out, with both overheads")),
        qPrintable(both_text.out));
  }

  // The shipped levels come back from the rows they were fitted on (docs/validation.md):
  // a100-80gb's 0.70 on both A100 tables, h100-sxm's 0.56 on the three Megatron-Core rows whose
  // step is that level's alone, and its FP8 level, held at 0.56, on the four dense
  // Megatron-Bridge rows after them.
  void reproducesTheShippedLevels() {
    const json a100 =
        runJson({"calibrate", "--published", "megatron-sc21-a100,megatron-mlsys23-a100", "--json"});
    QCOMPARE(a100["base_hardware"].get<std::string>(), std::string("a100-80gb"));
    QCOMPARE(a100["level"]["rows"].get<int>(), 18);
    QCOMPARE(a100["level"]["after"].get<double>(), 0.70);
    QVERIFY(!a100.contains("fp8_level")); // the A100 has no FP8 tensor cores
    // The same H100 rows picked out of every set by SET/ID (gpt-1.7b is an A100 row too).
    const QString h100_fit_rows = QStringLiteral("megatron-core-h100/gpt-1.7b,") +
                                  "megatron-core-h100/gpt-7.1b," +
                                  "megatron-core-h100/gpt-177b-strong-96";
    const json by_set =
        runJson({"calibrate", "--published", "all", "--rows", h100_fit_rows, "--json"});
    QCOMPARE(by_set["base_hardware"].get<std::string>(), std::string("h100-sxm"));
    QCOMPARE(by_set["level"]["rows"].get<int>(), 3);
    QCOMPARE(by_set["level"]["after"].get<double>(), 0.56);

    const QString fit_rows = QStringLiteral("gpt-1.7b,gpt-7.1b,gpt-177b-strong-96,") +
                             "llama3-70b-gbs128,llama3-70b-gbs256,llama3.1-405b-gbs512," +
                             "llama3.1-405b-gbs1536";
    const json h100 =
        runJson({"calibrate", "--published", "megatron-core-h100,megatron-bridge-h100", "--rows",
                 fit_rows, "--json"});
    QCOMPARE(h100["fitted"], json::array({"level", "fp8"})); // the rows mix BF16 and FP8
    QCOMPARE(h100["level"]["rows"].get<int>(), 3);
    QCOMPARE(h100["level"]["after"].get<double>(), 0.56);
    QCOMPARE(h100["fp8_level"]["rows"].get<int>(), 4);
    QCOMPARE(h100["fp8_level"]["after"].get<double>(), 0.56);
    QVERIFY(h100["fp8_level"]["held_at_bf16_level"].get<bool>());
    // Held out, each BF16 row is predicted on the level the other two give.
    int held_out = 0;
    for (const auto &row : h100["rows"])
      if (row["gemm_precision"] == "bf16") {
        QVERIFY(!row["error_held_out"].is_null());
        QVERIFY(std::abs(row["error_held_out"].get<double>()) >=
                std::abs(row["error_after"].get<double>()) - 1e-12);
        ++held_out;
      }
    QCOMPARE(held_out, 3);
  }

  // A row whose measured time is set aside (a regression its software's maintainers filed) is
  // not fitted on when a whole set is, and is when --rows names it.
  void setAsideRowsAreFittedOnlyWhenNamed() {
    const json bridge = runJson(
        {"calibrate", "--published", "megatron-bridge-h100", "--fit", "moe-host", "--json"});
    QCOMPARE(bridge["set_aside"], json::array({"megatron-bridge-h100/qwen3-30b-a3b-gbs512-pp2"}));
    QCOMPARE(bridge["rows"].size(), std::size_t{10});
    for (const auto &row : bridge["rows"])
      QVERIFY(row["id"] != "qwen3-30b-a3b-gbs512-pp2");
    // The five MoE rows left give the shipped host time back (fitted on the ModelZoo rows).
    QCOMPARE(bridge["moe_host_us"]["rows"].get<int>(), 5);
    QCOMPARE(bridge["moe_host_us"]["after"].get<double>(), 3500.0);

    const json named = runJson({"calibrate", "--published", "megatron-bridge-h100", "--rows",
                                "qwen3-30b-a3b-gbs512-pp2", "--fit", "moe-host", "--json"});
    QCOMPARE(named["set_aside"], json::array());
    QCOMPARE(named["rows"].size(), std::size_t{1});
    // A file whose timed rows are all set aside is refused, saying so.
    json aside = readJson(QStringLiteral(PIPESCOPE_TEST_DATA) + "/../../resources/validation/"
                                                                "megatron-bridge-h100.json");
    json kept = json::array();
    for (const auto &row : aside["rows"])
      if (row["measured"].contains("set_aside")) kept.push_back(row);
    aside["rows"] = kept;
    writeJson(path("aside.json"), aside);
    const Run all_aside = pipescope({"calibrate", "--published", path("aside.json")});
    QCOMPARE(all_aside.exit_code, 2);
    QVERIFY2(all_aside.err.contains(QStringLiteral("is set aside")), qPrintable(all_aside.err));
    // The regressed figure wants six times the host time to be met.
    QVERIFY2(named["moe_host_us"]["after"].get<double>() > 15000, named.dump().c_str());
  }

  // A row measured faster than its speed of light on the hardware fitted (the ModelZoo's FSDP
  // row) did not run as written: it is left out of a whole set's fit, listed with both steps,
  // and fitted on when --rows names it. A file of such rows alone is refused, saying so.
  void rowsBelowTheirSpeedOfLightAreFittedOnlyWhenNamed() {
    const json zoo = runJson({"calibrate", "--published", "megatron-moe-modelzoo-h100", "--json"});
    QCOMPARE(zoo["below_speed_of_light"].size(), std::size_t{1});
    QVERIFY2(zoo["below_speed_of_light"][0].get<std::string>().starts_with(
                 "megatron-moe-modelzoo-h100/qwen3-235b-a22b-ep8-fsdp (17.600 s measured, "),
             zoo.dump().c_str());
    QCOMPARE(zoo["rows"].size(), std::size_t{4});
    for (const auto &row : zoo["rows"])
      QVERIFY(row["id"] != "qwen3-235b-a22b-ep8-fsdp");
    const Run text = pipescope({"calibrate", "--published", "megatron-moe-modelzoo-h100"});
    QVERIFY2(text.out.contains(QStringLiteral("not fitted on, as they are measured faster than "
                                              "their configuration's speed of light")),
             qPrintable(text.out));

    const json named = runJson({"calibrate", "--published", "megatron-moe-modelzoo-h100", "--rows",
                                "qwen3-235b-a22b-ep8-fsdp,qwen3-235b-a22b-ep32-deepep", "--json"});
    QCOMPARE(named["below_speed_of_light"], json::array());
    QCOMPARE(named["rows"].size(), std::size_t{2});

    json zoo_file = readJson(QStringLiteral(PIPESCOPE_TEST_DATA) +
                             "/../../resources/validation/megatron-moe-modelzoo-h100.json");
    json fsdp = json::array();
    for (const auto &row : zoo_file["rows"])
      if (row["id"] == "qwen3-235b-a22b-ep8-fsdp") fsdp.push_back(row);
    zoo_file["rows"] = fsdp;
    writeJson(path("fsdp.json"), zoo_file);
    const Run refused = pipescope({"calibrate", "--published", path("fsdp.json")});
    QCOMPARE(refused.exit_code, 2);
    QVERIFY2(refused.err.contains(QStringLiteral("faster than its speed of light")),
             qPrintable(refused.err));
    QCOMPARE(refused.err.count('\n'), 1);
  }

  // The written hardware file predicts the rows with the errors the report gave after the fit,
  // and says in its source what it was fitted on.
  void savedHardwarePredictsAsReported() {
    const QString saved = path("nemo-fit.json");
    const json fit = runJson({"calibrate", "--published", "nemo-h100", "--fit", "level",
                              "--save-hardware", saved, "--json"});
    QCOMPARE(fit["saved_hardware"].get<std::string>(), saved.toStdString());
    const json hardware = readJson(saved);
    QCOMPARE(hardware["format"].get<std::string>(), std::string("pipescope.hardware"));
    QVERIFY(hardware["gemm_efficiency_source"].get<std::string>().find(
                "fitted by pipescope calibrate") != std::string::npos);
    QVERIFY(hardware["gemm_efficiency_source"].get<std::string>().find("nemotron-340b") !=
            std::string::npos);

    json rows = readJson(kResources + "/validation/nemo-h100.json")["rows"];
    for (auto &row : rows)
      row["hardware"] = saved.toStdString();
    writeJson(path("nemo-on-fit.json"), validationFile(rows));
    const json compared = runJson({"compare", "--published", path("nemo-on-fit.json"), "--json"});
    QCOMPARE(compared["rows"].size(), fit["rows"].size());
    for (std::size_t i = 0; i < fit["rows"].size(); ++i)
      QVERIFY2(std::abs(compared["rows"][i]["step_error"].get<double>() -
                        fit["rows"][i]["error_after"].get<double>()) < 1e-12,
               fit["rows"][i]["id"].get<std::string>().c_str());
    // The file carries its held-out error, and a plan on it quotes that as the error to expect
    // (not the published runs'); a calibration that cannot come from one set of runs is refused.
    QCOMPARE(hardware["calibration"]["runs"].get<int>(), fit["held_out"]["runs"].get<int>());
    QCOMPARE(hardware["calibration"]["held_out_mean_abs_step_error"].get<double>(),
             fit["held_out"]["mean_abs_step_error"].get<double>());
    const json simulated = runJson({"simulate", "--model", "llama3-8b", "--hardware", saved, "--pp",
                                    "2", "--microbatches", "8", "--json"});
    QVERIFY(simulated["validated_accuracy"]["calibrated"].get<bool>());
    QCOMPARE(simulated["validated_accuracy"]["runs"].get<int>(), 12);
    QCOMPARE(simulated["validated_accuracy"]["mean_abs_step_error"].get<double>(),
             fit["held_out"]["mean_abs_step_error"].get<double>());
    const json shipped = runJson({"simulate", "--model", "llama3-8b", "--hardware", "h100-sxm",
                                  "--pp", "2", "--microbatches", "8", "--json"});
    QVERIFY(!shipped["validated_accuracy"]["calibrated"].get<bool>());
    json corrupt = hardware;
    corrupt["calibration"]["held_out_worst_abs_step_error"] = 0.001;
    writeJson(path("corrupt.json"), corrupt);
    const Run refused =
        pipescope({"simulate", "--model", "llama3-8b", "--hardware", path("corrupt.json")});
    QCOMPARE(refused.exit_code, 2);
    QVERIFY2(
        refused.err.contains(QStringLiteral("/calibration: the worst |error| is below the mean")),
        qPrintable(refused.err));
    // One row fits its level exactly and holds nothing out: no calibration to quote.
    const json alone = runJson({"calibrate", "--published", "nemo-h100", "--rows", "llama3-8b",
                                "--save-hardware", path("alone.json"), "--json"});
    QCOMPARE(alone["held_out"]["runs"].get<int>(), 0);
    QVERIFY(!readJson(path("alone.json")).contains("calibration"));

    // The text report names the file and how to use it.
    const Run text =
        pipescope({"calibrate", "--published", "nemo-h100", "--save-hardware", path("again.json")});
    QCOMPARE(text.exit_code, 0);
    QVERIFY2(text.out.contains(QStringLiteral("--hardware ") + path("again.json")),
             qPrintable(text.out));
    QVERIFY2(text.out.contains(QStringLiteral("held out")), qPrintable(text.out));
  }

  // `megatron LAUNCH --step-time S --add-row RUNS` keeps the user's runs as validation rows:
  // each loads back with its measured step and the same prediction, a second row with the same
  // id or a file that is not a validation file is refused with the file left as it was, and
  // calibrate fits on what was added.
  void aLaunchWithItsStepBecomesARow() {
    // Megatron-LM's GPT-3 example, without its --step-batch-size-schedule line: the script gives
    // it beside --global-batch-size 1536, which Megatron refuses (and so does pipescope).
    QFile example(QStringLiteral(PIPESCOPE_TEST_DATA) +
                  "/megatron_examples/train_gpt3_175b_distributed.sh");
    QVERIFY(example.open(QIODevice::ReadOnly));
    QString script = QString::fromUtf8(example.readAll());
    const qsizetype schedule = script.indexOf(QStringLiteral("--step-batch-size-schedule"));
    QVERIFY(schedule >= 0);
    script.remove(schedule, script.indexOf(QLatin1Char('\n'), schedule) - schedule);
    const QString launch = path("train_gpt3_175b_distributed.sh");
    QFile copy(launch);
    QVERIFY(copy.open(QIODevice::WriteOnly));
    copy.write(script.toUtf8());
    copy.close();
    const QString runs = path("my-runs.json");
    const json first = runJson(
        {"megatron", launch, "--gpus", "1024", "--step-time", "9.5", "--add-row", runs, "--json"});
    QCOMPARE(first["runs"].get<std::string>(), runs.toStdString());
    const double error = first["prediction"]["step_error"].get<double>();
    QVERIFY(std::abs(error - (first["prediction"]["step_time_s"].get<double>() - 9.5) / 9.5) <
            1e-12);
    const json compared = runJson({"compare", "--published", runs, "--json"});
    QCOMPARE(compared["rows"].size(), std::size_t{1});
    QCOMPARE(compared["rows"][0]["id"].get<std::string>(),
             std::string("train_gpt3_175b_distributed"));
    QCOMPARE(compared["rows"][0]["measured_step_s"].get<double>(), 9.5);
    QVERIFY(std::abs(compared["rows"][0]["step_error"].get<double>() - error) < 1e-12);

    // The same id again: refused, the file untouched.
    QFile file(runs);
    QVERIFY(file.open(QIODevice::ReadOnly));
    const QByteArray before = file.readAll();
    file.close();
    const Run again =
        pipescope({"megatron", launch, "--gpus", "1024", "--step-time", "9.7", "--add-row", runs});
    QCOMPARE(again.exit_code, 2);
    QVERIFY2(again.err.contains(QStringLiteral(
                 "has a row 'train_gpt3_175b_distributed' already; give the new one --row-id ID")),
             qPrintable(again.err));
    QVERIFY(file.open(QIODevice::ReadOnly));
    QCOMPARE(file.readAll(), before);
    file.close();

    // Under another id it is a second row, and calibrate fits the level on both.
    QCOMPARE(pipescope({"megatron", launch, "--gpus", "512", "--step-time", "18.6", "--add-row",
                        runs, "--row-id", "gpt3-175b-512"})
                 .exit_code,
             0);
    const json fit = runJson({"calibrate", "--published", runs, "--json"});
    QCOMPARE(fit["rows"].size(), std::size_t{2});
    QCOMPARE(fit["rows"][1]["id"].get<std::string>(), std::string("gpt3-175b-512"));
    QVERIFY(fit["after"]["mean_abs_step_error"].get<double>() <=
            fit["before"]["mean_abs_step_error"].get<double>());

    // A file that is not a validation file is not rewritten.
    writeJson(path("plan.json"), {{"format", "pipescope.plan"}, {"version", 1}});
    const Run wrong = pipescope({"megatron", launch, "--gpus", "1024", "--step-time", "9.5",
                                 "--add-row", path("plan.json")});
    QCOMPARE(wrong.exit_code, 2);
    QVERIFY2(wrong.err.contains(QStringLiteral("is not a validation file that loads")),
             qPrintable(wrong.err));
    QCOMPARE(readJson(path("plan.json"))["format"].get<std::string>(),
             std::string("pipescope.plan"));

    // A measured step below the launch's speed of light is said to be so, and the row is kept
    // (the user's record) but left out of calibrate's fit unless named.
    const double fastest = first["prediction"]["speed_of_light_step_s"].get<double>();
    QVERIFY(fastest > 0 && fastest < first["prediction"]["step_time_s"].get<double>());
    QCOMPARE(first["measured"]["below_speed_of_light"].get<bool>(), fastest > 9.5);
    const QString too_fast = QString::number(fastest / 2);
    const Run impossible = pipescope({"megatron", launch, "--gpus", "1024", "--step-time", too_fast,
                                      "--add-row", runs, "--row-id", "too-fast"});
    QCOMPARE(impossible.exit_code, 0);
    QVERIFY2(impossible.out.contains(QStringLiteral("speed of light: ")) &&
                 impossible.out.contains(QStringLiteral("the measured step is below it")),
             qPrintable(impossible.out));
    const json refit = runJson({"calibrate", "--published", runs, "--json"});
    QCOMPARE(refit["rows"].size(), std::size_t{2});
    QCOMPARE(refit["below_speed_of_light"].size(), std::size_t{1});
    QVERIFY(refit["below_speed_of_light"][0].get<std::string>().find("/too-fast (") !=
            std::string::npos);

    // A row needs its measurement.
    const Run unmeasured = pipescope({"megatron", launch, "--gpus", "1024", "--add-row", runs});
    QCOMPARE(unmeasured.exit_code, 2);
    QVERIFY2(unmeasured.err.contains(QStringLiteral("--add-row needs the run's measured "
                                                    "step: --step-time S")),
             qPrintable(unmeasured.err));
  }

  // A Megatron-LM training log is its own row: the launch it resolved and the step it measured
  // (two real runs on one H100, tests/data/megatron_h100_run), and calibrate fits them.
  void aTrainingLogBecomesARow() {
    const QString logs = QStringLiteral(PIPESCOPE_TEST_DATA) + "/megatron_h100_run/";
    const QString runs = path("h100-logs.json");
    const json first =
        runJson({"megatron", logs + "train_gpt_1.7b.log", "--add-row", runs, "--json"});
    QVERIFY(std::abs(first["measured"]["step_time_s"].get<double>() - 1.22685) < 1e-9);
    QCOMPARE(first["measured"]["from_log"]["iterations"].get<int>(), 32);
    QCOMPARE(first["measured"]["from_log"]["first_iteration"].get<int>(), 9);
    QCOMPARE(first["log"]["world_size"].get<int>(), 1);
    QCOMPARE(first["configuration"]["model"]["vocab"].get<int>(), 131072);
    QVERIFY(runJson({"megatron", logs + "train_gpt_1.7b_mbs2.log", "--add-row", runs, "--json"})
                .contains("measured"));
    const json rows = readJson(runs)["rows"];
    QCOMPARE(rows.size(), std::size_t{2});
    QCOMPARE(rows[0]["id"].get<std::string>(), std::string("train_gpt_1.7b"));
    QVERIFY2(rows[0]["published"].get<std::string>().find("the median of iterations 9-40") !=
                 std::string::npos,
             rows[0]["published"].dump().c_str());
    QCOMPARE(rows[1]["measured"]["step_time_s"].get<double>(), 1.50315);
    const json fit = runJson({"calibrate", "--published", runs, "--json"});
    QCOMPARE(fit["level"]["rows"].get<int>(), 2);
    QVERIFY(fit["after"]["mean_abs_step_error"].get<double>() <
            fit["before"]["mean_abs_step_error"].get<double>());

    // One log per node: the arguments on the first rank's, the iteration lines on the last
    // rank's; named together, in either order, or beside the launch script.
    QFile source(logs + "train_gpt_1.7b.log");
    QVERIFY(source.open(QIODevice::ReadOnly));
    QByteArray first_rank, last_rank;
    for (const QByteArray &line : source.readAll().split('\n'))
      (line.contains("elapsed time per iteration") ? last_rank : first_rank) += line + '\n';
    QFile first_file(path("rank0.log")), last_file(path("rank15.log"));
    QVERIFY(first_file.open(QIODevice::WriteOnly) && last_file.open(QIODevice::WriteOnly));
    first_file.write(first_rank);
    last_file.write(last_rank);
    first_file.close();
    last_file.close();
    for (const QStringList &files : {QStringList{path("rank15.log"), path("rank0.log")},
                                     QStringList{logs + "train_gpt_1.7b.sh", path("rank15.log")}}) {
      const json split = runJson(QStringList{"megatron"} + files + QStringList{"--json"});
      QVERIFY(std::abs(split["measured"]["step_time_s"].get<double>() - 1.22685) < 1e-9);
      QCOMPARE(split["measured"]["from_log"]["file"].get<std::string>(),
               path("rank15.log").toStdString());
    }
    const Run alone = pipescope({"megatron", path("rank0.log"), "--add-row", path("x.json")});
    QCOMPARE(alone.exit_code, 2);
    QVERIFY2(alone.err.contains(QStringLiteral("name its last rank's log too")),
             qPrintable(alone.err));
    const Run two_launches =
        pipescope({"megatron", logs + "train_gpt_1.7b.sh", logs + "train_gpt_1.7b_mbs2.sh"});
    QCOMPARE(two_launches.exit_code, 2);
    QVERIFY2(two_launches.err.contains(QStringLiteral("no file given has Megatron-LM's iteration "
                                                      "lines")),
             qPrintable(two_launches.err));

    // --step-time wins over the log's own.
    const json given =
        runJson({"megatron", logs + "train_gpt_1.7b.log", "--step-time", "1.5", "--json"});
    QCOMPARE(given["measured"]["step_time_s"].get<double>(), 1.5);
    QVERIFY(!given["measured"].contains("from_log"));
    // A log cut inside its arguments is refused, naming why.
    QFile whole(logs + "train_gpt_1.7b.log");
    QVERIFY(whole.open(QIODevice::ReadOnly));
    const QByteArray text = whole.readAll();
    QFile cut(path("cut.log"));
    QVERIFY(cut.open(QIODevice::WriteOnly));
    cut.write(text.left(text.indexOf("end of arguments")));
    cut.close();
    const Run refused = pipescope({"megatron", path("cut.log")});
    QCOMPARE(refused.exit_code, 2);
    QVERIFY2(refused.err.contains(QStringLiteral("the arguments block does not end")),
             qPrintable(refused.err));
  }
};

QTEST_GUILESS_MAIN(TestCliCalibrate)
#include "test_cli_calibrate.moc"
