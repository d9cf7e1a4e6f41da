#pragma once
// A small command-line parser: "--name value", "--name=value" and boolean "--flag" options.
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "engine/result.h"

namespace pipescope::cli {

/// The non-empty items of a comma-separated list ("gpipe,1f1b").
std::vector<std::string> splitList(const std::string &text);

class Arguments {
public:
  /// `valued` options take a value, `flags` do not; anything else is refused.
  static Result<Arguments> parse(const std::vector<std::string> &args,
                                 const std::set<std::string> &valued,
                                 const std::set<std::string> &flags, const std::string &command);

  bool has(const std::string &name) const { return values_.count(name) != 0; }
  std::optional<std::string> text(const std::string &name) const;
  /// The option as an integer in [min, max]; the error names the option.
  Result<std::optional<int>> integer(const std::string &name, int min, int max) const;
  Result<std::optional<double>> number(const std::string &name, double min, double max) const;
  /// A comma-separated list of integers, e.g. "4,8,16".
  Result<std::optional<std::vector<int>>> integerList(const std::string &name, int min,
                                                      int max) const;
  const std::vector<std::string> &positional() const { return positional_; }

private:
  std::map<std::string, std::string> values_;
  std::vector<std::string> positional_;
};

} // namespace pipescope::cli
