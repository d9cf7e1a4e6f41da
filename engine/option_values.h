#pragma once
// Command-line option values and their typed readers, shared by the CLI's argument parser and the
// explorer's command line, so both accept the same text and refuse it with the same messages.
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "engine/result.h"

namespace pipescope {

/// Option values by name (without "--"): the text each was given, "1" for a flag. The typed
/// readers' errors name the option ("--pp must be between 1 and 16384, got 0").
class OptionValues {
public:
  void set(const std::string &name, std::string value) { values_[name] = std::move(value); }
  bool has(const std::string &name) const { return values_.count(name) != 0; }
  std::optional<std::string> text(const std::string &name) const;
  /// The option as an integer in [min, max].
  Result<std::optional<int>> integer(const std::string &name, int min, int max) const;
  Result<std::optional<double>> number(const std::string &name, double min, double max) const;
  /// A comma-separated list of integers, e.g. "4,8,16".
  Result<std::optional<std::vector<int>>> integerList(const std::string &name, int min,
                                                      int max) const;

private:
  std::map<std::string, std::string> values_;
};

} // namespace pipescope
