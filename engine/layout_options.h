#pragma once
// The uneven-stage options of a plan (read by planFromOptions, so `pipescope simulate` and the
// explorer's command line share them): --layout (Megatron's string), --layers-per-stage LIST and
// torchtitan's --first-stage-less-layers / --last-stage-less-layers.
#include "engine/model/model_setup.h"
#include "engine/option_values.h"
#include "engine/schedule.h"

namespace pipescope {

/// The option names.
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
Status applyLayoutOptions(const OptionValues &arguments, const ScheduleRequest &request,
                          const ModelSpec &model, TrainingSetup &training);

/// Whether any layout option was given.
bool hasLayoutOption(const OptionValues &arguments);

} // namespace pipescope
