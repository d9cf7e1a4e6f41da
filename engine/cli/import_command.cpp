// `pipescope import`: a real training run (PyTorch profiler traces, Megatron-LM PP timer dumps)
// brought in as a measured pipescope.trace, so `compare`, `--calibrate`, the explorer and the
// Chrome export work on it as on the backend's runs (DESIGN.md §6).
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/cli/arguments.h"
#include "engine/cli/commands.h"
#include "engine/run_import.h"

namespace pipescope::cli {

namespace {

constexpr const char *kImportHelp = R"(usage: pipescope import PATH... [options]

Reads a real training run and writes it as a measured pipescope.trace, matched to its schedule.

  PATH                 the run's files, or folders of them:
                       - PyTorch profiler (Kineto) Chrome traces, one per rank, as torch.profiler's
                         export_chrome_trace and torchtitan write them (rank{r}_trace.json, also
                         gzipped). torch.distributed.pipelining labels every action PP:<action>
                         (2F0, 1I3, 0W2, (0F7;7B3)OVERLAP_F_B, ...); ScheduleGPipe labels
                         Forward i / Backward i. GPU spans (gpu_user_annotation) are used when
                         every rank has them, else the CPU spans (which include waiting).
                       - Megatron-LM PP timer dumps (event_times_PP{P}_VPP{V}_..._pp_rank_{p}_
                         rank_{g}.json: forward-{mb}-start/-end, backward-..., in milliseconds).
  --format F           torch, megatron or auto (default: by the names and content)
  --step N|all         one profiled step (its ProfilerStep number; without markers, steps count
                       from 0 by the repeat of the actions), or all (default)
  --out FILE           the measured trace to write (.gz: gzipped)
  --json               print the summary as JSON: pp, microbatches, virtual_stages, placement,
                       schedule (the family and its parameters when the per-rank order equals
                       one pipescope generates, else custom), steps, ops, clock_error_us, ...
  --progress           show progress on stderr (default: when stderr is a terminal)

P, V, the placement and M come from the actions; ranks, world size and hosts from the traces'
distributedInfo and host_name. Ranks on one host share a clock; across hosts the clocks are
aligned by the send/receive pairs and the remaining bound is reported as clock_error_us. The
trace's plan holds the run's own median op times per stage, so 'pipescope compare --measured
FILE' shows the run against its ideal schedule at those times.
)";

// "12.3 of 400.0 MB" on one line of the terminal, at most every tenth of a second.
class ProgressLine {
public:
  explicit ProgressLine(bool enabled) : enabled_(enabled) {}
  ~ProgressLine() {
    if (enabled_ && shown_) std::fputs("\r\033[K", stderr);
  }
  ProgressLine(const ProgressLine &) = delete;
  ProgressLine &operator=(const ProgressLine &) = delete;

  void operator()(std::size_t done, std::size_t total) {
    if (!enabled_) return;
    const auto now = std::chrono::steady_clock::now();
    if (shown_ && now - last_ < std::chrono::milliseconds(100) && done < total) return;
    last_ = now;
    shown_ = true;
    std::fprintf(stderr, "\rpipescope: reading %.1f of %.1f MB", static_cast<double>(done) / 1e6,
                 static_cast<double>(total) / 1e6);
    std::fflush(stderr);
  }

private:
  bool enabled_;
  bool shown_ = false;
  std::chrono::steady_clock::time_point last_{};
};

} // namespace

int runImport(const std::vector<std::string> &args) {
  if (std::find(args.begin(), args.end(), "--help") != args.end() ||
      std::find(args.begin(), args.end(), "-h") != args.end()) {
    std::cout << kImportHelp;
    return 0;
  }
  auto parsed = Arguments::parse(args, {"format", "step", "out"}, {"json", "progress"}, "import");
  if (!parsed) return fail(parsed.error().message);
  const Arguments &a = *parsed;
  if (a.positional().empty())
    return fail("import: name the run's files or its folder (see pipescope import --help)");
  if (!a.has("out") && !a.has("json"))
    return fail("import: give --out FILE for the measured trace, or --json for the summary "
                "alone");
  ImportOptions options;
  const std::string format = a.text("format").value_or("auto");
  if (format == "torch")
    options.format = RunFormat::Torch;
  else if (format == "megatron")
    options.format = RunFormat::Megatron;
  else if (format != "auto")
    return fail("--format expects torch, megatron or auto, got '" + format + "'");
  if (const auto step = a.text("step"); step && *step != "all") {
    auto number = a.integer("step", 0, 1 << 30);
    if (!number) return fail("--step expects a step number or all, got '" + *step + "'");
    options.step = **number;
  }
  ProgressLine progress(a.has("progress") || ::isatty(STDERR_FILENO) == 1);
  options.progress = [&progress](std::size_t done, std::size_t total) { progress(done, total); };
  currentActivity() = "reading the run's files";
  auto run = importRun(a.positional(), options);
  if (!run) return fail(run.error().message);
  if (const auto out = a.text("out")) {
    currentActivity() = "writing " + *out;
    if (auto status = saveImportedRun(*out, *run); !status) return fail(status.error().message);
  }
  const ImportSummary &s = run->summary;
  if (a.has("json")) {
    std::cout << importSummaryJson(s).dump(2) << '\n';
    return 0;
  }
  std::string steps;
  for (const int step : s.steps)
    steps += (steps.empty() ? "" : ", ") + std::to_string(step);
  std::cout << "schedule: " << s.schedule.value("name", std::string("custom")) << " (P=" << s.pp
            << ", M=" << s.microbatches << ", V=" << s.virtual_stages << ", " << s.placement
            << " placement)\n"
            << "steps: " << steps << "; " << s.ops << " op records from " << s.actions
            << " actions\n"
            << "timing: "
            << (s.format == "megatron" ? "Megatron-LM timers"
                : s.timing == "gpu"    ? "GPU annotation spans"
                                       : "CPU annotation spans (they include waiting)")
            << "\nclock: "
            << (s.hosts > 1 ? std::to_string(s.hosts) +
                                  " hosts aligned by send/receive pairs, "
                                  "error bound " +
                                  nlohmann::json(s.clock_error_us).dump() + " us"
                            : std::string("one host, one clock"))
            << '\n';
  if (const auto out = a.text("out")) std::cout << "written: " << *out << '\n';
  return 0;
}

} // namespace pipescope::cli
