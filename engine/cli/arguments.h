#pragma once
// A small command-line parser: "--name value", "--name=value" and boolean "--flag" options. The
// typed readers (integer, number, integerList) are the engine's OptionValues, shared with the
// explorer's command line.
#include <set>
#include <string>
#include <vector>

#include "engine/option_values.h"
#include "engine/result.h"

namespace pipescope::cli {

class Arguments : public OptionValues {
public:
  /// `valued` options take a value, `flags` do not; anything else is refused.
  static Result<Arguments> parse(const std::vector<std::string> &args,
                                 const std::set<std::string> &valued,
                                 const std::set<std::string> &flags, const std::string &command);

  const std::vector<std::string> &positional() const { return positional_; }

private:
  std::vector<std::string> positional_;
};

} // namespace pipescope::cli
