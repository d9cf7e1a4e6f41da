#pragma once
// Compute ops of a pipeline schedule, named as in PyTorch's schedule IR
// (torch/distributed/pipelining/schedules.py) so schedules move between the two.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace pipescope {

/// What a compute op does. The zero-bubble paper calls the input-grad pass "B"; pipescope follows
/// PyTorch: I = backward w.r.t. the input, W = backward w.r.t. the weights, B = I + W in one op.
enum class OpKind : std::uint8_t {
  Forward,        ///< F(s,m)
  InputGrad,      ///< I(s,m)
  WeightGrad,     ///< W(s,m)
  FullBackward,   ///< B(s,m) = I + W
  OverlappedPair, ///< DualPipe: F(s,m) of one direction overlapped with B(s',m') of the other
};

inline constexpr int kOpKindCount = 5;

/// One compute op on one pipeline rank. For OverlappedPair, (stage, microbatch) is the forward
/// part and (backward_stage, backward_microbatch) the full-backward part.
struct Op {
  std::int32_t stage = 0;
  std::int32_t microbatch = 0;
  std::int32_t backward_stage = -1;
  std::int32_t backward_microbatch = -1;
  OpKind kind = OpKind::Forward;

  friend bool operator==(const Op &, const Op &) = default;
};

inline Op forwardOp(int stage, int microbatch) {
  return {stage, microbatch, -1, -1, OpKind::Forward};
}
inline Op inputGradOp(int stage, int microbatch) {
  return {stage, microbatch, -1, -1, OpKind::InputGrad};
}
inline Op weightGradOp(int stage, int microbatch) {
  return {stage, microbatch, -1, -1, OpKind::WeightGrad};
}
inline Op fullBackwardOp(int stage, int microbatch) {
  return {stage, microbatch, -1, -1, OpKind::FullBackward};
}
inline Op overlappedOp(int forward_stage, int forward_microbatch, int backward_stage,
                       int backward_microbatch) {
  return {forward_stage, forward_microbatch, backward_stage, backward_microbatch,
          OpKind::OverlappedPair};
}

/// One-letter name used in PyTorch's CSV ("F", "I", "W", "B"); "FB" for the overlapped pair.
std::string_view opKindLetter(OpKind kind);
/// Human-readable name, e.g. "forward", "input-grad".
std::string_view opKindName(OpKind kind);

/// PyTorch action text: "2F0", "1I3", "0W2", "(0F7;7B3)OVERLAP_F_B".
std::string formatOp(const Op &op);
/// Inverse of formatOp. Returns nothing when the text is not an action.
std::optional<Op> parseOp(std::string_view text);

} // namespace pipescope
