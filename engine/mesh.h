#pragma once
// The device mesh: dp × tp × pp GPUs in nodes of gpus_per_node (DESIGN.md §2 "Mesh").
#include <array>
#include <string>
#include <string_view>
#include <vector>

#include "engine/result.h"

namespace pipescope {

enum class MeshDim { DP, TP, PP };

std::string_view meshDimName(MeshDim dim); ///< "dp", "tp", "pp"

/// A rank's coordinates: data-parallel replica d, pipeline rank p, tensor-parallel index t.
struct RankCoords {
  int d = 0, p = 0, t = 0;
  friend bool operator==(const RankCoords &, const RankCoords &) = default;
};

struct Mesh {
  int dp = 1;
  int tp = 1;
  int pp = 1;
  int gpus_per_node = 8;
  /// Dimensions from fastest-varying (innermost) to slowest in rank numbering. The default
  /// tp-pp-dp keeps each TP group inside a node, as Megatron-LM numbers ranks.
  std::array<MeshDim, 3> order{MeshDim::TP, MeshDim::PP, MeshDim::DP};

  int worldSize() const { return dp * tp * pp; }
  int nodeCount() const { return (worldSize() + gpus_per_node - 1) / gpus_per_node; }
  int nodeOf(int rank) const { return rank / gpus_per_node; }
  int localRankOf(int rank) const { return rank % gpus_per_node; }

  RankCoords coordsOf(int rank) const;
  int rankOf(const RankCoords &coords) const;
  /// The ranks of `rank`'s group along `dim` (TP: fixed d,p; PP: fixed d,t; DP: fixed p,t), in
  /// order of the varying coordinate.
  std::vector<int> groupOf(MeshDim dim, int rank) const;
  /// Whether every rank of that group sits in one node (intra-node link) or not (inter-node).
  bool groupInsideNode(MeshDim dim, int rank) const;
  /// Whether two ranks share a node.
  bool sameNode(int a, int b) const { return nodeOf(a) == nodeOf(b); }

  /// "tp-pp-dp" style name of the order.
  std::string orderName() const;
  /// Parses "tp-pp-dp", "pp-tp-dp", ... (each of dp, tp, pp exactly once).
  static Result<std::array<MeshDim, 3>> parseOrder(std::string_view text);

  /// Positive sizes within limits; the error names the field and what would work.
  Status check() const;
};

inline constexpr int kMaxWorldSize = 1 << 20;

} // namespace pipescope
