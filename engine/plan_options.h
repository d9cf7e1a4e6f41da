#pragma once
// One path from command-line options to a Plan, shared by `pipescope simulate` and the explorer's
// command line (`pipescope-gui --pp 8 --schedule zb-h1 ...`): the same options, the same checks,
// the same messages. Options are named without their "--"; each value is the text given.
#include <span>
#include <string>
#include <vector>

#include "engine/option_values.h"
#include "engine/plan_file.h"
#include "engine/result.h"

namespace pipescope {

/// One option that describes a plan.
struct PlanOption {
  const char *name;       ///< without "--"
  const char *value_name; ///< "P", "FILE", ...; nullptr for a flag
  const char *help;       ///< one sentence
};

/// Every option planFromOptions reads, in the order `pipescope simulate --help` lists them
/// ("plan" included: the file the others override).
std::span<const PlanOption> planOptions();

/// The plan the options describe: `base` (or, without one, the --plan file, or the defaults
/// P=4, M=8 of 1F1B) with the options applied, each checked, and option combinations that would
/// be silently ignored refused with what would apply.
Result<Plan> planFromOptions(const OptionValues &options, const Plan *base = nullptr);

/// --gemm-precision / --fp8 and --collective-algorithm applied to `training`, with
/// planFromOptions's checks and messages (the planner gives them to every candidate).
Status applyPrecisionAndCollectiveOptions(const OptionValues &options, TrainingSetup &training);

} // namespace pipescope
