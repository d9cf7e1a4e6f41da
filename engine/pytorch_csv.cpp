#include "engine/pytorch_csv.h"

#include <array>

namespace pipescope {

std::string scheduleToPytorchCsv(const Schedule &schedule) {
  std::string text;
  for (const auto &ops : schedule.ranks) {
    for (std::size_t i = 0; i < ops.size(); ++i) {
      if (i > 0) text += ',';
      // The overlapped pair contains ';' and parentheses but no comma: no CSV quoting needed.
      text += formatOp(ops[i]);
    }
    text += '\n';
  }
  return text;
}

namespace {

// PyTorch actions that lowering re-derives, e.g. "1SEND_F0", "0RECV_B3", "2UNSHARD".
bool isCommunicationAction(std::string_view cell) {
  static constexpr std::array<std::string_view, 7> kinds = {
      "SEND_F", "RECV_F", "SEND_B", "RECV_B", "UNSHARD", "RESHARD", "REDUCE_GRAD"};
  std::size_t i = 0;
  while (i < cell.size() && cell[i] >= '0' && cell[i] <= '9')
    ++i;
  if (i == 0) return false;
  const std::string_view rest = cell.substr(i);
  for (auto kind : kinds)
    if (rest.starts_with(kind)) return true;
  return false;
}

std::string_view trimCell(std::string_view cell) {
  while (!cell.empty() && (cell.front() == ' ' || cell.front() == '"'))
    cell.remove_prefix(1);
  while (!cell.empty() && (cell.back() == ' ' || cell.back() == '"' || cell.back() == '\r'))
    cell.remove_suffix(1);
  return cell;
}

} // namespace

Result<std::vector<std::vector<Op>>> parsePytorchCsv(std::string_view text) {
  std::vector<std::vector<Op>> ranks;
  std::size_t row = 0;
  while (!text.empty()) {
    const auto newline = text.find('\n');
    std::string_view line = text.substr(0, newline);
    text = newline == std::string_view::npos ? std::string_view{} : text.substr(newline + 1);
    ++row;
    if (trimCell(line).empty() && text.empty()) break; // trailing newline
    if (static_cast<int>(ranks.size()) >= kMaxPipelineRanks)
      return makeError("CSV has more than " + std::to_string(kMaxPipelineRanks) + " rows (ranks)");
    auto &ops = ranks.emplace_back();
    std::size_t column = 0;
    while (true) {
      const auto comma = line.find(',');
      const std::string_view cell = trimCell(line.substr(0, comma));
      ++column;
      if (!cell.empty() && !isCommunicationAction(cell)) {
        auto op = parseOp(cell);
        if (!op)
          return makeError("CSV row " + std::to_string(row) + " (rank " + std::to_string(row - 1) +
                           "), column " + std::to_string(column) + ": '" + std::string(cell) +
                           "' is not an action; expected e.g. 2F0, 1I3, 0W2, 3B1 or "
                           "(0F7;7B3)OVERLAP_F_B");
        if (op->stage >= kMaxPipelineRanks * kMaxChunks || op->microbatch >= kMaxMicrobatches ||
            op->backward_stage >= kMaxPipelineRanks * kMaxChunks ||
            op->backward_microbatch >= kMaxMicrobatches)
          return makeError("CSV row " + std::to_string(row) + ", column " + std::to_string(column) +
                           ": '" + std::string(cell) +
                           "' has a stage or microbatch beyond pipescope's limits");
        ops.push_back(*op);
      }
      if (comma == std::string_view::npos) break;
      line = line.substr(comma + 1);
    }
  }
  if (ranks.empty()) return makeError("the CSV has no rows; write one row of actions per rank");
  return ranks;
}

} // namespace pipescope
