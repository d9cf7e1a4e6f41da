#pragma once
// Reading and writing the project's JSON files safely: size and nesting limits before parsing
// (nlohmann/json recurses when it copies and dumps). Writing is engine/output_file.h.
#include <memory>
#include <streambuf>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/result.h"

namespace pipescope {

/// Deepest JSON nesting any reader accepts; pipescope's files are a few levels deep.
inline constexpr int kMaxJsonDepth = 64;
/// Largest file any reader accepts.
inline constexpr std::size_t kMaxJsonBytes = std::size_t{512} << 20;
/// Most JSON values (objects, arrays, strings, numbers, booleans, nulls) any reader builds.
/// Measured (nlohmann/json 3.11, x86-64, glibc): a built document costs about 95 bytes per value
/// for trace op records (21.3 M values, 262 MB of text: +2.0 GB) and 76 for the cheapest text per
/// value, "[{},{},...]" (26.2 M values, 79 MB: +2.0 GB). So this cap keeps any accepted document
/// near 2.4 GB; at 512 MiB, only files of long strings reach kMaxJsonBytes. A trace of 2.4 M op
/// records (about 290 MB) fits. The streaming pass that enforces it reads 100 MB/s and little
/// memory, so a file past it is refused in seconds.
inline constexpr std::size_t kMaxJsonValues = std::size_t{24} << 20;
/// How long a pipe or FIFO may stay silent before reading it is given up, in milliseconds.
inline constexpr int kPipeSilenceMs = 5000;

/// What parseJsonLimited accepts; tests lower them.
struct JsonLimits {
  std::size_t max_bytes = kMaxJsonBytes;
  int max_depth = kMaxJsonDepth;
  std::size_t max_values = kMaxJsonValues;
};

/// What readTextFile accepts; tests lower them.
struct ReadLimits {
  std::size_t max_bytes = kMaxJsonBytes;
  int pipe_silence_ms = kPipeSilenceMs;
};

/// The text with control characters escaped ("\r", "\n", "\t", others "\xNN"), for quoting
/// file content or a path in a message.
std::string escapeControlCharacters(std::string_view text);

/// "not valid JSON: line 1, column 2: ..." from a nlohmann/json parse error's what().
std::string describeJsonParseError(std::string message);

/// Parses JSON text with the size, depth and value-count limits, checked by a streaming pass
/// before any document is built; the error says where parsing failed.
Result<nlohmann::json> parseJsonLimited(std::string_view text, const JsonLimits &limits = {});
/// Reads a whole file, opened once: a regular file (size-limited), or a pipe or FIFO (streamed,
/// size-limited, given up after `pipe_silence_ms` without data). Directories and devices are
/// refused; gzip (by its magic bytes) is
/// inflated within the same size limit. The error names the path.
Result<std::string> readTextFile(const std::string &path, const ReadLimits &limits = {});
/// A file opened as readTextFile opens it (a regular file, a pipe or a FIFO; nothing else) and
/// read piece by piece as a std::streambuf, for parsers that stream (a std::istream over it).
/// gzip (by its magic bytes) is inflated as it streams. Reading past `max_bytes` (of text, after
/// inflating), a failed read, damaged gzip, or a pipe silent for `pipe_silence_ms` ends the
/// stream early with error() set, naming the path.
class InputFile : public std::streambuf {
public:
  static Result<std::unique_ptr<InputFile>> open(const std::string &path,
                                                 const ReadLimits &limits = {});
  InputFile(const InputFile &) = delete;
  InputFile &operator=(const InputFile &) = delete;
  ~InputFile() override;
  /// Why reading stopped before the end; empty when it did not.
  const std::string &error() const { return error_; }
  std::size_t bytesRead() const { return bytes_; }
  /// Bytes taken from the file itself (before inflating), for progress against its size.
  std::size_t sourceBytesRead() const { return source_bytes_; }
  /// Whether the file is gzip, inflated as it is read.
  bool compressed() const { return gzip_ != nullptr; }

protected:
  int_type underflow() override;

private:
  InputFile(int fd, bool pipe, std::string path, const ReadLimits &limits);
  int_type stop(std::string error);
  /// Reads raw bytes into raw_; 0 at the end, -1 after stop().
  long readRaw();

  int fd_;
  bool pipe_;
  std::string path_;
  ReadLimits limits_;
  std::vector<char> buffer_;   ///< what the stream hands out (inflated when gzip)
  std::vector<char> raw_;      ///< compressed input when gzip
  std::shared_ptr<void> gzip_; ///< the zlib stream once gzip was detected
  std::size_t bytes_ = 0;
  std::size_t source_bytes_ = 0;
  bool done_ = false;
  std::string error_;
};

/// Reads, parses and converts a JSON file; every error is prefixed with the path.
template <typename T>
Result<T> loadJsonFile(const std::string &path, Result<T> (*fromJson)(const nlohmann::json &)) {
  auto text = readTextFile(path);
  if (!text) return text.error();
  auto parsed = parseJsonLimited(*text);
  if (!parsed) return makeError(escapeControlCharacters(path) + ": " + parsed.error().message);
  auto value = fromJson(*parsed);
  if (!value) return makeError(escapeControlCharacters(path) + ": " + value.error().message);
  return value;
}

} // namespace pipescope
