#pragma once
// The host-side coordination a run needs among its processes: agreeing on failures, barriers,
// broadcasting the NCCL ids and the calibration, gathering each step's timings on rank 0, the
// clock ping-pong, and stopping every rank at once. MPI provides it under mpirun and srun, a small
// TCP star under torchrun, and a trivial one for a single process. Every wait is bounded.
#include <memory>
#include <string>
#include <vector>

#include "engine/result.h"

namespace pipescope::backend {

class ControlChannel {
public:
  virtual ~ControlChannel() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual std::string name() const = 0; ///< "MPI", "TCP", "single process"

  /// Collective: the lowest rank whose `ok` is false, or -1 when every rank is ok.
  virtual Result<int> firstFailure(bool ok, double timeout_s) = 0;
  virtual Status barrier(double timeout_s) = 0;
  /// Collective: rank 0's bytes reach every rank (resized there).
  virtual Status broadcast(std::vector<char> &bytes, double timeout_s) = 0;
  /// Collective: rank 0 receives every rank's values, in rank order; other ranks get nothing.
  virtual Result<std::vector<std::vector<double>>> gather(const std::vector<double> &values,
                                                          double timeout_s) = 0;
  /// Point-to-point between rank 0 and another rank (the clock ping-pong).
  virtual Status sendTo(int peer, const std::vector<double> &values, double timeout_s) = 0;
  virtual Result<std::vector<double>> receiveFrom(int peer, double timeout_s) = 0;

  /// Stops every rank of the run now. Only main calls it, after reporting the error.
  [[noreturn]] virtual void abortAll(int exit_code) = 0;
  /// Orderly end (MPI_Finalize); collective.
  virtual void finish() = 0;
};

/// The channel of a single process.
std::unique_ptr<ControlChannel> makeSingleProcessChannel();

} // namespace pipescope::backend
