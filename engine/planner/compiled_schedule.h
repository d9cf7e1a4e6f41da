#pragma once
// A schedule's lowered program compiled once into a dependency-ordered op list, so that the
// planner can re-time it under many cost sets without generating, lowering or event-scheduling
// it again (DESIGN.md §9 "Planner").
//
// Why this is exact: under the simulator's semantics (simulator.cpp) an op starts at
// max(its rank's clock, the arrival of every recv before it) and a transfer arrives at its
// producer's end plus the link time. Which op feeds which does not depend on the durations, so
// an order in which every op follows its rank predecessor and its producers is valid for all
// durations, and one pass in that order performs the same max and + operations on the same
// numbers as the event simulation: the makespan, busy times and bubble are bitwise equal (the
// planner tests check it). Peak activation memory follows each rank's op order alone.
#include <cstdint>
#include <vector>

#include "engine/costs.h"
#include "engine/lowering.h"
#include "engine/result.h"
#include "engine/schedule.h"

namespace pipescope {

struct CompiledSchedule {
  struct Input {
    std::int32_t producer = 0; ///< index into ops of the producing compute
    std::int32_t stage = 0;    ///< the message's producing stage
    bool gradient = false;     ///< the link time is send_backward[stage], else send_forward
  };
  struct CompiledOp {
    Op op;
    std::int32_t rank = 0;
    std::int32_t first_input = 0; ///< inputs[first_input .. first_input + input_count)
    std::int32_t input_count = 0;
  };
  int pp = 0;
  int stage_count = 0;
  std::vector<CompiledOp> ops; ///< dependency order
  std::vector<Input> inputs;
  /// Per rank, its ops in its own order: what activation memory replays.
  std::vector<std::vector<Op>> rank_ops;
};

/// Compiles a schedule whose op coverage was checked. Refuses (with the simulator's message) a
/// program that cannot complete.
Result<CompiledSchedule> compileSchedule(const Schedule &schedule, const LoweredProgram &program);

/// What one timing pass yields: the simulator's step figures (DESIGN.md §3).
struct CompiledTiming {
  double makespan_us = 0;
  double bubble_fraction = 0;
  double bubble_ratio = 0;
  double busiest_rank_us = 0; ///< the largest busy time of a rank
};

/// What the ops alone give, before the gradient sync that follows each rank's last op: costs
/// that differ only in that sync (the ZeRO stage, the rank order's DP link) share one pass.
struct CompiledOpTiming {
  int pp = 0;
  double last_op_end_us = 0; ///< the latest rank's clock after its ops
  double busy_total_us = 0;  ///< busy time summed over the ranks, in rank order
  double busiest_rank_us = 0;
};

/// Times the compiled schedule's ops under `times` (its gradient_sync unused). `scratch` is
/// reused between calls (no allocation once it has grown).
CompiledOpTiming timeCompiledOps(const CompiledSchedule &compiled, const StageTimes &times,
                                 std::vector<double> &scratch);

/// The step's figures once each rank's gradient sync of `gradient_sync_us` follows its ops:
/// bitwise simulate()'s, since max over ranks of (clock + sync) rounds as (max clock) + sync.
CompiledTiming withGradientSync(const CompiledOpTiming &ops, double gradient_sync_us);

/// Times the compiled schedule under `times`: timeCompiledOps, then withGradientSync.
CompiledTiming timeCompiledSchedule(const CompiledSchedule &compiled, const StageTimes &times,
                                    std::vector<double> &scratch);

/// Peak stored activation bytes per rank, given the bytes one microbatch leaves on each stage
/// (as the simulator counts them: from the start of F to the end of B, or of W when split).
void peakActivationBytes(const CompiledSchedule &compiled,
                         const std::vector<double> &stage_activation_bytes,
                         const std::vector<double> &stage_activation_granule_bytes,
                         std::vector<double> &peak_per_rank);

} // namespace pipescope
