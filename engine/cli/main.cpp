// `pipescope`: the command-line face of the engine.
#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <new>
#include <string>
#include <vector>

#include "engine/cli/commands.h"
#include "engine/heap.h"
#include "engine/schedule.h"

namespace {

constexpr const char *kUsage =
    R"(pipescope: simulate, compare and check pipeline-parallel training schedules

usage: pipescope <command> [options]

commands:
  simulate   generate or load a schedule, simulate one step and print its metrics
  table      bubble tables over lists of P and M for chosen schedules
  validate   check a plan or a custom schedule (JSON or PyTorch CSV)
  compare    a measured trace against its plan's prediction, and calibration
  bench      time generation + lowering + simulation over a ladder of sizes
             (--search: the planner's configurations simulated per second)
  search     the planner: every mesh, schedule, V, M and option on N GPUs, ranked by tokens/s
  schedules  list the schedule families and the P, M, V each accepts
  presets    list the model and hardware presets

'pipescope <command> --help' describes a command's options.
)";

} // namespace

namespace {

int runCommand(std::vector<std::string> args) {
  if (args.empty() || args[0] == "--help" || args[0] == "-h" || args[0] == "help") {
    std::fputs(kUsage, args.empty() ? stderr : stdout);
    return args.empty() ? 2 : 0;
  }
  const std::string command = args[0];
  args.erase(args.begin());
  using namespace pipescope::cli;
  if (command == "simulate") return runSimulate(args);
  if (command == "table") return runTable(args);
  if (command == "validate") return runValidate(args);
  if (command == "compare") return runCompare(args);
  if (command == "search") return runSearch(args);
  if (command == "bench" && std::find(args.begin(), args.end(), "--search") != args.end())
    return runSearchBench(args);
  if (command == "bench") return runBench(args);
  if (command == "presets") return runPresets(args);
  if (command == "schedules") return runSchedules(args);
  return fail("unknown command '" + command +
              "'; use simulate, table, validate, compare, search, bench, schedules or presets (see "
              "pipescope --help)");
}

// Whatever went to standard output must have arrived: flush it and check the stream's state, so
// `pipescope simulate > /dev/full` fails loudly instead of exiting 0 with nothing written.
int checkStandardOutput(int status) {
  errno = 0;
  std::cout.flush();
  const bool failed = std::fflush(stdout) != 0 || std::ferror(stdout) || !std::cout;
  if (!failed) return status;
  const int error_number = errno;
  if (error_number == EPIPE) return status; // the reader left: a quiet end (see main)
  std::fprintf(stderr, "pipescope: cannot write to standard output: %s\n",
               error_number != 0 ? std::strerror(error_number) : "write error");
  return 2;
}

} // namespace

int main(int argc, char **argv) {
  pipescope::keepHeapWarm();
  // SIGPIPE is ignored so that `pipescope simulate --json --ops | head` does not die of a signal
  // (which shells, Python and QProcess report as a crash). A write to a closed pipe then fails
  // with EPIPE, which we treat as the quiet, normal end of output and exit 0: the reader chose to
  // stop reading, as with coreutils' default SIGPIPE death, which shells do not report. Every
  // other write failure on standard output (disk full, I/O error) is reported and exits 2.
  std::signal(SIGPIPE, SIG_IGN);
  int status = 2;
  try {
    status = runCommand(std::vector<std::string>(argv + 1, argv + argc));
  } catch (const std::bad_alloc &) {
    // Allocation sizes are bounded by the input checks (at most pipescope::kMaxScheduleOps ops),
    // so this means the machine has less free memory than that size needs.
    std::fprintf(stderr,
                 "pipescope: out of memory while %s (at most %zu ops are accepted, which needs up "
                 "to about %zu MB); lower P, M or V, or free memory\n",
                 pipescope::cli::currentActivity().c_str(), pipescope::kMaxScheduleOps,
                 pipescope::kMaxScheduleOps * pipescope::kPeakBytesPerOp / 1000000);
    return 2;
  }
  return checkStandardOutput(status);
}
