#include "backend/events.h"

#include <unistd.h>

#include <array>
#include <atomic>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <mutex>

namespace pipescope::backend {

namespace {

std::mutex output_mutex;

// Two prepared lines; the handler reads the one `current_line` names, so an update in progress
// never tears the line the handler writes.
constexpr std::size_t kLineBytes = 1024;
std::array<std::array<char, kLineBytes>, 2> activity_lines{};
std::array<std::size_t, 2> activity_lengths{};
std::atomic<int> current_line{-1};
std::mutex activity_mutex; // one writer at a time (the gpu-shared device has a thread per stage)

void writeAll(const char *data, std::size_t length) {
  while (length > 0) {
    const ssize_t written = ::write(STDOUT_FILENO, data, length);
    if (written <= 0) return;
    data += written;
    length -= static_cast<std::size_t>(written);
  }
}

extern "C" void reportTermination(int signal_number) {
  const int line = current_line.load();
  if (line >= 0)
    writeAll(activity_lines[static_cast<std::size_t>(line)].data(),
             activity_lengths[static_cast<std::size_t>(line)]);
  _exit(128 + signal_number);
}

} // namespace

namespace {

void writeLine(std::string line) {
  line += '\n';
  std::lock_guard<std::mutex> lock(output_mutex);
  std::fwrite(line.data(), 1, line.size(), stdout);
  std::fflush(stdout);
}

} // namespace

void emitEvent(const RunEvent &event) {
  writeLine(runEventLine(event));
}

void emitJsonLine(const nlohmann::json &line) {
  writeLine(line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
}

void emitError(int rank, const std::string &message) {
  emitEvent(ErrorEvent{rank, message});
}

void emitWarning(int rank, const std::string &message) {
  emitEvent(WarningEvent{rank, message});
}

void setActivity(int rank, const std::string &activity, int waiting_for_rank) {
  std::string line =
      runEventLine(ErrorEvent{rank,
                              "stopped by the launcher (another rank failed or the run was "
                              "cancelled) while " +
                                  activity,
                              waiting_for_rank}) +
      "\n";
  if (line.size() > kLineBytes) return; // keep the previous line rather than a cut one
  std::lock_guard<std::mutex> lock(activity_mutex);
  const int next = current_line.load() == 0 ? 1 : 0;
  std::memcpy(activity_lines[static_cast<std::size_t>(next)].data(), line.data(), line.size());
  activity_lengths[static_cast<std::size_t>(next)] = line.size();
  current_line.store(next);
}

void clearActivity() {
  current_line.store(-1);
}

void installTerminationReport() {
  struct sigaction action {};
  action.sa_handler = reportTermination;
  sigemptyset(&action.sa_mask);
  sigaction(SIGTERM, &action, nullptr);
  sigaction(SIGINT, &action, nullptr);
}

} // namespace pipescope::backend
