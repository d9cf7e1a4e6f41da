#include "engine/cli/arguments.h"

namespace pipescope::cli {

Result<Arguments> Arguments::parse(const std::vector<std::string> &args,
                                   const std::set<std::string> &valued,
                                   const std::set<std::string> &flags, const std::string &command) {
  Arguments parsed;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string &arg = args[i];
    if (!arg.starts_with("--")) {
      parsed.positional_.push_back(arg);
      continue;
    }
    std::string name = arg.substr(2);
    std::optional<std::string> value;
    if (const auto eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
    }
    if (flags.count(name)) {
      if (value) return makeError("option --" + name + " takes no value");
      parsed.set(name, "1");
    } else if (valued.count(name)) {
      if (!value) {
        if (i + 1 >= args.size()) return makeError("option --" + name + " needs a value");
        value = args[++i];
      }
      parsed.set(name, *value);
    } else {
      return makeError("unknown option --" + name + " for '" + command + "'; see 'pipescope " +
                       command + " --help'");
    }
  }
  return parsed;
}

} // namespace pipescope::cli
