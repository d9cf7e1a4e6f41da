// `pipescope validate`: checks a plan or a custom schedule (JSON or PyTorch CSV) and summarizes it.
#include <iostream>

#include "engine/cli/commands.h"
#include "engine/evaluation.h"
#include "engine/json_io.h"
#include "engine/plan_file.h"
#include "engine/pytorch_csv.h"

namespace pipescope::cli {

int runValidate(const std::vector<std::string> &args) {
  if (wantsHelp(args)) {
    std::cout
        << "usage: pipescope validate FILE\n\nChecks a plan (pipescope.plan JSON) or a custom "
           "schedule (pipescope.schedule JSON or PyTorch's schedule CSV): every op once on "
           "its owning rank, and the lowered program runs to completion. Prints a summary, "
           "or the precise problem.\n";
    return 0;
  }
  if (args.size() != 1)
    return fail(std::string(args.empty() ? "validate needs the FILE to check"
                                         : "validate takes one FILE, got " +
                                               std::to_string(args.size()) + " arguments") +
                "; usage: pipescope validate FILE (see 'pipescope validate --help')");
  if (args[0].starts_with("--"))
    return fail("unknown option " + args[0] +
                " for 'validate'; usage: pipescope validate FILE (see 'pipescope validate "
                "--help')");
  const std::string &path = args[0];
  auto text = readTextFile(path);
  if (!text) return fail(text.error().message);
  Plan plan;
  const auto first = text->find_first_not_of(" \t\r\n");
  bool is_plan = false;
  if (first != std::string::npos && (*text)[first] == '{') {
    auto parsed = parseJsonLimited(*text);
    if (!parsed) return fail(escapeControlCharacters(path) + ": " + parsed.error().message);
    if (const auto f = parsed->find("format"); f != parsed->end() && *f == kPlanFormat) {
      auto loaded = planFromJson(*parsed);
      if (!loaded) return fail(escapeControlCharacters(path) + ": " + loaded.error().message);
      plan = std::move(*loaded);
      is_plan = true;
    }
  }
  if (!is_plan) {
    auto schedule = loadCustomSchedule(path);
    if (!schedule) return fail(schedule.error().message);
    plan.request.name = "custom";
    plan.request.pp = plan.mesh.pp = schedule->pp();
    plan.request.microbatches = schedule->microbatches();
    plan.request.chunks = schedule->chunks();
    plan.custom = std::move(*schedule);
  }
  auto evaluation = evaluatePlan(plan);
  if (!evaluation) return fail(escapeControlCharacters(path) + ": " + evaluation.error().message);
  const auto &e = *evaluation;
  std::cout << path << ": valid " << (is_plan ? "plan" : "custom schedule") << " ("
            << e.schedule.name << ", P=" << e.schedule.pp() << " M=" << e.schedule.microbatches()
            << " V=" << e.schedule.chunks() << ", " << placementName(e.schedule.placement.kind)
            << " placement, " << e.schedule.opCount() << " ops, " << e.program.messages.size()
            << " transfers)\n"
            << "makespan " << number(e.simulation.makespan_us) << " us, bubble_fraction "
            << percent(e.simulation.bubble_fraction) << ", bubble_ratio "
            << percent(e.simulation.bubble_ratio) << '\n';
  return 0;
}

} // namespace pipescope::cli
