#include "engine/op.h"

#include <charconv>

namespace pipescope {

std::string_view opKindLetter(OpKind kind) {
  switch (kind) {
  case OpKind::Forward: return "F";
  case OpKind::InputGrad: return "I";
  case OpKind::WeightGrad: return "W";
  case OpKind::FullBackward: return "B";
  case OpKind::OverlappedPair: return "FB";
  }
  return "?";
}

std::string_view opKindName(OpKind kind) {
  switch (kind) {
  case OpKind::Forward: return "forward";
  case OpKind::InputGrad: return "input-grad";
  case OpKind::WeightGrad: return "weight-grad";
  case OpKind::FullBackward: return "full-backward";
  case OpKind::OverlappedPair: return "overlapped F&B";
  }
  return "?";
}

std::string formatOp(const Op &op) {
  if (op.kind == OpKind::OverlappedPair) {
    return "(" + std::to_string(op.stage) + "F" + std::to_string(op.microbatch) + ";" +
           std::to_string(op.backward_stage) + "B" + std::to_string(op.backward_microbatch) +
           ")OVERLAP_F_B";
  }
  return std::to_string(op.stage) + std::string(opKindLetter(op.kind)) +
         std::to_string(op.microbatch);
}

namespace {

// Parses "<int><letter><int>" exactly, e.g. "12F3".
std::optional<Op> parseSimpleAction(std::string_view text) {
  int stage = 0;
  const char *begin = text.data();
  const char *end = text.data() + text.size();
  auto [after_stage, stage_error] = std::from_chars(begin, end, stage);
  if (stage_error != std::errc() || after_stage == end || stage < 0) return std::nullopt;
  OpKind kind{};
  switch (*after_stage) {
  case 'F': kind = OpKind::Forward; break;
  case 'I': kind = OpKind::InputGrad; break;
  case 'W': kind = OpKind::WeightGrad; break;
  case 'B': kind = OpKind::FullBackward; break;
  default: return std::nullopt;
  }
  int microbatch = 0;
  auto [after_mb, mb_error] = std::from_chars(after_stage + 1, end, microbatch);
  if (mb_error != std::errc() || after_mb != end || microbatch < 0) return std::nullopt;
  return Op{stage, microbatch, -1, -1, kind};
}

std::string_view trim(std::string_view text) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t'))
    text.remove_prefix(1);
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t' || text.back() == '\r'))
    text.remove_suffix(1);
  return text;
}

} // namespace

std::optional<Op> parseOp(std::string_view text) {
  text = trim(text);
  constexpr std::string_view kOverlapSuffix = ")OVERLAP_F_B";
  if (!text.empty() && text.front() == '(') {
    if (text.size() <= kOverlapSuffix.size() + 1 || !text.ends_with(kOverlapSuffix))
      return std::nullopt;
    std::string_view inner = text.substr(1, text.size() - 1 - kOverlapSuffix.size());
    const auto semicolon = inner.find(';');
    if (semicolon == std::string_view::npos) return std::nullopt;
    auto forward = parseSimpleAction(trim(inner.substr(0, semicolon)));
    auto backward = parseSimpleAction(trim(inner.substr(semicolon + 1)));
    if (!forward || !backward || forward->kind != OpKind::Forward ||
        backward->kind != OpKind::FullBackward)
      return std::nullopt;
    return overlappedOp(forward->stage, forward->microbatch, backward->stage, backward->microbatch);
  }
  return parseSimpleAction(text);
}

} // namespace pipescope
