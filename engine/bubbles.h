#pragma once
// Every bubble explained (DESIGN.md §3 "bubble causes"): each idle interval of each pipeline rank
// in one step, attributed to its cause, and the step's critical path.
//
// The step runs from its first op's start (T0) to its last op's end (T1; a simulated plan's DP
// gradient sync after a rank's last op extends it, as the simulator's makespan does). A rank is
// idle whenever none of its ops runs inside [T0, T1]: before its first op (leading idle), between
// two ops, and after its last op (trailing idle). An op can start when its rank is free (the end
// of the ops before it on the rank) and its inputs have arrived (dependencies.h: DESIGN.md §2's
// rules, the same ones the simulator and the lowering follow). The gap between the rank becoming
// free and the op starting — for the first op, between T0 and its start — is cut at two instants
// of the op's latest-arriving input L: the end of the op that produces it, and its arrival.
//
//   rank free ─────── L's producer ends ─────── L arrives ─────── op starts
//      │  waiting for L (fill, drain or       │  transfer in      │  unexplained
//      │  dependency, named by L's op/rank)   │  flight           │  (measured only)
//
// - Waiting for an op: the rank waits for the op that produces L, on its rank. Each such interval
//   names that op and follows the chain of waits back: the producer itself may have started late
//   because it waited for its own latest input, and so on, to the op that started the chain — the
//   first op on the chain that started because its own rank became free (or at T0), not because
//   of an input. Rank 3 waits for F(2,5) on rank 2, which waited for F(1,5) on rank 1, which
//   waited for F(0,5) on rank 0: started by F(0,5).
// - Fill and drain are waits for ops classified by where they fall in the rank's own timeline, as
//   the literature describes the warm-up and cool-down bubbles (GPipe, Huang et al. 2019;
//   PipeDream-Flush / Megatron's 1F1B, Narayanan et al. 2021; Zero Bubble PP, Qi et al. 2024): a
//   wait before the start of the rank's first backward (I, B or an overlapped pair) is *fill* —
//   the rank waits for the first microbatches to come down the pipeline and for the first
//   gradient to come back; a wait after the end of the rank's last forward (F or a pair) is *drain*
//   — the rank waits for the last gradients to come back. Waits between the two (the steady state)
//   are *dependency* waits. Where a rank's last forward ends before its first backward starts
//   (GPipe's turn-around), the gap counts as fill. The trailing idle after a rank's last op, until
//   the step ends, is drain: the rank has finished its share while others still work. With uniform
//   op times and free transfers, 1F1B's and GPipe's idle is then all fill and drain, (P−1)·(F+B)
//   per rank, the published bubble.
// - Transfer in flight: the producer had finished, its output had not yet arrived (from the
//   producer's end to the transfer's recorded end). A trace without a record for that transfer
//   cannot tell transfer time from overhead; that time is then unexplained.
// - Unexplained: the op's inputs had arrived and its rank was free, yet it had not started —
//   host, launch or framework overhead. Only measured traces have it; a simulation starts every
//   op as soon as it can. The leading idle of a rank whose first op has no inputs is unexplained
//   for the same reason.
// - Gradient sync: the modeled DP all-reduce after a rank's last op (simulated plans with
//   costs.gradient_sync), which the simulator counts as idle compute time.
// On each rank the intervals tile its idle time, so the causes sum to it (to rounding).
//
// The critical path is the chain of ops, transfers and (measured) overhead gaps, walked back from
// the op that ends the step through each op's binding predecessor — the latest-arriving input
// when it arrived no earlier than the rank was free, else the previous op on the rank — whose
// durations tile [T0, T1] and so sum to the makespan.
#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "engine/evaluation.h"
#include "engine/trace_file.h"

namespace pipescope {

/// A compute op of the schedule: its rank and its position in schedule.ranks[rank] (the index of
/// the simulator's op_times and of a trace record's `index`). An overlapped pair is one op.
struct OpRef {
  std::int32_t rank = -1;
  std::int32_t position = -1;
  bool valid() const { return rank >= 0; }
  friend bool operator==(const OpRef &, const OpRef &) = default;
};

enum class BubbleCause : std::uint8_t {
  Fill,         ///< waiting for an op before the rank's first backward (warm-up)
  Drain,        ///< waiting for an op after the rank's last forward, or done early (cool-down)
  Dependency,   ///< waiting for an op in the steady state
  Transfer,     ///< the producer had finished; its output was in flight
  Unexplained,  ///< inputs had arrived, rank was free: host, launch or framework overhead
  GradientSync, ///< the modeled tail after the rank's last op (Costs::gradient_sync_us)
};
inline constexpr int kBubbleCauseCount = 6;

/// "fill", "drain", "dependency", "transfer", "unexplained", "gradient_sync" (the JSON names).
std::string_view bubbleCauseName(BubbleCause cause);

/// One idle interval of one rank.
struct IdleInterval {
  double start_us = 0;
  double end_us = 0;
  BubbleCause cause = BubbleCause::Unexplained;
  /// The op whose output the rank waits for (fill, drain, dependency) or whose output is in
  /// flight (transfer); invalid for the rest.
  OpRef waits_for;
  /// The op that started the chain of waits leading to `waits_for` (waits_for itself when it did
  /// not wait); invalid when waits_for is.
  OpRef chain_start;
  std::int32_t chain_length = 0; ///< ops from waits_for back to chain_start, both included
  /// The op the rank starts when the interval ends (invalid for trailing idle).
  OpRef before;

  double durationUs() const { return end_us - start_us; }
};

struct RankBubbles {
  double busy_us = 0; ///< time inside the step when one of the rank's ops runs
  double idle_us = 0; ///< the step's makespan minus busy_us: the sum of `intervals`
  std::array<double, kBubbleCauseCount> cause_us{};
  std::vector<IdleInterval> intervals; ///< in time order
};

enum class PathSegmentKind : std::uint8_t {
  Compute,      ///< `op` runs
  Transfer,     ///< `op`'s output travels to `to_rank`
  Overhead,     ///< measured: the next op on `rank` could have started but had not
  GradientSync, ///< the modeled DP all-reduce after `rank`'s last op
};
/// "compute", "transfer", "overhead", "gradient_sync".
std::string_view pathSegmentKindName(PathSegmentKind kind);

struct PathSegment {
  PathSegmentKind kind = PathSegmentKind::Compute;
  double start_us = 0; ///< the part of the step this segment accounts for
  double end_us = 0;
  OpRef op;         ///< Compute: the op; Transfer: the producer; otherwise invalid
  int rank = 0;     ///< the rank it runs on (Transfer: the sender)
  int to_rank = -1; ///< Transfer: the receiver
  /// Transfer: what travels — the output of (stage, microbatch), a gradient or an activation.
  int stage = -1, microbatch = -1;
  bool gradient = false;
};

struct CriticalPath {
  std::vector<PathSegment> segments; ///< in time order, tiling [T0, T1]
  std::array<double, 4> kind_us{};   ///< per PathSegmentKind: they sum to the makespan
  std::size_t opCount() const;
};

struct BubbleAnalysis {
  double step_start_us = 0; ///< T0: the first op's start
  double step_end_us = 0;   ///< T1: the last op's end (plus a modeled gradient sync)
  bool measured = false;
  std::vector<RankBubbles> ranks;
  std::array<double, kBubbleCauseCount> cause_us{}; ///< over all ranks
  double idle_us = 0;                               ///< over all ranks
  double busy_us = 0;
  CriticalPath critical_path;
  /// Per op ([rank][position]): the input whose arrival set its start, when it did (the op waited
  /// for it), else invalid. The chains of waits follow these links.
  std::vector<std::vector<OpRef>> waited_for;

  double makespanUs() const { return step_end_us - step_start_us; }
};

/// One step of a schedule as it ran or was simulated, laid out like SimulationResult.
struct StepTimeline {
  std::vector<std::vector<OpTiming>> op_times; ///< [rank][position in schedule.ranks[rank]]
  std::vector<TransferTiming> transfers;       ///< by message id of the lowered program
  /// By message id: whether `transfers` holds that transfer's timing (empty: all do).
  std::vector<std::uint8_t> transfer_recorded;
  double gradient_sync_us = 0; ///< modeled DP all-reduce after each rank's last op
  bool measured = false;       ///< whether unexplained time is possible
};

/// Attributes every idle interval of every rank of the step and finds its critical path. The
/// error names a timeline that does not fit the schedule (a rank or op count that differs).
Result<BubbleAnalysis> explainBubbles(const Schedule &schedule, const LoweredProgram &program,
                                      const StepTimeline &timeline);
/// The same for the simulated step of an evaluation.
Result<BubbleAnalysis> explainBubbles(const Evaluation &evaluation);

/// The steps a trace holds, in order (a simulation holds step 0).
std::vector<int> traceSteps(const Trace &trace);

/// One step of a trace laid out on its schedule: each record at its op's position (an overlapped
/// pair's two records at one), each transfer record at its message id (the first recorded after
/// its producer started, of those ending before the step ends). The error names an op of the step
/// the schedule lacks or misses, or two ops a rank ran in another order than the schedule's (a
/// trace of another schedule with the same ops, as GPipe's and 1F1B's are).
Result<StepTimeline> stepTimelineFromTrace(const Trace &trace, const Schedule &schedule,
                                           const LoweredProgram &program, int step);

/// The chain of waits from `op` back to the op that started it: `op` first.
std::vector<OpRef> waitChain(const BubbleAnalysis &analysis, OpRef op);

/// "F(2,5)", "I(3,1)", "F(0,7)&B(7,3)" for an overlapped pair (stage, microbatch).
std::string describeOpShort(const Op &op);
/// The interval's cause as a sentence, for a tooltip or a report: "fill: waits for F(2,5) on
/// rank 2, which waited for F(1,5) on rank 1 ← ... ← started by F(0,5) on rank 0". Long chains
/// are cut to their first links and their start.
std::string describeIdleInterval(const Schedule &schedule, const BubbleAnalysis &analysis,
                                 const IdleInterval &interval);

/// The analysis as one JSON object, written record by record (one interval or path segment per
/// line): {step_start_us, step_end_us, makespan_us, busy_us, idle_us, causes{...}, ranks[{rank,
/// busy_us, idle_us, causes{...}, intervals[{start_us, end_us, cause, waits_for?, chain_start?,
/// chain_length?, before?}]}], critical_path_us{compute, transfer, overhead, gradient_sync},
/// critical_path[{type, rank, kind, stage, microbatch, start_us, end_us, ...}]}. Ops are
/// {rank, kind, stage, microbatch} (plus backward_stage, backward_microbatch for an F&B pair).
/// `header` (an object) adds leading keys.
void streamBubbleJson(const TextSink &write, const Schedule &schedule,
                      const BubbleAnalysis &analysis, const nlohmann::json &header = nullptr);

} // namespace pipescope
