#pragma once
// The control channel over MPI (mpirun, srun), and the bounded wait every MPI request of the
// backend goes through: a rank never blocks inside MPI without a deadline, so a dead or hung peer
// becomes an error naming what was awaited instead of a hang.
#include <functional>
#include <memory>
#include <string>

#include <mpi.h>

#include "backend/control_channel.h"

/// Check macro for MPI calls: a failure becomes an Error naming the file, line, call and MPI's
/// message, returned up the stack (as nccl-tests does for its calls).
#define PIPESCOPE_MPI_CHECK(call)                                                                  \
  do {                                                                                             \
    const int pipescope_mpi_status_ = (call);                                                      \
    if (pipescope_mpi_status_ != MPI_SUCCESS)                                                      \
      return ::pipescope::makeError(                                                               \
          ::pipescope::backend::mpiFailure(#call, pipescope_mpi_status_, __FILE__, __LINE__));     \
  } while (0)

namespace pipescope::backend {

std::string mpiFailure(const char *call, int code, const char *file, int line);

class MpiChannel final : public ControlChannel {
public:
  /// MPI_Init_thread; errors are returned, never fatal (MPI_ERRORS_RETURN on the communicators).
  static Result<std::unique_ptr<MpiChannel>> initialize(int *argc, char ***argv);
  ~MpiChannel() override;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string name() const override { return "MPI"; }
  /// The communicator the devices use for their transfers and collectives.
  MPI_Comm world() const { return world_; }

  Result<int> firstFailure(bool ok, double timeout_s) override;
  Status barrier(double timeout_s) override;
  Status broadcast(std::vector<char> &bytes, double timeout_s) override;
  Result<std::vector<std::vector<double>>> gather(const std::vector<double> &values,
                                                  double timeout_s) override;
  Status sendTo(int peer, const std::vector<double> &values, double timeout_s) override;
  Result<std::vector<double>> receiveFrom(int peer, double timeout_s) override;
  [[noreturn]] void abortAll(int exit_code) override;
  void finish() override;

private:
  MpiChannel() = default;
  int rank_ = 0, size_ = 1;
  MPI_Comm world_ = MPI_COMM_NULL;   ///< data: transfers and collectives of the devices
  MPI_Comm control_ = MPI_COMM_NULL; ///< this channel's own traffic, apart from the data
  bool finished_ = false;
};

/// Waits for an MPI request, polling so that the wait is bounded: spinning briefly, then yielding,
/// then sleeping a few microseconds between tests (ranks may share cores). On timeout the error
/// says what was awaited. `on_poll` (optional) runs between tests.
Status waitForRequest(MPI_Request &request, double timeout_s, const std::string &what,
                      MPI_Status *status = nullptr, const std::function<void()> &on_poll = {});

} // namespace pipescope::backend
