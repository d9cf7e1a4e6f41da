#pragma once
// One run of pipescope-backend on this process: load and check the plan against the launch, size
// the work, make the devices, check their kernels, run the warm-up and the measured steps, and
// write the measured trace after every measured step. Errors come back to main, which reports
// them and decides how the process ends (STYLE.md 18).
#include <optional>
#include <string>

#include "backend/control_channel.h"
#include "backend/launch.h"
#include "backend/options.h"

namespace pipescope::backend {

class MpiChannel;

enum class FailureScope {
  AllRanks, ///< every rank found the same problem: rank 0 reports it, all end normally
  Agreed,   ///< ranks agreed that `reporter` failed: it reports, all end normally
  ThisRank, ///< this rank failed mid-run: it reports and stops every rank
};

struct Failure {
  std::string message;
  FailureScope scope = FailureScope::ThisRank;
  int reporter = 0;
  /// The plan, the options or the launch is wrong (exit 2), not the run (exit 1).
  bool bad_input = false;
};

/// Runs the backend; nothing on success.
std::optional<Failure> runBackend(const BackendOptions &options, const LaunchEnvironment &launch,
                                  ControlChannel &channel, MpiChannel *mpi);

} // namespace pipescope::backend
