#include "backend/mpi_channel.h"

#include <sched.h>
#include <time.h>

#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>

#include "backend/clock.h"

namespace pipescope::backend {

namespace {
constexpr int kControlTag = 7;
} // namespace

std::string mpiFailure(const char *call, int code, const char *file, int line) {
  char text[MPI_MAX_ERROR_STRING] = "";
  int length = 0;
  MPI_Error_string(code, text, &length);
  return std::string(file) + ":" + std::to_string(line) + ": " + call + " failed: " + text;
}

Status waitForRequest(MPI_Request &request, double timeout_s, const std::string &what,
                      MPI_Status *status, const std::function<void()> &on_poll) {
  const double start = nowMicroseconds();
  const double deadline = start + timeout_s * 1e6;
  for (long polls = 0;; ++polls) {
    int done = 0;
    PIPESCOPE_MPI_CHECK(MPI_Test(&request, &done, status ? status : MPI_STATUS_IGNORE));
    if (done) return Ok{};
    if (on_poll) on_poll();
    const double now = nowMicroseconds();
    if (now > deadline)
      return makeError("no progress for " + std::to_string(static_cast<int>(timeout_s)) +
                       " s while " + what);
    // Spin for the first 100 µs (a message that is about to land), then yield the core, and after
    // 2 ms sleep 20 µs between tests: ranks sharing cores leave them to the ones computing.
    if (now - start < 100) continue;
    if (now - start < 2000) {
      sched_yield();
      continue;
    }
    const timespec pause{0, 20000};
    nanosleep(&pause, nullptr);
  }
}

Result<std::unique_ptr<MpiChannel>> MpiChannel::initialize(int *argc, char ***argv) {
  // When ranks outnumber cores, Open MPI makes every progress call that finds nothing to do yield
  // the core (mpi_yield_when_idle). The cpu device tests its transfers between the GEMMs of an
  // op, so each test would hand the core away in the middle of the op; the backend's own waits
  // (waitForRequest) decide when to yield instead.
  setenv("OMPI_MCA_mpi_yield_when_idle", "0", 1);
  int provided = 0;
  PIPESCOPE_MPI_CHECK(MPI_Init_thread(argc, argv, MPI_THREAD_SERIALIZED, &provided));
  std::unique_ptr<MpiChannel> channel(new MpiChannel());
  PIPESCOPE_MPI_CHECK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
  PIPESCOPE_MPI_CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &channel->world_));
  PIPESCOPE_MPI_CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &channel->control_));
  PIPESCOPE_MPI_CHECK(MPI_Comm_rank(channel->world_, &channel->rank_));
  PIPESCOPE_MPI_CHECK(MPI_Comm_size(channel->world_, &channel->size_));
  return channel;
}

MpiChannel::~MpiChannel() {
  finish();
}

Result<int> MpiChannel::firstFailure(bool ok, double timeout_s) {
  int mine = ok ? INT_MAX : rank_, lowest = INT_MAX;
  MPI_Request request;
  PIPESCOPE_MPI_CHECK(MPI_Iallreduce(&mine, &lowest, 1, MPI_INT, MPI_MIN, control_, &request));
  if (auto status = waitForRequest(request, timeout_s, "agreeing with every rank"); !status)
    return status.error();
  return lowest == INT_MAX ? -1 : lowest;
}

Status MpiChannel::barrier(double timeout_s) {
  MPI_Request request;
  PIPESCOPE_MPI_CHECK(MPI_Ibarrier(control_, &request));
  return waitForRequest(request, timeout_s, "waiting at a barrier for every rank");
}

Status MpiChannel::broadcast(std::vector<char> &bytes, double timeout_s) {
  long long count = static_cast<long long>(bytes.size());
  MPI_Request request;
  PIPESCOPE_MPI_CHECK(MPI_Ibcast(&count, 1, MPI_LONG_LONG, 0, control_, &request));
  if (auto status = waitForRequest(request, timeout_s, "waiting for rank 0's broadcast"); !status)
    return status;
  if (count < 0 || count > INT_MAX) return makeError("broadcast of an impossible size");
  bytes.resize(static_cast<std::size_t>(count));
  PIPESCOPE_MPI_CHECK(
      MPI_Ibcast(bytes.data(), static_cast<int>(count), MPI_BYTE, 0, control_, &request));
  return waitForRequest(request, timeout_s, "waiting for rank 0's broadcast");
}

Result<std::vector<std::vector<double>>> MpiChannel::gather(const std::vector<double> &values,
                                                            double timeout_s) {
  int count = static_cast<int>(values.size());
  std::vector<int> counts(rank_ == 0 ? static_cast<std::size_t>(size_) : 0);
  MPI_Request request;
  PIPESCOPE_MPI_CHECK(
      MPI_Igather(&count, 1, MPI_INT, counts.data(), 1, MPI_INT, 0, control_, &request));
  if (auto status = waitForRequest(request, timeout_s, "gathering the step's timings on rank 0");
      !status)
    return status.error();
  std::vector<int> offsets(counts.size(), 0);
  long long total = 0;
  for (std::size_t r = 0; r < counts.size(); ++r) {
    offsets[r] = static_cast<int>(total);
    total += counts[r];
  }
  if (total > INT_MAX) return makeError("gathered timings exceed MPI's count limit");
  std::vector<double> all(static_cast<std::size_t>(total));
  PIPESCOPE_MPI_CHECK(MPI_Igatherv(values.data(), count, MPI_DOUBLE, all.data(), counts.data(),
                                   offsets.data(), MPI_DOUBLE, 0, control_, &request));
  if (auto status = waitForRequest(request, timeout_s, "gathering the step's timings on rank 0");
      !status)
    return status.error();
  std::vector<std::vector<double>> out;
  for (std::size_t r = 0; r < counts.size(); ++r)
    out.emplace_back(all.begin() + offsets[r], all.begin() + offsets[r] + counts[r]);
  return out;
}

Status MpiChannel::sendTo(int peer, const std::vector<double> &values, double timeout_s) {
  MPI_Request request;
  PIPESCOPE_MPI_CHECK(MPI_Isend(values.data(), static_cast<int>(values.size()), MPI_DOUBLE, peer,
                                kControlTag, control_, &request));
  return waitForRequest(request, timeout_s, "sending to rank " + std::to_string(peer));
}

Result<std::vector<double>> MpiChannel::receiveFrom(int peer, double timeout_s) {
  // Control messages are small: probe for the size, then receive.
  MPI_Status status;
  const double deadline = nowMicroseconds() + timeout_s * 1e6;
  for (;;) {
    int ready = 0;
    PIPESCOPE_MPI_CHECK(MPI_Iprobe(peer, kControlTag, control_, &ready, &status));
    if (ready) break;
    if (nowMicroseconds() > deadline)
      return makeError("no progress for " + std::to_string(static_cast<int>(timeout_s)) +
                       " s while waiting for a message from rank " + std::to_string(peer));
    sched_yield();
  }
  int count = 0;
  PIPESCOPE_MPI_CHECK(MPI_Get_count(&status, MPI_DOUBLE, &count));
  std::vector<double> values(static_cast<std::size_t>(count));
  PIPESCOPE_MPI_CHECK(
      MPI_Recv(values.data(), count, MPI_DOUBLE, peer, kControlTag, control_, MPI_STATUS_IGNORE));
  return values;
}

void MpiChannel::abortAll(int exit_code) {
  std::fflush(stdout);
  MPI_Abort(MPI_COMM_WORLD, exit_code);
  std::_Exit(exit_code); // MPI_Abort does not return; this satisfies [[noreturn]]
}

void MpiChannel::finish() {
  if (finished_) return;
  finished_ = true;
  if (world_ != MPI_COMM_NULL) MPI_Comm_free(&world_);
  if (control_ != MPI_COMM_NULL) MPI_Comm_free(&control_);
  MPI_Finalize();
}

} // namespace pipescope::backend
