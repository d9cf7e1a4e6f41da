#pragma once
// Every file pipescope writes goes through here, with one rule:
// - a regular file (or a path that does not exist yet) is written atomically: a uniquely named
//   temporary in the folder of the *final target* (symlinks resolved, so a link stays a link and
//   its target gets the new content), written, fsynced, then renamed over the target;
// - anything else (a device such as /dev/null or /dev/full, a FIFO, a terminal, /dev/stdout and
//   other /proc/self/fd links) is opened and written in place, never replaced;
// - "-" is standard output.
// A name ending in ".gz" is gzip-compressed as it streams. Every write, flush, fsync, close and
// rename is checked; the first failure is kept and reported once, naming the path and the reason.
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "engine/result.h"

namespace pipescope {

class OutputFile {
public:
  /// Opens `path` for writing by the rule above. Nothing is visible at `path` until commit().
  static Result<OutputFile> open(const std::string &path);

  OutputFile(OutputFile &&) noexcept;
  OutputFile &operator=(OutputFile &&) noexcept;
  OutputFile(const OutputFile &) = delete;
  OutputFile &operator=(const OutputFile &) = delete;
  /// Removes the temporary if commit() was not reached.
  ~OutputFile();

  /// Buffers (and compresses) bytes; a failure is kept and returned by finish() / commit().
  void write(std::string_view bytes);
  /// True while no write has failed.
  bool good() const;

  /// Writes out the buffer, ends the gzip stream, fsyncs and closes. A staged file is not renamed
  /// yet. Idempotent; returns the first failure.
  Status finish();
  /// finish(), then renames a staged temporary over its target.
  Status commit();
  /// Drops a staged temporary (in-place outputs keep what they were sent).
  void discard();

  /// The name the caller gave.
  const std::string &path() const;
  /// Devices, FIFOs, terminals and standard output: written as they go, never replaced.
  bool inPlace() const;
  /// Standard output whose reader went away (EPIPE): the caller may end quietly.
  bool brokenPipe() const;

private:
  struct State;
  explicit OutputFile(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

/// Several outputs of one command: either all appear or none does. Staged (regular) outputs are
/// written to temporaries and renamed only when every output was written without error; on any
/// failure every temporary is removed and earlier files at those paths stay untouched.
/// In-place outputs (devices, FIFOs, standard output) cannot be taken back: they are
/// non-transactional, so callers write them after the staged ones (writeOrder() gives that
/// order) and a failure there still withholds every staged file.
class OutputTransaction {
public:
  /// Opens one more output; the error names the path.
  Result<OutputFile *> add(const std::string &path);
  /// Indices of the added outputs, staged ones first, then in-place ones.
  std::vector<std::size_t> writeOrder() const;
  OutputFile &output(std::size_t index) { return *outputs_[index]; }
  /// Finishes every output; if all succeeded, renames the staged ones into place. Otherwise
  /// discards all staged temporaries and returns the first failure.
  Status commit();
  /// Drops all staged temporaries.
  void discard();
  /// An in-place output was standard output and its reader went away.
  bool brokenPipe() const;

private:
  std::vector<std::unique_ptr<OutputFile>> outputs_;
};

/// "-" and the names of this process's standard output (/dev/stdout, /dev/fd/1,
/// /proc/self/fd/1), which are all written to descriptor 1.
bool isStandardOutput(const std::string &path);

/// Writes a small text whole through OutputFile (atomic for regular files).
Status writeTextFile(const std::string &path, std::string_view text);

} // namespace pipescope
