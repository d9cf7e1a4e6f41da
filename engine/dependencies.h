#pragma once
// What each compute op needs before it can start (DESIGN.md §2 "Dependencies"), in one place: the
// simulator checks the same-rank inputs with it, the bubble analysis follows every input back to
// the op that produced it, and the lowering's recvs are exactly the inputs that cross ranks.
#include <cstdint>

#include "engine/op.h"
#include "engine/placement.h"

namespace pipescope {

/// The result an input waits for: the forward of (stage, microbatch), or its backward with
/// respect to the input (the I op, the full B op, or the backward half of an overlapped pair).
enum class OpOutput : std::uint8_t { Forward, BackwardInput };

/// One input of an op: the output of (stage, microbatch), and whether it comes from another rank
/// (then the lowered program receives it: an activation for Forward, a gradient otherwise).
struct OpInput {
  int stage = 0;
  int microbatch = 0;
  OpOutput output = OpOutput::Forward;
  bool crosses_ranks = false;
};

/// Calls `visit(OpInput)` for every input of `op`:
/// - F(s,m) needs F(s-1,m) (the previous stage on the microbatch's route), if any;
/// - I(s,m) and B(s,m) need their own F(s,m) and the backward of (s+1,m), if any (the last stage's
///   backward needs only its forward: the loss);
/// - W(s,m) needs I(s,m);
/// - an overlapped pair needs the inputs of its forward part and of its backward part.
template <typename Visit>
void forEachInput(const Placement &placement, const Op &op, Visit &&visit) {
  const auto forward_inputs = [&](int stage, int microbatch) {
    const int previous = placement.previousStage(stage);
    if (previous >= 0)
      visit(OpInput{previous, microbatch, OpOutput::Forward,
                    placement.rankOf(previous) != placement.rankOf(stage)});
  };
  const auto backward_inputs = [&](int stage, int microbatch) {
    visit(OpInput{stage, microbatch, OpOutput::Forward, false});
    const int next = placement.nextStage(stage);
    if (next >= 0)
      visit(OpInput{next, microbatch, OpOutput::BackwardInput,
                    placement.rankOf(next) != placement.rankOf(stage)});
  };
  switch (op.kind) {
  case OpKind::Forward: forward_inputs(op.stage, op.microbatch); break;
  case OpKind::InputGrad:
  case OpKind::FullBackward: backward_inputs(op.stage, op.microbatch); break;
  case OpKind::WeightGrad:
    visit(OpInput{op.stage, op.microbatch, OpOutput::BackwardInput, false});
    break;
  case OpKind::OverlappedPair:
    forward_inputs(op.stage, op.microbatch);
    backward_inputs(op.backward_stage, op.backward_microbatch);
    break;
  }
}

/// Calls `visit(stage, microbatch, OpOutput)` for every output `op` produces: F and the forward
/// half of a pair produce Forward; I, B and the backward half of a pair produce BackwardInput (W
/// produces nothing another op waits for).
template <typename Visit> void forEachOutput(const Op &op, Visit &&visit) {
  switch (op.kind) {
  case OpKind::Forward: visit(op.stage, op.microbatch, OpOutput::Forward); break;
  case OpKind::InputGrad:
  case OpKind::FullBackward: visit(op.stage, op.microbatch, OpOutput::BackwardInput); break;
  case OpKind::WeightGrad: break;
  case OpKind::OverlappedPair:
    visit(op.stage, op.microbatch, OpOutput::Forward);
    visit(op.backward_stage, op.backward_microbatch, OpOutput::BackwardInput);
    break;
  }
}

} // namespace pipescope
