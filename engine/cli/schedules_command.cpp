// `pipescope schedules`: the schedule families and the P, M, V each accepts.
#include <iostream>

#include "engine/cli/commands.h"
#include "engine/schedule.h"

namespace pipescope::cli {

int runSchedules(const std::vector<std::string> &args) {
  if (!args.empty() && !wantsHelp(args)) return fail("'schedules' takes no arguments");
  for (const auto &family : scheduleFamilies()) {
    std::cout << family.name << " — " << family.title << "\n  " << family.summary
              << "\n  accepts: " << family.constraints
              << "\n  placement: " << placementName(family.placement)
              << (family.splits_backward ? ", backward split into I and W" : "")
              << "\n  source: " << family.reference << "\n\n";
  }
  std::cout << "custom — per-rank op lists from a pipescope.schedule JSON file or PyTorch's "
               "schedule CSV (--custom FILE, pipescope validate FILE)\n";
  return 0;
}

} // namespace pipescope::cli
