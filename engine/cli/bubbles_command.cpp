// `pipescope bubbles`: every idle interval of a trace's step attributed to its cause, and the
// step's critical path (engine/bubbles.h defines the causes). The explorer shows the same
// analysis on its timeline; this is its headless form.
#include <algorithm>
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/bubbles.h"
#include "engine/calibration.h"
#include "engine/cli/arguments.h"
#include "engine/cli/commands.h"
#include "engine/plan_file.h"
#include "engine/trace_matching.h"

namespace pipescope::cli {

namespace {

constexpr const char *kBubblesHelp =
    R"(usage: pipescope bubbles TRACE [--plan PLAN] [--step N] [--top K] [--json]

Explains every idle interval of every pipeline rank in one step of a trace (simulated or
measured, as pipescope writes them; gzipped too). The step runs from its first op's start to its
last op's end. Each interval gets one cause:
  fill         waiting for an op (named, with its rank) before the rank's first backward:
               the pipeline filling; the idle before a rank's first op counts here
  drain        waiting for an op after the rank's last forward, and the idle after the rank's
               last op until the step ends: the pipeline draining
  dependency   waiting for an op in the steady state between the two
  transfer     the producing op had finished; its output was still in flight
  unexplained  measured traces: the op's inputs had arrived and its rank was free, yet it had
               not started (host, launch or framework overhead)
  gradient_sync  the modeled DP gradient all-reduce after a rank's last op (simulated plans)
Each wait names the op it waits for and follows the chain of waits back to the op that started
it. Per rank and in total the causes sum to the idle time. The critical path is the chain of
ops, transfers and (measured) overhead whose durations sum to the step time.

  --plan FILE   the plan whose schedule the trace ran (default: the plan stored in the trace);
                its schedule supplies the dependencies and must hold exactly the trace's ops
  --step N      which step of a measured trace (default: the median step by step time)
  --top K       how many of the longest bubbles to list with their chains (default 10)
  --json        one JSON object: per rank busy, idle, per-cause totals and every interval with
                its cause, the op it waits for and its chain's start; per-cause totals; the
                critical path as a list of ops and transfers with their times
)";

using Table = std::vector<std::vector<std::string>>; // first row: the headers

void printTable(const Table &table) {
  std::vector<std::size_t> widths(table.front().size(), 0);
  for (const auto &row : table)
    for (std::size_t c = 0; c < row.size(); ++c)
      widths[c] = std::max(widths[c], row[c].size());
  for (const auto &row : table) {
    std::string line;
    for (std::size_t c = 0; c < row.size(); ++c) {
      // Numbers right-aligned, the first column left-aligned.
      const std::string pad(widths[c] - row[c].size(), ' ');
      line += c == 0 ? row[c] + pad : "  " + pad + row[c];
    }
    std::cout << line << '\n';
  }
}

// The causes worth a column: those with any time in the step (fill and drain always).
std::vector<BubbleCause> shownCauses(const BubbleAnalysis &analysis) {
  std::vector<BubbleCause> causes;
  for (int c = 0; c < kBubbleCauseCount; ++c) {
    const auto cause = static_cast<BubbleCause>(c);
    if (analysis.cause_us[static_cast<std::size_t>(c)] > 0 || cause == BubbleCause::Fill ||
        cause == BubbleCause::Drain)
      causes.push_back(cause);
  }
  return causes;
}

void printReport(const Schedule &schedule, const BubbleAnalysis &analysis, int top) {
  const double makespan = analysis.makespanUs();
  const TimeUnit unit = timeUnitFor(makespan);
  const auto time = [&](double us) { return fixed(us * unit.per_us, 3); };
  const auto share = [](double part, double whole) {
    return whole > 0 ? fixed(100 * part / whole, 1) + " %" : std::string("-");
  };
  const double capacity = makespan * static_cast<double>(analysis.ranks.size());
  std::cout << "Idle time by rank and cause (" << unit.name << "; step " << time(makespan) << " "
            << unit.name << ", idle " << share(analysis.idle_us, capacity) << " of rank time):\n\n";
  const auto causes = shownCauses(analysis);
  Table table;
  table.push_back({"rank", "busy", "idle"});
  for (const auto cause : causes)
    table.front().push_back(std::string(bubbleCauseName(cause)));
  for (std::size_t r = 0; r < analysis.ranks.size(); ++r) {
    const RankBubbles &rank = analysis.ranks[r];
    std::vector<std::string> row{std::to_string(r), time(rank.busy_us), time(rank.idle_us)};
    for (const auto cause : causes)
      row.push_back(time(rank.cause_us[static_cast<std::size_t>(cause)]));
    table.push_back(std::move(row));
  }
  std::vector<std::string> all{"all", time(analysis.busy_us), time(analysis.idle_us)};
  for (const auto cause : causes)
    all.push_back(time(analysis.cause_us[static_cast<std::size_t>(cause)]));
  table.push_back(std::move(all));
  std::vector<std::string> shares{"share", "", "100.0 %"};
  for (const auto cause : causes)
    shares.push_back(share(analysis.cause_us[static_cast<std::size_t>(cause)], analysis.idle_us));
  table.push_back(std::move(shares));
  printTable(table);

  // The longest bubbles, each with its cause in words.
  std::vector<std::pair<std::size_t, std::size_t>> longest; // (rank, interval)
  for (std::size_t r = 0; r < analysis.ranks.size(); ++r)
    for (std::size_t k = 0; k < analysis.ranks[r].intervals.size(); ++k)
      longest.emplace_back(r, k);
  const auto duration = [&](const std::pair<std::size_t, std::size_t> &at) {
    return analysis.ranks[at.first].intervals[at.second].durationUs();
  };
  const auto shown = std::min(longest.size(), static_cast<std::size_t>(top));
  std::partial_sort(longest.begin(), longest.begin() + static_cast<std::ptrdiff_t>(shown),
                    longest.end(), [&](const auto &a, const auto &b) {
                      return duration(a) > duration(b) || (duration(a) == duration(b) && a < b);
                    });
  if (shown > 0) {
    std::cout << "\nLongest bubbles (" << shown << " of " << longest.size() << "):\n";
    for (std::size_t k = 0; k < shown; ++k) {
      const auto [r, index] = longest[k];
      const IdleInterval &interval = analysis.ranks[r].intervals[index];
      // The cause wrapped at the terminal's width, continued under its first word.
      const std::string lead = "  rank " + std::to_string(r) + "  " + time(interval.start_us) +
                               "-" + time(interval.end_us) + " " + unit.name + "  (" +
                               time(interval.durationUs()) + ")  ";
      std::cout << wrappedLine(lead, std::string(lead.size(), ' '),
                               describeIdleInterval(schedule, analysis, interval));
    }
  }

  // The critical path: its make-up, then its runs of consecutive ops on one rank.
  const CriticalPath &path = analysis.critical_path;
  const auto kind_time = [&](PathSegmentKind kind) {
    return path.kind_us[static_cast<std::size_t>(kind)];
  };
  std::cout << "\nCritical path: " << path.opCount() << " ops, " << time(makespan) << " "
            << unit.name << " = compute " << time(kind_time(PathSegmentKind::Compute))
            << " + transfers " << time(kind_time(PathSegmentKind::Transfer));
  if (analysis.measured || kind_time(PathSegmentKind::Overhead) > 0)
    std::cout << " + overhead " << time(kind_time(PathSegmentKind::Overhead));
  if (kind_time(PathSegmentKind::GradientSync) > 0)
    std::cout << " + gradient sync " << time(kind_time(PathSegmentKind::GradientSync));
  std::cout << '\n';
  struct Run {
    int rank;
    double start, end;
    std::string ops;
    int count = 0;
  };
  std::vector<Run> runs;
  for (const auto &segment : path.segments) {
    if (segment.kind != PathSegmentKind::Compute) continue;
    if (runs.empty() || runs.back().rank != segment.rank)
      runs.push_back({segment.rank, segment.start_us, segment.end_us, "", 0});
    Run &run = runs.back();
    run.end = segment.end_us;
    const Op &op = schedule.ranks[static_cast<std::size_t>(segment.op.rank)]
                                 [static_cast<std::size_t>(segment.op.position)];
    if (++run.count <= 6) run.ops += (run.count > 1 ? " " : "") + describeOpShort(op);
  }
  constexpr std::size_t kRunsShown = 24;
  for (std::size_t k = 0; k < runs.size(); ++k) {
    if (runs.size() > kRunsShown && k == kRunsShown / 2) {
      std::cout << "  ... " << runs.size() - kRunsShown << " more runs ...\n";
      k = runs.size() - kRunsShown / 2;
    }
    const Run &run = runs[k];
    std::cout << "  rank " << run.rank << "  " << time(run.start) << "-" << time(run.end) << " "
              << unit.name << "  " << run.ops
              << (run.count > 6 ? " ... (" + std::to_string(run.count) + " ops)" : "") << '\n';
  }
}

} // namespace

int runBubbles(const std::vector<std::string> &args) {
  if (std::find(args.begin(), args.end(), "--help") != args.end() ||
      std::find(args.begin(), args.end(), "-h") != args.end()) {
    std::cout << kBubblesHelp;
    return 0;
  }
  auto parsed = Arguments::parse(args, {"plan", "step", "top"}, {"json"}, "bubbles");
  if (!parsed) return fail(parsed.error().message);
  const Arguments &a = *parsed;
  if (a.positional().size() != 1)
    return fail("bubbles: give one trace file (pipescope bubbles TRACE [--plan PLAN]); see "
                "pipescope bubbles --help");
  const std::string &trace_path = a.positional().front();
  auto step_option = a.integer("step", 0, 1 << 30);
  if (!step_option) return fail(step_option.error().message);
  auto top_option = a.integer("top", 0, 1 << 20);
  if (!top_option) return fail(top_option.error().message);
  if (a.has("top") && a.has("json"))
    return fail("bubbles: --top chooses the bubbles the text report lists; --json lists them all");

  currentActivity() = "reading " + trace_path;
  auto document = loadTraceDocument(trace_path);
  if (!document) return fail(document.error().message);
  const Trace &trace = document->trace;
  if (trace.ops.empty()) return fail(trace_path + ": /ops: the trace has no ops to explain");
  Plan plan = trace.plan;
  if (auto path = a.text("plan")) {
    auto loaded = loadPlan(*path);
    if (!loaded) return fail(loaded.error().message);
    plan = std::move(*loaded);
  }
  currentActivity() = "evaluating the plan";
  auto evaluation = evaluatePlan(plan);
  if (!evaluation)
    return fail("cannot build the schedule of the plan" +
                (a.has("plan") ? " " + *a.text("plan") : std::string(" stored in the trace")) +
                ": " + evaluation.error().message);
  if (auto status = checkTraceMatchesSchedule(trace, evaluation->schedule); !status)
    return fail(trace_path + ": " + status.error().message +
                (a.has("plan") ? " Give the plan it ran with --plan, or leave --plan out to use "
                                 "the plan stored in the trace."
                               : " Give the plan it ran with --plan."));

  const std::vector<int> steps = traceSteps(trace);
  int step = steps.front();
  if (auto chosen = *step_option) {
    if (!std::binary_search(steps.begin(), steps.end(), *chosen))
      return fail("bubbles: --step " + std::to_string(*chosen) +
                  ": the trace has no such step; its steps are " + std::to_string(steps.front()) +
                  " to " + std::to_string(steps.back()));
    step = *chosen;
  } else if (steps.size() > 1) {
    // The median step by step time, as `pipescope compare` reports.
    auto metrics = traceStepMetrics(trace);
    std::sort(metrics.begin(), metrics.end(), [](const StepMetrics &x, const StepMetrics &y) {
      return x.makespan_us < y.makespan_us;
    });
    step = metrics[metrics.size() / 2].step;
  }

  currentActivity() = "explaining the bubbles";
  auto timeline = stepTimelineFromTrace(trace, evaluation->schedule, evaluation->program, step);
  if (!timeline)
    return fail(trace_path + ": " + timeline.error().message +
                (a.has("plan") ? ". Give the plan it ran with --plan, or leave --plan out to use "
                                 "the plan stored in the trace."
                               : ". Give the plan it ran with --plan."));
  // A simulation counts its modeled DP gradient sync in the step; a measurement's step ends at
  // its last op.
  if (!timeline->measured) timeline->gradient_sync_us = evaluation->times.gradient_sync;
  auto analysis = explainBubbles(evaluation->schedule, evaluation->program, *timeline);
  if (!analysis) return fail(trace_path + ": " + analysis.error().message);

  const std::string schedule_text = describeSchedule(evaluation->schedule);
  if (a.has("json")) {
    const nlohmann::json header{{"trace", trace_path},
                                {"source", trace.source},
                                {"schedule", schedule_text},
                                {"step", step},
                                {"steps", steps.size()}};
    streamBubbleJson(
        [](std::string_view text) {
          std::cout.write(text.data(), static_cast<std::streamsize>(text.size()));
        },
        evaluation->schedule, *analysis, header);
    return 0;
  }
  std::cout << schedule_text << ": " << trace.source << " trace, step " << step;
  if (steps.size() > 1)
    std::cout << (*step_option ? " of " : " (the median by step time) of ") << steps.size()
              << " steps";
  if (analysis->measured && trace.clock_error_us > 0)
    std::cout << "; clocks aligned to within " << fixed(trace.clock_error_us, 1) << " us";
  std::cout << "\n";
  printReport(evaluation->schedule, *analysis, top_option->value_or(10));
  return 0;
}

} // namespace pipescope::cli
