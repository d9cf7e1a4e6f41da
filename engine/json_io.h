#pragma once
// Reading and writing the project's JSON files safely: size and nesting limits before parsing
// (nlohmann/json recurses when it copies and dumps). Writing is engine/output_file.h.
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "engine/result.h"

namespace pipescope {

/// Deepest JSON nesting any reader accepts; pipescope's files are a few levels deep.
inline constexpr int kMaxJsonDepth = 64;
/// Largest file any reader accepts.
inline constexpr std::size_t kMaxJsonBytes = std::size_t{512} << 20;

/// Parses JSON text with the depth and size limits; the error says where parsing failed.
Result<nlohmann::json> parseJsonLimited(std::string_view text);
/// Reads a whole file (size-limited, gzip inflated); the error names the path.
Result<std::string> readTextFile(const std::string &path);

/// Reads, parses and converts a JSON file; every error is prefixed with the path.
template <typename T>
Result<T> loadJsonFile(const std::string &path, Result<T> (*fromJson)(const nlohmann::json &)) {
  auto text = readTextFile(path);
  if (!text) return text.error();
  auto parsed = parseJsonLimited(*text);
  if (!parsed) return makeError(path + ": " + parsed.error().message);
  auto value = fromJson(*parsed);
  if (!value) return makeError(path + ": " + value.error().message);
  return value;
}

} // namespace pipescope
