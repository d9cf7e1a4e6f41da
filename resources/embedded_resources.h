#pragma once
// JSON presets and example plans compiled into the binaries (see resources/embed.cmake).
#include <optional>
#include <string_view>
#include <vector>

namespace pipescope {

struct EmbeddedResource {
  std::string_view name; ///< path under resources/, e.g. "presets/models/llama3-8b.json"
  std::string_view text;
};

/// Every embedded file, in path order.
const std::vector<EmbeddedResource> &embeddedResources();

/// The embedded file at that path, if any.
inline std::optional<std::string_view> findEmbeddedResource(std::string_view name) {
  for (const auto &resource : embeddedResources())
    if (resource.name == name) return resource.text;
  return std::nullopt;
}

} // namespace pipescope
