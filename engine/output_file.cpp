#include "engine/output_file.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

namespace pipescope {

namespace {

constexpr std::size_t kBufferBytes = std::size_t{1} << 20;
constexpr int kMaxSymlinkHops = 40; // Linux's own limit (MAXSYMLINKS)

std::string folderOf(const std::string &path) {
  const auto slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

std::string baseNameOf(const std::string &path) {
  const auto slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// /dev/stdout, /dev/fd/N and /proc/self/fd/N name an already open file: replacing what they
// point to would not reach the process's descriptor, so they are written in place.
bool isDescriptorLink(const std::string &path) {
  return path.starts_with("/proc/") || path.starts_with("/dev/fd/");
}

mode_t currentUmask() {
  // The only portable way to read the umask is to set it; it is restored at once.
  const mode_t mask = ::umask(022);
  ::umask(mask);
  return mask;
}

} // namespace

struct OutputFile::State {
  std::string path;   // as given
  std::string target; // the file that gets the content (symlinks resolved)
  std::string temporary;
  int fd = -1;
  bool standard_output = false;
  bool in_place = false;
  bool finished = false;
  bool committed = false;
  bool broken_pipe = false;
  std::string error; // first failure
  std::string buffer;
  bool gzip = false;
  z_stream zip{};
  std::string zipped;

  ~State() {
    if (gzip) deflateEnd(&zip);
    if (fd >= 0 && !standard_output) ::close(fd);
    if (!temporary.empty() && !committed) ::unlink(temporary.c_str());
  }

  std::string describe() const {
    if (standard_output) return "standard output";
    if (target.empty() || target == path) return "'" + path + "'";
    return "'" + path + "' (→ '" + target + "')";
  }

  void fail(const std::string &what, int error_number) {
    if (!error.empty()) return;
    if (standard_output && error_number == EPIPE) broken_pipe = true;
    error = "cannot write to " + describe() + ": " + (what.empty() ? "" : what + ": ") +
            std::strerror(error_number);
  }

  void writeAll(const char *data, std::size_t size) {
    while (size > 0 && error.empty()) {
      const ssize_t written = ::write(fd, data, size);
      if (written < 0) {
        if (errno == EINTR) continue;
        fail("", errno);
        return;
      }
      data += written;
      size -= static_cast<std::size_t>(written);
    }
  }

  void deflateBuffer(int flush) {
    zip.next_in = reinterpret_cast<Bytef *>(buffer.data());
    zip.avail_in = static_cast<uInt>(buffer.size());
    zipped.resize(kBufferBytes);
    int status = Z_OK;
    do {
      zip.next_out = reinterpret_cast<Bytef *>(zipped.data());
      zip.avail_out = static_cast<uInt>(zipped.size());
      status = deflate(&zip, flush);
      if (status == Z_STREAM_ERROR) {
        if (error.empty()) error = "cannot write to " + describe() + ": zlib stream error";
        return;
      }
      writeAll(zipped.data(), zipped.size() - zip.avail_out);
    } while (error.empty() &&
             (zip.avail_out == 0 || (flush == Z_FINISH && status != Z_STREAM_END)));
  }

  void flushBuffer(bool last) {
    if (!error.empty()) {
      buffer.clear();
      return;
    }
    if (gzip)
      deflateBuffer(last ? Z_FINISH : Z_NO_FLUSH);
    else
      writeAll(buffer.data(), buffer.size());
    buffer.clear();
  }
};

OutputFile::OutputFile(std::unique_ptr<State> state) : state_(std::move(state)) {}
OutputFile::OutputFile(OutputFile &&) noexcept = default;
OutputFile &OutputFile::operator=(OutputFile &&) noexcept = default;
OutputFile::~OutputFile() = default;

bool isStandardOutput(const std::string &path) {
  return path == "-" || path == "/dev/stdout" || path == "/dev/fd/1" || path == "/proc/self/fd/1";
}

Result<OutputFile> OutputFile::open(const std::string &path) {
  auto state = std::make_unique<State>();
  state->path = path;
  state->target = path;
  if (path.empty()) return makeError("an output file name is empty");
  if (isStandardOutput(path)) {
    state->standard_output = state->in_place = true;
    state->fd = STDOUT_FILENO;
    std::fflush(stdout); // what the caller printed before comes first
  } else {
    // Follow the symlink chain by hand, so the temporary lands beside the final target.
    std::string target = path;
    bool in_place = false;
    struct stat info {};
    bool exists = false;
    for (int hop = 0;; ++hop) {
      if (hop > kMaxSymlinkHops)
        return makeError("cannot write to '" + path + "': " + std::strerror(ELOOP));
      if (::lstat(target.c_str(), &info) != 0) {
        if (errno != ENOENT)
          return makeError("cannot write to '" + path + "': " + std::strerror(errno));
        break; // a new file (possibly the target of a dangling link)
      }
      if (!S_ISLNK(info.st_mode)) {
        exists = true;
        break;
      }
      if (isDescriptorLink(target)) {
        in_place = true;
        break;
      }
      std::string link(4096, '\0');
      const ssize_t length = ::readlink(target.c_str(), link.data(), link.size());
      if (length < 0) return makeError("cannot write to '" + path + "': " + std::strerror(errno));
      link.resize(static_cast<std::size_t>(length));
      target = link.starts_with('/') ? link : folderOf(target) + "/" + link;
    }
    state->target = target;
    if (exists && S_ISDIR(info.st_mode))
      return makeError("cannot write to '" + path + "': " + std::strerror(EISDIR));
    if (exists && !S_ISREG(info.st_mode)) in_place = true;
    if (in_place) {
      // A device, FIFO, terminal or descriptor link: written where it is, never replaced.
      state->in_place = true;
      state->target = path;
      state->fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC | O_NOCTTY);
      if (state->fd < 0)
        return makeError("cannot write to '" + path + "': " + std::strerror(errno));
    } else {
      std::string name = folderOf(target) + "/." + baseNameOf(target) + ".XXXXXX";
      state->fd = ::mkostemp(name.data(), O_CLOEXEC);
      if (state->fd < 0)
        return makeError("cannot write to " + state->describe() + ": cannot create a file in '" +
                         folderOf(target) + "': " + std::strerror(errno));
      state->temporary = name;
      // mkostemp creates mode 0600: give the file the mode the target has, or a new file's.
      const mode_t mode = exists ? (info.st_mode & 07777) : (0666 & ~currentUmask());
      if (::fchmod(state->fd, mode) != 0)
        return makeError("cannot write to " + state->describe() + ": " + std::strerror(errno));
    }
  }
  if (!state->standard_output && baseNameOf(state->path).ends_with(".gz")) {
    // windowBits 15 + 16: a gzip header, which gunzip, Perfetto and our reader understand.
    // Level 1: traces are repetitive and compress well even at the fastest level.
    if (deflateInit2(&state->zip, 1, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
      return makeError("cannot write to '" + path + "': zlib could not start");
    state->gzip = true;
  }
  state->buffer.reserve(kBufferBytes);
  return OutputFile(std::move(state));
}

void OutputFile::write(std::string_view bytes) {
  auto &s = *state_;
  if (!s.error.empty() || s.finished) return;
  s.buffer.append(bytes);
  if (s.buffer.size() >= kBufferBytes) s.flushBuffer(false);
}

bool OutputFile::good() const {
  return state_->error.empty();
}

Status OutputFile::finish() {
  auto &s = *state_;
  if (!s.finished) {
    s.finished = true;
    s.flushBuffer(true);
    if (s.gzip) {
      deflateEnd(&s.zip);
      s.gzip = false;
    }
    if (!s.in_place && s.error.empty() && ::fsync(s.fd) != 0) s.fail("", errno);
    if (!s.standard_output && s.fd >= 0) {
      if (::close(s.fd) != 0) s.fail("", errno);
      s.fd = -1;
    }
    if (!s.error.empty() && !s.temporary.empty()) {
      ::unlink(s.temporary.c_str());
      s.temporary.clear();
    }
  }
  if (!s.error.empty()) return makeError(s.error);
  return Ok{};
}

Status OutputFile::commit() {
  auto &s = *state_;
  if (auto status = finish(); !status) return status;
  if (s.committed || s.temporary.empty()) {
    s.committed = true;
    return Ok{};
  }
  if (std::rename(s.temporary.c_str(), s.target.c_str()) != 0) {
    const int error_number = errno;
    ::unlink(s.temporary.c_str());
    s.temporary.clear();
    s.fail("cannot replace it", error_number);
    return makeError(s.error);
  }
  s.committed = true;
  s.temporary.clear();
  // Make the rename itself durable. Best effort: some file systems refuse fsync on a folder, and
  // the content is already in place either way.
  if (const int folder = ::open(folderOf(s.target).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
      folder >= 0) {
    ::fsync(folder);
    ::close(folder);
  }
  return Ok{};
}

void OutputFile::discard() {
  auto &s = *state_;
  if (!s.finished) {
    s.finished = true;
    if (s.gzip) {
      deflateEnd(&s.zip);
      s.gzip = false;
    }
    s.buffer.clear();
    if (!s.standard_output && s.fd >= 0) ::close(s.fd);
    s.fd = -1;
  }
  if (!s.temporary.empty() && !s.committed) ::unlink(s.temporary.c_str());
  s.temporary.clear();
}

const std::string &OutputFile::path() const {
  return state_->path;
}
bool OutputFile::inPlace() const {
  return state_->in_place;
}
bool OutputFile::brokenPipe() const {
  return state_->broken_pipe;
}

Result<OutputFile *> OutputTransaction::add(const std::string &path) {
  auto opened = OutputFile::open(path);
  if (!opened) return opened.error();
  outputs_.push_back(std::make_unique<OutputFile>(std::move(*opened)));
  return outputs_.back().get();
}

std::vector<std::size_t> OutputTransaction::writeOrder() const {
  std::vector<std::size_t> order;
  for (int in_place = 0; in_place < 2; ++in_place)
    for (std::size_t i = 0; i < outputs_.size(); ++i)
      if (outputs_[i]->inPlace() == (in_place == 1)) order.push_back(i);
  return order;
}

Status OutputTransaction::commit() {
  std::string first_error;
  for (auto &output : outputs_)
    if (auto status = output->finish(); !status && first_error.empty())
      first_error = status.error().message;
  if (!first_error.empty()) {
    discard();
    return makeError(first_error);
  }
  // Every temporary is complete and on disk; only renames in one folder each remain. A rename
  // failing here (the folder turned read-only in between) leaves earlier ones done.
  for (auto &output : outputs_)
    if (auto status = output->commit(); !status) {
      discard();
      return status;
    }
  return Ok{};
}

void OutputTransaction::discard() {
  for (auto &output : outputs_)
    output->discard();
}

bool OutputTransaction::brokenPipe() const {
  for (const auto &output : outputs_)
    if (output->brokenPipe()) return true;
  return false;
}

Status writeTextFile(const std::string &path, std::string_view text) {
  auto output = OutputFile::open(path);
  if (!output) return output.error();
  output->write(text);
  return output->commit();
}

} // namespace pipescope
