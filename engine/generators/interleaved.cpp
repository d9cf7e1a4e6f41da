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
namespace {

// The interleaved rules, naming `family` (interleaved-1f1b or combined-1f1b) in the messages.
Status checkInterleavedRules(const ScheduleRequest &request, const std::string &family) {
  if (request.chunks < 2)
    return makeError(family + " needs V >= 2 chunks per rank, got V = " +
                     std::to_string(request.chunks) + "; for V = 1 use 1f1b");
  if (request.pp < 2)
    return makeError(family +
                     " needs P >= 2 pipeline ranks, got P = " + std::to_string(request.pp));
  if (request.microbatches < request.pp)
    return makeError(family + " needs M >= P microbatches (Megatron-LM), got M = " +
                     std::to_string(request.microbatches) +
                     " with P = " + std::to_string(request.pp) + "; raise M to at least " +
                     std::to_string(request.pp));
  const int group = request.microbatch_group > 0 ? request.microbatch_group : request.pp;
  if (group < request.pp || group > request.microbatches)
    return makeError(
        family + " needs a microbatch group G with P <= G <= M (" + std::to_string(request.pp) +
        " <= G <= " + std::to_string(request.microbatches) + "), got G = " + std::to_string(group) +
        "; G = P is depth-first, G = M breadth-first");
  if (request.microbatches % group != 0) {
    const int lower = request.microbatches / group * group;
    return makeError(
        family + " needs M to be a multiple of the microbatch group G = " + std::to_string(group) +
        " (Megatron-LM), got M = " + std::to_string(request.microbatches) +
        "; use M = " + (lower >= request.pp ? std::to_string(lower) + " or " : std::string()) +
        std::to_string(lower + group) + ", or G = M (breadth-first)");
  }
  return Ok{};
}

} // namespace

Status checkInterleaved(const ScheduleRequest &request) {
  return checkInterleavedRules(request, "interleaved-1f1b");
}

// Megatron's order: the k-th forward on a rank runs table[k] = (microbatch, chunk), where the
// table walks groups of G microbatches, all chunks of a group before the next group (the last
// group takes the remainder). The k-th backward runs table[k] with the chunk mirrored
// (V-1-chunk). Phases per rank r:
//   warm-up:   min(2(P-1-r) + (V-1)G, MV) forwards
// Megatron-LM before November 2024 ran all MV forwards first when M == P; its
// get_pp_rank_microbatches (megatron/core/pipeline_parallel/schedules.py, since commit 4295be1a6c,
// "tunable schedule with overlapping") applies the formula at every M, as PyTorch's
// ScheduleInterleaved1F1B does, and so does pipescope.
//   steady:    MV - warm-up pairs of forward k+warm-up then backward k
//   cool-down: the remaining backwards
namespace {

// Megatron's interleaved order on every rank; `combined` pairs each steady-state forward with
// its backward as one overlapped op after one more warm-up forward (combined 1F1B).
RankOps interleavedOrder(const ScheduleRequest &request, const Placement &placement,
                         bool combined) {
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
    // P = 1 (Megatron's no-pipelining path) has no warm-up of its own.
    int warmup = pp == 1 ? 0 : std::min(2 * (pp - 1 - r) + (chunks - 1) * group, total);
    if (combined) warmup = std::min(warmup + 1, total);
    for (int k = 0; k < warmup; ++k)
      ops.push_back(forward_k(k));
    for (int k = 0; k < total - warmup; ++k) {
      const Op forward = forward_k(k + warmup), backward = backward_k(k);
      if (combined) {
        ops.push_back(
            overlappedOp(forward.stage, forward.microbatch, backward.stage, backward.microbatch));
      } else {
        ops.push_back(forward);
        ops.push_back(backward);
      }
    }
    for (int k = total - warmup; k < total; ++k)
      ops.push_back(backward_k(k));
  }
  return ranks;
}

} // namespace

RankOps interleaved(const ScheduleRequest &request, const Placement &placement) {
  return interleavedOrder(request, placement, false);
}

// Megatron-Core's combined 1F1B (megatron/core/pipeline_parallel/combined_1f1b.py, enabled by
// --overlap-moe-expert-parallel-comm): the interleaved order with one more warm-up forward
// ("to ensure the forward and backward computations are independent in all 1f1b steps",
// get_pp_rank_microbatches in schedules.py), then each steady-state step runs the forward of
// one microbatch and the backward of another layer by layer on two streams, so one's
// expert-parallel all-to-all hides behind the other's compute: an overlapped F&B pair, priced
// as DualPipe's. At P = 1 (combined_1f1b_schedule_for_no_pipelining): F0, (F1, B0), ...,
// (F(M-1), B(M-2)), B(M-1). Megatron requires virtual stages when P > 1.
Status checkCombinedOneFOneB(const ScheduleRequest &request) {
  if (request.pp == 1) {
    if (request.chunks != 1)
      return makeError("combined-1f1b at P = 1 runs one chunk (Megatron's no-pipelining path), "
                       "got V = " +
                       std::to_string(request.chunks) + "; use V = 1");
    if (request.microbatch_group > 1)
      return makeError("combined-1f1b at P = 1 has no microbatch groups; leave G unset");
    return Ok{};
  }
  if (request.chunks < 2)
    return makeError("combined-1f1b needs V >= 2 chunks per rank when P > 1 (Megatron-Core: "
                     "\"virtual_pipeline_model_parallel_size must be specified when "
                     "pipeline_model_parallel_size > 1\"), got V = " +
                     std::to_string(request.chunks));
  return checkInterleavedRules(request, "combined-1f1b");
}

RankOps combinedOneFOneB(const ScheduleRequest &request, const Placement &placement) {
  return interleavedOrder(request, placement, true);
}

} // namespace pipescope::generators

// PyTorch's interleaved schedules (torch.distributed.pipelining, schedules.py): per-rank orders as
// ScheduleInterleavedZeroBubble and ScheduleLoopedBFS build their pipeline_order, without the idle
// cells PyTorch pads in (a rank runs its list in order; idle time comes from the simulation).
namespace pipescope::generators {

namespace {

// PyTorch's rounds: max(1, floor(M / P)) rounds of M / rounds microbatches each; M must divide
// evenly. Zero when M does not split into rounds.
int pytorchMicrobatchesPerRound(int pp, int microbatches) {
  const int rounds = std::max(1, microbatches / pp);
  return microbatches % rounds == 0 ? microbatches / rounds : 0;
}

} // namespace

// Accepts what ScheduleInterleavedZeroBubble accepts with V >= 2 (V = 1 is zb-h1, which equals
// PyTorch's V = 1 order): any P >= 1, and M that splits into max(1, floor(M/P)) equal rounds, so
// any M <= P and any multiple of P, among others.
Status checkInterleavedZeroBubble(const ScheduleRequest &request) {
  if (request.chunks < 2)
    return makeError(
        "interleaved-zb needs V >= 2 chunks per rank, got V = " + std::to_string(request.chunks) +
        "; for V = 1 use zb-h1 (the same order PyTorch generates for one stage per "
        "rank)");
  if (pytorchMicrobatchesPerRound(request.pp, request.microbatches) == 0) {
    // The nearest M on either side that splits into rounds (M <= P always does, so both exist
    // within a round of M).
    int lower = request.microbatches - 1, higher = request.microbatches + 1;
    while (pytorchMicrobatchesPerRound(request.pp, lower) == 0)
      --lower;
    while (pytorchMicrobatchesPerRound(request.pp, higher) == 0)
      ++higher;
    const int rounds = std::max(1, request.microbatches / request.pp);
    return makeError(
        "interleaved-zb needs M to be a multiple of its number of rounds, max(1, "
        "floor(M/P)) = " +
        std::to_string(rounds) + " (PyTorch's ScheduleInterleavedZeroBubble), got M = " +
        std::to_string(request.microbatches) + "; use M = " + std::to_string(lower) + " or " +
        std::to_string(higher) + ", or any multiple of P = " + std::to_string(request.pp));
  }
  return Ok{};
}

// PyTorch's _get_1f1b_rank_ops(enable_zero_bubble=True, num_1f1b_microbatches=rank) with
// multiply_factor 1 in _get_warmup_ops. With R = M / rounds microbatches per round, step k's
// forward runs chunk floor(k/R) mod V and its backward chunk V-1-floor((k-warm-up)/R) mod V, each
// chunk taking its microbatches in order. Phases per rank r (MV ops of each kind):
//   warm-up:   w = min((V-1)R + P-1-r, MV) forwards
//   steady:    MV - w iterations of F, I, then W from iteration r on (W's lag r behind the I's)
//   cool-down: w iterations of I, W (W from iteration r on)
//   drain:     the W's still queued, in the order of their I's
RankOps interleavedZeroBubble(const ScheduleRequest &request, const Placement &placement) {
  const int pp = placement.pp;
  const int chunks = placement.chunks;
  const int per_round = pytorchMicrobatchesPerRound(pp, request.microbatches);
  const int total = request.microbatches * chunks;
  RankOps ranks(static_cast<std::size_t>(pp));
  for (int r = 0; r < pp; ++r) {
    auto &ops = ranks[static_cast<std::size_t>(r)];
    ops.reserve(3 * static_cast<std::size_t>(total));
    const int warmup = std::min((chunks - 1) * per_round + (pp - 1 - r), total);
    auto forward_stage = [&](int step) { return (step / per_round) % chunks * pp + r; };
    auto backward_stage = [&](int step) {
      return (chunks - 1 - (step - warmup) / per_round % chunks) * pp + r;
    };
    // Per chunk: the next microbatch of each kind (PyTorch's per-stage counters).
    std::vector<int> next_forward(static_cast<std::size_t>(chunks)),
        next_input(static_cast<std::size_t>(chunks)), next_weight(static_cast<std::size_t>(chunks));
    auto take = [&](std::vector<int> &counters, int stage) {
      return counters[static_cast<std::size_t>(stage / pp)]++;
    };
    std::vector<int> input_stages; // stage of each I, in order: the W's follow them
    input_stages.reserve(static_cast<std::size_t>(total));
    std::size_t weights_done = 0;
    auto weight = [&] {
      const int stage = input_stages[weights_done++];
      ops.push_back(weightGradOp(stage, take(next_weight, stage)));
    };
    for (int step = 0; step < total + warmup; ++step) {
      if (step < total) {
        const int stage = forward_stage(step);
        ops.push_back(forwardOp(stage, take(next_forward, stage)));
      }
      if (step < warmup) continue;
      const int stage = backward_stage(step);
      ops.push_back(inputGradOp(stage, take(next_input, stage)));
      input_stages.push_back(stage);
      if (step - warmup >= r) weight();
    }
    while (weights_done < input_stages.size())
      weight();
  }
  return ranks;
}

// Accepts any P >= 1, M >= 1 with V >= 2, as ScheduleLoopedBFS does (V = 1 would be GPipe with the
// backwards in reverse microbatch order; gpipe is the V = 1 family).
Status checkLoopedBfs(const ScheduleRequest &request) {
  if (request.chunks < 2)
    return makeError(
        "looped-bfs needs V >= 2 chunks per rank, got V = " + std::to_string(request.chunks) +
        "; for V = 1 use gpipe (all forwards, then all backwards)");
  return Ok{};
}

// ScheduleLoopedBFS (Lamy-Poirier, Breadth-First Pipeline Parallelism, 2023, as PyTorch builds
// it). Phases per rank r:
//   forwards:  for chunk 0..V-1, all M forwards of that chunk in microbatch order
//   backwards: for chunk V-1..0, all M full backwards of that chunk, last microbatch first
// Every forward of a chunk runs before any backward, so a rank holds all MV chunk activations.
RankOps loopedBfs(const ScheduleRequest &request, const Placement &placement) {
  const int pp = placement.pp;
  const int chunks = placement.chunks;
  const int microbatches = request.microbatches;
  RankOps ranks(static_cast<std::size_t>(pp));
  for (int r = 0; r < pp; ++r) {
    auto &ops = ranks[static_cast<std::size_t>(r)];
    ops.reserve(2 * static_cast<std::size_t>(microbatches) * static_cast<std::size_t>(chunks));
    for (int c = 0; c < chunks; ++c)
      for (int m = 0; m < microbatches; ++m)
        ops.push_back(forwardOp(c * pp + r, m));
    for (int c = chunks - 1; c >= 0; --c)
      for (int m = microbatches - 1; m >= 0; --m)
        ops.push_back(fullBackwardOp(c * pp + r, m));
  }
  return ranks;
}

} // namespace pipescope::generators
