#pragma once
// Walks one pipeline rank's lowered program for one step and calls the device for each
// instruction, exactly in the plan's order.
#include <cstdint>

#include "backend/device.h"

namespace pipescope::backend {

/// Test hooks for the fault tests, read once from the environment:
///   PIPESCOPE_BACKEND_TEST_KILL_RANK=R   world rank R raises SIGKILL ...
///   PIPESCOPE_BACKEND_TEST_HANG_RANK=R   world rank R stops making progress ...
///   PIPESCOPE_BACKEND_TEST_AFTER_OPS=N   ... when it is about to start its N-th compute op
///                                        (counted over warm-up and measured steps; default 1).
class FaultInjection {
public:
  static FaultInjection fromEnvironment(int world_rank);
  /// Called before each compute op; may not return.
  void beforeCompute();

private:
  bool kill_ = false, hang_ = false;
  long long after_ops_ = 1;
  long long ops_started_ = 0;
};

/// Runs one step of the rank's program on the device.
Result<StepTimings> runProgramStep(Device &device, const RankSetup &setup, FaultInjection &faults);

} // namespace pipescope::backend
