#include "engine/layout_options.h"

#include <string>

namespace pipescope {

bool hasLayoutOption(const OptionValues &arguments) {
  for (const char *name : kLayoutOptionNames)
    if (arguments.has(name)) return true;
  return false;
}

Status applyLayoutOptions(const OptionValues &arguments, const ScheduleRequest &request,
                          const ModelSpec &model, TrainingSetup &training) {
  const bool torchtitan =
      arguments.has("first-stage-less-layers") || arguments.has("last-stage-less-layers");
  const int ways = (arguments.has("layout") ? 1 : 0) + (arguments.has("layers-per-stage") ? 1 : 0) +
                   (torchtitan ? 1 : 0);
  if (ways == 0) return Ok{};
  if (ways > 1)
    return makeError("--layout, --layers-per-stage and --first/last-stage-less-layers each set "
                     "the layer split; give one of them");
  if (arguments.has("balance"))
    return makeError("--balance does not apply with a layer layout: the layout fixes the split; "
                     "drop --balance or the layout");
  const auto *family = findScheduleFamily(request.name);
  const PlacementKind kind = family ? family->placement : PlacementKind::Loop;
  const int stages = Placement::make(kind, request.pp, request.chunks, 1).modelStageCount();
  LayerLayout layout;
  if (auto text = arguments.text("layout")) {
    auto parsed = parseMegatronLayout(*text);
    if (!parsed) return makeError("--" + parsed.error().message); // "--layout: ..."
    layout = std::move(*parsed);
  } else if (arguments.has("layers-per-stage")) {
    auto list = arguments.integerList("layers-per-stage", 0, 100000);
    if (!list) return list.error();
    layout = layoutFromLayerCounts(**list);
    if (!layout.empty()) layout.back().mtp_layers = model.mtp_layers;
  } else {
    auto first = arguments.integer("first-stage-less-layers", 0, 100000);
    if (!first) return first.error();
    auto last = arguments.integer("last-stage-less-layers", 0, 100000);
    if (!last) return last.error();
    // torchtitan's defaults are 1 and 1.
    auto split = torchtitanLayout(model.layers, stages, first->value_or(1), last->value_or(1));
    if (!split) return makeError(split.error().message);
    layout = std::move(*split);
    layout.back().mtp_layers = model.mtp_layers;
  }
  if (auto status = checkLayerLayout(layout, model.layers, model.mtp_layers, stages); !status) {
    std::string even;
    if (auto split = torchtitanLayout(model.layers, stages, 0, 0)) {
      split->back().mtp_layers = model.mtp_layers;
      even = "; an even split is " + formatMegatronLayout(*split);
    }
    return makeError(status.error().message + " (" + request.name + " with P = " +
                     std::to_string(request.pp) + ", V = " + std::to_string(request.chunks) +
                     " has " + std::to_string(stages) + " model stages" + even + ")");
  }
  training.layout = std::move(layout);
  return Ok{};
}

} // namespace pipescope
