#pragma once
// Where virtual stages live and which stages each microbatch passes through (DESIGN.md §2).
#include <string_view>
#include <vector>

namespace pipescope {

enum class PlacementKind {
  Loop,          ///< stage s on rank s mod P (V = 1 contiguous, V > 1 Megatron interleaving)
  VShape,        ///< V = 2; s < P on rank s, s >= P on rank 2P-1-s (zb-v, dualpipev)
  Bidirectional, ///< dualpipe: two directions of P stages each; direction 1's stage k on rank P-1-k
};

std::string_view placementName(PlacementKind kind);

/// Stage-to-rank map and microbatch routes. Virtual stages are numbered 0..stageCount()-1.
/// For Bidirectional, ids 0..P-1 are direction 0 (model stage k = id k on rank k) and ids
/// P..2P-1 are direction 1 (model stage k = id P+k, on rank P-1-k); microbatches
/// 0..M/2-1 take direction 0 and M/2..M-1 direction 1.
struct Placement {
  PlacementKind kind = PlacementKind::Loop;
  int pp = 1;     ///< P, pipeline ranks
  int chunks = 1; ///< V, model chunks per rank
  int microbatches = 1;

  std::vector<int> stage_rank;     ///< rank of each virtual stage
  std::vector<int> model_stage;    ///< which slice of the model each virtual stage computes
  std::vector<double> stage_share; ///< its work as a fraction of one rank's share (L/P layers)
  std::vector<int> next_stage;     ///< next stage on the route, -1 at the end
  std::vector<int> previous_stage; ///< previous stage on the route, -1 at the start

  static Placement make(PlacementKind kind, int pp, int chunks, int microbatches);

  int stageCount() const { return static_cast<int>(stage_rank.size()); }
  int modelStageCount() const { return kind == PlacementKind::Bidirectional ? pp : pp * chunks; }
  int rankOf(int stage) const { return stage_rank[static_cast<std::size_t>(stage)]; }

  /// Direction of a microbatch (always 0 unless Bidirectional).
  int direction(int microbatch) const {
    return kind == PlacementKind::Bidirectional && microbatch >= microbatches / 2 ? 1 : 0;
  }
  /// First stage of a microbatch's route.
  int firstStage(int microbatch) const { return direction(microbatch) == 0 ? 0 : pp; }
  /// Last stage of a microbatch's route (where the loss is computed).
  int lastStage(int microbatch) const {
    if (kind != PlacementKind::Bidirectional) return stageCount() - 1;
    return direction(microbatch) == 0 ? pp - 1 : 2 * pp - 1;
  }
  /// Next stage on the route, or -1 at the end.
  int nextStage(int stage) const { return next_stage[static_cast<std::size_t>(stage)]; }
  /// Previous stage on the route, or -1 at the start.
  int previousStage(int stage) const { return previous_stage[static_cast<std::size_t>(stage)]; }
  /// Whether a stage lies on the microbatch's route.
  bool onRoute(int stage, int microbatch) const {
    if (stage < 0 || stage >= stageCount()) return false;
    return kind != PlacementKind::Bidirectional || (stage < pp) == (direction(microbatch) == 0);
  }
  /// Number of stages each microbatch passes through.
  int routeLength() const { return kind == PlacementKind::Bidirectional ? pp : stageCount(); }
};

} // namespace pipescope
