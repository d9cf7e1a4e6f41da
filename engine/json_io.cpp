#include "engine/json_io.h"

#include <algorithm>
#include <cstdio>
#include <fstream>

namespace pipescope {

using nlohmann::json;

namespace {

// Nesting depth of JSON text, scanned before parsing so that a hostile file cannot drive
// nlohmann/json's recursive parser, copy or dump into a stack overflow.
int nestingDepth(std::string_view text, int limit) {
  int depth = 0, deepest = 0;
  bool in_string = false, escaped = false;
  for (char c : text) {
    if (in_string) {
      if (escaped)
        escaped = false;
      else if (c == '\\')
        escaped = true;
      else if (c == '"')
        in_string = false;
      continue;
    }
    if (c == '"')
      in_string = true;
    else if (c == '[' || c == '{') {
      deepest = std::max(deepest, ++depth);
      if (deepest > limit) return deepest;
    } else if (c == ']' || c == '}')
      --depth;
  }
  return deepest;
}

std::string stripJsonExceptionPrefix(std::string message) {
  // "[json.exception.parse_error.101] parse error at line 1, column 2: ..." -> "line 1, ...".
  const auto at = message.find(" at ");
  if (message.starts_with("[json.exception") && at != std::string::npos)
    return message.substr(at + 4);
  return message;
}

} // namespace

Result<json> parseJsonLimited(std::string_view text) {
  if (text.size() > kMaxJsonBytes)
    return makeError("the JSON is " + std::to_string(text.size()) + " bytes; at most " +
                     std::to_string(kMaxJsonBytes) + " are read");
  if (nestingDepth(text, kMaxJsonDepth) > kMaxJsonDepth)
    return makeError("the JSON nests deeper than " + std::to_string(kMaxJsonDepth) +
                     " levels; pipescope files are a few levels deep, so this is not one");
  try {
    return json::parse(text);
  } catch (const json::exception &e) {
    return makeError("not valid JSON: " + stripJsonExceptionPrefix(e.what()));
  }
}

Result<std::string> readTextFile(const std::string &path) {
  std::ifstream file(path, std::ios::binary);
  if (!file) return makeError("cannot open '" + path + "': no such file or not readable");
  file.seekg(0, std::ios::end);
  const auto size = file.tellg();
  if (size < 0) return makeError("cannot read '" + path + "' (is it a directory?)");
  if (static_cast<std::size_t>(size) > kMaxJsonBytes)
    return makeError("'" + path + "' is " + std::to_string(static_cast<long long>(size)) +
                     " bytes; at most " + std::to_string(kMaxJsonBytes) + " are read");
  file.seekg(0);
  std::string text(static_cast<std::size_t>(size), '\0');
  file.read(text.data(), size);
  if (!file) return makeError("cannot read '" + path + "'");
  return text;
}

Status writeTextFileAtomically(const std::string &path, std::string_view text) {
  const std::string temporary = path + ".tmp";
  {
    std::ofstream file(temporary, std::ios::binary | std::ios::trunc);
    if (!file) return makeError("cannot write '" + path + "': the folder is missing or read-only");
    file.write(text.data(), static_cast<std::streamsize>(text.size()));
    file.flush();
    if (!file) {
      std::remove(temporary.c_str());
      return makeError("cannot write '" + path + "': the disk may be full");
    }
  }
  if (std::rename(temporary.c_str(), path.c_str()) != 0) {
    std::remove(temporary.c_str());
    return makeError("cannot replace '" + path + "'");
  }
  return Ok{};
}

} // namespace pipescope
