#pragma once
// Walks one pipeline rank's lowered program for one step and calls the device for each
// instruction, exactly in the plan's order.
#include <cstdint>

#include "backend/device.h"

namespace pipescope::backend {

/// Test hooks for the fault tests, read once from the environment:
///   PIPESCOPE_BACKEND_TEST_KILL_RANK=R   world rank R raises SIGKILL (where each process is a
///                                        rank) or its stage thread dies (gpu-shared, where one
///                                        process runs a thread per pipeline rank) ...
///   PIPESCOPE_BACKEND_TEST_HANG_RANK=R   world rank R stops making progress ...
///   PIPESCOPE_BACKEND_TEST_AFTER_OPS=N   ... when it is about to start its N-th compute op
///                                        (counted over warm-up and measured steps; default 1).
/// What a killed stage thread throws: it unwinds the thread's step without a result or an error,
/// as a thread that dies does, and the runner must notice by itself (backend_run.cpp).
struct StageThreadKilled {};

class FaultInjection {
public:
  /// `stage_threads`: the process runs every pipeline rank as a thread (gpu-shared).
  static FaultInjection fromEnvironment(int world_rank, bool stage_threads = false);
  /// Called before each compute op; may not return.
  void beforeCompute();

private:
  bool kill_ = false, hang_ = false, stage_threads_ = false;
  long long after_ops_ = 1;
  long long ops_started_ = 0;
};

/// Runs one step of the rank's program on the device.
Result<StepTimings> runProgramStep(Device &device, const RankSetup &setup, FaultInjection &faults);

} // namespace pipescope::backend
