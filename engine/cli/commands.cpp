#include "engine/cli/commands.h"

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <sstream>

namespace pipescope::cli {

std::span<const Command> commands() {
  static const Command kCommands[] = {
#define PIPESCOPE_COMMAND(name, function, summary) {name, summary, function},
#include "engine/cli/command_list.inc"
#undef PIPESCOPE_COMMAND
  };
  return kCommands;
}

std::string &currentActivity() {
  static std::string activity = "starting";
  activity.reserve(256);
  return activity;
}

int fail(const std::string &message) {
  const auto newline = message.find('\n');
  std::cerr << "pipescope: " << message.substr(0, newline) << '\n';
  if (newline != std::string::npos) std::cerr << message.substr(newline + 1) << '\n';
  return 2;
}

bool wantsHelp(const std::vector<std::string> &args) {
  return std::find(args.begin(), args.end(), "--help") != args.end() ||
         std::find(args.begin(), args.end(), "-h") != args.end();
}

std::string wrappedLine(const std::string &lead, const std::string &continuation,
                        const std::string &text) {
  std::string out = lead, line_lead = lead;
  std::size_t column = lead.size(), start = 0;
  while (start < text.size()) {
    std::size_t end = text.find(' ', start);
    if (end == std::string::npos) end = text.size();
    const std::string word = text.substr(start, end - start);
    // Columns, not bytes: "µs" and "·" are two bytes of UTF-8 each and one column.
    const auto width = static_cast<std::size_t>(std::count_if(word.begin(), word.end(), [](char c) {
      return (static_cast<unsigned char>(c) & 0xC0) != 0x80;
    }));
    const bool unit = word == "%" || word == "s" || word == "ms" || word == "GiB";
    if (!unit && column > line_lead.size() && column + 1 + width > kTextWidth) {
      out += "\n" + continuation;
      line_lead = continuation;
      column = continuation.size();
    } else if (column > line_lead.size()) {
      out += ' ';
      ++column;
    }
    out += word;
    column += width;
    start = end + 1;
  }
  return out + '\n';
}

std::string percent(double fraction) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.2f %%", fraction * 100);
  return buffer;
}

std::string number(double value) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.6g", value);
  return buffer;
}

std::string fixed(double value, int digits) {
  char buffer[48];
  std::snprintf(buffer, sizeof buffer, "%.*f", digits, value);
  return buffer;
}

TimeUnit timeUnitFor(double makespan_us) {
  if (makespan_us >= 1e6) return {1e-6, "s"};
  if (makespan_us >= 1e3) return {1e-3, "ms"};
  return {1, "us"};
}

std::string signedPercent(double fraction) {
  char buffer[48];
  std::snprintf(buffer, sizeof buffer, "%+.1f %%", fraction * 100);
  return buffer;
}

void printTable(const Table &table, bool markdown) {
  if (table.empty()) return;
  std::vector<std::size_t> widths(table.front().size(), 0);
  for (const auto &row : table)
    for (std::size_t c = 0; c < row.size() && c < widths.size(); ++c)
      widths[c] = std::max(widths[c], row[c].size());
  for (std::size_t r = 0; r < table.size(); ++r) {
    std::string line = markdown ? "|" : "";
    for (std::size_t c = 0; c < widths.size(); ++c) {
      const std::string &cell = c < table[r].size() ? table[r][c] : std::string();
      const std::string padded = cell + std::string(widths[c] - cell.size(), ' ');
      line += markdown ? " " + padded + " |" : (c ? "   " : "") + padded;
    }
    while (!markdown && !line.empty() && line.back() == ' ')
      line.pop_back();
    std::cout << line << '\n';
    if (markdown && r == 0) {
      std::string rule = "|";
      for (std::size_t c = 0; c < widths.size(); ++c)
        rule += (c == 0 ? " :" : " ") + std::string(std::max<std::size_t>(widths[c], 3) - 1, '-') +
                (c == 0 ? " |" : ": |");
      std::cout << rule << '\n';
    }
  }
}

std::vector<std::string> splitList(const std::string &text) {
  std::vector<std::string> items;
  std::stringstream stream(text);
  std::string item;
  while (std::getline(stream, item, ','))
    if (!item.empty()) items.push_back(item);
  return items;
}

} // namespace pipescope::cli
