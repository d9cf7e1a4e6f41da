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
#include <cstdint>
#include <limits>

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
// The op types are scattered into one array of slots first: one pass over the ops and one over
// the slots, where testing every type's next op at every slot cost a quarter of the generator.
template <typename Visit, typename Idle>
void walkSlots(const RankSlots &slots, Visit &&visit, Idle &&idle) {
  const int last = lastSlot(slots);
  std::vector<int> type_at(static_cast<std::size_t>(last + 1), -1);
  for (std::size_t t = 0; t < slots.size(); ++t)
    for (int slot : slots[t])
      type_at[static_cast<std::size_t>(slot)] = static_cast<int>(t);
  for (int slot = 0; slot <= last; ++slot) {
    const int type = type_at[static_cast<std::size_t>(slot)];
    if (type >= 0)
      visit(slot, type);
    else
      idle(slot);
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
// (with explicit W lists, when it runs; without, each idle slot frees one for a waiting
// input-grad).
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

// The ops the squeeze visits, as a window of the global order (slot, rank): every op in a slot
// before `below`, and every op after (after_slot, after_rank). The ops between keep their slots.
struct SlotWindow {
  int below = 0;
  int after_slot = 0, after_rank = 0;
};

// Visits the ops of every rank that `window` picks in the order of (slot, rank, type,
// microbatch), the reference's global order; `visit(rank, type, m)` may move the op it is given.
// An op's slot changes only when it is visited, so the order is that of the slots on entry: a
// counting sort by slot, filled in (rank, type, microbatch) order so that ties keep it. Each list
// increases, so the window is a prefix and a suffix of it, found by bisection: the squeeze leaves
// the steady state, most of a long schedule, alone, so it is not sorted.
template <typename Visit>
void visitInSlotOrder(const Slots &slots, const SlotWindow &window, Visit &&visit) {
  int last = -1;
  for (const auto &rank : slots)
    last = std::max(last, lastSlot(rank));
  // Slots [0, below) and (after_slot, last], and after_slot itself for the ranks past after_rank,
  // packed one after the other.
  const int prefix = std::clamp(window.below, 0, last + 1);
  const int suffix_from = std::max(prefix, std::min(window.after_slot, last + 1));
  const auto packed = [&](int slot) {
    return static_cast<std::size_t>(slot < prefix ? slot : prefix + (slot - suffix_from));
  };
  const std::size_t slot_count = packed(std::max(last, suffix_from - 1) + 1);
  struct Range {
    std::size_t prefix_end, suffix_begin;
  };
  std::vector<std::vector<Range>> picked(slots.size());
  std::vector<std::size_t> begin(slot_count + 1, 0);
  for (std::size_t r = 0; r < slots.size(); ++r) {
    for (const auto &list : slots[r]) {
      const auto first_after = static_cast<int>(r) > window.after_rank
                                   ? std::lower_bound(list.begin(), list.end(), window.after_slot)
                                   : std::upper_bound(list.begin(), list.end(), window.after_slot);
      Range range{static_cast<std::size_t>(std::lower_bound(list.begin(), list.end(), prefix) -
                                           list.begin()),
                  static_cast<std::size_t>(first_after - list.begin())};
      range.suffix_begin = std::max(range.suffix_begin, range.prefix_end);
      for (std::size_t m = 0; m < range.prefix_end; ++m)
        ++begin[packed(list[m]) + 1];
      for (std::size_t m = range.suffix_begin; m < list.size(); ++m)
        ++begin[packed(list[m]) + 1];
      picked[r].push_back(range);
    }
  }
  for (std::size_t i = 1; i <= slot_count; ++i)
    begin[i] += begin[i - 1];
  // rank (14 bits), type (3 bits), microbatch (the rest) in one word.
  static_assert(kMaxPipelineRanks <= (1 << 14));
  std::vector<std::uint64_t> order(begin[slot_count]);
  for (std::size_t r = 0; r < slots.size(); ++r)
    for (std::size_t t = 0; t < slots[r].size(); ++t) {
      const auto &list = slots[r][t];
      const auto place = [&](std::size_t m) {
        order[begin[packed(list[m])]++] = (std::uint64_t{m} << 17) | (std::uint64_t{r} << 3) | t;
      };
      for (std::size_t m = 0; m < picked[r][t].prefix_end; ++m)
        place(m);
      for (std::size_t m = picked[r][t].suffix_begin; m < list.size(); ++m)
        place(m);
    }
  for (const std::uint64_t entry : order)
    visit(static_cast<int>((entry >> 3) & 0x3fff), static_cast<int>(entry & 7),
          static_cast<int>(entry >> 17));
}

// The slot of a rank's k-th input-grad (0-based) of either chunk: the k-th smallest of the two
// increasing lists of B and b slots (a rank's slots are distinct), found by bisection.
int kthInputGradSlot(const RankSlots &own, int k) {
  const auto &ones = own[kInput1], &zeros = own[kInput0];
  const int count_ones = static_cast<int>(ones.size()),
            count_zeros = static_cast<int>(zeros.size());
  // Take `low` of the k+1 smallest from `ones` and the rest from `zeros`.
  int low = std::max(0, k + 1 - count_zeros), high = std::min(k + 1, count_ones);
  while (low < high) {
    const int from_ones = (low + high) / 2;
    const int from_zeros = k + 1 - from_ones;
    if (ones[static_cast<std::size_t>(from_ones)] < zeros[static_cast<std::size_t>(from_zeros - 1)])
      low = from_ones + 1;
    else
      high = from_ones;
  }
  const int from_zeros = k + 1 - low;
  return std::max(low > 0 ? ones[static_cast<std::size_t>(low - 1)] : -1,
                  from_zeros > 0 ? zeros[static_cast<std::size_t>(from_zeros - 1)] : -1);
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
  if ((type == kForward0 || type == kInput1) && rank > 0)
    slot = std::max(slot, at(rank - 1, type, m));
  if ((type == kForward1 || type == kInput0) && rank + 1 < pp)
    slot = std::max(slot, at(rank + 1, type, m));
  if (type > kForward0 && type < kWeight1) slot = std::max(slot, at(rank, type - 1, m));
  if (type == kWeight1) slot = std::max(slot, kthInputGradSlot(own, m));
  if (m > 0) slot = std::max(slot, at(rank, type, m - 1));
  return slot;
}

// eager_execution_time with unit op times and free transfers: the start of every op when each
// rank runs its ops in slot order as soon as their dependencies are done. The reference visits
// the ops in the global (slot, rank, type, microbatch) order; an op's start depends only on its
// rank's previous op and on its dependencies, which always sit in earlier slots (the block puts
// them there and the squeeze moves an op only to a slot after them), so each rank here runs down
// its own slot order as far as its neighbours' progress allows, sweeping over the ranks until all
// are done: the same starts, without sorting every op by slot. With the squeeze's window
// (visitInSlotOrder) this took V-Half's generation at P = 64, M = 2048 from 38 to 34 ms
// (RelWithDebInfo, best of 20 runs each) and its first-level data-cache misses down by a quarter
// (cachegrind).
Slots replayAsSoonAsPossible(const Slots &slots) {
  const std::size_t pp = slots.size();
  Slots start = slots;
  // Per rank, its ops in slot order, as microbatch << 3 | type.
  std::vector<std::vector<int>> sequence(pp);
  std::size_t remaining = 0;
  for (std::size_t r = 0; r < pp; ++r) {
    std::array<int, 8> next{};
    auto &ops = sequence[r];
    walkSlots(
        slots[r],
        [&](int, int type) { ops.push_back(next[static_cast<std::size_t>(type)]++ << 3 | type); },
        [](int) {});
    remaining += ops.size();
  }
  std::vector<std::size_t> cursor(pp, 0);
  // done[r][t]: how many of rank r's ops of type t have their start (the first ones: a list
  // increases, so a rank's slot order takes each type's microbatches in turn).
  std::vector<std::array<int, 8>> done(pp, std::array<int, 8>{});
  std::vector<int> rank_free(pp, 0);
  while (remaining > 0) {
    bool progressed = false;
    for (std::size_t r = 0; r < pp; ++r) {
      const auto &ops = sequence[r];
      std::size_t &at = cursor[r];
      for (; at < ops.size(); ++at) {
        const int type = ops[at] & 7, m = ops[at] >> 3;
        const auto t = static_cast<std::size_t>(type);
        int ready = rank_free[r];
        // A neighbour's op of the same type and microbatch: F and B come from rank r-1, f and b
        // from rank r+1.
        std::size_t from = pp;
        if ((type == kForward0 || type == kInput1) && r > 0) from = r - 1;
        if ((type == kForward1 || type == kInput0) && r + 1 < pp) from = r + 1;
        if (from < pp) {
          if (done[from][t] <= m) break; // not replayed yet
          ready = std::max(ready, start[from][t][static_cast<std::size_t>(m)] + 1);
        }
        if (type > kForward0 && type < kWeight1)
          ready = std::max(ready, start[r][t - 1][static_cast<std::size_t>(m)] + 1);
        if (m > 0) ready = std::max(ready, start[r][t][static_cast<std::size_t>(m - 1)] + 1);
        start[r][t][static_cast<std::size_t>(m)] = ready;
        rank_free[r] = ready + 1;
        ++done[r][t];
        --remaining;
        progressed = true;
      }
    }
    if (!progressed) break; // unreachable: the globally first op left always has its inputs
  }
  return start;
}

// A rank's activation profile during the squeeze, answering mem_of_stage(...) <= cap for one
// tentative move without walking the whole rank (the reference re-walks it per candidate slot,
// O(M) each, which is what made large P and M slow).
//   With explicit W's, held(t) is the sum over ops in slots <= t of +1 (F, f) and -1 (W), so
//   moving an F or f from `original` to `candidate` adds 1 on [candidate, original) and moving a W
//   subtracts 1 there; B and b hold nothing. The peak never exceeds the cap (moves that would are
//   refused), so a move fits when max(held[candidate..original)) + 1 <= cap.
//   Without W's, each idle slot frees one activation of a waiting input-grad, so a move reshapes
//   the profile after `candidate`. The state (held, waiting, peak so far) before `candidate` is
//   cached and unchanged by a move later than it; only the suffix is replayed.
class RankMemory {
public:
  RankMemory(const RankSlots &slots, bool explicit_weights, int cap)
      : explicit_(explicit_weights), cap_(cap) {
    const int last = lastSlot(slots);
    at_.assign(static_cast<std::size_t>(last) + 1, -1);
    for (std::size_t t = 0; t < slots.size(); ++t)
      for (int slot : slots[t])
        at_[static_cast<std::size_t>(slot)] = static_cast<int>(t);
    if (explicit_) {
      held_.resize(at_.size());
      int held = 0;
      for (std::size_t t = 0; t < at_.size(); ++t)
        held_[t] = held += change(at_[t]);
    } else {
      states_.resize(at_.size());
    }
  }

  bool occupied(int slot) const { return at_[static_cast<std::size_t>(slot)] >= 0; }

  /// Prepares fits() for moving an op of `type` out of `original` to candidates from `first` on.
  void beginMove(int type, int first, int original) {
    type_ = type;
    original_ = original;
    if (!explicit_ || change(type) <= 0) return;
    // Suffix maxima of held over [candidate, original).
    window_max_.assign(static_cast<std::size_t>(std::max(0, original - first)), 0);
    int best = -1 << 30;
    for (int t = original - 1; t >= first; --t)
      window_max_[static_cast<std::size_t>(t - first)] = best =
          std::max(best, held_[static_cast<std::size_t>(t)]);
    first_ = first;
  }

  /// Whether the rank's peak stays within the cap with the op moved to `candidate`.
  bool fits(int candidate) {
    if (explicit_)
      return change(type_) <= 0 ||
             window_max_[static_cast<std::size_t>(candidate - first_)] + 1 <= cap_;
    extendCache(candidate - 1);
    State state = candidate > 0 ? states_[static_cast<std::size_t>(candidate - 1)] : State{};
    for (int t = candidate; t < static_cast<int>(at_.size()); ++t) {
      const int type = t == candidate   ? type_
                       : t == original_ ? -1
                                        : at_[static_cast<std::size_t>(t)];
      state = step(state, type);
      if (state.peak > cap_) return false;
    }
    return true;
  }

  void move(int candidate) {
    at_[static_cast<std::size_t>(original_)] = -1;
    at_[static_cast<std::size_t>(candidate)] = type_;
    if (explicit_) {
      for (int t = candidate; t < original_; ++t)
        held_[static_cast<std::size_t>(t)] += change(type_);
    } else {
      valid_ = std::min(valid_, candidate - 1);
    }
  }

private:
  struct State {
    int held = 0, waiting = 0, peak = 0;
  };
  static int change(int type) {
    return type == kForward0 || type == kForward1 ? 1 : type == kWeight1 ? -1 : 0;
  }
  // mem_of_stage's step without W's: an idle slot frees one activation of a waiting input-grad.
  static State step(State state, int type) {
    if (type == kForward0 || type == kForward1) ++state.held;
    if (type == kInput1 || type == kInput0) ++state.waiting;
    if (type < 0 && state.waiting > 0) {
      --state.held;
      --state.waiting;
    }
    state.peak = std::max(state.peak, state.held);
    return state;
  }
  void extendCache(int until) {
    for (int t = valid_ + 1; t <= until; ++t)
      states_[static_cast<std::size_t>(t)] =
          step(t > 0 ? states_[static_cast<std::size_t>(t - 1)] : State{},
               at_[static_cast<std::size_t>(t)]);
    valid_ = std::max(valid_, until);
  }

  bool explicit_;
  int cap_;
  std::vector<int> at_;   ///< op type in each slot, -1 when idle
  std::vector<int> held_; ///< explicit W's: activations held after each slot
  std::vector<State> states_;
  int valid_ = -1; ///< states_[0..valid_] are current
  std::vector<int> window_max_;
  int type_ = 0, original_ = 0, first_ = 0;
};

// reorder: the greedy squeeze. Returns the compact slots of the result, with one W queue.
Slots squeeze(Slots slots, bool with_weights, int microbatches) {
  if (with_weights)
    for (auto &rank : slots)
      placeWeightGrads(rank, false);
  int memory_cap = 0;
  for (const auto &rank : slots)
    memory_cap = std::max(memory_cap, peakActivations(rank));
  std::vector<RankMemory> memory;
  memory.reserve(slots.size());
  for (const auto &rank : slots)
    memory.emplace_back(rank, with_weights, memory_cap);

  // The warm-up runs until rank 0's first b; the steady state from there up to the last
  // microbatch's first F (included) keeps the building block; the cool-down follows. The squeeze
  // without W's also keeps the warm-up.
  const int steady_from = slots[0][kInput0][0];
  SlotWindow window{with_weights ? steady_from : 0, std::numeric_limits<int>::max(), 0};
  for (int r = 0; r < static_cast<int>(slots.size()); ++r) {
    const int slot =
        slots[static_cast<std::size_t>(r)][kForward0][static_cast<std::size_t>(microbatches - 1)];
    if ((slot > steady_from || (slot == steady_from && r > 0)) && slot < window.after_slot) {
      window.after_slot = slot;
      window.after_rank = r;
    }
  }
  visitInSlotOrder(slots, window, [&](int rank, int type, int m) {
    int &slot = slots[static_cast<std::size_t>(rank)][static_cast<std::size_t>(type)]
                     [static_cast<std::size_t>(m)];
    auto &profile = memory[static_cast<std::size_t>(rank)];
    const int first = dependencySlot(slots, rank, type, m) + 1;
    profile.beginMove(type, first, slot);
    for (int candidate = first; candidate < slot; ++candidate)
      if (!profile.occupied(candidate) && profile.fits(candidate)) {
        profile.move(candidate);
        slot = candidate;
        break;
      }
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

// Both accept any M >= 1 and P from 1 to kMaxControllableMemoryRanks; V = 2 is fixed by the
// V-shape (request.chunks is ignored, as for zb-v). The reference builds every such P and M; with
// M below about P the steady state never forms and the squeeze alone shapes the schedule. The
// squeeze's work grows as P^3 (O(P^2) warm-up and cool-down ops per rank pass, each looking back
// O(P) slots): measured 1.5 s at P = M = 512 and 15 s at P = M = 1024 on this project's 2-core
// machine, hence the bound on P.
constexpr int kMaxControllableMemoryRanks = 512;

Status checkControllableMemoryV(const ScheduleRequest &request) {
  if (request.pp > kMaxControllableMemoryRanks)
    return makeError(request.name + " builds its order greedily, in time growing as P^3; " +
                     "pipescope builds it for P <= " + std::to_string(kMaxControllableMemoryRanks) +
                     ", got P = " + std::to_string(request.pp) +
                     "; use P <= " + std::to_string(kMaxControllableMemoryRanks) +
                     ", or zb-v for a V-shape schedule at this P");
  return Ok{};
}

RankOps vHalf(const ScheduleRequest &request, const Placement &placement) {
  return buildControllableMemoryV(false, placement.pp, request.microbatches);
}

RankOps vMin(const ScheduleRequest &request, const Placement &placement) {
  return buildControllableMemoryV(true, placement.pp, request.microbatches);
}

} // namespace pipescope::generators
