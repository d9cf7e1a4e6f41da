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

// `pipescope --help`: the commands and their summaries come from the table (command_list.inc).
std::string usage() {
  std::string text = "pipescope: simulate, compare and check pipeline-parallel training "
                     "schedules\n\nusage: pipescope <command> [options]\n\ncommands:\n";
  for (const auto &command : pipescope::cli::commands()) {
    std::string name(command.name);
    name.resize(std::max<std::size_t>(name.size(), 10), ' ');
    text += "  " + name + " " + std::string(command.summary) + "\n";
  }
  return text + "\n'pipescope <command> --help' describes a command's options.\n";
}

// "simulate, table, ... or presets".
std::string commandNames() {
  const auto all = pipescope::cli::commands();
  std::string names;
  for (std::size_t i = 0; i < all.size(); ++i)
    names += (i == 0 ? "" : i + 1 == all.size() ? " or " : ", ") + std::string(all[i].name);
  return names;
}

int runCommand(std::vector<std::string> args) {
  if (args.empty() || args[0] == "--help" || args[0] == "-h" || args[0] == "help") {
    std::fputs(usage().c_str(), args.empty() ? stderr : stdout);
    return args.empty() ? 2 : 0;
  }
  const std::string command = args[0];
  args.erase(args.begin());
  for (const auto &known : pipescope::cli::commands())
    if (known.name == command) return known.run(args);
  return pipescope::cli::fail("unknown command '" + command + "'; use " + commandNames() +
                              " (see pipescope --help)");
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
