#include "engine/pytorch_csv.h"

#include <array>
#include <charconv>
#include <utility>

#include "engine/json_io.h"

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

std::optional<PytorchAction> parsePytorchAction(std::string_view text) {
  if (auto op = parseOp(text)) return PytorchAction{PytorchActionType::Compute, *op, 0, -1};
  // "<stage><TYPE>[<microbatch>]"; longer names first where one is the other's prefix, as in
  // PyTorch's _action_regex.
  static constexpr std::array<std::pair<std::string_view, PytorchActionType>, 10> kTypes = {{
      {"WAIT_REDUCE_GRAD", PytorchActionType::WaitReduceGradient},
      {"WAIT_SEND_F", PytorchActionType::WaitSendForward},
      {"WAIT_SEND_B", PytorchActionType::WaitSendBackward},
      {"REDUCE_GRAD", PytorchActionType::ReduceGradient},
      {"UNSHARD", PytorchActionType::Unshard},
      {"RESHARD", PytorchActionType::Reshard},
      {"SEND_F", PytorchActionType::SendForward},
      {"RECV_F", PytorchActionType::ReceiveForward},
      {"SEND_B", PytorchActionType::SendBackward},
      {"RECV_B", PytorchActionType::ReceiveBackward},
  }};
  const char *begin = text.data(), *end = text.data() + text.size();
  int stage = 0;
  auto [after_stage, stage_error] = std::from_chars(begin, end, stage);
  if (stage_error != std::errc() || after_stage == begin || stage < 0) return std::nullopt;
  const std::string_view rest(after_stage, static_cast<std::size_t>(end - after_stage));
  for (const auto &[name, type] : kTypes) {
    if (!rest.starts_with(name)) continue;
    const std::string_view number = rest.substr(name.size());
    PytorchAction action{type, {}, stage, -1};
    if (!number.empty()) {
      auto [after, error] =
          std::from_chars(number.data(), number.data() + number.size(), action.microbatch);
      if (error != std::errc() || after != number.data() + number.size() || action.microbatch < 0)
        return std::nullopt;
    }
    return action;
  }
  return std::nullopt;
}

namespace {

// PyTorch actions that lowering re-derives, e.g. "1SEND_F0", "0RECV_B3", "2UNSHARD", and the
// waits PyTorch 2.15 writes after them ("0WAIT_SEND_F0", "0WAIT_REDUCE_GRAD": ScheduleGPipe's
// pipeline_order ends every rank with REDUCE_GRAD, WAIT_REDUCE_GRAD).
bool isCommunicationAction(std::string_view cell) {
  const auto action = parsePytorchAction(cell);
  return action && action->type != PytorchActionType::Compute;
}

std::string_view trimCell(std::string_view cell) {
  while (!cell.empty() && (cell.front() == ' ' || cell.front() == '\t' || cell.front() == '"'))
    cell.remove_prefix(1);
  while (!cell.empty() && (cell.back() == ' ' || cell.back() == '\t' || cell.back() == '"'))
    cell.remove_suffix(1);
  return cell;
}

// The next line of `text`, which ends at "\n", "\r\n" or a lone "\r" (all three are written by
// spreadsheets and editors); `text` moves past it and its ending.
std::string_view nextLine(std::string_view &text) {
  const auto end = text.find_first_of("\r\n");
  const std::string_view line = text.substr(0, end);
  if (end == std::string_view::npos) {
    text = {};
  } else {
    const bool crlf = text[end] == '\r' && end + 1 < text.size() && text[end + 1] == '\n';
    text.remove_prefix(end + (crlf ? 2 : 1));
  }
  return line;
}

bool isBlank(std::string_view line) {
  return line.find_first_not_of(" \t") == std::string_view::npos;
}

} // namespace

Result<std::vector<std::vector<Op>>> parsePytorchCsv(std::string_view text) {
  // Excel and other spreadsheets start UTF-8 CSV files with a byte-order mark.
  if (text.starts_with("\xEF\xBB\xBF")) text.remove_prefix(3);
  std::vector<std::vector<Op>> ranks;
  std::size_t line_number = 0;
  while (!text.empty()) {
    std::string_view line = nextLine(text);
    ++line_number;
    // Blank lines (between rows or after the last) hold no rank.
    if (isBlank(line)) continue;
    if (static_cast<int>(ranks.size()) >= kMaxPipelineRanks)
      return makeError("CSV has more than " + std::to_string(kMaxPipelineRanks) + " rows (ranks)");
    const std::string row =
        "CSV row " + std::to_string(line_number) + " (rank " + std::to_string(ranks.size()) + ")";
    auto &ops = ranks.emplace_back();
    std::size_t column = 0;
    while (true) {
      const auto comma = line.find(',');
      const std::string_view cell = trimCell(line.substr(0, comma));
      ++column;
      if (!cell.empty() && !isCommunicationAction(cell)) {
        auto op = parseOp(cell);
        if (!op)
          return makeError(row + ", column " + std::to_string(column) + ": '" +
                           escapeControlCharacters(cell) +
                           "' is not an action; expected e.g. 2F0, 1I3, 0W2, 3B1 or "
                           "(0F7;7B3)OVERLAP_F_B");
        if (op->stage >= kMaxPipelineRanks * kMaxChunks || op->microbatch >= kMaxMicrobatches ||
            op->backward_stage >= kMaxPipelineRanks * kMaxChunks ||
            op->backward_microbatch >= kMaxMicrobatches)
          return makeError(row + ", column " + std::to_string(column) + ": '" +
                           escapeControlCharacters(cell) +
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
