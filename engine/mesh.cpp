#include "engine/mesh.h"

#include <cstdint>

namespace pipescope {

std::string_view meshDimName(MeshDim dim) {
  switch (dim) {
  case MeshDim::DP: return "dp";
  case MeshDim::TP: return "tp";
  case MeshDim::PP: return "pp";
  }
  return "?";
}

namespace {

int sizeOf(const Mesh &mesh, MeshDim dim) {
  switch (dim) {
  case MeshDim::DP: return mesh.dp;
  case MeshDim::TP: return mesh.tp;
  case MeshDim::PP: return mesh.pp;
  }
  return 1;
}

int &coordOf(RankCoords &c, MeshDim dim) {
  switch (dim) {
  case MeshDim::DP: return c.d;
  case MeshDim::TP: return c.t;
  case MeshDim::PP: return c.p;
  }
  return c.d;
}

} // namespace

RankCoords Mesh::coordsOf(int rank) const {
  RankCoords coords;
  for (MeshDim dim : order) {
    const int size = sizeOf(*this, dim);
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
    stride *= sizeOf(*this, dim);
  }
  return rank;
}

std::vector<int> Mesh::groupOf(MeshDim dim, int rank) const {
  RankCoords c = coordsOf(rank);
  std::vector<int> group;
  const int size = sizeOf(*this, dim);
  group.reserve(static_cast<std::size_t>(size));
  for (int i = 0; i < size; ++i) {
    coordOf(c, dim) = i;
    group.push_back(rankOf(c));
  }
  return group;
}

bool Mesh::groupInsideNode(MeshDim dim, int rank) const {
  const auto group = groupOf(dim, rank);
  for (int member : group)
    if (!sameNode(member, group.front())) return false;
  return true;
}

std::string Mesh::orderName() const {
  return std::string(meshDimName(order[0])) + "-" + std::string(meshDimName(order[1])) + "-" +
         std::string(meshDimName(order[2]));
}

Result<std::array<MeshDim, 3>> Mesh::parseOrder(std::string_view text) {
  std::array<MeshDim, 3> order{};
  bool seen[3] = {false, false, false};
  std::size_t index = 0;
  std::string_view rest = text;
  while (!rest.empty() || index < 3) {
    const auto dash = rest.find('-');
    const std::string_view part = rest.substr(0, dash);
    MeshDim dim{};
    if (part == "dp")
      dim = MeshDim::DP;
    else if (part == "tp")
      dim = MeshDim::TP;
    else if (part == "pp")
      dim = MeshDim::PP;
    else
      break;
    if (index >= 3 || seen[static_cast<int>(dim)]) break;
    seen[static_cast<int>(dim)] = true;
    order[index++] = dim;
    if (dash == std::string_view::npos) {
      rest = {};
      break;
    }
    rest = rest.substr(dash + 1);
  }
  if (index != 3 || !rest.empty())
    return makeError("rank order '" + std::string(text) +
                     "' is not valid; name dp, tp and pp once each from innermost to outermost, "
                     "e.g. tp-pp-dp (Megatron's default) or pp-tp-dp");
  return order;
}

Status Mesh::check() const {
  const struct {
    int value;
    const char *name;
  } sizes[] = {{dp, "dp"}, {tp, "tp"}, {pp, "pp"}, {gpus_per_node, "gpus_per_node"}};
  for (const auto &s : sizes)
    if (s.value < 1)
      return makeError(std::string(s.name) + " must be at least 1, got " + std::to_string(s.value));
  const auto world = static_cast<std::int64_t>(dp) * tp * pp;
  if (world > kMaxWorldSize)
    return makeError("the mesh has " + std::to_string(world) +
                     " GPUs (dp × tp × pp); pipescope "
                     "models at most " +
                     std::to_string(kMaxWorldSize));
  return Ok{};
}

} // namespace pipescope
