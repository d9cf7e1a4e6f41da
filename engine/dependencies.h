#pragma once
// What each compute op needs before it can start (DESIGN.md §2 "Dependencies"), in one place: the
// simulator checks the same-rank inputs with it, the bubble analysis follows every input back to
// the op that produced it, and the lowering's recvs are exactly the inputs that cross ranks.
#include <cstddef>
#include <cstdint>
#include <vector>

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

/// The inputs of every op of one placement. Each stage's neighbours on the route, and whether they
/// live on another rank, are looked up once here, so the simulator's inner loop pays one load per
/// input.
class OpDependencies {
public:
  explicit OpDependencies(const Placement &placement) {
    stages_.resize(static_cast<std::size_t>(placement.stageCount()));
    for (int s = 0; s < placement.stageCount(); ++s) {
      auto &links = stages_[static_cast<std::size_t>(s)];
      links.previous = placement.previousStage(s);
      links.next = placement.nextStage(s);
      links.previous_crosses =
          links.previous >= 0 && placement.rankOf(links.previous) != placement.rankOf(s);
      links.next_crosses = links.next >= 0 && placement.rankOf(links.next) != placement.rankOf(s);
    }
  }

  /// Calls `visit(OpInput)` for every input of `op`:
  /// - F(s,m) needs F(s-1,m) (the previous stage on the microbatch's route), if any;
  /// - I(s,m) and B(s,m) need their own F(s,m) and the backward of (s+1,m), if any (the last
  ///   stage's backward needs only its forward: the loss);
  /// - W(s,m) needs I(s,m);
  /// - an overlapped pair needs the inputs of its forward part and of its backward part.
  template <typename Visit> void forEachInput(const Op &op, Visit &&visit) const {
    const auto forward_inputs = [&](int stage, int microbatch) {
      const StageLinks &links = stages_[static_cast<std::size_t>(stage)];
      if (links.previous >= 0)
        visit(OpInput{links.previous, microbatch, OpOutput::Forward, links.previous_crosses});
    };
    const auto backward_inputs = [&](int stage, int microbatch) {
      visit(OpInput{stage, microbatch, OpOutput::Forward, false});
      const StageLinks &links = stages_[static_cast<std::size_t>(stage)];
      if (links.next >= 0)
        visit(OpInput{links.next, microbatch, OpOutput::BackwardInput, links.next_crosses});
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

private:
  struct StageLinks {
    std::int32_t previous = -1, next = -1; ///< neighbours on the route, -1 at its ends
    bool previous_crosses = false, next_crosses = false;
  };
  std::vector<StageLinks> stages_;
};

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
