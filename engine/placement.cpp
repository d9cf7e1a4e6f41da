#include "engine/placement.h"

namespace pipescope {

std::string_view placementName(PlacementKind kind) {
  switch (kind) {
  case PlacementKind::Loop: return "loop";
  case PlacementKind::VShape: return "v-shape";
  case PlacementKind::Bidirectional: return "bidirectional";
  }
  return "?";
}

Placement Placement::make(PlacementKind kind, int pp, int chunks, int microbatches) {
  Placement placement;
  placement.kind = kind;
  placement.pp = pp;
  placement.chunks = kind == PlacementKind::Loop ? chunks : 2;
  placement.microbatches = microbatches;
  const int stage_count = pp * placement.chunks;
  placement.stage_rank.resize(static_cast<std::size_t>(stage_count));
  placement.model_stage.resize(static_cast<std::size_t>(stage_count));
  placement.stage_share.resize(static_cast<std::size_t>(stage_count));
  for (int s = 0; s < stage_count; ++s) {
    const auto i = static_cast<std::size_t>(s);
    switch (kind) {
    case PlacementKind::Loop:
      placement.stage_rank[i] = s % pp;
      placement.model_stage[i] = s;
      placement.stage_share[i] = 1.0 / placement.chunks;
      break;
    case PlacementKind::VShape:
      placement.stage_rank[i] = s < pp ? s : 2 * pp - 1 - s;
      placement.model_stage[i] = s;
      placement.stage_share[i] = 0.5;
      break;
    case PlacementKind::Bidirectional:
      // Each direction is a whole model split over P stages, so a stage is a full rank share.
      placement.stage_rank[i] = s < pp ? s : 2 * pp - 1 - s;
      placement.model_stage[i] = s < pp ? s : s - pp;
      placement.stage_share[i] = 1.0;
      break;
    }
  }
  // Routes: stage s feeds s+1, except that in the bidirectional placement each direction ends
  // at its own last stage (P-1 and 2P-1).
  placement.next_stage.resize(static_cast<std::size_t>(stage_count));
  placement.previous_stage.resize(static_cast<std::size_t>(stage_count));
  for (int s = 0; s < stage_count; ++s) {
    const bool route_end =
        s + 1 == stage_count || (kind == PlacementKind::Bidirectional && s == pp - 1);
    const bool route_start = s == 0 || (kind == PlacementKind::Bidirectional && s == pp);
    placement.next_stage[static_cast<std::size_t>(s)] = route_end ? -1 : s + 1;
    placement.previous_stage[static_cast<std::size_t>(s)] = route_start ? -1 : s - 1;
  }
  return placement;
}

} // namespace pipescope
