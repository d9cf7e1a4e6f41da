#pragma once
// Event-driven simulation of a lowered program (DESIGN.md §2–3): exact for the given op times.
#include <utility>
#include <vector>

#include "engine/costs.h"
#include "engine/lowering.h"
#include "engine/result.h"
#include "engine/schedule.h"

namespace pipescope {

struct OpTiming {
  double start_us = 0;
  double end_us = 0;
};

/// A transfer as simulated: leaves when its producer ends, arrives after the link time.
struct TransferTiming {
  double start_us = 0;
  double end_us = 0;
};

/// One step of a rank's activation memory: from time_us on, this many activation sets are held.
struct MemoryPoint {
  double time_us = 0;
  int inflight_chunks = 0;
  double inflight_microbatches = 0;
  double activation_bytes = 0; ///< when stage activation bytes were given
};

struct RankStats {
  double busy_us = 0;
  double idle_us = 0;
  double end_us = 0;                     ///< last op end (plus gradient sync)
  int peak_inflight = 0;                 ///< activation sets (chunks) held at once
  double peak_inflight_microbatches = 0; ///< the same weighted by stage share
  double peak_activation_bytes = 0;      ///< when stage activation bytes were given
};

struct SimulationOptions {
  bool memory_timeline = false; ///< record every change of each rank's in-flight count
  /// Bytes of activations one microbatch leaves on each virtual stage between its forward and
  /// the backward that frees them (empty: bytes are not tracked).
  std::vector<double> stage_activation_bytes;
  /// With stage_activation_bytes: the most one layer of each virtual stage holds. An overlapped
  /// F&B pair (DualPipe, Megatron-Core's combined 1F1B) runs its forward and its backward layer
  /// by layer in turn, so the backward frees the older chunk's activations while the forward
  /// builds the new one's (overlappedPairPeakBytes). Empty: the pair holds both chunks at once.
  std::vector<double> stage_activation_granule_bytes;
  /// Per rank, per op of schedule.ranks: a factor on the op's duration (empty: 1 for every op).
  /// Calibration uses it for ops that run longer while other ranks compute on a shared device.
  std::vector<std::vector<double>> op_duration_scale;
};

/// The most activation bytes a rank holds while an overlapped F&B pair runs, given what it held
/// before: the forward's chunk (`forward` bytes) grows a layer at a time while the backward's
/// (`backward`) shrinks a layer at a time, DeepSeek-V3's overlapped chunk pair (its report,
/// §3.2.1, Figure 4) and Megatron-Core's combined 1F1B (schedule_chunk_1f1b, one forward layer
/// beside one backward layer): the growth beyond what is freed, plus one layer (`granule`) of
/// the forward ahead of the backward. A granule of `forward` or more: both chunks at once.
double overlappedPairPeakBytes(double held_before, double forward, double backward, double granule);

struct SimulationResult {
  /// op_times[r][i] is the timing of schedule.ranks[r][i].
  std::vector<std::vector<OpTiming>> op_times;
  /// transfers[id] is the timing of program.messages[id].
  std::vector<TransferTiming> transfers;
  std::vector<RankStats> ranks;
  std::vector<std::vector<MemoryPoint>> memory; ///< per rank, when requested
  double makespan_us = 0;
  double bubble_fraction = 0; ///< 1 - Σ busy / (P·T)
  double bubble_ratio = 0;    ///< (P·T - Σ busy) / Σ busy
};

/// Duration of one op under resolved stage times.
inline double opDuration(const Op &op, const StageTimes &times) {
  const auto s = static_cast<std::size_t>(op.stage);
  switch (op.kind) {
  case OpKind::Forward: return times.forward[s];
  case OpKind::InputGrad: return times.input_grad[s];
  case OpKind::WeightGrad: return times.weight_grad[s];
  case OpKind::FullBackward: return times.full_backward[s];
  case OpKind::OverlappedPair:
    return times.overlap_factor *
           (times.forward[s] + times.full_backward[static_cast<std::size_t>(op.backward_stage)]);
  }
  return 0;
}

/// Runs the program. A program that cannot complete is refused with the blocked ranks, the op
/// each waits at and what it waits for, and the rank × step grid with those steps marked. With a
/// concurrency slowdown in `times` (ranks sharing a device) and no op_duration_scale of the
/// caller's, each op's time is scaled by the factor for the number of other ranks computing at
/// its midpoint, found by iterating the simulation to a fixed point (at most 12 passes).
Result<SimulationResult> simulate(const Schedule &schedule, const LoweredProgram &program,
                                  const StageTimes &times, const SimulationOptions &options = {});

/// The factor on an op's time with `others` other ranks computing (Costs::concurrency_slowdown,
/// not empty); counts past its end take its last entry.
inline double concurrencyFactor(const std::vector<double> &factors, int others) {
  const auto n = static_cast<std::size_t>(others < 0 ? 0 : others);
  return factors[n < factors.size() ? n : factors.size() - 1];
}

/// For each interval (per rank, in time order), how many other ranks' intervals hold its midpoint.
std::vector<std::vector<int>>
othersComputingAtMidpoints(const std::vector<std::vector<std::pair<double, double>>> &intervals);

/// The rank × step grid of a schedule (PyTorch's _format_pipeline_order), with the given step of
/// each rank marked by brackets (-1: none). Long rows are cut to a window around the marks.
std::string formatScheduleGrid(const Schedule &schedule, const std::vector<int> &marked_steps);

} // namespace pipescope
