#pragma once
// The subcommands of `pipescope`. Each returns the process exit code: 0 on success, 2 on bad
// usage or bad input (after printing one line naming the problem on stderr).
#include <string>
#include <vector>

namespace pipescope::cli {

int runSimulate(const std::vector<std::string> &args);
int runTable(const std::vector<std::string> &args);
int runValidate(const std::vector<std::string> &args);
int runBench(const std::vector<std::string> &args);
int runPresets(const std::vector<std::string> &args);
int runSchedules(const std::vector<std::string> &args);
int runCompare(const std::vector<std::string> &args);
int runSearch(const std::vector<std::string> &args);      // search_command.cpp
int runSearchBench(const std::vector<std::string> &args); // bench --search

/// What the command is doing now ("simulating the schedule", "writing out.json"), for the
/// out-of-memory message in main.
std::string &currentActivity();

/// Prints "pipescope: <first line>" on stderr and the remaining lines (details such as the
/// rank × step grid) after it; returns 2.
int fail(const std::string &message);

} // namespace pipescope::cli
