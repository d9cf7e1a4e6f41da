// V-Half and V-Min: the controllable-memory V-shape schedules of Qi, Wan, Amar and Lin, Pipeline
// Parallelism with Controllable Memory (NeurIPS 2024, arXiv 2405.15362), built as the authors'
// reference builds them (sail-sg/zero-bubble-pipeline-parallelism,
// megatron/core/pipeline_parallel/zerobubble/scheduler/zbv_greedy.py): a repeating building block
// laid on a grid of unit time slots, then "squeezed" greedily without raising peak memory.
//
// Placement: V-shape (zb-v's), rank r holds chunk 0 = stage r and chunk 1 = stage 2P-1-r; ops are
// split (I and W). Per rank the reference tracks six op types, named as in its code:
//   F  forward of chunk 0      f  forward of chunk 1
//   B  input-grad of chunk 1   b  input-grad of chunk 0   (the paper's "B" is pipescope's I)
//   W  weight-grad of chunk 1  w  weight-grad of chunk 0
// Building block (paper §4, Fig. 4; stable_pattern_v_*): microbatch m's op of type t on rank r sits
// in slot offset(r, t) + 6m, i.e. one microbatch enters every 6 slots (F, f, B, b, W, w each take
// one slot when F = I = W). The block's lifespan fixes the peak memory (paper §3):
//   V-Min:  F at r, f at 2P-1-r, B at 2P+g+r, b at 4P+g-1-r, g = 2 if 3 | P else 0
//           chunk activations live ~4P slots -> about (P+4)/3 microbatches (1/3 of 1F1B)
//   V-Half: F at 2r, f at 3P-2-r, B at 3P+g+2r-1, b at 6P+g-2-r, g = 3 if P even else 0
//           chunk activations live ~6P slots -> about (P+2)/2 microbatches (1/2 of 1F1B)
// Then, as the reference's schedule_from_pattern does:
//   1. put the weight-grads (one W queue per rank) into the free slots after their input-grads;
//   2. squeeze with W: in the warm-up (until rank 0's first b) and the cool-down (after the last
//      microbatch's first F), move each op to the earliest free slot its dependencies allow whose
//      peak memory stays within the block's; then replay the order as soon as possible (unit
//      times) to get compact slots;
//   3. drop the W's, squeeze again without them (the warm-up is kept), replay with W's;
//   4. drop the W's once more and put them back split by chunk (a chunk-1 W first when both
//      wait): the final per-rank order is the slot order.
// The order does not depend on op times; the simulation times it.
#include <algorithm>
#include <array>
#include <functional>
#include <queue>
#include <tuple>

#include "engine/generators/generators.h"

namespace pipescope::generators {

namespace {

enum SlotType { kForward0 = 0, kForward1, kInput1, kInput0, kWeight1, kWeight0 };

// slots[type][m]: the slot of the m-th op of that type on one rank (increasing in m).
using RankSlots = std::vector<std::vector<int>>;
using Slots = std::vector<RankSlots>; // per rank

// Building-block offsets of F, f, B, b on rank r (stable_pattern_v_min / stable_pattern_v_half).
std::array<int, 4> blockOffsets(bool minimum_memory, int pp, int r) {
  if (minimum_memory) {
    const int gap = pp % 3 == 0 ? 2 : 0;
    return {r, 2 * pp - r - 1, 2 * pp + gap + r, 4 * pp + gap - r - 1};
  }
  const int gap = pp % 2 == 0 ? 3 : 0;
  return {2 * r, 3 * pp - r - 2, 3 * pp + gap + 2 * r - 1, 6 * pp + gap - r - 2};
}

int lastSlot(const RankSlots &slots) {
  int last = -1;
  for (const auto &list : slots)
    if (!list.empty()) last = std::max(last, list.back());
  return last;
}

// Visits a rank's ops in slot order: calls `visit(slot, type)` for each op, and `idle(slot)` for
// every slot in 0..last with no op. A rank's slots are distinct and each list increases.
template <typename Visit, typename Idle>
void walkSlots(const RankSlots &slots, Visit &&visit, Idle &&idle) {
  const int last = lastSlot(slots);
  std::vector<std::size_t> next(slots.size(), 0);
  for (int slot = 0; slot <= last; ++slot) {
    bool busy = false;
    for (std::size_t t = 0; t < slots.size() && !busy; ++t)
      if (next[t] < slots[t].size() && slots[t][next[t]] == slot) {
        ++next[t];
        busy = true;
        visit(slot, static_cast<int>(t));
      }
    if (!busy) idle(slot);
  }
}

// put_w: appends weight-grad queues to a rank's four lists: one queue (split = false), or one per
// chunk (split = true: W after B, w after b). Each idle slot runs the oldest waiting weight-grad
// (chunk 1's first when split); those still waiting at the end follow in consecutive slots.
void placeWeightGrads(RankSlots &slots, bool split) {
  slots.resize(4);
  slots.resize(split ? 6 : 5);
  std::array<int, 2> waiting = {0, 0};
  int last = -1;
  walkSlots(
      RankSlots(slots.begin(), slots.begin() + 4),
      [&](int slot, int type) {
        last = slot;
        if (type == kInput1 || type == kInput0) ++waiting[split && type == kInput0 ? 1 : 0];
      },
      [&](int slot) {
        last = slot;
        for (std::size_t queue = 0; queue < 2; ++queue)
          if (waiting[queue] > 0) {
            slots[4 + queue].push_back(slot);
            --waiting[queue];
            break;
          }
      });
  for (std::size_t queue = 0; queue < 2; ++queue)
    for (; waiting[queue] > 0; --waiting[queue])
      slots[4 + queue].push_back(++last);
}

// mem_of_stage: a rank's peak, in chunk activations. A forward takes one; a weight-grad frees one
// (with explicit W lists, when it runs; without, each idle slot frees one for a waiting input-grad).
int peakActivations(const RankSlots &slots) {
  const bool explicit_weights = slots.size() > 4;
  int held = 0, peak = 0, waiting = 0;
  walkSlots(
      slots,
      [&](int, int type) {
        if (type == kForward0 || type == kForward1) ++held;
        if (type == kInput1 || type == kInput0) ++waiting;
        if (type == kWeight1) --held; // with one W queue, every weight-grad is in list 4
        peak = std::max(peak, held);
      },
      [&](int) {
        if (!explicit_weights && waiting > 0) {
          --held;
          --waiting;
        }
        peak = std::max(peak, held);
      });
  return peak;
}

// Visits every op of every rank in the order of (slot, rank, type), the reference's global order.
// `visit(rank, type, m)` may move the op it is given; ops not yet visited keep their slots.
void visitInSlotOrder(const Slots &slots, const std::function<void(int, int, int)> &visit) {
  using Head = std::tuple<int, int, int>; // slot, rank, type
  std::priority_queue<Head, std::vector<Head>, std::greater<>> heads;
  std::vector<std::vector<std::size_t>> next(slots.size());
  for (std::size_t r = 0; r < slots.size(); ++r) {
    next[r].assign(slots[r].size(), 0);
    for (std::size_t t = 0; t < slots[r].size(); ++t)
      if (!slots[r][t].empty()) heads.emplace(slots[r][t][0], int(r), int(t));
  }
  while (!heads.empty()) {
    const auto [slot, rank, type] = heads.top();
    heads.pop();
    auto &position = next[static_cast<std::size_t>(rank)][static_cast<std::size_t>(type)];
    const int m = static_cast<int>(position++);
    visit(rank, type, m);
    const auto &list = slots[static_cast<std::size_t>(rank)][static_cast<std::size_t>(type)];
    if (position < list.size()) heads.emplace(list[position], rank, type);
  }
}

// The slot each op's dependencies end in (-1: none), as the reference counts them: the same
// microbatch on the neighbouring rank (F and B come from rank r-1, f and b from rank r+1), the
// previous type of the same microbatch on this rank, the previous microbatch of the same type,
// and for a weight-grad the m-th input-grad of the rank.
int dependencySlot(const Slots &slots, int rank, int type, int m) {
  const int pp = static_cast<int>(slots.size());
  const auto &own = slots[static_cast<std::size_t>(rank)];
  auto at = [&](int r, int t, int i) {
    return slots[static_cast<std::size_t>(r)][static_cast<std::size_t>(t)]
                [static_cast<std::size_t>(i)];
  };
  int slot = -1;
  if ((type == kForward0 || type == kInput1) && rank > 0) slot = std::max(slot, at(rank - 1, type, m));
  if ((type == kForward1 || type == kInput0) && rank + 1 < pp)
    slot = std::max(slot, at(rank + 1, type, m));
  if (type > kForward0 && type < kWeight1) slot = std::max(slot, at(rank, type - 1, m));
  if (type == kWeight1) {
    // The m-th input-grad of either chunk, merging the two increasing lists.
    const auto &ones = own[kInput1], &zeros = own[kInput0];
    std::size_t i = 0, j = 0;
    int kth = -1;
    for (int k = 0; k <= m; ++k)
      kth = (j >= zeros.size() || (i < ones.size() && ones[i] <= zeros[j])) ? ones[i++] : zeros[j++];
    slot = std::max(slot, kth);
  }
  if (m > 0) slot = std::max(slot, at(rank, type, m - 1));
  return slot;
}

// eager_execution_time with unit op times and free transfers: the start of every op when each
// rank runs its ops in slot order as soon as their dependencies are done.
Slots replayAsSoonAsPossible(const Slots &slots) {
  const int pp = static_cast<int>(slots.size());
  Slots start = slots;
  std::vector<int> rank_free(static_cast<std::size_t>(pp), 0);
  auto end = [&](int r, int t, int i) {
    return start[static_cast<std::size_t>(r)][static_cast<std::size_t>(t)]
                [static_cast<std::size_t>(i)] +
           1;
  };
  visitInSlotOrder(slots, [&](int rank, int type, int m) {
    int ready = rank_free[static_cast<std::size_t>(rank)];
    if ((type == kForward0 || type == kInput1) && rank > 0)
      ready = std::max(ready, end(rank - 1, type, m));
    if ((type == kForward1 || type == kInput0) && rank + 1 < pp)
      ready = std::max(ready, end(rank + 1, type, m));
    if (type > kForward0 && type < kWeight1) ready = std::max(ready, end(rank, type - 1, m));
    if (m > 0) ready = std::max(ready, end(rank, type, m - 1));
    start[static_cast<std::size_t>(rank)][static_cast<std::size_t>(type)]
         [static_cast<std::size_t>(m)] = ready;
    rank_free[static_cast<std::size_t>(rank)] = ready + 1;
  });
  return start;
}

// reorder: the greedy squeeze. Returns the compact slots of the result, with one W queue.
Slots squeeze(Slots slots, bool with_weights, int microbatches) {
  if (with_weights)
    for (auto &rank : slots)
      placeWeightGrads(rank, false);
  int memory_cap = 0;
  for (const auto &rank : slots)
    memory_cap = std::max(memory_cap, peakActivations(rank));
  std::vector<std::vector<char>> occupied;
  for (const auto &rank : slots)
    occupied.emplace_back(static_cast<std::size_t>(lastSlot(rank) + 1), 0);

  enum Phase { kWarmUp, kSteady, kCoolDown } phase = kWarmUp;
  visitInSlotOrder(slots, [&](int rank, int type, int m) {
    auto &own = slots[static_cast<std::size_t>(rank)];
    int &slot = own[static_cast<std::size_t>(type)][static_cast<std::size_t>(m)];
    auto &taken = occupied[static_cast<std::size_t>(rank)];
    if (phase == kWarmUp && type == kInput0 && rank == 0) phase = kSteady;
    // The steady state (up to the last microbatch's first F, included) keeps the building block;
    // the squeeze without W's also keeps the warm-up.
    bool keep = phase == kWarmUp && !with_weights;
    if (phase == kSteady) {
      keep = true;
      if (type == kForward0 && m == microbatches - 1) phase = kCoolDown;
    }
    if (!keep) {
      const int original = slot;
      bool moved = false;
      for (int candidate = dependencySlot(slots, rank, type, m) + 1; candidate < original;
           ++candidate) {
        if (taken[static_cast<std::size_t>(candidate)] != 0) continue;
        slot = candidate;
        if (peakActivations(own) <= memory_cap) {
          moved = true;
          break;
        }
      }
      if (!moved) slot = original;
    }
    taken[static_cast<std::size_t>(slot)] = 1;
  });
  if (!with_weights)
    for (auto &rank : slots)
      placeWeightGrads(rank, false);
  return replayAsSoonAsPossible(slots);
}

RankOps buildControllableMemoryV(bool minimum_memory, int pp, int microbatches) {
  Slots slots(static_cast<std::size_t>(pp));
  for (int r = 0; r < pp; ++r) {
    const auto offsets = blockOffsets(minimum_memory, pp, r);
    auto &rank = slots[static_cast<std::size_t>(r)];
    rank.resize(4);
    for (std::size_t t = 0; t < 4; ++t)
      for (int m = 0; m < microbatches; ++m)
        rank[t].push_back(offsets[t] + 6 * m);
  }
  auto drop_weights = [](Slots &all) {
    for (auto &rank : all)
      rank.resize(4);
  };
  Slots squeezed = squeeze(std::move(slots), true, microbatches);
  drop_weights(squeezed);
  squeezed = squeeze(std::move(squeezed), false, microbatches);
  drop_weights(squeezed);

  RankOps ranks(static_cast<std::size_t>(pp));
  for (int r = 0; r < pp; ++r) {
    auto &rank = squeezed[static_cast<std::size_t>(r)];
    placeWeightGrads(rank, true);
    const int down = r, up = 2 * pp - 1 - r; // chunk 0's and chunk 1's stage ids
    auto &ops = ranks[static_cast<std::size_t>(r)];
    ops.reserve(6 * static_cast<std::size_t>(microbatches));
    std::array<int, 6> next{};
    walkSlots(
        rank,
        [&](int, int type) {
          const int m = next[static_cast<std::size_t>(type)]++;
          switch (type) {
          case kForward0: ops.push_back(forwardOp(down, m)); break;
          case kForward1: ops.push_back(forwardOp(up, m)); break;
          case kInput1: ops.push_back(inputGradOp(up, m)); break;
          case kInput0: ops.push_back(inputGradOp(down, m)); break;
          case kWeight1: ops.push_back(weightGradOp(up, m)); break;
          default: ops.push_back(weightGradOp(down, m)); break;
          }
        },
        [](int) {});
  }
  return ranks;
}

} // namespace

// Both accept any P >= 1 and M >= 1; V = 2 is fixed by the V-shape (request.chunks is ignored,
// as for zb-v). The reference builds every such P and M; with M below about P the steady state
// never forms and the squeeze alone shapes the schedule.
Status checkControllableMemoryV(const ScheduleRequest &) {
  return Ok{};
}

RankOps vHalf(const ScheduleRequest &request, const Placement &placement) {
  return buildControllableMemoryV(false, placement.pp, request.microbatches);
}

RankOps vMin(const ScheduleRequest &request, const Placement &placement) {
  return buildControllableMemoryV(true, placement.pp, request.microbatches);
}

} // namespace pipescope::generators
