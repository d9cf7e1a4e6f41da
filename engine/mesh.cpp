#include "engine/mesh.h"

#include <algorithm>
#include <cstdint>

namespace pipescope {

std::string_view meshDimName(MeshDim dim) {
  switch (dim) {
  case MeshDim::DP: return "dp";
  case MeshDim::TP: return "tp";
  case MeshDim::PP: return "pp";
  case MeshDim::CP: return "cp";
  }
  return "?";
}

std::string_view meshGroupName(MeshGroup group) {
  switch (group) {
  case MeshGroup::TP: return "TP";
  case MeshGroup::CP: return "CP";
  case MeshGroup::PP: return "PP";
  case MeshGroup::DP: return "DP";
  case MeshGroup::DataCP: return "DP\u00d7CP";
  case MeshGroup::EP: return "EP";
  case MeshGroup::ExpertData: return "EDP";
  }
  return "?";
}

namespace {

int &coordOf(RankCoords &c, MeshDim dim) {
  switch (dim) {
  case MeshDim::DP: return c.d;
  case MeshDim::TP: return c.t;
  case MeshDim::PP: return c.p;
  case MeshDim::CP: return c.c;
  }
  return c.d;
}

/// Whether `dim` comes before `other` in the order (varies faster).
bool inner(const RankOrder &order, MeshDim dim, MeshDim other) {
  return std::find(order.begin(), order.end(), dim) < std::find(order.begin(), order.end(), other);
}

} // namespace

int Mesh::sizeOf(MeshDim dim) const {
  switch (dim) {
  case MeshDim::DP: return dp;
  case MeshDim::TP: return tp;
  case MeshDim::PP: return pp;
  case MeshDim::CP: return cp;
  }
  return 1;
}

int Mesh::groupSize(MeshGroup group) const {
  switch (group) {
  case MeshGroup::TP: return tp;
  case MeshGroup::CP: return cp;
  case MeshGroup::PP: return pp;
  case MeshGroup::DP: return dp;
  case MeshGroup::DataCP: return dataCpSize();
  case MeshGroup::EP: return ep;
  case MeshGroup::ExpertData: return expertDataSize();
  }
  return 1;
}

RankCoords Mesh::coordsOf(int rank) const {
  RankCoords coords;
  for (MeshDim dim : order) {
    const int size = sizeOf(dim);
    coordOf(coords, dim) = rank % size;
    rank /= size;
  }
  return coords;
}

int Mesh::rankOf(const RankCoords &coords) const {
  int rank = 0;
  int stride = 1;
  RankCoords c = coords;
  for (MeshDim dim : order) {
    rank += coordOf(c, dim) * stride;
    stride *= sizeOf(dim);
  }
  return rank;
}

int Mesh::foldedIndexOf(const RankCoords &coords) const {
  return inner(order, MeshDim::CP, MeshDim::DP) ? coords.c + cp * coords.d
                                                : coords.d + dp * coords.c;
}

RankCoords Mesh::unfold(int folded, RankCoords base) const {
  if (inner(order, MeshDim::CP, MeshDim::DP)) {
    base.c = folded % cp;
    base.d = folded / cp;
  } else {
    base.d = folded % dp;
    base.c = folded / dp;
  }
  return base;
}

namespace {

/// tp, cp and dp in the order's precedence, innermost first.
std::array<MeshDim, 3> nonPipelineDims(const RankOrder &order) {
  std::array<MeshDim, 3> dims{};
  std::size_t i = 0;
  for (MeshDim dim : order)
    if (dim != MeshDim::PP) dims[i++] = dim;
  return dims;
}

} // namespace

int Mesh::expertFoldedIndexOf(const RankCoords &coords) const {
  if (!expertsFoldTp()) return foldedIndexOf(coords);
  RankCoords c = coords;
  int folded = 0, stride = 1;
  for (MeshDim dim : nonPipelineDims(order)) {
    folded += coordOf(c, dim) * stride;
    stride *= sizeOf(dim);
  }
  return folded;
}

RankCoords Mesh::expertUnfold(int folded, RankCoords base) const {
  if (!expertsFoldTp()) return unfold(folded, base);
  for (MeshDim dim : nonPipelineDims(order)) {
    coordOf(base, dim) = folded % sizeOf(dim);
    folded /= sizeOf(dim);
  }
  return base;
}

int Mesh::expertIndexOf(const RankCoords &coords) const {
  return expertFoldedIndexOf(coords) / (expertsFoldTp() ? expertTpSize() : 1) % ep;
}

std::vector<int> Mesh::groupOf(MeshGroup group, int rank) const {
  std::vector<int> members;
  groupOf(group, rank, members);
  return members;
}

void Mesh::groupOf(MeshGroup group, int rank, std::vector<int> &members) const {
  RankCoords c = coordsOf(rank);
  members.clear();
  const int size = groupSize(group);
  members.reserve(static_cast<std::size_t>(std::max(size, 1)));
  const auto along = [&](int &coord) {
    for (int i = 0; i < size; ++i) {
      coord = i;
      members.push_back(rankOf(c));
    }
  };
  switch (group) {
  case MeshGroup::TP: along(c.t); break;
  case MeshGroup::CP: along(c.c); break;
  case MeshGroup::PP: along(c.p); break;
  case MeshGroup::DP: along(c.d); break;
  case MeshGroup::DataCP:
    for (int f = 0; f < size; ++f)
      members.push_back(rankOf(unfold(f, c)));
    break;
  case MeshGroup::EP:
  case MeshGroup::ExpertData: {
    // Expert shards of etp consecutive indices (1 when etp = tp: the t coordinate carries them),
    // ep of those in an EP group, the groups side by side.
    const int shard = expertsFoldTp() ? expertTpSize() : 1;
    const int index = expertFoldedIndexOf(c);
    const int block = shard * ep;
    for (int j = 0; j < size; ++j) {
      const int member = group == MeshGroup::EP ? index / block * block + index % shard + j * shard
                                                : index % block + j * block;
      members.push_back(rankOf(expertUnfold(member, c)));
    }
    break;
  }
  }
}

bool Mesh::groupInsideNode(MeshGroup group, int rank) const {
  const auto members = groupOf(group, rank);
  return std::all_of(members.begin(), members.end(),
                     [&](int member) { return sameNode(member, members.front()); });
}

std::string Mesh::orderName() const {
  std::string name;
  for (MeshDim dim : order) {
    if (dim == MeshDim::CP && cp == 1) continue;
    name += (name.empty() ? "" : "-") + std::string(meshDimName(dim));
  }
  return name;
}

Result<RankOrder> Mesh::parseOrder(std::string_view text, int cp) {
  RankOrder order{};
  bool seen[4] = {false, false, false, false};
  std::size_t index = 0;
  std::string_view rest = text;
  bool valid = true;
  while (valid) {
    const auto dash = rest.find('-');
    const std::string_view part = rest.substr(0, dash);
    MeshDim dim{};
    if (part == "dp")
      dim = MeshDim::DP;
    else if (part == "tp")
      dim = MeshDim::TP;
    else if (part == "pp")
      dim = MeshDim::PP;
    else if (part == "cp")
      dim = MeshDim::CP;
    else
      valid = false;
    if (!valid || index >= 4 || seen[static_cast<int>(dim)]) {
      valid = false;
      break;
    }
    seen[static_cast<int>(dim)] = true;
    order[index++] = dim;
    if (dash == std::string_view::npos) break;
    rest = rest.substr(dash + 1);
  }
  const bool three = valid && index == 3 && !seen[static_cast<int>(MeshDim::CP)];
  if (!valid || (index != 4 && !three))
    return makeError("rank order '" + std::string(text) +
                     "' is not valid; name tp, cp, pp and dp once each from innermost to "
                     "outermost, e.g. tp-cp-pp-dp (pipescope's default) or tp-cp-dp-pp "
                     "(Megatron's); without context parallelism tp-pp-dp style names of three "
                     "also work");
  if (three && cp > 1)
    return makeError("rank order '" + std::string(text) +
                     "' does not place cp, but cp = " + std::to_string(cp) +
                     "; name all four dimensions, e.g. tp-cp-pp-dp (the CP ring next to TP)");
  if (three) {
    // cp right after tp: where a dimension of size 1 sits does not change the numbering.
    const auto tp_at = std::find(order.begin(), order.begin() + 3, MeshDim::TP) - order.begin();
    std::copy_backward(order.begin() + tp_at + 1, order.begin() + 3, order.end());
    order[static_cast<std::size_t>(tp_at) + 1] = MeshDim::CP;
  }
  return order;
}

std::vector<RankOrder> Mesh::allOrders(int cp) {
  std::vector<RankOrder> orders;
  if (cp == 1) {
    std::array<MeshDim, 3> three{MeshDim::DP, MeshDim::TP, MeshDim::PP};
    do {
      std::string name;
      for (MeshDim dim : three)
        name += (name.empty() ? "" : "-") + std::string(meshDimName(dim));
      orders.push_back(*parseOrder(name, 1));
    } while (std::next_permutation(three.begin(), three.end()));
    return orders;
  }
  RankOrder order{MeshDim::DP, MeshDim::TP, MeshDim::PP, MeshDim::CP};
  do {
    orders.push_back(order);
  } while (std::next_permutation(order.begin(), order.end()));
  return orders;
}

Status Mesh::check() const {
  const struct {
    int value;
    const char *name;
  } sizes[] = {{dp, "dp"}, {cp, "cp"}, {tp, "tp"},
               {pp, "pp"}, {ep, "ep"}, {gpus_per_node, "gpus_per_node"}};
  for (const auto &s : sizes)
    if (s.value < 1)
      return makeError(std::string(s.name) + " must be at least 1, got " + std::to_string(s.value));
  if (etp < 0 || (etp > 0 && tp % etp != 0))
    return makeError("etp = " + std::to_string(etp) +
                     " does not divide tp = " + std::to_string(tp) +
                     "; expert tensor parallelism splits each expert over a divisor of tp (1 for "
                     "whole experts, tp or 0 to split them like the dense layers)");
  const auto world = static_cast<std::int64_t>(dp) * cp * tp * pp;
  if (world > kMaxWorldSize)
    return makeError("the mesh has " + std::to_string(world) +
                     " GPUs (dp × cp × tp × pp); pipescope models at most " +
                     std::to_string(kMaxWorldSize) + "; use fewer GPUs");
  if (expertsFoldTp() && (static_cast<std::int64_t>(dp) * cp * (tp / expertTpSize())) % ep != 0)
    return makeError("ep = " + std::to_string(ep) + " does not divide dp × cp × tp / etp = " +
                     std::to_string(dp) + " × " + std::to_string(cp) + " × " + std::to_string(tp) +
                     " / " + std::to_string(expertTpSize()) + " = " +
                     std::to_string(dp * cp * (tp / expertTpSize())) +
                     "; with expert tensor parallelism below tp, EP folds into the tensor-, data- "
                     "and context-parallel ranks (Megatron-Core's MoE parallel folding), so use an "
                     "ep dividing that");
  if (!expertsFoldTp() && (static_cast<std::int64_t>(dp) * cp) % ep != 0)
    return makeError("ep = " + std::to_string(ep) +
                     " does not divide dp × cp = " + std::to_string(dp) + " × " +
                     std::to_string(cp) + " = " + std::to_string(dp * cp) +
                     "; expert parallelism is folded into the data- and context-parallel ranks "
                     "(Megatron-Core), so use an ep dividing dp × cp");
  return Ok{};
}

} // namespace pipescope
