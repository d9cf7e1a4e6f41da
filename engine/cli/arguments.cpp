#include "engine/cli/arguments.h"

#include <charconv>
#include <cmath>
#include <sstream>

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
      parsed.values_[name] = "1";
    } else if (valued.count(name)) {
      if (!value) {
        if (i + 1 >= args.size()) return makeError("option --" + name + " needs a value");
        value = args[++i];
      }
      parsed.values_[name] = *value;
    } else {
      return makeError("unknown option --" + name + " for '" + command + "'; see 'pipescope " +
                       command + " --help'");
    }
  }
  return parsed;
}

std::optional<std::string> Arguments::text(const std::string &name) const {
  const auto it = values_.find(name);
  if (it == values_.end()) return std::nullopt;
  return it->second;
}

namespace {

Result<double> parseNumber(const std::string &name, const std::string &text, double min,
                           double max) {
  double value = 0;
  const auto *end = text.data() + text.size();
  auto [ptr, error] = std::from_chars(text.data(), end, value);
  if (error != std::errc() || ptr != end || !std::isfinite(value))
    return makeError("--" + name + " expects a number, got '" + text + "'");
  if (value < min || value > max)
    return makeError("--" + name + " must be between " + std::to_string(min) + " and " +
                     std::to_string(max) + ", got " + text);
  return value;
}

Result<int> parseInteger(const std::string &name, const std::string &text, int min, int max) {
  long long value = 0;
  const auto *end = text.data() + text.size();
  auto [ptr, error] = std::from_chars(text.data(), end, value);
  if (error != std::errc() || ptr != end)
    return makeError("--" + name + " expects an integer, got '" + text + "'");
  if (value < min || value > max)
    return makeError("--" + name + " must be between " + std::to_string(min) + " and " +
                     std::to_string(max) + ", got " + text);
  return static_cast<int>(value);
}

} // namespace

Result<std::optional<int>> Arguments::integer(const std::string &name, int min, int max) const {
  const auto value = text(name);
  if (!value) return std::optional<int>{};
  auto parsed = parseInteger(name, *value, min, max);
  if (!parsed) return parsed.error();
  return std::optional<int>{*parsed};
}

Result<std::optional<double>> Arguments::number(const std::string &name, double min,
                                                double max) const {
  const auto value = text(name);
  if (!value) return std::optional<double>{};
  auto parsed = parseNumber(name, *value, min, max);
  if (!parsed) return parsed.error();
  return std::optional<double>{*parsed};
}

Result<std::optional<std::vector<int>>> Arguments::integerList(const std::string &name, int min,
                                                               int max) const {
  const auto value = text(name);
  if (!value) return std::optional<std::vector<int>>{};
  std::vector<int> list;
  std::string rest = *value;
  while (true) {
    const auto comma = rest.find(',');
    auto parsed = parseInteger(name, rest.substr(0, comma), min, max);
    if (!parsed) return parsed.error();
    list.push_back(*parsed);
    if (comma == std::string::npos) break;
    rest = rest.substr(comma + 1);
    if (list.size() > 10000) return makeError("--" + name + " lists too many values");
  }
  return std::optional<std::vector<int>>{std::move(list)};
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
