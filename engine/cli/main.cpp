// `pipescope`: the command-line face of the engine.
#include <cstdio>
#include <string>
#include <vector>

#include "engine/cli/commands.h"
#include "engine/heap.h"

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
  schedules  list the schedule families and the P, M, V each accepts
  presets    list the model and hardware presets

'pipescope <command> --help' describes a command's options.
)";

} // namespace

int main(int argc, char **argv) {
  pipescope::keepHeapWarm();
  std::vector<std::string> args(argv + 1, argv + argc);
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
  if (command == "bench") return runBench(args);
  if (command == "presets") return runPresets(args);
  if (command == "schedules") return runSchedules(args);
  return fail("unknown command '" + command +
              "'; use simulate, table, validate, compare, bench, schedules or presets (see "
              "pipescope --help)");
}
