// `pipescope schedules`: the schedule families and the P, M, V each accepts.
#include <iostream>

#include "engine/cli/commands.h"
#include "engine/schedule.h"

namespace pipescope::cli {

int runSchedules(const std::vector<std::string> &args) {
  if (!args.empty() && !wantsHelp(args)) return fail("'schedules' takes no arguments");
  for (const auto &family : scheduleFamilies()) {
    // Each field wrapped at the terminal's width under its own first line.
    std::cout << wrappedLine("", "  ", family.name + " — " + family.title)
              << wrappedLine("  ", "  ", family.summary)
              << wrappedLine("  ", "    ", "accepts: " + family.constraints)
              << "  placement: " << placementName(family.placement)
              << (family.splits_backward ? ", backward split into I and W" : "") << '\n'
              << wrappedLine("  ", "    ", "source: " + family.reference) << '\n';
  }
  std::cout << wrappedLine("", "  ",
                           "custom — per-rank op lists from a pipescope.schedule JSON file or "
                           "PyTorch's schedule CSV (--custom FILE, pipescope validate FILE)");
  return 0;
}

} // namespace pipescope::cli
