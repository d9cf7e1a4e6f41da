#pragma once
// Schedules: for each pipeline rank, the ordered list of its compute ops (DESIGN.md §2, §4).
#include <cstddef>
#include <string>
#include <vector>

#include "engine/op.h"
#include "engine/placement.h"
#include "engine/result.h"

namespace pipescope {

/// What to generate. V, the microbatch group and the other knobs are ignored by families that do
/// not use them; checkScheduleRequest says which apply.
struct ScheduleRequest {
  std::string name = "1f1b";
  int pp = 4;               ///< P
  int microbatches = 8;     ///< M
  int chunks = 1;           ///< V
  int microbatch_group = 0; ///< interleaved-1f1b: microbatches per group, 0 = P (depth-first)
};

/// A generated or loaded schedule. ranks[r] is rank r's op list in execution order.
struct Schedule {
  std::string name;
  Placement placement;
  int microbatch_group = 0;
  std::vector<std::vector<Op>> ranks;

  int pp() const { return placement.pp; }
  int microbatches() const { return placement.microbatches; }
  int chunks() const { return placement.chunks; }
  std::size_t opCount() const;
};

/// Everything the app and CLI show about a schedule family.
struct ScheduleFamily {
  std::string name;
  std::string title;       ///< e.g. "Interleaved 1F1B"
  std::string summary;     ///< one or two sentences: what it does
  std::string constraints; ///< which P, M, V it accepts
  std::string reference;   ///< the published source
  PlacementKind placement = PlacementKind::Loop;
  bool uses_chunks = false; ///< V is a free parameter
  bool uses_microbatch_group = false;
  bool splits_backward = false; ///< emits I and W instead of B
  /// Emits overlapped F&B pairs (their time is Costs::overlapped_us).
  bool overlapped_pairs = false;
  /// Runs only with expert parallelism (Megatron-Core's combined 1F1B: "only supported with
  /// expert model parallelism"); the planner offers it where EP > 1.
  bool needs_expert_parallel = false;
};

/// The built-in families in display order (custom schedules are loaded, not generated).
const std::vector<ScheduleFamily> &scheduleFamilies();
/// The family of that name, or nullptr.
const ScheduleFamily *findScheduleFamily(const std::string &name);
/// How many model stages the request's schedule splits the model into, as its placement will
/// (Placement::modelStageCount) without generating it: P for a bidirectional family (DualPipe's
/// two directions run the same P stages), P × V otherwise.
int modelStageCount(const ScheduleRequest &request);

/// Size guard: the most compute ops one schedule may have (keeps memory and time bounded).
inline constexpr std::size_t kMaxScheduleOps = std::size_t{1} << 25;
/// Peak memory per op of `pipescope simulate --chrome-trace` (the costliest run), measured with
/// /usr/bin/time -v (README.md, "Memory"): what the out-of-memory message quotes.
inline constexpr std::size_t kPeakBytesPerOp = 140;
inline constexpr int kMaxPipelineRanks = 16384;
inline constexpr int kMaxMicrobatches = 1 << 22;
inline constexpr int kMaxChunks = 64;

/// Whether the request is one the family accepts; the error says what would work.
Status checkScheduleRequest(const ScheduleRequest &request);

/// Generates a built-in schedule (after checkScheduleRequest).
Result<Schedule> generateSchedule(const ScheduleRequest &request);

/// Every required op appears exactly once, on the rank that owns its stage: for each stage on a
/// microbatch's route, one forward and either one full backward or one input-grad plus one
/// weight-grad. The error names the rank, the op and the problem.
Status checkOpCoverage(const Schedule &schedule);

/// Builds a custom schedule from per-rank op lists; infers the placement when not given.
Result<Schedule> makeCustomSchedule(std::vector<std::vector<Op>> ranks,
                                    const std::string *placement_name = nullptr);

} // namespace pipescope
