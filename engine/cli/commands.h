#pragma once
// The subcommands of `pipescope`, one file each (<name>_command.cpp), listed once in
// command_list.inc. Each returns the process exit code: 0 on success, 2 on bad usage or bad input
// (after printing one line naming the problem on stderr).
#include <cstddef>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace pipescope::cli {

using CommandFunction = int (*)(const std::vector<std::string> &args);

// The command functions, each defined in its command's file.
#define PIPESCOPE_COMMAND(name, function, summary)                                                 \
  int function(const std::vector<std::string> &args);
#include "engine/cli/command_list.inc"
#undef PIPESCOPE_COMMAND
int runSearchBench(const std::vector<std::string> &args); ///< `bench --search`, search_command.cpp

struct Command {
  std::string_view name;
  std::string_view summary; ///< the line in `pipescope --help`
  CommandFunction run;
};

/// Every command, in the order `pipescope --help` lists them.
std::span<const Command> commands();

/// What the command is doing now ("simulating the schedule", "writing out.json"), for the
/// out-of-memory message in main.
std::string &currentActivity();

/// Prints "pipescope: <first line>" on stderr and the remaining lines (details such as the
/// rank × step grid) after it; returns 2.
int fail(const std::string &message);

/// Whether the arguments ask for the command's help (--help or -h anywhere).
bool wantsHelp(const std::vector<std::string> &args);
/// Text output's width: prose wraps at 100 columns (a terminal beside an editor).
inline constexpr std::size_t kTextWidth = 100;
/// `text` after `lead` (a label, or nothing), broken at spaces so that no line passes kTextWidth
/// where a word allows; each further line starts with `continuation`. A unit ("%", "s", "ms",
/// "GiB") stays with its number. Columns are counted in characters, not UTF-8 bytes. Ends in a
/// newline.
std::string wrappedLine(const std::string &lead, const std::string &continuation,
                        const std::string &text);
/// "12.34 %".
std::string percent(double fraction);
/// Six significant digits.
std::string number(double value);
/// `value` with `digits` decimals ("%.*f").
std::string fixed(double value, int digits);
/// The unit that keeps a step's times short: microseconds, milliseconds or seconds.
struct TimeUnit {
  double per_us;    ///< multiply microseconds by this
  const char *name; ///< "us", "ms" or "s"
};
TimeUnit timeUnitFor(double makespan_us);
/// "+1.2 %": a signed error.
std::string signedPercent(double fraction);
/// Rows of cells, the first row the headers.
using Table = std::vector<std::vector<std::string>>;
/// Columns padded to their widest cell, or a Markdown table (the first column left-aligned, the
/// others right-aligned).
void printTable(const Table &table, bool markdown);
/// "a,b,,c" -> {"a", "b", "c"}.
std::vector<std::string> splitList(const std::string &text);

} // namespace pipescope::cli
