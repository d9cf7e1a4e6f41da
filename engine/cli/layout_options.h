#pragma once
// The uneven-stage options shared by `simulate` and `search`: --layout (Megatron's string),
// --layers-per-stage LIST and torchtitan's --first-stage-less-layers / --last-stage-less-layers.
#include "engine/cli/arguments.h"
#include "engine/model/model_setup.h"
#include "engine/schedule.h"

namespace pipescope::cli {

/// The option names, for Arguments::parse.
inline constexpr const char *kLayoutOptionNames[] = {
    "layout", "layers-per-stage", "first-stage-less-layers", "last-stage-less-layers"};

/// The help lines describing them.
inline constexpr const char *kLayoutHelp =
    R"(  --layout STR             uneven stages as Megatron's --pipeline-model-parallel-layout:
                           E embedding, t layer, m MTP layer, L loss, | between the P×V
                           stages, (...)*n and x*n repeats, e.g. "Et*9|(t*10|)*6t*9L"
  --layers-per-stage LIST  transformer layers per model stage, e.g. 9,10,10,10,10,10,10,11
  --first-stage-less-layers N --last-stage-less-layers N
                           torchtitan's pipeline_parallel_first/last_stage_less_layers:
                           the embedding and head count as N layers in an even split
)";

/// Applies the layout options to `training` for a schedule of `request` (its family decides the
/// number of model stages). Refuses combinations that would be ignored.
Status applyLayoutOptions(const Arguments &arguments, const ScheduleRequest &request,
                          const ModelSpec &model, TrainingSetup &training);

/// Whether any layout option was given.
bool hasLayoutOption(const Arguments &arguments);

} // namespace pipescope::cli
