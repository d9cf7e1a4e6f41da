// DualPipe and DualPipeV (DeepSeek-AI, DeepSeek-V3 Technical Report, 2024; deepseek-ai/DualPipe,
// dualpipe/dualpipe.py and dualpipe/dualpipev.py). Both are ported from the reference's per-rank
// step() loops: the same eight steps, the same per-rank counts, the same op order.
//
// The reference names a rank's two model chunks by "phase" rather than by direction:
//   phase 0: the chunk where this rank sits early in its pipeline,
//   phase 1: the chunk where this rank sits late (its backward arrives first).
// DualPipe: on ranks r < P/2 phase 0 is direction 0 (stage id r) and phase 1 direction 1 (stage
// id 2P-1-r, model stage P-1-r); on ranks r >= P/2 the two swap. The "half rank"
// h = min(r, P-1-r) is the rank's distance from the nearer end, and each direction carries M/2
// microbatches (global ids m for direction 0, M/2 + m for direction 1).
// DualPipeV: phase 0 is stage r (down the V), phase 1 stage 2P-1-r (back up); every microbatch
// passes both, so it is DualPipe's step sequence with P/2 -> P, h -> r and M/2 -> M.
//
// Within a phase the reference runs forwards and backwards in microbatch order (one counter
// each), so the k-th forward or backward of a phase is microbatch k of that phase.
//
// Op mapping:
//   _forward_chunk                  -> F
//   _backward_chunk(enable_zb=False) -> B (full backward)
//   _backward_chunk(enable_zb=True)  -> I; its weight-grad closure is queued (WeightGradStore)
//   _weight_chunk                   -> W of the oldest queued backward (the store is FIFO)
//   _forward_backward_chunk(f, b)   -> OverlappedPair: F of phase f with B of phase b. The
//       reference never enables zero-bubble inside an overlapped pair (WeightGradStore is off
//       there), so the backward part is a full B, exactly what our pair represents.
// The reference's P2P details (a rank may defer a send until after its next compute so sends
// and receives pair up in one batch_isend_irecv) are not order constraints: our lowering sends
// each output right after the op that produces it, which can only make data arrive earlier.
// Without a module-level overlapped_forward_backward the reference runs a pair as F then B;
// pipescope always models the overlapped pair (its time is Costs::overlapped_us).
//
// V is fixed at 2 by the placement (two chunks per rank); request.chunks is ignored, as
// schedule.h says for families that do not use it.
#include <string>

#include "engine/generators/generators.h"

namespace pipescope::generators {

namespace {

// Emits one rank's op list. Counts and order follow the reference's step() with
//   n = half_ranks      (DualPipe: P/2, DualPipeV: P)
//   h = half_rank       (DualPipe: min(r, P-1-r), DualPipeV: r)
//   c = chunks          (microbatches per phase: DualPipe M/2, DualPipeV M)
//   last = (h == n - 1) (DualPipe's two middle ranks, DualPipeV's last rank)
// Phases, with a = n - h - 1 and b = h + 1:
//   1  nF0        2a forwards of phase 0
//   2  nF0F1      b  x (F0, F1)
//   3  nB1W1F1    a  x (I1, W, F1)                      zero-bubble backward, W at once
//   4  nF0B1F1B0  c - 2n + b x (F0&B1, F1&B0)           main step, overlapped pairs; on the
//                                                       `last` rank the first F0&B1 is F0, B1
//                                                       unoverlapped (reference's choice)
//   5  nB1F1B0    a  x (B1, F1&B0)
//   6  nB1B0      b  x (B1, B0); the last b of these 2b backwards are zero-bubble I with
//                    their W queued (the reference's switch at i = floor(b/2), before B1
//                    when h is odd and before B0 when h is even, amounts to that)
//   7  nWB0       a  x (W, I0)                          W of the oldest queued backward
//   8  nW         b  x W                                drains the b still queued
// Per phase this is c forwards and c backwards; ops = 9a + 5b + 2(c - 2n + b) + last.
class RankEmitter {
public:
  RankEmitter(std::vector<Op> &ops, std::vector<Op> &weight_queue)
      : ops_(ops), queue_(weight_queue) {}

  void setPhase(int phase, int stage, int microbatch_offset) {
    stage_[phase] = stage;
    offset_[phase] = microbatch_offset;
  }

  void forward(int phase) { ops_.push_back(forwardOp(stage_[phase], nextForward(phase))); }

  void backward(int phase, bool zero_bubble) {
    const int microbatch = nextBackward(phase);
    if (!zero_bubble) {
      ops_.push_back(fullBackwardOp(stage_[phase], microbatch));
      return;
    }
    ops_.push_back(inputGradOp(stage_[phase], microbatch));
    queue_.push_back(weightGradOp(stage_[phase], microbatch));
  }

  void weight() { ops_.push_back(queue_[head_++]); }

  void overlapped(int forward_phase, int backward_phase) {
    const int f = nextForward(forward_phase);
    const int b = nextBackward(backward_phase);
    ops_.push_back(overlappedOp(stage_[forward_phase], f, stage_[backward_phase], b));
  }

private:
  int nextForward(int phase) { return offset_[phase] + forward_count_[phase]++; }
  int nextBackward(int phase) { return offset_[phase] + backward_count_[phase]++; }

  std::vector<Op> &ops_;
  std::vector<Op> &queue_; // FIFO of deferred W; entries before head_ are done
  std::size_t head_ = 0;
  int stage_[2] = {0, 0};
  int offset_[2] = {0, 0};
  int forward_count_[2] = {0, 0};
  int backward_count_[2] = {0, 0};
};

std::size_t rankOpCount(int n, int h, int c) {
  const int a = n - h - 1, b = h + 1;
  const int main_steps = c - 2 * n + b;
  const int count = 9 * a + 5 * b + 2 * main_steps + (h == n - 1 ? 1 : 0);
  return static_cast<std::size_t>(count);
}

// One rank of the shared eight-step sequence. stage0/stage1 and offset0/offset1 say which stage
// id and which first global microbatch each phase maps to.
void emitRank(int n, int h, int c, int stage0, int offset0, int stage1, int offset1,
              std::vector<Op> &ops, std::vector<Op> &weight_queue) {
  ops.reserve(rankOpCount(n, h, c));
  weight_queue.clear();
  RankEmitter emit(ops, weight_queue);
  emit.setPhase(0, stage0, offset0);
  emit.setPhase(1, stage1, offset1);
  const int a = n - h - 1, b = h + 1;
  const bool last = h == n - 1;

  // 1: nF0
  for (int i = 0; i < 2 * a; ++i)
    emit.forward(0);
  // 2: nF0F1
  for (int i = 0; i < b; ++i) {
    emit.forward(0);
    emit.forward(1);
  }
  // 3: nB1W1F1 (zero bubble: the queue is empty here, so W is the I just run)
  for (int i = 0; i < a; ++i) {
    emit.backward(1, true);
    emit.weight();
    emit.forward(1);
  }
  // 4: nF0B1F1B0 (main step)
  const int main_steps = c - 2 * n + b;
  for (int i = 0; i < main_steps; ++i) {
    if (i == 0 && last) {
      // Reference: "We don't overlap these two chunks to further reduce bubble size." The gain
      // there comes from when its P2P sends go out; with free transfers in pipescope this
      // split gains nothing and costs the rank one pair's overlap saving (F + B - F&B). Kept
      // for fidelity to the published order.
      emit.forward(0);
      emit.backward(1, false);
    } else {
      emit.overlapped(0, 1);
    }
    emit.overlapped(1, 0);
  }
  // 5: nB1F1B0
  for (int i = 0; i < a; ++i) {
    emit.backward(1, false);
    emit.overlapped(1, 0);
  }
  // 6: nB1B0, the second half of these backwards split for zero bubble
  bool zero_bubble = false;
  for (int i = 0; i < b; ++i) {
    if (i == b / 2 && h % 2 == 1) zero_bubble = true;
    emit.backward(1, zero_bubble);
    if (i == b / 2 && h % 2 == 0) zero_bubble = true;
    emit.backward(0, zero_bubble);
  }
  // 7: nWB0
  for (int i = 0; i < a; ++i) {
    emit.weight();
    emit.backward(0, true);
  }
  // 8: nW
  for (int i = 0; i < b; ++i)
    emit.weight();
}

} // namespace

// DualPipe accepts what the reference asserts in DualPipe.step: num_ranks % 2 == 0 and
// num_chunks > 0, even, >= 2 * num_ranks. Odd P has no middle pair of ranks for the two
// directions to cross at; odd M cannot be split evenly between the directions; M < 2P leaves
// the main step (c - P + h + 1 pairs, c = M/2) empty for the middle ranks.
Status checkDualPipe(const ScheduleRequest &request) {
  const int pp = request.pp, microbatches = request.microbatches;
  if (pp % 2 == 0 && microbatches % 2 == 0 && microbatches >= 2 * pp) return Ok{};
  const int even_pp = pp % 2 == 0 ? pp : pp + 1;
  int even_microbatches = microbatches < 2 * even_pp ? 2 * even_pp : microbatches;
  if (even_microbatches % 2 != 0) ++even_microbatches;
  std::string fix =
      "try P = " + std::to_string(even_pp) + ", M = " + std::to_string(even_microbatches);
  return makeError("dualpipe needs an even P >= 2 and an even M >= 2P (deepseek-ai/DualPipe); got "
                   "P = " +
                   std::to_string(pp) + ", M = " + std::to_string(microbatches) + "; " + fix +
                   " (or dualpipev, which takes any P with M >= 2P)");
}

RankOps dualPipe(const ScheduleRequest &request, const Placement &placement) {
  const int pp = placement.pp;
  const int half_ranks = pp / 2;
  const int per_direction = request.microbatches / 2;
  RankOps ranks(static_cast<std::size_t>(pp));
  std::vector<Op> weight_queue;
  weight_queue.reserve(static_cast<std::size_t>(per_direction));
  for (int r = 0; r < pp; ++r) {
    const bool second_half = r >= half_ranks;
    const int half_rank = second_half ? pp - 1 - r : r;
    const int direction0_stage = r, direction1_stage = 2 * pp - 1 - r;
    // Phase 0 is the direction where this rank is early (model stage half_rank).
    const int stage0 = second_half ? direction1_stage : direction0_stage;
    const int stage1 = second_half ? direction0_stage : direction1_stage;
    const int offset0 = second_half ? per_direction : 0;
    const int offset1 = second_half ? 0 : per_direction;
    emitRank(half_ranks, half_rank, per_direction, stage0, offset0, stage1, offset1,
             ranks[static_cast<std::size_t>(r)], weight_queue);
  }
  return ranks;
}

// DualPipeV accepts what the reference asserts in DualPipeV.step: num_chunks > 0 and
// num_chunks >= 2 * num_ranks (no parity condition on P or M). Fewer microbatches leave the
// main step (M - 2P + r + 1 pairs) empty on the last rank.
Status checkDualPipeV(const ScheduleRequest &request) {
  const int pp = request.pp, microbatches = request.microbatches;
  if (microbatches >= 2 * pp) return Ok{};
  return makeError(
      "dualpipev needs M >= 2P microbatches (deepseek-ai/DualPipe); got P = " + std::to_string(pp) +
      ", M = " + std::to_string(microbatches) + "; raise M to at least " + std::to_string(2 * pp) +
      (microbatches >= 2 ? " or lower P to at most " + std::to_string(microbatches / 2)
                         : std::string()));
}

RankOps dualPipeV(const ScheduleRequest &request, const Placement &placement) {
  const int pp = placement.pp;
  RankOps ranks(static_cast<std::size_t>(pp));
  std::vector<Op> weight_queue;
  weight_queue.reserve(static_cast<std::size_t>(request.microbatches));
  for (int r = 0; r < pp; ++r)
    emitRank(pp, r, request.microbatches, r, 0, 2 * pp - 1 - r, 0,
             ranks[static_cast<std::size_t>(r)], weight_queue);
  return ranks;
}

} // namespace pipescope::generators
