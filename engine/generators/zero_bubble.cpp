// Zero-bubble schedules: ZB-H1, ZB-H2 (Qi et al., Zero Bubble Pipeline Parallelism, ICLR 2024,
// Fig. 3 and Table 2; sail-sg/zero-bubble-pipeline-parallelism) and ZB-V (Qi et al., Pipeline
// Parallelism with Controllable Memory, NeurIPS 2024; the handcrafted get_zb_v_schedule in
// sail-sg's megatron/core/pipeline_parallel/handcrafted_zb_v and PyTorch's ScheduleZBVZeroBubble).
//
// All three split the backward: I (input-grad) carries the gradient to the previous stage at once,
// W (weight-grad) only needs its own I and is placed wherever the rank would otherwise idle. The
// paper calls I "B"; pipescope follows PyTorch (DESIGN.md §2). No generator emits a full B.
//
// ZB-H1 and ZB-H2 are one construction with two parameter choices. Rank r runs
//   warm-up:  w_r forwards F(0..w_r-1)
//   steady:   for k = 0..M-1:  I(k);  W(k - d_r) if k >= d_r;  F(w_r + k) if w_r + k < M
//   drain:    the d_r weight-grads still queued (the W's of the last d_r microbatches)
// W's run in microbatch order, d_r iterations behind the I's (the "lag"). Putting W before F inside
// an iteration frees an activation before the next one is taken, so rank r holds at most
// min(M, w_r + d_r) activations (DESIGN.md §3: an activation is held from F until W ends).
//   ZB-H1: w_r = P - r,       d_r = r    (1F1B's warm-up; peak P, 1F1B's rank-0 peak)
//   ZB-H2: w_r = 2P - 1 - 2r, d_r = 2r   (enough warm-up F's to reach the first I; peak 2P - 1)
// Deadlock freedom for any M >= 1 (w_r capped at M, w_r non-increasing in r, w_{P-1} >= 1): give
// I(r,k) the key (k, 0, P-1-r), the W after it (k, 1, 0) and F(r,m) the key (m - w_r, 2, r). Keys
// increase along each rank's list, and every dependency points to a smaller key (I(r+1,k) <
// I(r,k); the last rank's F(P-1,k) has k - w_{P-1} < k; F(r-1,m) has m - w_{r-1} <= m - w_r), so
// program order plus dependencies is acyclic and the simulation cannot deadlock.
#include <algorithm>
#include <initializer_list>
#include <string>

#include "engine/generators/generators.h"

namespace pipescope::generators {

namespace {

constexpr const char *kZeroBubbleVInstead =
    "use zb-v for a two-chunk (V-shape) zero-bubble schedule";

// Emits rank `rank`'s list for the ZB-H family: `warmup` forwards, then M iterations of
// I(k), W(k - lag), F(warmup + k), then the queued W's. Stage id = rank (Loop placement, V = 1).
void emitLaggedWeightGrad(std::vector<Op> &ops, int rank, int microbatches, int warmup, int lag) {
  warmup = std::min(warmup, microbatches);
  ops.reserve(3 * static_cast<std::size_t>(microbatches));
  for (int m = 0; m < warmup; ++m)
    ops.push_back(forwardOp(rank, m));
  int next_weight = 0;
  for (int k = 0; k < microbatches; ++k) {
    ops.push_back(inputGradOp(rank, k));
    if (k >= lag) ops.push_back(weightGradOp(rank, next_weight++));
    if (warmup + k < microbatches) ops.push_back(forwardOp(rank, warmup + k));
  }
  while (next_weight < microbatches)
    ops.push_back(weightGradOp(rank, next_weight++));
}

} // namespace

// ZB-H1 accepts any P >= 1, M >= 1 with V = 1.
// Phases per rank r (w = min(P - r, M), steady iterations counted in k):
//   warm-up:   w forwards                                  (1F1B's P-1-r plus its first steady F)
//   steady 1:  min(r, M - w) iterations of I, F            (W deferred; in-flight grows to P)
//   steady 2:  max(0, M - w - r) iterations of I, W, F     (one W per I, r behind)
//   cool-down: the remaining w iterations of I, W (I alone while k < r), then the min(r, M)
//              queued W's
// This is PyTorch's _get_1f1b_rank_ops(enable_zero_bubble=True, num_1f1b_microbatches=rank)
// for one stage per rank (ScheduleInterleavedZeroBubble with V = 1), and the paper's ZB-H1:
// W starts are delayed by the rank, so every rank holds min(P, M) activations at most, 1F1B's
// rank-0 peak (1F1B's rank r holds min(P - r, M)).
// Step time with free transfers, confirmed exactly by simulation (P <= 16, M <= 32, op times in
// quarter units): for M >= P,  T = M(F+I+W) + (P-1)(F + I - min(F, I, W)),
// which is the paper's bubble (P-1)(F+B-W) whenever W <= min(F, I) (e.g. F = I = W); for
// M < P and F = I = W = t, T = (2P - 1 + 2M)t.
Status checkZeroBubbleH1(const ScheduleRequest &request) {
  return requireSingleChunk(request, kZeroBubbleVInstead);
}

RankOps zeroBubbleH1(const ScheduleRequest &request, const Placement &placement) {
  const int pp = placement.pp;
  RankOps ranks(static_cast<std::size_t>(pp));
  for (int r = 0; r < pp; ++r)
    emitLaggedWeightGrad(ranks[static_cast<std::size_t>(r)], r, request.microbatches, pp - r, r);
  return ranks;
}

// ZB-H2 accepts any P >= 1, M >= 1 with V = 1. Its full form needs M >= 2P - 1 microbatches; with
// fewer, the e = max(0, M - P) microbatches beyond 1F1B's P are spent on the two ZB-H2 changes,
//   w_r = P - r + min(P - 1 - r, e),   d_r = r + min(r, e),
// so M <= P gives exactly ZB-H1 and M >= 2P - 1 exactly ZB-H2 (w_r = 2P-1-2r, d_r = 2r); in
// between it is never slower than ZB-H1 (checked by simulation, P <= 16, M <= 32).
// Phases per rank r for M >= 2P - 1, with b = M - 2P + 1:
//   warm-up:   2P - 1 - 2r forwards          (fills the time until the first I arrives: rank r
//                                             starts at rF and I(r,0) can start at (2P-1-r)F
//                                             when F = I)
//   steady 1:  2r iterations of I, F         (W deferred: the I chain runs at pace F+I here)
//   steady 2:  b  iterations of I, W, F      (pace F+I+W)
//   cool-down: 2P - 1 - 2r iterations of I, W, then the 2r queued W's (the W triangle at the
//              tail that turns ZB-H1's trapezoid into the paper's parallelogram)
// Every rank holds min(M, 2P - 1) activations at most (paper: (2p-1)M_B).
// Confirmed exactly by simulation for M >= 2P - 1 (free transfers):
//   step time             T = M(F+I+W) + (P-1) max(F, I - F, F + I - 2W)
//   bubble in each rank's own span (its first start to its last end): (P-1) max(0, I - F, F+I-2W)
// The second is the paper's (P-1)(F+B-2W) whenever W <= F and 2W <= F + I; with F = I = W it is
// zero: rank r runs without a gap from rF to rF + M(F+I+W). The step still spans (P-1)F more than
// the work, because the last rank cannot start before (P-1)F; the paper removes that offset
// across steps with its optimizer post-validation (so with F = I = W, ZB-H1 and ZB-H2 have the
// same step time T = M(F+I+W) + (P-1)F, and differ in per-rank span and memory).
Status checkZeroBubbleH2(const ScheduleRequest &request) {
  return requireSingleChunk(request, kZeroBubbleVInstead);
}

RankOps zeroBubbleH2(const ScheduleRequest &request, const Placement &placement) {
  const int pp = placement.pp;
  const int extra = std::max(0, request.microbatches - pp);
  RankOps ranks(static_cast<std::size_t>(pp));
  for (int r = 0; r < pp; ++r)
    emitLaggedWeightGrad(ranks[static_cast<std::size_t>(r)], r, request.microbatches,
                         pp - r + std::min(pp - 1 - r, extra), r + std::min(r, extra));
  return ranks;
}

// ZB-V accepts any P >= 1, M >= 1; V = 2 is fixed by the V-shape placement (request.chunks is
// ignored, as for dualpipev). Rank r holds chunk 0 = stage r and chunk 1 = stage 2P-1-r; every
// microbatch runs stages 0..2P-1, so a rank sees chunk 1's backward before chunk 0's.
// The order is the reference's handcrafted one (get_zb_v_schedule / ScheduleZBVZeroBubble), built
// for n = max(M, 2P - 1) microbatches; for M < 2P - 1 the ops of microbatches >= M are dropped,
// as the reference does (dropping a dependency-closed set of microbatches keeps the order
// deadlock-free). Phases per rank r, counted for n microbatches:
//   warm-up 1:   2(P - r) - 1  F0
//   warm-up 2:   r             x (F1, F0)
//   warm-up 3:   P - r         x (F1, I1, W1)
//   steady:      n - 2P + r + 1 x (F0, I0, W0, F1, I1, W1),
//                then P - r - 1 x (I0, W0, F1, I1, W1)     (no chunk-0 forwards left)
//   cool-down 1: r             x (I0, I1)                  (their W's wait)
//   cool-down 2: P - r         x (I0, W0)
//   drain:       the r queued W1, then the r queued W0
// A chunk is half a rank's layers (0.5 microbatch equivalents), so every rank holds at most
// min(P, M) microbatch equivalents (2P chunk activations): 1F1B's rank-0 peak.
// With F = I = W = t (a rank share; a chunk op takes t/2) and free transfers, simulation confirms
//   T = 3Mt + max((P-1)t/2, (2P-1-M)t),
// i.e. only the (P-1)t/2 offset of the last rank's start once M >= floor(3P/2), and zero bubble
// inside every rank's own span once M >= 2P - 1 (1F1B: 3(P-1)t). Unequal F, I, W leave bubbles;
// the reference notes it is zero-bubble only when F = I = W.
Status checkZeroBubbleV(const ScheduleRequest &) {
  return Ok{};
}

RankOps zeroBubbleV(const ScheduleRequest &request, const Placement &placement) {
  const int pp = placement.pp;
  const int microbatches = request.microbatches;
  const int padded = std::max(microbatches, 2 * pp - 1);
  RankOps ranks(static_cast<std::size_t>(pp));
  for (int r = 0; r < pp; ++r) {
    auto &ops = ranks[static_cast<std::size_t>(r)];
    ops.reserve(6 * static_cast<std::size_t>(microbatches));
    const int stage[2] = {r, 2 * pp - 1 - r};
    // Per chunk: how many F, I, W the reference has issued, padded microbatches included.
    int f0 = 0, f1 = 0, i0 = 0, i1 = 0, w0 = 0, w1 = 0;
    // Ops of padded microbatches (>= M) advance their counter but are not emitted.
    auto emit = [&](Op op, int &counter) {
      if (counter < microbatches) {
        op.microbatch = counter;
        ops.push_back(op);
      }
      ++counter;
    };
    const Op forward[2] = {forwardOp(stage[0], 0), forwardOp(stage[1], 0)};
    const Op input[2] = {inputGradOp(stage[0], 0), inputGradOp(stage[1], 0)};
    const Op weight[2] = {weightGradOp(stage[0], 0), weightGradOp(stage[1], 0)};
    // Runs a phase of `iterations` steps. Once every counter the phase advances has reached M the
    // rest would emit nothing, so the counters jump ahead instead: with M << P this keeps the work
    // O(M) per rank instead of O(P).
    auto phase = [&](int iterations, std::initializer_list<int *> counters, auto step) {
      for (int i = 0; i < iterations; ++i) {
        bool live = false;
        for (int *counter : counters)
          live = live || *counter < microbatches;
        if (!live) {
          for (int *counter : counters)
            *counter += iterations - i;
          return;
        }
        step();
      }
    };

    phase(2 * (pp - r) - 1, {&f0}, [&] { emit(forward[0], f0); });
    phase(r, {&f1, &f0}, [&] {
      emit(forward[1], f1);
      emit(forward[0], f0);
    });
    phase(pp - r, {&f1, &i1, &w1}, [&] {
      emit(forward[1], f1);
      emit(input[1], i1);
      emit(weight[1], w1);
    });
    // The reference's stable loop: one (F0,) I0, W0, F1, I1, W1 round until both chunks have
    // issued all n forwards.
    phase(padded - f0, {&f0, &i0, &w0, &f1, &i1, &w1}, [&] {
      emit(forward[0], f0);
      emit(input[0], i0);
      emit(weight[0], w0);
      emit(forward[1], f1);
      emit(input[1], i1);
      emit(weight[1], w1);
    });
    phase(f0 - f1, {&i0, &w0, &f1, &i1, &w1}, [&] {
      emit(input[0], i0);
      emit(weight[0], w0);
      emit(forward[1], f1);
      emit(input[1], i1);
      emit(weight[1], w1);
    });
    phase(r, {&i0, &i1}, [&] {
      emit(input[0], i0);
      emit(input[1], i1);
    });
    phase(pp - r, {&i0, &w0}, [&] {
      emit(input[0], i0);
      emit(weight[0], w0);
    });
    phase(i1 - w1, {&w1}, [&] { emit(weight[1], w1); });
    phase(i0 - w0, {&w0}, [&] { emit(weight[0], w0); });
  }
  return ranks;
}

} // namespace pipescope::generators
