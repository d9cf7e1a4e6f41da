#include "engine/json_io.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>

#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

namespace pipescope {

using nlohmann::json;

namespace {

// A streaming pass over JSON text that builds nothing: it counts nesting depth and values and
// stops at the first limit passed, so a hostile or huge file is refused before nlohmann/json
// builds a document (whose copy and dump recurse, and which costs far more memory than its text).
class LimitCheck : public nlohmann::json_sax<json> {
public:
  explicit LimitCheck(const JsonLimits &limits) : limits_(limits) {}

  bool null() override { return value(); }
  bool boolean(bool) override { return value(); }
  bool number_integer(number_integer_t) override { return value(); }
  bool number_unsigned(number_unsigned_t) override { return value(); }
  bool number_float(number_float_t, const string_t &) override { return value(); }
  bool string(string_t &) override { return value(); }
  bool binary(binary_t &) override { return value(); }
  bool start_object(std::size_t) override { return open(); }
  bool key(string_t &) override { return true; }
  bool end_object() override { return close(); }
  bool start_array(std::size_t) override { return open(); }
  bool end_array() override { return close(); }
  bool parse_error(std::size_t, const std::string &,
                   const nlohmann::detail::exception &e) override {
    error_ = describeJsonParseError(e.what());
    return false;
  }

  const std::string &error() const { return error_; }

private:
  bool value() {
    if (++values_ <= limits_.max_values) return true;
    error_ = "the JSON holds more than " + std::to_string(limits_.max_values) +
             " values; pipescope reads at most that many (its largest plans and traces hold far "
             "fewer)";
    return false;
  }
  bool open() {
    if (++depth_ > limits_.max_depth) {
      error_ = "the JSON nests deeper than " + std::to_string(limits_.max_depth) +
               " levels; pipescope files are a few levels deep, so this is not one";
      return false;
    }
    return value();
  }
  bool close() {
    --depth_;
    return true;
  }

  const JsonLimits &limits_;
  std::size_t values_ = 0;
  int depth_ = 0;
  std::string error_;
};

std::string sizeError(const std::string &path, std::size_t size, std::size_t limit) {
  return "'" + escapeControlCharacters(path) + "' is " + (size > limit ? "over " : "") +
         std::to_string(std::min(size, limit)) + " bytes; at most " + std::to_string(limit) +
         " are read";
}

// Reads a pipe or FIFO (opened non-blocking) to its end, waiting at most `silence_ms` for each
// piece, so a FIFO nobody writes to is refused instead of blocking forever.
Result<std::string> readPipe(int fd, const std::string &path, const ReadLimits &limits) {
  std::string text;
  char buffer[1 << 16];
  while (true) {
    pollfd waiting{fd, POLLIN, 0};
    const int ready = ::poll(&waiting, 1, limits.pipe_silence_ms);
    if (ready < 0 && errno == EINTR) continue;
    if (ready < 0) return makeError("cannot read '" + escapeControlCharacters(path) + "'");
    if (ready == 0)
      return makeError("'" + escapeControlCharacters(path) + "' is a pipe or FIFO and nothing " +
                       (text.empty() ? "was written to it" : "more arrived") + " for " +
                       (limits.pipe_silence_ms % 1000 == 0
                            ? std::to_string(limits.pipe_silence_ms / 1000) + " s"
                            : std::to_string(limits.pipe_silence_ms) + " ms") +
                       "; start the program that writes it, or give a file");
    const ssize_t got = ::read(fd, buffer, sizeof buffer);
    if (got < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (got < 0) return makeError("cannot read '" + escapeControlCharacters(path) + "'");
    if (got == 0) return text;
    if (text.size() + static_cast<std::size_t>(got) > limits.max_bytes)
      return makeError(
          sizeError(path, text.size() + static_cast<std::size_t>(got), limits.max_bytes));
    text.append(buffer, static_cast<std::size_t>(got));
  }
}

Result<std::string> readRegularFile(int fd, const std::string &path, std::size_t size,
                                    const ReadLimits &limits) {
  if (size > limits.max_bytes) return makeError(sizeError(path, size, limits.max_bytes));
  // The size fstat gave, in place; then pieces from a small buffer until the end (a file that
  // grows while read, or one that reports size 0 as /proc files do), so the text is never copied
  // into a doubled buffer.
  std::string text(size, '\0');
  std::size_t done = 0;
  while (done < size) {
    const ssize_t got = ::read(fd, text.data() + done, size - done);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) return makeError("cannot read '" + escapeControlCharacters(path) + "'");
    if (got == 0) break;
    done += static_cast<std::size_t>(got);
  }
  text.resize(done);
  char buffer[1 << 16];
  while (true) {
    const ssize_t got = ::read(fd, buffer, sizeof buffer);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) return makeError("cannot read '" + escapeControlCharacters(path) + "'");
    if (got == 0) return text;
    if (text.size() + static_cast<std::size_t>(got) > limits.max_bytes)
      return makeError(
          sizeError(path, text.size() + static_cast<std::size_t>(got), limits.max_bytes));
    text.append(buffer, static_cast<std::size_t>(got));
  }
}

class FileDescriptor {
public:
  explicit FileDescriptor(int fd) : fd_(fd) {}
  FileDescriptor(const FileDescriptor &) = delete;
  FileDescriptor &operator=(const FileDescriptor &) = delete;
  ~FileDescriptor() {
    if (fd_ >= 0) ::close(fd_);
  }
  int get() const { return fd_; }
  int release() {
    const int fd = fd_;
    fd_ = -1;
    return fd;
  }

private:
  int fd_;
};

// A gzipped file (pipescope writes one for any output name ending in .gz), inflated with the same
// size limit as plain text.
Result<std::string> gunzip(const std::string &path, const std::string &compressed,
                           std::size_t max_bytes) {
  z_stream zip{};
  if (inflateInit2(&zip, 15 + 32) != Z_OK) // 15 + 32: gzip or zlib header, detected
    return makeError("cannot read '" + escapeControlCharacters(path) + "': zlib could not start");
  zip.next_in = reinterpret_cast<Bytef *>(const_cast<char *>(compressed.data()));
  zip.avail_in = static_cast<uInt>(compressed.size());
  const std::string too_big = "'" + escapeControlCharacters(path) + "' inflates to more than " +
                              std::to_string(max_bytes) + " bytes; at most that many are read";
  std::string text;
  std::size_t used = 0;
  int status = Z_OK;
  while (status != Z_STREAM_END) {
    if (text.size() - used < (std::size_t{1} << 20)) {
      if (text.size() > max_bytes) {
        inflateEnd(&zip);
        return makeError(too_big);
      }
      text.resize(std::min(max_bytes + 1, std::max(text.size() * 2, std::size_t{1} << 22)));
    }
    zip.next_out = reinterpret_cast<Bytef *>(text.data() + used);
    zip.avail_out = static_cast<uInt>(text.size() - used);
    status = inflate(&zip, Z_NO_FLUSH);
    used = text.size() - zip.avail_out;
    if (status == Z_STREAM_END) break;
    if (status != Z_OK) {
      inflateEnd(&zip);
      return makeError("cannot read '" + escapeControlCharacters(path) + "': the gzip data is " +
                       (status == Z_BUF_ERROR ? "cut short" : "damaged"));
    }
  }
  inflateEnd(&zip);
  if (used > max_bytes) return makeError(too_big);
  text.resize(used);
  return text;
}

// The file's text, inflated when it is gzip (by its magic bytes, whatever its name).
Result<std::string> inflatedIfGzip(Result<std::string> text, const std::string &path,
                                   std::size_t max_bytes) {
  if (text && text->starts_with("\x1f\x8b")) return gunzip(path, *text, max_bytes);
  return text;
}

} // namespace

std::string describeJsonParseError(std::string message) {
  // "[json.exception.parse_error.101] parse error at line 1, column 2: ..." -> "line 1, ...".
  const auto at = message.find(" at ");
  if (message.starts_with("[json.exception") && at != std::string::npos)
    message = message.substr(at + 4);
  return "not valid JSON: " + message;
}

std::string escapeControlCharacters(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte >= 0x20 && byte != 0x7f) {
      out += c;
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else {
      static constexpr char kHex[] = "0123456789abcdef";
      out += "\\x";
      out += kHex[byte >> 4];
      out += kHex[byte & 15];
    }
  }
  return out;
}

Result<json> parseJsonLimited(std::string_view text, const JsonLimits &limits) {
  if (text.size() > limits.max_bytes)
    return makeError("the JSON is " + std::to_string(text.size()) + " bytes; at most " +
                     std::to_string(limits.max_bytes) + " are read");
  LimitCheck check(limits);
  if (!json::sax_parse(text, &check)) return makeError(escapeControlCharacters(check.error()));
  try {
    return json::parse(text);
  } catch (const json::exception &e) {
    return makeError("not valid JSON: " + escapeControlCharacters(e.what()));
  }
}

namespace {

// What readTextFile and InputFile accept: a file opened once and asked what it is through the
// descriptor, so nothing can swap the file between the check and the read. O_NONBLOCK keeps
// opening a FIFO with no writer from blocking; a regular file is switched back to blocking.
struct OpenedFile {
  int fd = -1;
  bool pipe = false;
  std::size_t size = 0; ///< fstat's size of a regular file
};

Result<OpenedFile> openForReading(const std::string &path) {
  const std::string shown = "'" + escapeControlCharacters(path) + "'";
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) {
    const int error = errno;
    if (error == ENOENT || error == ENOTDIR)
      return makeError("cannot open " + shown + ": no such file");
    if (error == EACCES || error == EPERM)
      return makeError("cannot open " + shown + ": permission denied");
    return makeError("cannot open " + shown + ": " + std::strerror(error));
  }
  FileDescriptor file(fd);
  struct stat status {};
  if (::fstat(file.get(), &status) != 0)
    return makeError("cannot read " + shown + ": " + std::strerror(errno));
  if (S_ISDIR(status.st_mode)) return makeError(shown + " is a directory; give a file in it");
  OpenedFile opened;
  if (S_ISFIFO(status.st_mode) || S_ISSOCK(status.st_mode)) {
    opened.pipe = true;
  } else if (!S_ISREG(status.st_mode)) {
    return makeError(shown + " is " +
                     (S_ISCHR(status.st_mode)   ? "a character device"
                      : S_ISBLK(status.st_mode) ? "a block device"
                                                : "something else") +
                     ", not a regular file; give a file");
  } else {
    ::fcntl(file.get(), F_SETFL, ::fcntl(file.get(), F_GETFL) & ~O_NONBLOCK);
    opened.size = static_cast<std::size_t>(std::max<off_t>(0, status.st_size));
  }
  opened.fd = file.release();
  return opened;
}

} // namespace

Result<std::string> readTextFile(const std::string &path, const ReadLimits &limits) {
  auto opened = openForReading(path);
  if (!opened) return opened.error();
  const FileDescriptor file(opened->fd);
  if (opened->pipe)
    return inflatedIfGzip(readPipe(file.get(), path, limits), path, limits.max_bytes);
  return inflatedIfGzip(readRegularFile(file.get(), path, opened->size, limits), path,
                        limits.max_bytes);
}

Result<std::unique_ptr<InputFile>> InputFile::open(const std::string &path,
                                                   const ReadLimits &limits) {
  auto opened = openForReading(path);
  if (!opened) return opened.error();
  if (!opened->pipe && opened->size > limits.max_bytes) {
    ::close(opened->fd);
    return makeError(sizeError(path, opened->size, limits.max_bytes));
  }
  return std::unique_ptr<InputFile>(new InputFile(opened->fd, opened->pipe, path, limits));
}

InputFile::InputFile(int fd, bool pipe, std::string path, const ReadLimits &limits)
    : fd_(fd), pipe_(pipe), path_(std::move(path)), limits_(limits), buffer_(1 << 16) {}

InputFile::~InputFile() {
  if (fd_ >= 0) ::close(fd_);
}

long InputFile::readRaw() {
  const std::string shown = "'" + escapeControlCharacters(path_) + "'";
  while (true) {
    if (pipe_) {
      pollfd waiting{fd_, POLLIN, 0};
      const int ready = ::poll(&waiting, 1, limits_.pipe_silence_ms);
      if (ready < 0 && errno == EINTR) continue;
      if (ready < 0) return stop("cannot read " + shown), -1;
      if (ready == 0)
        return stop(shown + " is a pipe or FIFO and nothing " +
                    (bytes_ == 0 ? "was written to it" : "more arrived") + " for " +
                    (limits_.pipe_silence_ms % 1000 == 0
                         ? std::to_string(limits_.pipe_silence_ms / 1000) + " s"
                         : std::to_string(limits_.pipe_silence_ms) + " ms") +
                    "; start the program that writes it, or give a file"),
               -1;
    }
    const ssize_t got = ::read(fd_, raw_.data(), raw_.size());
    if (got < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (got < 0) return stop("cannot read " + shown), -1;
    source_bytes_ += static_cast<std::size_t>(got);
    return got;
  }
}

InputFile::int_type InputFile::underflow() {
  if (gptr() < egptr()) return traits_type::to_int_type(*gptr());
  if (!error_.empty() || done_) return traits_type::eof();
  if (raw_.empty()) raw_.resize(1 << 16);
  auto *zip = static_cast<z_stream *>(gzip_.get());
  std::size_t produced = 0;
  if (zip == nullptr) {
    const long got = readRaw();
    if (got < 0) return traits_type::eof();
    if (got == 0) {
      done_ = true;
      return traits_type::eof();
    }
    // The first bytes tell gzip (pipescope writes it for any output name ending in .gz).
    if (bytes_ == 0 && got >= 2 && raw_[0] == '\x1f' && raw_[1] == '\x8b') {
      auto stream = std::make_shared<z_stream>();
      if (inflateInit2(stream.get(), 15 + 32) != Z_OK)
        return stop("cannot read '" + escapeControlCharacters(path_) + "': zlib could not start");
      gzip_ = std::shared_ptr<void>(stream.get(), [stream](void *) { inflateEnd(stream.get()); });
      zip = stream.get();
      zip->next_in = reinterpret_cast<Bytef *>(raw_.data());
      zip->avail_in = static_cast<uInt>(got);
    } else {
      std::copy_n(raw_.data(), got, buffer_.data());
      produced = static_cast<std::size_t>(got);
    }
  }
  while (zip != nullptr && produced == 0) {
    if (zip->avail_in == 0) {
      const long got = readRaw();
      if (got < 0) return traits_type::eof();
      if (got == 0)
        return stop("cannot read '" + escapeControlCharacters(path_) +
                    "': the gzip data is cut short");
      zip->next_in = reinterpret_cast<Bytef *>(raw_.data());
      zip->avail_in = static_cast<uInt>(got);
    }
    zip->next_out = reinterpret_cast<Bytef *>(buffer_.data());
    zip->avail_out = static_cast<uInt>(buffer_.size());
    const int status = inflate(zip, Z_NO_FLUSH);
    produced = buffer_.size() - zip->avail_out;
    if (status == Z_STREAM_END) {
      done_ = true;
      if (produced == 0) return traits_type::eof();
    } else if (status != Z_OK && status != Z_BUF_ERROR) {
      return stop("cannot read '" + escapeControlCharacters(path_) + "': the gzip data is damaged");
    }
  }
  bytes_ += produced;
  if (bytes_ > limits_.max_bytes) return stop(sizeError(path_, bytes_, limits_.max_bytes));
  setg(buffer_.data(), buffer_.data(), buffer_.data() + produced);
  return traits_type::to_int_type(*gptr());
}

InputFile::int_type InputFile::stop(std::string error) {
  error_ = std::move(error);
  return traits_type::eof();
}

} // namespace pipescope
