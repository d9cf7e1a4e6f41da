#pragma once
// One call from a schedule request and costs to everything the app shows: the schedule, its
// lowered program, the simulation and the published closed forms beside it.
#include <optional>
#include <string>
#include <vector>

#include "engine/costs.h"
#include "engine/lowering.h"
#include "engine/schedule.h"
#include "engine/simulator.h"

namespace pipescope {

/// A published closed form for the schedule, evaluated at the plan's F, B, W, P, M, V. It is
/// exact only under its assumptions (uniform op times, free transfers, `exact_when`).
struct AnalyticMetrics {
  double makespan_us = 0;
  double bubble_fraction = 0;
  double bubble_ratio = 0;
  std::vector<int> peak_inflight; ///< per rank, in chunks (empty when none is published)
  std::string bubble_formula;     ///< e.g. "(P-1)/(M+P-1)"
  std::string memory_formula;     ///< e.g. "min(P-r, M) microbatches on rank r"
  std::string source;             ///< the publication
  std::string exact_when;         ///< the regime in which the simulation must match it
};

/// The closed form for this schedule, or nothing when none is published (custom schedules).
std::optional<AnalyticMetrics> analyticMetrics(const Schedule &schedule, const Costs &costs);

struct Evaluation {
  Schedule schedule;
  LoweredProgram program;
  StageTimes times;
  SimulationResult simulation;
  std::optional<AnalyticMetrics> analytic;
};

/// How far the simulated bubble fraction is from the closed form's, in fractions (0 without a
/// closed form), and whether that is a real departure: above rounding (1e-6, a ten-thousandth of
/// a percentage point), the line every face draws between "matches" and "differs".
double closedFormGap(const Evaluation &evaluation);
inline bool departsFromClosedForm(const Evaluation &evaluation) {
  return closedFormGap(evaluation) >= 1e-6;
}

/// One way a plan leaves the regime in which its closed form is exact.
enum class DepartureKind {
  UnevenStages,    ///< the virtual stages' op times differ
  Transfers,       ///< transfers between stages take time
  GradientSync,    ///< a gradient sync and optimizer tail after each rank's last op
  SharedDevice,    ///< ranks sharing a device slow each other
  Microbatches,    ///< M outside the formula's range (below P, not a multiple of P, ...)
  MicrobatchGroup, ///< an interleaved group G other than P
  UnequalOpKinds,  ///< F, I and W differ where the formula takes them equal
  PairOverlap,     ///< an overlapped F&B pair takes other than F + B
};
struct AnalyticDeparture {
  DepartureKind kind;
  std::string text; ///< with its size, e.g. "transfers take up to 2.6 ms"
};

/// Where an evaluated plan leaves the regime in which its closed form is exact
/// (AnalyticMetrics::exact_when), one phrase each with its size, e.g. "the stages' op times
/// differ (F 98.1 ms to 121 ms a stage)", "transfers take up to 2.6 ms", "M = 6 is not a
/// multiple of P = 4". Empty when the plan is inside that regime (or there is no closed form):
/// the simulation then matches the formula, except V-Half's and V-Min's, which are approximate.
/// So a reader of "differs by 4.7 points" learns which assumption this plan breaks, not a list
/// of all of them. `step_overhead_us`: how much of the tail after each rank's last op is the
/// hardware's step overhead (HardwareSpec::step_overhead_us), named apart from the sync.
std::vector<AnalyticDeparture> analyticDepartures(const Evaluation &evaluation,
                                                  double step_overhead_us = 0);

/// The simulated bubble fraction of the same schedule with one departure's costs made as the
/// closed form assumes: each kind of op at its mean over the stages, free transfers, no sync
/// tail, separate devices, F = I = W at their mean on each stage, an F&B pair taking F + B. So
/// "without it the bubble would be 9.6 %" says how much of the gap that departure makes (one at
/// a time: the effects of several need not add up). Nothing for M or G, which change the
/// schedule itself, or when the simulation fails.
std::optional<double> bubbleFractionWithout(const Evaluation &evaluation, DepartureKind kind);

/// How the gap between the simulated bubble and the closed form's divides among the departures
/// that are costs. One at a time (bubbleFractionWithout) their effects need not add up: evening
/// the stages also shortens the transfers' share of the critical path, so taking either away
/// first claims the overlap. Each share here is Shapley's value (Shapley, "A Value for n-Person
/// Games", 1953): the bubble a departure adds, averaged over every order of taking the costs
/// away, so the shares add up to `simulated - without_all` exactly, and a departure that adds
/// nothing in any order gets 0.
struct GapShares {
  std::vector<std::optional<double>> shares; ///< per departure, as a fraction; none for M or G
  /// Per departure, the bubble with it alone as the formula assumes: bubbleFractionWithout's
  /// figure, already among the 2^n simulations. None for M or G.
  std::vector<std::optional<double>> without_alone;
  double without_all = 0; ///< the bubble with every cost as the formula assumes, all at once
};

/// The shares for `departures` (analyticDepartures of the same evaluation), from 2^n
/// simulations over the n cost departures. Nothing when no departure is a cost, when that would
/// mean more than `max_simulated_ops` ops simulated in all (n simulations of a million-op plan
/// take seconds), or when a simulation fails.
std::optional<GapShares> closedFormGapShares(const Evaluation &evaluation,
                                             const std::vector<AnalyticDeparture> &departures,
                                             double max_simulated_ops = 4e6);

/// Whether every figure an evaluation reports is finite and non-negative: the makespan, each
/// rank's busy, idle and peak figures, both bubble metrics and the analytic ones. The error names
/// the figure and, for a non-finite one, the cost that made it so and what would work.
/// evaluateSchedule and evaluate run it, so nothing impossible reaches a report or a file.
Status checkEvaluationFigures(const Evaluation &evaluation, const Costs &costs);

/// Checks op coverage, lowers, resolves costs and simulates a schedule.
Result<Evaluation> evaluateSchedule(Schedule schedule, const Costs &costs,
                                    const SimulationOptions &options = {});
/// The same for a schedule generateSchedule built, without the coverage pass: the suites check
/// every generator's coverage over grids of P, M and V, and the simulator still refuses anything
/// that cannot complete. The pass is a tenth of a million-op evaluation; a schedule from a file,
/// a trace or an edit goes through evaluateSchedule.
Result<Evaluation> evaluateGenerated(Schedule schedule, const Costs &costs,
                                     const SimulationOptions &options = {});
/// Generates the requested schedule, then evaluateGenerated.
Result<Evaluation> evaluate(const ScheduleRequest &request, const Costs &costs,
                            const SimulationOptions &options = {});

} // namespace pipescope
