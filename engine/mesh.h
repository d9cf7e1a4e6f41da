#pragma once
// The device mesh: dp × cp × tp × pp GPUs in nodes of gpus_per_node, with expert parallelism
// folded into the dp × cp ranks (DESIGN.md §2 "Mesh"; Megatron-LM's parallel state).
#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "engine/result.h"

namespace pipescope {

/// The dimensions of the rank numbering.
enum class MeshDim : std::uint8_t { DP, TP, PP, CP };

std::string_view meshDimName(MeshDim dim); ///< "dp", "tp", "pp", "cp"

/// The process groups ranks communicate in (Megatron-Core's parallel_state groups).
enum class MeshGroup : std::uint8_t {
  TP, ///< tensor parallel: fixed d, c, p
  CP, ///< context parallel (the K/V ring): fixed d, p, t
  PP, ///< pipeline: fixed d, c, t
  DP, ///< data parallel proper: fixed c, p, t
  /// dp × cp ranks of fixed p, t: the dense parameters' gradient reduction (Megatron's "dp_cp"
  /// group, which its distributed optimizer also shards over).
  DataCP,
  /// Expert parallel: ep consecutive ranks of the folded dp·cp space (Mesh::foldedIndexOf); with
  /// expert tensor parallelism below tp, ep ranks etp apart in the folded tp·dp·cp space
  /// (Mesh::expertFoldedIndexOf).
  EP,
  /// The ranks holding the same expert shards: the expert gradients' reduction (Megatron's
  /// expert-data-parallel group), dp·cp·tp / (etp·ep) of them.
  ExpertData,
};

std::string_view meshGroupName(MeshGroup group); ///< "TP", "CP", "PP", "DP", "DP×CP", "EP", "EDP"

/// A rank's coordinates: data-parallel replica d, pipeline rank p, tensor-parallel index t,
/// context-parallel index c.
struct RankCoords {
  int d = 0, p = 0, t = 0, c = 0;
  friend bool operator==(const RankCoords &, const RankCoords &) = default;
};

using RankOrder = std::array<MeshDim, 4>;

struct Mesh {
  int dp = 1;
  int tp = 1;
  int pp = 1;
  int gpus_per_node = 8;
  /// Dimensions from fastest-varying (innermost) to slowest in rank numbering. The default
  /// tp-cp-pp-dp keeps each TP group inside a node, as Megatron-LM numbers ranks, with the CP
  /// ring next to it (Megatron's tp-cp-…); with cp = 1 it is the tp-pp-dp of earlier plans.
  RankOrder order{MeshDim::TP, MeshDim::CP, MeshDim::PP, MeshDim::DP};
  /// Context parallelism: each sequence split over cp ranks (Megatron's --context-parallel-size).
  /// It multiplies the world: world = dp × cp × tp × pp.
  int cp = 1;
  /// Expert parallelism, folded into the dp × cp ranks as Megatron-Core folds it ("MoE parallel
  /// folding"): ep divides dp × cp; each EP group holds 1/ep of every MoE layer's experts.
  int ep = 1;
  /// Expert tensor parallelism (Megatron-Core's --expert-tensor-parallel-size): each expert split
  /// over this many ranks. 0 means tp: experts split like the dense MLP, EP folded into dp × cp.
  /// A divisor of tp below it folds the experts' etp × ep × edp into the tp × dp × cp ranks of a
  /// pipeline stage (MoE parallel folding, Liu et al. 2025, arXiv:2504.14960), e.g. etp = 1:
  /// whole experts, EP drawn across the TP ranks too.
  int etp = 0;

  int worldSize() const { return dp * cp * tp * pp; }
  int nodeCount() const { return (worldSize() + gpus_per_node - 1) / gpus_per_node; }
  int nodeOf(int rank) const { return rank / gpus_per_node; }
  int localRankOf(int rank) const { return rank % gpus_per_node; }
  /// Sizes of the groups: dp × cp and dp × cp × tp / (etp × ep) (dp × cp / ep when etp = tp).
  int dataCpSize() const { return dp * cp; }
  int expertTpSize() const { return etp > 0 ? etp : tp; }
  /// Whether EP folds into the TP ranks too (etp below tp).
  bool expertsFoldTp() const { return expertTpSize() != tp; }
  int expertDataSize() const { return dp * cp * (tp / expertTpSize()) / ep; }
  int sizeOf(MeshDim dim) const;
  int groupSize(MeshGroup group) const;

  RankCoords coordsOf(int rank) const;
  int rankOf(const RankCoords &coords) const;
  /// Where (d, c) sits in the folded dp·cp space EP is drawn from: of cp and dp, the one the
  /// rank order names first varies fastest (with the default order c + cp·d, as Megatron-Core's
  /// expert ranks run tp-ep-dp over its tp-cp-dp numbering), so EP groups are as close in rank
  /// numbering as the order allows.
  int foldedIndexOf(const RankCoords &coords) const;
  /// The (d, c) of a folded index, the inverse of foldedIndexOf (d and c set, p and t kept).
  RankCoords unfold(int folded, RankCoords base) const;
  /// Where a rank sits in the space its stage's experts are laid out over: foldedIndexOf when
  /// etp = tp; otherwise the folded t, c, d (in the rank order's precedence; Megatron-Core's
  /// expert ranks run etp-ep-edp over the same numbering), of which etp consecutive indices
  /// share an expert's shards, then ep such blocks form an EP group.
  int expertFoldedIndexOf(const RankCoords &coords) const;
  RankCoords expertUnfold(int folded, RankCoords base) const;
  /// The rank's place in its EP group: which 1/ep of the experts it holds.
  int expertIndexOf(const RankCoords &coords) const;
  /// The ranks of `rank`'s group (see MeshGroup), in order of the varying coordinate (folded
  /// index for DataCP, EP and ExpertData).
  std::vector<int> groupOf(MeshGroup group, int rank) const;
  /// The same into `members` (cleared first), for callers that walk many groups.
  void groupOf(MeshGroup group, int rank, std::vector<int> &members) const;
  /// Whether every rank of that group sits in one node (intra-node link) or not (inter-node).
  bool groupInsideNode(MeshGroup group, int rank) const;
  /// Whether two ranks share a node.
  bool sameNode(int a, int b) const { return nodeOf(a) == nodeOf(b); }

  /// "tp-cp-pp-dp" style name of the order; with cp = 1 the three-name form without cp
  /// ("tp-pp-dp"), as plans without CP have always been written.
  std::string orderName() const;
  /// Parses "tp-cp-pp-dp", "cp-tp-dp-pp", ... (each of dp, cp, tp, pp once). A three-name order
  /// of dp, tp and pp (plans without CP) places cp right after tp; it is refused when `cp` > 1,
  /// where the CP ring sits must be named.
  static Result<RankOrder> parseOrder(std::string_view text, int cp = 1);
  /// The 24 orders of the four dimensions; with `cp` = 1, the 6 orders of dp, tp and pp (cp right
  /// after tp), since where a dimension of size 1 sits does not change the numbering.
  static std::vector<RankOrder> allOrders(int cp);

  /// Positive sizes within limits, etp dividing tp, ep dividing dp × cp (× tp / etp); the
  /// error names the field and what would work.
  Status check() const;
};

inline constexpr int kMaxWorldSize = 1 << 20;

} // namespace pipescope
