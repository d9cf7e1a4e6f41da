// `pipescope calibrate`: a hardware file's GEMM levels (and MoE host time) fitted to measured steps
// (a "pipescope.validation" file of the user's own runs, or the shipped sets), so the planner's
// predictions follow the user's cluster and software (docs/cost-model.md, "Calibrating the GEMM
// level to your runs").
#include <algorithm>
#include <iostream>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/cli/arguments.h"
#include "engine/cli/commands.h"
#include "engine/model/hardware_fit.h"
#include "engine/model/speed_of_light.h"
#include "engine/model/validation.h"
#include "engine/output_file.h"

namespace pipescope::cli {

namespace {

using nlohmann::json;

constexpr const char *kCalibrateHelp =
    R"(usage: pipescope calibrate --published SET[,SET...] [--rows ID[,ID...]] [--hardware H]
                           [--fit level,fp8,moe-host,overhead,step]
                           [--save-hardware FILE]
                           [--markdown | --json]

Fits the hardware's GEMM efficiency (and, for mixture-of-experts runs, the MoE layers' host time)
to measured step times, so that predictions, and the planner's ranking, follow your cluster and
software instead of the published runs the presets were fitted on. The curve keeps its shape
(efficiency over GEMM size) and takes one level, its plateau, in steps of 0.01 of peak: the level
with the least mean |error| over the rows. Every row is then predicted again with the figure
fitted on the other rows alone, which says how far off to expect a run the fit has not seen. The
shipped presets were fitted this way (docs/validation.md): with the same rows this reproduces
their levels.

SET is a "pipescope.validation" file (docs/validation.md: one row per run, its model, mesh,
schedule and training settings, and "measured": {"step_time_s": ...}; `pipescope megatron LAUNCH
--step-time S --add-row FILE` adds a Megatron-LM launch and its measured step to one), a shipped
set, or "all". Rows that check memory only are left out.

  --rows ID,...        only these rows: each an id, or SET/ID where sets share ids (a row
                       whose measured time is set aside, or is below its configuration's speed
                       of light on the hardware fitted, is fitted on only when named here)
  --markdown           the table in Markdown
  --hardware H         the hardware preset or file to fit, which every row then runs on
                       (default: the one the rows name; rows naming different ones are refused)
  --fit WHAT           what to fit, a comma-separated list, each on its own rows:
                         level     the BF16 curve's level, the FP8 curve moved with it, on the
                                   rows no other figure takes
                         fp8       the FP8 curve's level alone, at most the BF16 level, on the
                                   FP8 rows
                         moe-host  the MoE layers' host time per layer and microbatch (steps of
                                   0.5 ms), on the MoE rows that leave theirs unset
                         overhead  every transformer layer's fixed time per microbatch (steps of
                                   125 us, up to 3 ms; layer_overhead_us), with the level on its
                                   rows: the pair of the least mean |error|. It tells apart
                                   only rows of different tokens per microbatch; the report
                                   gives those rows held out with it and with the level alone
                         step      a fixed time every step pays once (to 0.1 ms;
                                   step_overhead_us): the framework's per-step host work, with
                                   the level on its rows as overhead is (and beside it when
                                   both are asked). It tells apart only rows of different
                                   microbatch counts; the report gives those rows held out with
                                   it and with the level alone
                       Default: level; with fp8 when the dense rows mix BF16 and FP8 GEMMs; with
                       moe-host when there are MoE rows (moe-host alone when every row is MoE)
  --save-hardware FILE write the fitted hardware file (its sources say what it was fitted on);
                       simulate, search and megatron take it with --hardware FILE
  --json               one JSON object: the levels, every row's error before, after and held
                       out, their means and worst, and the fitted hardware
)";

/// "all", one set or a comma-separated list of sets.
Result<std::vector<ValidationSet>> loadSets(const std::string &which) {
  std::vector<std::string> names = which == "all" ? validationSetNames() : splitList(which);
  if (names.empty()) return makeError("calibrate: --published needs a set or a file");
  std::vector<ValidationSet> sets;
  for (const auto &name : names) {
    auto set = loadValidationSet(name);
    if (!set) return makeError("calibrate: " + set.error().message);
    sets.push_back(std::move(*set));
  }
  return sets;
}

std::string levelText(double level) {
  return fixed(level, 2);
}

/// "1 FP8 row", "3 rows".
std::string rowsText(int count, const std::string &kind) {
  return std::to_string(count) + " " + kind + (count == 1 ? "row" : "rows");
}

json fitJson(const HardwareFit &fit, const std::string &base_name,
             const HardwareFitOptions &options) {
  const bool level = options.level, fp8 = options.fp8;
  json rows = json::array();
  for (const auto &row : fit.rows) {
    json item = {{"set", row.set},
                 {"id", row.validation_case->id},
                 {"gemm_precision", row.fp8 ? "fp8" : "bf16"},
                 {"measured_step_s", row.validation_case->measured_step_s},
                 {"error_before", row.before},
                 {"error_after", row.after}};
    item["error_held_out"] = row.held_out ? json(*row.held_out) : json(nullptr);
    rows.push_back(std::move(item));
  }
  const auto summary = [](const StepErrorSummary &s) {
    return json{
        {"runs", s.runs}, {"mean_abs_step_error", s.mean()}, {"worst_abs_step_error", s.worst}};
  };
  json out = {{"base_hardware", base_name},
              {"fitted", json::array()},
              {"level", {{"before", fit.level_before}, {"after", fit.level_after}}},
              {"rows", rows},
              {"before", summary(fit.before)},
              {"after", summary(fit.after)},
              {"held_out", summary(fit.held_out)},
              {"hardware", toJson(fit.hardware)}};
  if (level) out["fitted"].push_back("level");
  if (fp8) out["fitted"].push_back("fp8");
  if (level) out["level"]["rows"] = fit.level_rows;
  if (options.moe_host) out["fitted"].push_back("moe-host");
  out["moe_host_us"] = {{"before", fit.moe_host_before_us}, {"after", fit.moe_host_after_us}};
  if (options.moe_host) out["moe_host_us"]["rows"] = fit.moe_host_rows;
  if (options.overhead) out["fitted"].push_back("overhead");
  out["layer_overhead_us"] = {{"before", fit.overhead_before_us}, {"after", fit.overhead_after_us}};
  if (options.overhead) out["layer_overhead_us"]["rows"] = fit.level_rows;
  if (options.step) out["fitted"].push_back("step");
  out["step_overhead_us"] = {{"before", fit.step_before_us}, {"after", fit.step_after_us}};
  if (options.step) out["step_overhead_us"]["rows"] = fit.level_rows;
  // The level's rows held out with the figures fitted, under each overhead fitted.
  if (fit.level_alone_held_out.runs > 0) {
    const std::pair<const char *, bool> overheads[] = {{"layer_overhead_us", options.overhead},
                                                       {"step_overhead_us", options.step}};
    for (const auto &[key, fitted] : overheads)
      if (fitted) {
        out[key]["held_out"] = summary(fit.overhead_held_out);
        out[key]["held_out_level_alone"] = summary(fit.level_alone_held_out);
      }
  }
  if (fit.fp8_level_before > 0) {
    out["fp8_level"] = {{"before", fit.fp8_level_before}, {"after", fit.fp8_level_after}};
    if (fp8) {
      out["fp8_level"]["rows"] = fit.fp8_rows;
      out["fp8_level"]["held_at_bf16_level"] = fit.fp8_held_at_level;
    }
  }
  return out;
}

} // namespace

int runCalibrate(const std::vector<std::string> &args) {
  if (wantsHelp(args)) {
    std::cout << kCalibrateHelp;
    return 0;
  }
  auto parsed = Arguments::parse(args, {"published", "rows", "hardware", "fit", "save-hardware"},
                                 {"json", "markdown"}, "calibrate");
  if (!parsed) return fail(parsed.error().message);
  const Arguments &a = *parsed;
  if (!a.positional().empty())
    return fail("calibrate: unexpected argument '" + a.positional().front() +
                "'; the rows come from --published SET (see pipescope calibrate --help)");
  const auto which = a.text("published");
  if (!which)
    return fail("calibrate: give the measured runs with --published SET (a pipescope.validation "
                "file, a shipped set or all; see pipescope calibrate --help)");
  if (a.has("markdown") && a.has("json"))
    return fail("calibrate: choose one of --markdown and --json");
  const auto save_path = a.text("save-hardware");
  // The report goes to standard output, so the hardware file needs a file of its own.
  if (save_path && isStandardOutput(*save_path))
    return fail("calibrate: --save-hardware needs a file name: standard output carries the "
                "report");

  auto sets = loadSets(*which);
  if (!sets) return fail(sets.error().message);

  // The rows: every row of the sets, or the ones --rows names (each must exist), by id or, where
  // ids repeat across sets (gpt-1.7b is on A100 and on H100), as SET/ID.
  std::vector<FitRow> rows;
  std::vector<std::string> set_aside; // rows left out as their measured time is set aside
  std::set<std::string> wanted, found;
  if (const auto ids = a.text("rows")) {
    for (const auto &id : splitList(*ids))
      wanted.insert(id);
    if (wanted.empty())
      return fail("calibrate: --rows needs row ids, e.g. --rows gpt-1.7b,gpt-7.1b");
  }
  for (const auto &set : *sets)
    for (const auto &validation_case : set.cases) {
      const std::string qualified = set.name + "/" + validation_case.id;
      const bool by_id = wanted.count(validation_case.id) != 0;
      const bool by_set = wanted.count(qualified) != 0;
      if (!wanted.empty() && !by_id && !by_set) continue;
      // A row whose time is set aside (not what its configuration costs) is fitted on only
      // when --rows names it.
      if (wanted.empty() && !validation_case.set_aside.empty()) {
        set_aside.push_back(qualified);
        continue;
      }
      rows.push_back({&validation_case, set.name});
      if (by_id) found.insert(validation_case.id);
      if (by_set) found.insert(qualified);
    }
  for (const auto &id : wanted)
    if (!found.count(id)) {
      std::string ids;
      for (const auto &set : *sets)
        for (const auto &validation_case : set.cases)
          ids += (ids.empty() ? "" : ", ") + validation_case.id;
      return fail("calibrate: --rows names '" + id + "', which is not a row of " + *which +
                  "; its rows are " + ids);
    }

  // One hardware file is fitted: --hardware's, else the one every timed row names.
  std::string base_name;
  if (const auto hardware = a.text("hardware")) {
    base_name = *hardware;
  } else {
    auto common = commonHardwareName(rows);
    if (!common)
      return fail("calibrate: " + common.error().message +
                  ": pick the rows of one with --rows (SET/ID where sets share ids), or give "
                  "--hardware H to run them all on H");
    base_name = *common;
  }
  if (base_name.empty() && !set_aside.empty())
    return fail("calibrate: every timed row of " + *which +
                " is set aside (its \"measured\" says why); name the rows to fit on them anyway "
                "with --rows, or add rows that count");
  if (base_name.empty())
    return fail("calibrate: no row of " + *which +
                " has a measured step time (rows with memory_gib alone check memory); add rows "
                "whose \"measured\" gives step_time_s");
  auto base = loadHardwareSpec(base_name);
  if (!base)
    return fail(std::string("calibrate: ") + (a.has("hardware") ? "--hardware: " : "") +
                base.error().message);

  // A row measured faster than its configuration's speed of light on the hardware fitted
  // cannot be that configuration: fitting on it would pull every figure toward a step no
  // figure can reach, so it is left out as a set-aside row is, unless --rows names it.
  std::vector<std::string> below_speed_of_light;
  if (wanted.empty()) {
    below_speed_of_light = removeRowsBelowSpeedOfLight(rows, *base);
    const bool timed_left = std::any_of(rows.begin(), rows.end(), [](const FitRow &row) {
      return row.validation_case->measured_step_s > 0;
    });
    if (!timed_left && !below_speed_of_light.empty())
      return fail("calibrate: every timed row of " + *which +
                  " is measured faster than its speed of light on " + base_name +
                  ", so none is the configuration it says (" + below_speed_of_light.front() +
                  "); correct the rows' settings, or name them with --rows to fit on them anyway");
  }

  // What to fit: --fit, else by the rows: each kind of row fits its own figure.
  HardwareFitOptions options;
  if (const auto what = a.text("fit")) {
    options.level = false;
    const auto items = splitList(*what);
    for (const auto &item : items) {
      bool *flag = item == "level"      ? &options.level
                   : item == "fp8"      ? &options.fp8
                   : item == "moe-host" ? &options.moe_host
                   : item == "overhead" ? &options.overhead
                   : item == "step"     ? &options.step
                                        : nullptr;
      if (!flag || *flag)
        return fail("calibrate: --fit takes level, fp8, moe-host, overhead and step, "
                    "comma-separated, each once; got '" +
                    *what + "'");
      *flag = true;
    }
    if (items.empty())
      return fail("calibrate: --fit takes level, fp8, moe-host, overhead and step");
  } else {
    options = defaultFitOptions(rows);
  }

  currentActivity() = "fitting the hardware to the rows";
  auto fit = fitHardware(rows, *base, options);
  if (!fit) return fail("calibrate: " + fit.error().message);

  if (save_path) {
    currentActivity() = "writing " + *save_path;
    if (auto status = writeTextFile(*save_path, toJson(fit->hardware).dump(2) + "\n"); !status)
      return fail("calibrate: " + status.error().message);
  }

  if (a.has("json")) {
    json out = fitJson(*fit, base_name, options);
    if (save_path) out["saved_hardware"] = *save_path;
    out["set_aside"] = set_aside;
    out["below_speed_of_light"] = below_speed_of_light;
    std::cout << out.dump(2) << '\n';
    return 0;
  }

  std::cout << "calibrating " << base_name << " on " << fit->rows.size() << " measured step"
            << (fit->rows.size() == 1 ? "" : "s") << " (" << *which << ")\n";
  if (!set_aside.empty()) {
    std::string listed;
    for (const auto &id : set_aside)
      listed += (listed.empty() ? "" : ", ") + id;
    std::cout << wrappedLine(
        "", "  ",
        "not fitted on, as their measured time is set aside (--rows fits on them too): " + listed);
  }
  if (!below_speed_of_light.empty()) {
    std::string listed;
    for (const auto &row : below_speed_of_light)
      listed += (listed.empty() ? "" : "; ") + row;
    std::cout << wrappedLine("", "  ",
                             "not fitted on, as they are measured faster than their "
                             "configuration's speed of light (every kernel at the GPU's peak, "
                             "every link at its line rate), so they did not run as written "
                             "(--rows fits on them too): " +
                                 listed);
  }
  if (options.level)
    std::cout << wrappedLine(
        "", "  ",
        "GEMM level (the BF16 curve's plateau, of peak): " + levelText(fit->level_before) + " -> " +
            levelText(fit->level_after) + ", fitted on " +
            rowsText(fit->level_rows, options.fp8 ? "BF16 " : "") +
            (fit->fp8_level_before > 0 && !options.fp8
                 ? " (the FP8 curve moved with it: " + levelText(fit->fp8_level_before) + " -> " +
                       levelText(fit->fp8_level_after) + " of the FP8 peak)"
                 : ""));
  if (options.fp8)
    std::cout << wrappedLine(
        "", "  ",
        "FP8 GEMM level (of the FP8 peak): " + levelText(fit->fp8_level_before) + " -> " +
            levelText(fit->fp8_level_after) + ", fitted on " + rowsText(fit->fp8_rows, "FP8 ") +
            (fit->fp8_held_at_level
                 ? "; held at the BF16 level, which the rows would have it pass (FP8 GEMMs "
                   "reach no larger a share of their peak than BF16 ones)"
                 : ""));
  if (options.overhead)
    std::cout << "layer overhead (per transformer layer and microbatch): "
              << fixed(fit->overhead_before_us, 0) << " -> " << fixed(fit->overhead_after_us, 0)
              << " us, fitted on " << rowsText(fit->level_rows, options.fp8 ? "BF16 " : "")
              << (options.level ? " with the level" : "") << '\n';
  if (options.step)
    std::cout << "step overhead (once a step): " << fixed(fit->step_before_us / 1000, 1) << " -> "
              << fixed(fit->step_after_us / 1000, 1) << " ms, fitted on "
              << rowsText(fit->level_rows, options.fp8 ? "BF16 " : "")
              << (options.level ? " with the level" : "") << '\n';
  if (options.moe_host)
    std::cout << "MoE layers' host time (per layer and microbatch): "
              << fixed(fit->moe_host_before_us / 1000, 1) << " -> "
              << fixed(fit->moe_host_after_us / 1000, 1) << " ms, fitted on "
              << rowsText(fit->moe_host_rows, "MoE ") << '\n';
  std::cout << '\n';
  Table table{{"set", "run", "GEMMs", "measured", "before", "after", "held out"}};
  for (const auto &row : fit->rows)
    table.push_back({row.set, row.validation_case->id, row.fp8 ? "fp8" : "bf16",
                     fixed(row.validation_case->measured_step_s, 3) + " s",
                     signedPercent(row.before), signedPercent(row.after),
                     row.held_out ? signedPercent(*row.held_out) : "-"});
  printTable(table, a.has("markdown"));
  const auto line = [](const char *what, const StepErrorSummary &s) {
    std::cout << what << ": mean |error| " << fixed(100 * s.mean(), 1) << " %, worst "
              << fixed(100 * s.worst, 1) << " % (" << rowsText(s.runs, "") << ")\n";
  };
  std::cout << '\n';
  line("before", fit->before);
  line("after", fit->after);
  if (fit->held_out.runs > 0)
    line("held out (each row on the figure fitted on the others)", fit->held_out);
  if (fit->level_alone_held_out.runs > 0) {
    line(options.step && options.overhead ? "the level's rows held out, with both overheads"
         : options.step                   ? "the level's rows held out, with the step overhead"
                                          : "the level's rows held out, with the layer overhead",
         fit->overhead_held_out);
    line("the level's rows held out, the level alone (--fit level)", fit->level_alone_held_out);
  }
  if (save_path)
    std::cout << "\nThe fitted hardware is written to " << *save_path
              << " (pipescope simulate, search and megatron take it with --hardware " << *save_path
              << ")\n";
  return 0;
}

} // namespace pipescope::cli
