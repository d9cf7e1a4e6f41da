// Interleaved 1F1B, after Megatron-LM's forward_backward_pipelining_with_interleaving
// (megatron/core/pipeline_parallel/schedules.py, with microbatch_group_size_per_vp_stage).
#include <algorithm>

#include "engine/generators/generators.h"

namespace pipescope::generators {

// Accepts P >= 2, V >= 2, M >= P and a microbatch group G with P <= G <= M that divides M. With
// G < P the first backward needs forwards that the warm-up has not issued; with a remainder
// group (M mod G != 0) the warm-up count, sized for full groups, leaves ranks waiting on each
// other (the simulator finds the cycle, e.g. P=4, V=3, M=5); older Megatron-LM likewise required M
// to be a multiple of P. All are refused rather than silently changed.
Status checkInterleaved(const ScheduleRequest &request) {
  if (request.chunks < 2)
    return makeError("interleaved-1f1b needs V >= 2 chunks per rank, got V = " +
                     std::to_string(request.chunks) + "; for V = 1 use 1f1b");
  if (request.pp < 2)
    return makeError("interleaved-1f1b needs P >= 2 pipeline ranks, got P = " +
                     std::to_string(request.pp));
  if (request.microbatches < request.pp)
    return makeError("interleaved-1f1b needs M >= P microbatches (Megatron-LM), got M = " +
                     std::to_string(request.microbatches) +
                     " with P = " + std::to_string(request.pp) + "; raise M to at least " +
                     std::to_string(request.pp));
  const int group = request.microbatch_group > 0 ? request.microbatch_group : request.pp;
  if (group < request.pp || group > request.microbatches)
    return makeError(
        "interleaved-1f1b needs a microbatch group G with P <= G <= M (" +
        std::to_string(request.pp) + " <= G <= " + std::to_string(request.microbatches) +
        "), got G = " + std::to_string(group) + "; G = P is depth-first, G = M breadth-first");
  if (request.microbatches % group != 0) {
    const int lower = request.microbatches / group * group;
    return makeError(
        "interleaved-1f1b needs M to be a multiple of the microbatch group G = " +
        std::to_string(group) + " (Megatron-LM), got M = " + std::to_string(request.microbatches) +
        "; use M = " + (lower >= request.pp ? std::to_string(lower) + " or " : std::string()) +
        std::to_string(lower + group) + ", or G = M (breadth-first)");
  }
  return Ok{};
}

// Megatron's order: the k-th forward on a rank runs table[k] = (microbatch, chunk), where the
// table walks groups of G microbatches, all chunks of a group before the next group (the last
// group takes the remainder). The k-th backward runs table[k] with the chunk mirrored
// (V-1-chunk). Phases per rank r:
//   warm-up:   min(2(P-1-r) + (V-1)G, MV) forwards   (all MV when M == P, as Megatron does)
//   steady:    MV - warm-up pairs of forward k+warm-up then backward k
//   cool-down: the remaining backwards
RankOps interleaved(const ScheduleRequest &request, const Placement &placement) {
  const int pp = placement.pp;
  const int chunks = placement.chunks;
  const int microbatches = request.microbatches;
  const int group = request.microbatch_group > 0 ? request.microbatch_group : pp;
  const int total = microbatches * chunks;

  struct Slot {
    int microbatch, chunk;
  };
  std::vector<Slot> table;
  table.reserve(static_cast<std::size_t>(total));
  for (int first = 0; first < microbatches; first += group) {
    const int last = first + group >= microbatches ? microbatches : first + group;
    for (int c = 0; c < chunks; ++c)
      for (int m = first; m < last; ++m)
        table.push_back({m, c});
    if (last == microbatches) break;
  }

  RankOps ranks(static_cast<std::size_t>(pp));
  for (int r = 0; r < pp; ++r) {
    auto &ops = ranks[static_cast<std::size_t>(r)];
    ops.reserve(2 * static_cast<std::size_t>(total));
    auto forward_k = [&](int k) {
      const Slot &slot = table[static_cast<std::size_t>(k)];
      return forwardOp(slot.chunk * pp + r, slot.microbatch);
    };
    auto backward_k = [&](int k) {
      const Slot &slot = table[static_cast<std::size_t>(k)];
      return fullBackwardOp((chunks - 1 - slot.chunk) * pp + r, slot.microbatch);
    };
    int warmup =
        microbatches == pp ? total : std::min(2 * (pp - 1 - r) + (chunks - 1) * group, total);
    for (int k = 0; k < warmup; ++k)
      ops.push_back(forward_k(k));
    for (int k = 0; k < total - warmup; ++k) {
      ops.push_back(forward_k(k + warmup));
      ops.push_back(backward_k(k));
    }
    for (int k = total - warmup; k < total; ++k)
      ops.push_back(backward_k(k));
  }
  return ranks;
}

} // namespace pipescope::generators
