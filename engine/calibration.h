#pragma once
// Measured against predicted: the errors between two traces of the same plan, and a refit of the
// cost model (F, B, W per stage, the F&B overlap, transfer times) to a measured trace.
#include <string>
#include <vector>

#include "engine/costs.h"
#include "engine/schedule.h"
#include "engine/simulator.h"
#include "engine/trace_file.h"

namespace pipescope {

/// The median of `values` (the mean of the two middle ones for an even count); 0 when empty.
double median(std::vector<double> values);

/// Relative error of one op kind's durations, measured against predicted, over matched ops.
struct KindError {
  OpKind kind = OpKind::Forward;
  int count = 0;
  double median_relative_error = 0; ///< median of |measured - predicted| / predicted
  double worst_relative_error = 0;
  double median_signed_error = 0; ///< median of (measured - predicted) / predicted
};

/// One step's metrics from a trace (a simulated trace has one step, 0).
struct StepMetrics {
  int step = 0;
  double makespan_us = 0;
  double bubble_fraction = 0;
  double bubble_ratio = 0;
};

struct TraceComparison {
  StepMetrics predicted;
  StepMetrics measured;                  ///< the median step of the measured trace (by makespan)
  double makespan_relative_error = 0;    ///< (measured - predicted) / predicted
  double bubble_fraction_difference = 0; ///< measured - predicted, in fraction points
  double bubble_ratio_difference = 0;
  std::vector<KindError> kinds; ///< per op kind present in both traces
  int matched_ops = 0;
  int unmatched_ops = 0; ///< ops of the prediction missing from the measurement
};

/// Per-step metrics of a trace, in step order.
std::vector<StepMetrics> traceStepMetrics(const Trace &trace);

/// Compares a prediction with a measurement of the same plan; ops are matched by rank, kind,
/// stage and microbatch, and each measured op's duration is its median over the measured steps.
TraceComparison compareTraces(const Trace &predicted, const Trace &measured);

/// Refits the costs to a measurement of `schedule`: per-stage F, B = I + W and W from the
/// median durations of each stage's ops; the F&B overlap factor from overlapped pairs; the
/// transfer time of each stage boundary from the gaps where a consumer waited for its input; and
/// the concurrency slowdown where it matters (fitConcurrencySlowdown; cleared where it does not),
/// the per-stage times then being the steady state's. `fit_concurrency` false keeps the plain
/// medians and no slowdown (an imported run's plan states the run's own median op times). What
/// the measurement does not show is kept from `current`.
Result<Costs> calibrateCosts(const Schedule &schedule, const Trace &measured, const Costs &current,
                             bool fit_concurrency = true);

/// Contention between ranks that share a device (gpu-shared runs every stage in a partition of one
/// GPU, whose memory bandwidth, cache and power the partitions share): an op's duration when n
/// other ranks compute at its midpoint, over its duration when all of them do, the steady state
/// that the calibrated (median) op times describe (docs/measurements/gpu-shared-h100.md).
struct ConcurrencySlowdown {
  std::vector<double> factor; ///< index n: other ranks computing; factor[P-1] = 1; empty: none
  /// Whether some factor is more than 2 % from 1 (ranks on separate GPUs: none is).
  bool matters() const;
};

/// Fits the slowdown to a measured trace of `ranks` ranks: for each group of ops (stage, kind,
/// overlapped pair or not), the median duration at each count of other ranks computing over the
/// group's median with all of them computing; a count's factor is the median of those ratios over
/// the groups that have both (with at least 3 ops at the count); a count no group has enough ops
/// at takes the nearest fitted count's factor. Factors are then held to at most 1 and to not
/// more than the next count's: sharing can slow an op down, not speed it up.
ConcurrencySlowdown fitConcurrencySlowdown(const Trace &measured, int ranks);

} // namespace pipescope
