#pragma once
// Op and transfer durations (DESIGN.md §2 "Op times", §5). All times in microseconds.
#include <vector>

#include "engine/placement.h"
#include "engine/result.h"

namespace pipescope {

/// Bounds every reader of costs shares: the command line, plan files and the model derivation
/// all go through Costs::check, so a number refused in one is refused in all.
inline constexpr double kMaxCostMicroseconds = 1e15; ///< about 31 years: any op or transfer
inline constexpr double kMaxActivationBytes = 1e15;  ///< a petabyte per stage boundary
/// Slowest link pipescope prices (1 MB/s); 0 means transfers take only the latency.
inline constexpr double kMinLinkBandwidthGbps = 1e-3;
inline constexpr double kMaxLinkBandwidthGbps = 1e9;
/// Bounds of a concurrency slowdown factor (Costs::concurrency_slowdown) and of its length.
/// An overlapped F&B pair takes at most this many times F + B (Costs::check).
inline constexpr double kMaxOverlapSlowdown = 2;
inline constexpr double kMinConcurrencySlowdown = 0.01;
inline constexpr double kMaxConcurrencySlowdown = 100;
inline constexpr std::size_t kMaxConcurrencySlowdownEntries = 16384; ///< kMaxPipelineRanks

/// How Costs::check names a field in its message: as the engine's field ("forward"), as the plan
/// file's JSON pointer ("/costs/forward") or as the command line's option ("--forward").
enum class CostNaming { Field, PlanFile, CommandLine };

/// Explicit per-stage durations that replace the share-scaled defaults for one virtual stage.
struct StageCost {
  double forward_us = 0;
  double backward_us = 0; ///< full backward B = I + W
  double weight_us = 0;   ///< W; the input-grad op takes backward_us - weight_us
  /// What an input-grad op takes beyond B - W because W runs as its own op (Costs field).
  double input_grad_split_extra_us = 0;

  friend bool operator==(const StageCost &, const StageCost &) = default;
};

/// Cost inputs. forward/backward/weight are for one pipeline rank's share of the model (L/P
/// layers); an op of a virtual stage takes them scaled by the stage's share, so schedules with
/// different V compare fairly on one model. A later layer (the model cost model) fills the same
/// structure from a model, hardware and mesh.
struct Costs {
  double forward_us = 1;  ///< F
  double backward_us = 2; ///< B = I + W
  double weight_us = 1;   ///< W
  /// What the input-grad op I takes beyond B - W where a schedule runs W as its own op: work that
  /// B hides behind its weight-gradient GEMMs and a lone I cannot (Megatron-LM's asynchronous
  /// backward TP collectives, TrainingSetup::tp_backward_overlap). 0: I = B - W.
  double input_grad_split_extra_us = 0;
  /// Time of one overlapped F&B pair for a rank's share, from max(F, B) (perfect overlap) to
  /// 2(F + B) (halves that slow each other down); 0 means F + B (no overlap gain).
  double overlapped_us = 0;
  /// Per virtual stage overrides (empty, or one entry per stage).
  std::vector<StageCost> stage_overrides;

  double p2p_latency_us = 0;
  double p2p_bandwidth_gbps = 0; ///< GB/s; 0 means transfers take only the latency
  double activation_bytes = 0;   ///< bytes sent per stage boundary per microbatch
  /// Optional per virtual stage: time to send stage s's output to its next stage (and the
  /// gradient back); replaces latency + bytes / bandwidth when not empty.
  std::vector<double> boundary_transfer_us;

  /// The tail added after each rank's last op (0 = not modeled): from the model cost model, the
  /// exposed DP gradient sync (with the GEMMs its hidden part slowed), the tied-embedding sum
  /// and the optimizer step, the longest rank's.
  double gradient_sync_us = 0;

  /// Ranks that share one device (gpu-shared: the stages in partitions of one GPU): entry n is
  /// the factor on an op's time while n other ranks compute, 1 at all P - 1 of them (the op
  /// times above). Calibration fits it where a measurement shows it; empty: separate devices.
  std::vector<double> concurrency_slowdown;

  /// Whether every number is finite and within its bounds (times and bytes non-negative and at
  /// most kMaxCost*, a bandwidth 0 or at least kMinLinkBandwidthGbps), W <= B, an overlapped
  /// F&B time 0 or between max(F, B) and F + B, and the per-stage lists have one entry per
  /// virtual stage (not checked when stage_count < 0). The error names the field as `naming`
  /// says and what would be accepted.
  Status check(int stage_count, CostNaming naming = CostNaming::Field) const;

  /// Field by field (the GUI compares costs on every slider move; no JSON round trip).
  friend bool operator==(const Costs &, const Costs &) = default;
};

/// Costs resolved for one placement: what the simulator reads per op.
struct StageTimes {
  std::vector<double> forward;       ///< per virtual stage
  std::vector<double> input_grad;    ///< I = B - W + the split extra
  std::vector<double> weight_grad;   ///< W
  std::vector<double> full_backward; ///< B
  std::vector<double> send_forward;  ///< stage s -> next stage, 0 on the same rank
  std::vector<double> send_backward; ///< stage s -> previous stage, 0 on the same rank
  double overlap_factor = 1;         ///< overlapped pair time = factor * (F + B)
  double gradient_sync = 0;
  std::vector<double> concurrency_slowdown; ///< Costs::concurrency_slowdown (empty: none)
};

/// Scales the rank-share costs to each stage of the placement and prices every boundary.
Result<StageTimes> resolveStageTimes(const Costs &costs, const Placement &placement);

} // namespace pipescope
