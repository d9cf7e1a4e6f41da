#include "engine/json_io.h"

#include <algorithm>
#include <cstdio>
#include <fstream>

#include <zlib.h>

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

// A gzipped file (pipescope writes one for any output name ending in .gz), inflated with the same
// size limit as plain text.
Result<std::string> gunzip(const std::string &path, const std::string &compressed) {
  z_stream zip{};
  if (inflateInit2(&zip, 15 + 32) != Z_OK) // 15 + 32: gzip or zlib header, detected
    return makeError("cannot read '" + path + "': zlib could not start");
  zip.next_in = reinterpret_cast<Bytef *>(const_cast<char *>(compressed.data()));
  zip.avail_in = static_cast<uInt>(compressed.size());
  std::string text;
  std::size_t used = 0;
  int status = Z_OK;
  while (status != Z_STREAM_END) {
    if (text.size() - used < (std::size_t{1} << 20)) {
      if (text.size() >= kMaxJsonBytes) {
        inflateEnd(&zip);
        return makeError("'" + path + "' inflates to more than " + std::to_string(kMaxJsonBytes) +
                         " bytes; at most that many are read");
      }
      text.resize(std::min(kMaxJsonBytes + 1, std::max(text.size() * 2, std::size_t{1} << 22)));
    }
    zip.next_out = reinterpret_cast<Bytef *>(text.data() + used);
    zip.avail_out = static_cast<uInt>(text.size() - used);
    status = inflate(&zip, Z_NO_FLUSH);
    used = text.size() - zip.avail_out;
    if (status == Z_STREAM_END) break;
    if (status != Z_OK) {
      inflateEnd(&zip);
      return makeError("cannot read '" + path + "': the gzip data is " +
                       (status == Z_BUF_ERROR ? "cut short" : "damaged"));
    }
  }
  inflateEnd(&zip);
  if (used > kMaxJsonBytes)
    return makeError("'" + path + "' inflates to more than " + std::to_string(kMaxJsonBytes) +
                     " bytes; at most that many are read");
  text.resize(used);
  return text;
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
  if (text.starts_with("\x1f\x8b")) return gunzip(path, text);
  return text;
}

} // namespace pipescope
