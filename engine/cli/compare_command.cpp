// `pipescope compare`: a measured trace against its plan's prediction, and the cost model refit to
// it (DESIGN.md §7 "Calibration"). The explorer's Run tab shows the same tables; this is their
// headless form, for scripts and for the measurement reports in docs/.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/calibration.h"
#include "engine/cli/arguments.h"
#include "engine/cli/commands.h"
#include "engine/model/validation.h"
#include "engine/output_file.h"
#include "engine/plan_file.h"
#include "engine/trace_matching.h"

namespace pipescope::cli {

namespace {

using nlohmann::json;

constexpr const char *kCompareHelp = R"(usage: pipescope compare --measured TRACE [options]

Compares a measured trace (written by pipescope-backend, or exported by the explorer) with the
prediction of the plan it ran: step time, bubble_fraction and bubble_ratio of the median measured
step, and per op kind the median and worst relative error of the op durations. Measured times are
brought to planned time by the run's time factor (device microseconds per planned microsecond,
which the backend records when it scales the work to the device).

  --measured FILE      the measured pipescope.trace
  --plan FILE          the plan it ran (default: the plan stored in the trace)
  --time-factor X      device microseconds per planned microsecond (default: the trace's
                       backend.workload.expected_time_factor, else 1)
  --calibrate          refit F, B, W per stage, the F&B overlap and the transfer times to the
                       measurement, predict again, and show the errors before and after
  --save-plan FILE     with --calibrate: write the plan with the calibrated costs (and its
                       lowered program, so pipescope-backend can run it again)
  --markdown           tables in Markdown
  --json               one JSON object

usage: pipescope compare --published SET [--row ID [--save-plan FILE]] [--markdown | --json]

Compares the cost model with published measurements of real runs (docs/validation.md): for each
row of the set, the configuration, the measured iteration time (and memory where published), the
prediction from the shipped hardware preset of its GPU type, and the error; then the mean and the
worst |error| of the iteration time (over all rows and, with several sets, per set; "by_set" in
the JSON) and of the peak memory. A row may check memory only (its
published rate is no check, e.g. on a GPU whose peak is unknown). A row whose measured time is
set aside (its "measured" says why, e.g. its software's maintainers filed that figure as a
regression) is shown with its error but kept out of the mean and worst, which are then also
given with it. Each row is also predicted at its speed of light (every kernel at the GPU's peak,
every link at its line rate, nothing else: "speed_of_light_step_s"), and the measured steps are
summarized over it; a row measured below it is marked, as no run of its configuration can be
that fast: the run was not the configuration as written, or it overlapped something pipescope
prices in series. SET is a shipped set (all of them with "all") or a "pipescope.validation" file.

  --row ID             only the row ID, and what its prediction is made of: each stage's F, I
                       and W by part (GEMM, attention, memory-bound, TP, ...), the communication
                       per step and how much of the DP sync is exposed, the MFU. With --json
                       every row carries this as "explanation".
  --save-plan FILE     with --row: write the row's configuration as a plan file (schedule, mesh,
                       model, hardware preset, training settings); pipescope simulate --plan
                       FILE predicts the row from it, and the explorer opens it to vary it
)";

std::string percentText(double fraction) {
  return fixed(fraction * 100, 1) + " %";
}

std::string pointsText(double difference) {
  char buffer[48];
  std::snprintf(buffer, sizeof buffer, "%+.1f pts", difference * 100);
  return buffer;
}

// Step times in the unit that keeps them short.
std::string durationText(double us) {
  if (std::abs(us) >= 1e6) return fixed(us * 1e-6, 3) + " s";
  if (std::abs(us) >= 1e3) return fixed(us * 1e-3, 3) + " ms";
  return fixed(us, 1) + " us";
}

Table stepTable(const TraceComparison &before, const TraceComparison *after) {
  Table table;
  if (after)
    table.push_back({"metric", "measured", "predicted before", "error before", "predicted after",
                     "error after"});
  else
    table.push_back({"metric", "measured", "predicted", "error"});
  const auto row = [&](const std::string &name, double measured, double predicted_before,
                       const std::string &error_before, double predicted_after,
                       const std::string &error_after, bool duration) {
    const auto show = [duration](double value) {
      return duration ? durationText(value) : percentText(value);
    };
    std::vector<std::string> cells{name, show(measured), show(predicted_before), error_before};
    if (after) {
      cells.push_back(show(predicted_after));
      cells.push_back(error_after);
    }
    table.push_back(std::move(cells));
  };
  const TraceComparison &a = after ? *after : before;
  row("step time", before.measured.makespan_us, before.predicted.makespan_us,
      signedPercent(before.makespan_relative_error), a.predicted.makespan_us,
      signedPercent(a.makespan_relative_error), true);
  row("bubble_fraction", before.measured.bubble_fraction, before.predicted.bubble_fraction,
      pointsText(before.bubble_fraction_difference), a.predicted.bubble_fraction,
      pointsText(a.bubble_fraction_difference), false);
  row("bubble_ratio", before.measured.bubble_ratio, before.predicted.bubble_ratio,
      pointsText(before.bubble_ratio_difference), a.predicted.bubble_ratio,
      pointsText(a.bubble_ratio_difference), false);
  return table;
}

const KindError *findKind(const TraceComparison &comparison, OpKind kind) {
  for (const auto &entry : comparison.kinds)
    if (entry.kind == kind) return &entry;
  return nullptr;
}

Table kindTable(const TraceComparison &before, const TraceComparison *after) {
  Table table;
  if (after)
    table.push_back({"op kind", "ops", "median error before", "worst before", "median error after",
                     "worst after"});
  else
    table.push_back({"op kind", "ops", "median error", "worst error", "median signed"});
  for (const auto &entry : before.kinds) {
    std::vector<std::string> cells{std::string(opKindName(entry.kind)), std::to_string(entry.count),
                                   percentText(entry.median_relative_error),
                                   percentText(entry.worst_relative_error)};
    if (after) {
      const KindError *refit = findKind(*after, entry.kind);
      cells.push_back(refit ? percentText(refit->median_relative_error) : "-");
      cells.push_back(refit ? percentText(refit->worst_relative_error) : "-");
    } else {
      cells.push_back(signedPercent(entry.median_signed_error));
    }
    table.push_back(std::move(cells));
  }
  return table;
}

json comparisonJson(const TraceComparison &c) {
  const auto step = [](const StepMetrics &m) {
    return json{{"step", m.step},
                {"makespan_us", m.makespan_us},
                {"bubble_fraction", m.bubble_fraction},
                {"bubble_ratio", m.bubble_ratio}};
  };
  json kinds = json::array();
  for (const auto &k : c.kinds)
    kinds.push_back({{"kind", std::string(opKindName(k.kind))},
                     {"count", k.count},
                     {"median_relative_error", k.median_relative_error},
                     {"worst_relative_error", k.worst_relative_error},
                     {"median_signed_error", k.median_signed_error}});
  return {{"predicted", step(c.predicted)},
          {"measured", step(c.measured)},
          {"makespan_relative_error", c.makespan_relative_error},
          {"bubble_fraction_difference", c.bubble_fraction_difference},
          {"bubble_ratio_difference", c.bubble_ratio_difference},
          {"matched_ops", c.matched_ops},
          {"unmatched_ops", c.unmatched_ops},
          {"kinds", std::move(kinds)}};
}

} // namespace

namespace {

/// `compare --published`: the validation table (docs/validation.md is its Markdown form).
int runPublishedComparison(const std::string &which, const std::optional<std::string> &only_row,
                           const std::optional<std::string> &save_plan, bool markdown,
                           bool as_json) {
  // The prose under the table: wrapped at the terminal's width as text; one line a paragraph as
  // Markdown (docs/validation.md's "All rows"), whose renderer wraps it.
  const auto paragraph = [markdown](const std::string &lead, const std::string &continuation,
                                    const std::string &text) {
    return markdown ? lead + text + '\n' : wrappedLine(lead, continuation, text);
  };
  std::vector<std::string> names;
  if (which == "all")
    names = validationSetNames();
  else
    names.push_back(which);
  std::vector<ValidationSet> sets;
  for (const auto &name : names) {
    auto set = loadValidationSet(name);
    if (!set) return fail(set.error().message);
    sets.push_back(std::move(*set));
  }
  Table table{{"set", "run", "GPUs", "measured", "predicted", "error", "memory (GiB)"}};
  json rows = json::array();
  double memory_sum = 0, memory_worst = 0;
  StepErrorSummary steps;
  // Each set's own mean and worst: the sets differ in GPU, software and what was fitted on them,
  // so one mean over all of them hides which set a prediction is good or bad on.
  std::vector<std::pair<std::string, StepErrorSummary>> by_set;
  int memory_count = 0;
  // Timed rows kept out of the figures over rows (ValidationCase::set_aside), listed after them
  // with what the figures would be with them in.
  struct SetAside {
    std::string set;
    const ValidationCase *validation_case = nullptr;
    double step_error = 0;
  };
  std::vector<SetAside> set_aside;
  if (only_row) {
    std::string ids;
    std::vector<std::string> holders; // the sets with a row of that id
    for (const auto &set : sets)
      for (const auto &validation_case : set.cases) {
        if (validation_case.id == *only_row) holders.push_back(set.name);
        ids += (ids.empty() ? "" : ", ") + validation_case.id;
      }
    if (holders.empty())
      return fail("compare: --row '" + *only_row + "' is not a row of " + which +
                  "; its rows are " + ids);
    // Ids are unique within a set, not across them (gpt-1.7b is on A100 and on H100).
    if (save_plan && holders.size() > 1)
      return fail("compare: --row '" + *only_row + "' is a row of " + holders[0] + " and of " +
                  holders[1] + "; give one set with --published to write its plan");
  }
  std::vector<std::string> explanation;
  std::vector<ValidationResult> results;
  for (const auto &set : sets)
    for (const auto &validation_case : set.cases) {
      if (only_row && validation_case.id != *only_row) continue;
      auto result = predictValidationCase(validation_case, true);
      if (!result) return fail(set.name + ": " + result.error().message);
      if (save_plan)
        if (auto status = savePlan(*save_plan, validationCasePlan(validation_case)); !status)
          return fail("compare: " + status.error().message);
      if (countsInStepAccuracy(*result)) {
        steps.add(*result->step_error);
        if (by_set.empty() || by_set.back().first != set.name) by_set.push_back({set.name, {}});
        by_set.back().second.add(*result->step_error);
      } else if (result->step_error) {
        set_aside.push_back({set.name, &validation_case, *result->step_error});
      }
      if (result->memory_error) {
        memory_sum += std::abs(*result->memory_error);
        memory_worst = std::max(memory_worst, std::abs(*result->memory_error));
        ++memory_count;
      }
      const std::string memory = validation_case.measured_memory_gib
                                     ? fixed(result->predicted_memory_gib, 1) + " vs " +
                                           fixed(*validation_case.measured_memory_gib, 1) + " (" +
                                           signedPercent(*result->memory_error) + ")"
                                     : fixed(result->predicted_memory_gib, 1) + " (not published)";
      // Memory-only rows: the predicted step is shown, but no measured time checks it.
      const bool timed = result->step_error.has_value();
      table.push_back({set.name, validation_case.id,
                       std::to_string(validation_case.mesh.worldSize()),
                       timed ? fixed(validation_case.measured_step_s, 3) + " s" : "(memory only)",
                       fixed(result->predicted_step_s, 3) + " s",
                       timed ? signedPercent(*result->step_error) +
                                   (validation_case.set_aside.empty() ? "" : " (set aside)") +
                                   (belowSpeedOfLight(*result) ? " (below speed of light)" : "")
                             : "-",
                       memory});
      json row = {{"set", set.name},
                  {"id", validation_case.id},
                  {"published", validation_case.published},
                  {"hardware", validation_case.hardware_name},
                  {"gpus", validation_case.mesh.worldSize()},
                  {"predicted_step_s", result->predicted_step_s},
                  {"predicted_memory_gib", result->predicted_memory_gib}};
      if (timed) {
        row["measured_step_s"] = validation_case.measured_step_s;
        row["measured_how"] = validation_case.measured_how;
        row["step_error"] = *result->step_error;
        if (!validation_case.set_aside.empty()) row["set_aside"] = validation_case.set_aside;
      }
      if (validation_case.measured_memory_gib) {
        row["measured_memory_gib"] = *validation_case.measured_memory_gib;
        row["memory_error"] = *result->memory_error;
        if (!validation_case.memory_how.empty()) row["memory_how"] = validation_case.memory_how;
      }
      row["speed_of_light_step_s"] = result->speed_of_light_step_s;
      if (timed)
        row["measured_over_speed_of_light"] =
            validation_case.measured_step_s / result->speed_of_light_step_s;
      row["explanation"] = explanationJson(*result);
      if (only_row) explanation = explanationLines(*result);
      rows.push_back(std::move(row));
      results.push_back(std::move(*result));
    }
  const LayoutRanking ranking = layoutRanking(results);
  const SpeedOfLightSummary speed_of_light = speedOfLightSummary(results);
  const double memory_mean = memory_count ? memory_sum / memory_count : 0;
  if (as_json) {
    json sources = json::array();
    for (const auto &set : sets)
      sources.push_back({{"set", set.name}, {"title", set.title}, {"source", set.source}});
    json out = {{"sets", sources},
                {"rows", rows},
                {"mean_abs_step_error", steps.mean()},
                {"worst_abs_step_error", steps.worst},
                {"mean_abs_memory_error", memory_mean},
                {"worst_abs_memory_error", memory_worst}};
    json per_set = json::array();
    for (const auto &[name, summary] : by_set)
      per_set.push_back({{"set", name},
                         {"runs", summary.runs},
                         {"mean_abs_step_error", summary.mean()},
                         {"worst_abs_step_error", summary.worst}});
    out["by_set"] = std::move(per_set);
    json aside = json::array();
    for (const auto &row : set_aside)
      aside.push_back({{"set", row.set},
                       {"id", row.validation_case->id},
                       {"step_error", row.step_error},
                       {"set_aside", row.validation_case->set_aside}});
    out["set_aside"] = std::move(aside);
    if (speed_of_light.runs > 0) {
      json below = json::array();
      for (const auto *result : speed_of_light.below)
        below.push_back({{"id", result->validation_case->id},
                         {"measured_step_s", result->validation_case->measured_step_s},
                         {"speed_of_light_step_s", result->speed_of_light_step_s}});
      out["measured_over_speed_of_light"] = {{"runs", speed_of_light.runs},
                                             {"median", speed_of_light.median},
                                             {"lowest", speed_of_light.lowest},
                                             {"highest", speed_of_light.highest},
                                             {"below", below}};
    }
    if (save_plan) out["saved_plan"] = *save_plan;
    if (ranking.pairs > 0)
      out["layout_ranking"] = {{"pairs", ranking.pairs},
                               {"ordered", ranking.ordered},
                               {"misordered", ranking.misordered}};
    std::cout << out.dump(2) << '\n';
    return 0;
  }
  printTable(table, markdown);
  if (!explanation.empty()) std::cout << '\n';
  for (const auto &line : explanation) {
    // Markdown: a list, each stage's passes nested under it. Text: each wrapped under itself.
    const bool nested = line.starts_with("  ");
    if (markdown)
      std::cout << (nested ? "  - " : "- ") << (nested ? line.substr(2) : line) << '\n';
    else
      std::cout << paragraph(nested ? "  " : "", nested ? "    " : "  ",
                             nested ? line.substr(2) : line);
  }
  if (save_plan)
    std::cout << "\nThe row's plan is written to " << *save_plan << " (pipescope simulate --plan "
              << *save_plan << " predicts it again; the explorer opens it)\n";
  if (only_row) {
    for (const auto &result : results)
      if (result.step_error)
        std::cout << '\n'
                  << paragraph(
                         "", "  ",
                         "speed of light: " + fixed(result.speed_of_light_step_s, 3) +
                             " s (every kernel at the GPU's peak, every link at its line rate, "
                             "nothing else); measured " +
                             fixed(result.validation_case->measured_step_s /
                                       result.speed_of_light_step_s,
                                   2) +
                             "x it" +
                             (belowSpeedOfLight(result)
                                  ? ": below it, so the run was not this configuration, or it "
                                    "overlapped something pipescope prices in series"
                                  : ""));
    for (const auto &row : set_aside)
      std::cout << "\nset aside, not in the figures over rows: " << row.validation_case->set_aside
                << '\n';
    return 0;
  }
  // A set that checks memory only has no time figures to give.
  if (steps.runs > 0)
    std::cout << (markdown ? "\n" : "") << "iteration time over " << steps.runs
              << " runs: mean |error| " << percentText(steps.mean()) << ", worst "
              << percentText(steps.worst) << '\n';
  if (by_set.size() > 1)
    for (const auto &[name, summary] : by_set)
      std::cout << (markdown ? "- " : "  ") << name << ": " << summary.runs
                << (summary.runs == 1 ? " run" : " runs") << ", mean |error| "
                << percentText(summary.mean()) << ", worst " << percentText(summary.worst) << '\n';
  if (!set_aside.empty()) {
    StepErrorSummary with_them = steps;
    for (const auto &row : set_aside)
      with_them.add(row.step_error);
    std::cout << (markdown ? "\n" : "") << set_aside.size()
              << (set_aside.size() == 1 ? " run" : " runs")
              << " set aside, not in the figures above (with them, over " << with_them.runs
              << " runs: mean |error| " << percentText(with_them.mean()) << ", worst "
              << percentText(with_them.worst) << "):\n";
    for (const auto &row : set_aside)
      std::cout << paragraph(markdown ? "- " : "  ", markdown ? "  " : "    ",
                             row.set + "/" + row.validation_case->id + " (" +
                                 signedPercent(row.step_error) +
                                 "): " + row.validation_case->set_aside);
  }
  if (speed_of_light.runs > 0) {
    std::string line = "measured over speed of light (the step with every kernel at the GPU's "
                       "peak, every link at its line rate, nothing else): median " +
                       fixed(speed_of_light.median, 2) + "x over " +
                       std::to_string(speed_of_light.runs) + " runs, lowest " +
                       fixed(speed_of_light.lowest, 2) + "x, highest " +
                       fixed(speed_of_light.highest, 2) + "x";
    if (!speed_of_light.below.empty()) {
      line += "; below it, so the run was not its configuration as written, or it overlapped "
              "something pipescope prices in series:";
      for (const auto *result : speed_of_light.below)
        line += " " + result->validation_case->id + " (" +
                fixed(result->validation_case->measured_step_s, 3) + " s measured, " +
                fixed(result->speed_of_light_step_s, 3) + " s at speed of light)";
    }
    std::cout << (markdown ? "\n" : "") << paragraph("", "  ", line);
  }
  if (ranking.pairs > 0) {
    std::string line =
        "layouts of one workload (model, GPUs, tokens per step, precision) ordered as measured: " +
        std::to_string(ranking.ordered) + " of " + std::to_string(ranking.pairs) + " pairs";
    std::string misordered;
    for (const auto &pair : ranking.misordered)
      misordered += (misordered.empty() ? "" : "; ") + pair;
    if (!misordered.empty())
      line += " (measured faster first, predicted slower: " + misordered + ")";
    std::cout << (markdown ? "\n" : "") << paragraph("", "  ", line);
  }
  if (memory_count > 0)
    std::cout << (markdown ? "\n" : "") << "peak memory over " << memory_count
              << " runs: mean |error| " << percentText(memory_mean) << ", worst "
              << percentText(memory_worst) << '\n';
  for (const auto &set : sets)
    std::cout << (markdown ? "\n" : "")
              << paragraph("", "  ", set.name + ": " + set.title + ". " + set.source);
  return 0;
}

} // namespace

int runCompare(const std::vector<std::string> &args) {
  if (std::find(args.begin(), args.end(), "--help") != args.end()) {
    std::cout << kCompareHelp;
    return 0;
  }
  auto parsed =
      Arguments::parse(args, {"measured", "plan", "time-factor", "save-plan", "published", "row"},
                       {"calibrate", "markdown", "json"}, "compare");
  if (!parsed) return fail(parsed.error().message);
  const Arguments &a = *parsed;
  if (const auto published = a.text("published")) {
    for (const char *other : {"measured", "plan", "time-factor", "calibrate"})
      if (a.has(other))
        return fail(std::string("compare: --") + other +
                    " does not apply with --published, which predicts the published runs "
                    "themselves");
    if (a.has("markdown") && a.has("json"))
      return fail("compare: choose one of --markdown and --json");
    const auto save_plan = a.text("save-plan");
    if (save_plan && !a.has("row"))
      return fail("compare: --save-plan with --published writes one row's plan; pick it with "
                  "--row ID");
    // The table goes to standard output, so the plan needs a file of its own.
    if (save_plan && isStandardOutput(*save_plan))
      return fail("compare: --save-plan needs a file name here: standard output carries the "
                  "table");
    return runPublishedComparison(*published, a.text("row"), save_plan, a.has("markdown"),
                                  a.has("json"));
  }
  if (a.has("row")) return fail("compare: --row picks a row of --published SET; add --published");
  const auto measured_path = a.text("measured");
  if (!measured_path)
    return fail("compare: give the measured trace with --measured FILE (see pipescope compare "
                "--help)");
  if (a.has("markdown") && a.has("json"))
    return fail("compare: --markdown formats the text tables and does not apply with --json; "
                "choose one");
  if (a.has("save-plan") && !a.has("calibrate"))
    return fail("compare: --save-plan writes the calibrated plan; add --calibrate");
  auto factor_option = a.number("time-factor", 1e-9, 1e12);
  if (!factor_option) return fail(factor_option.error().message);

  auto file = loadMeasuredTrace(*measured_path);
  if (!file) return fail(file.error().message);
  Plan plan = file->trace.plan;
  if (auto path = a.text("plan")) {
    auto loaded = loadPlan(*path);
    if (!loaded) return fail(loaded.error().message);
    plan = std::move(*loaded);
  }
  auto evaluation = evaluatePlan(plan);
  if (!evaluation)
    return fail("cannot predict the plan" +
                (a.has("plan") ? " " + *a.text("plan") : std::string(" stored in the trace")) +
                ": " + evaluation.error().message);
  if (auto status = checkTraceMatchesSchedule(file->trace, evaluation->schedule); !status)
    return fail(*measured_path + ": " + status.error().message +
                (a.has("plan") ? " Give the plan it ran with --plan, or leave --plan out to use "
                                 "the plan stored in the trace."
                               : ""));
  const double factor = factor_option->value_or(file->time_factor > 0 ? file->time_factor : 1.0);
  const Trace measured = inPlannedTime(file->trace, factor);
  const Trace predicted = traceFromEvaluation(plan, *evaluation);
  const TraceComparison before = compareTraces(predicted, measured);

  std::optional<TraceComparison> after;
  std::optional<Costs> calibrated;
  Plan calibrated_plan = plan;
  if (a.has("calibrate")) {
    auto current = planCosts(plan, evaluation->schedule.placement);
    if (!current) return fail("cannot calibrate: " + current.error().message);
    auto refit = calibrateCosts(evaluation->schedule, measured, *current);
    if (!refit) return fail("cannot calibrate: " + refit.error().message);
    // Calibrated costs are explicit per-stage op times: a model's derivation would override them.
    calibrated_plan.model.reset();
    calibrated_plan.costs = *refit;
    auto again = evaluatePlan(calibrated_plan);
    if (!again) return fail("cannot predict with the calibrated costs: " + again.error().message);
    after = compareTraces(traceFromEvaluation(calibrated_plan, *again), measured);
    calibrated = *refit;
    if (auto path = a.text("save-plan")) {
      if (auto status = savePlan(*path, calibrated_plan, &again->program); !status)
        return fail(status.error().message);
    }
  }

  const auto steps = traceStepMetrics(file->trace).size();
  const std::string device = file->trace.devices.empty() ? "" : file->trace.devices.front();
  if (a.has("json")) {
    json out{{"schedule", describeSchedule(evaluation->schedule)},
             {"source", file->trace.source},
             {"devices", file->trace.devices},
             {"steps", steps},
             {"time_factor", factor},
             {"clock_error_us", file->trace.clock_error_us},
             {"comparison", comparisonJson(before)}};
    if (after) out["calibrated"] = comparisonJson(*after);
    if (calibrated && !calibrated->concurrency_slowdown.empty())
      out["concurrency_slowdown"] = calibrated->concurrency_slowdown;
    std::cout << out.dump(2) << '\n';
    return 0;
  }
  const bool markdown = a.has("markdown");
  std::cout << (markdown ? "**" : "") << describeSchedule(evaluation->schedule)
            << (markdown ? "**" : "") << ": " << file->trace.source << " trace, " << steps
            << (steps == 1 ? " step" : " steps");
  if (!device.empty()) std::cout << " on " << device;
  std::cout << (markdown ? "  \n" : "\n");
  if (factor != 1)
    std::cout << "Times in planned microseconds: measured device time / " << fixed(factor, 4)
              << " (the run's time factor; measured step "
              << durationText(before.measured.makespan_us * factor) << " on the device).\n";
  std::cout << '\n';
  printTable(stepTable(before, after ? &*after : nullptr), markdown);
  // The trace has no gradient sync or optimizer step (the backend runs neither), so both sides
  // are the ops' span; simulate and the explorer add the plan's tail after the last op.
  if (const double tail_us = evaluation->times.gradient_sync; tail_us > 0)
    std::cout << (markdown ? "\n" : "")
              << "Step time is the ops' span, first op to last, on both sides: the run has no DP "
                 "gradient sync or optimizer step, so the plan's "
              << durationText(tail_us)
              << " after the last op (in simulate's and the explorer's step time) is in neither.\n";
  std::cout << '\n';
  printTable(kindTable(before, after ? &*after : nullptr), markdown);
  if (before.unmatched_ops > 0)
    std::cout << '\n' << before.unmatched_ops << " predicted ops have no measured counterpart.\n";
  if (calibrated) {
    std::cout << "\nCalibrated: per-stage F, B, W"
              << (calibrated->boundary_transfer_us.empty() ? "" : ", transfer times")
              << " refit to the measurement";
    if (auto path = a.text("save-plan")) std::cout << "; written to " << *path;
    std::cout << ".\n";
    if (const auto &factor = calibrated->concurrency_slowdown; !factor.empty()) {
      // The factors, from none of the other ranks computing to all of them.
      std::string factors;
      for (std::size_t n = 0; n < factor.size(); ++n)
        factors += (n ? ", " : "") + fixed(factor[n], 2);
      std::cout << "Contention: with 0 to " << factor.size() - 1
                << " other ranks computing, ops took " << factors
                << " of their time with all of them; the calibrated costs carry it and the "
                   "prediction after calibration simulates it (the ranks share a device).\n";
    }
  }
  return 0;
}

} // namespace pipescope::cli
