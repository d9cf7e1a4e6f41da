#include "engine/calibration.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <tuple>

namespace pipescope {

double median(std::vector<double> values) {
  if (values.empty()) return 0;
  const auto middle = values.begin() + static_cast<std::ptrdiff_t>(values.size() / 2);
  std::nth_element(values.begin(), middle, values.end());
  if (values.size() % 2 == 1) return *middle;
  const double upper = *middle;
  const double lower = *std::max_element(values.begin(), middle);
  return (lower + upper) / 2;
}

namespace {

// (rank, kind, stage, microbatch) identifies an op across traces of one plan.
using OpKey = std::tuple<int, int, int, int>;

OpKey keyOf(const TraceOp &op) {
  return {op.rank, static_cast<int>(op.kind), op.stage, op.microbatch};
}

// An overlapped pair is recorded as two parts with one interval; count its time once.
bool countsAsBusy(const TraceOp &op) {
  return !(op.overlapped && op.kind == OpKind::FullBackward);
}

} // namespace

bool ConcurrencySlowdown::matters() const {
  return std::any_of(factor.begin(), factor.end(),
                     [](double f) { return std::abs(f - 1.0) > 0.02; });
}

namespace {

// Other ranks computing at each measured op's midpoint, one entry per op of the trace (an
// overlapped pair's backward part takes its forward part's count); -1 where the op's rank is
// outside [0, ranks).
std::vector<int> othersComputingPerOp(const Trace &measured, int ranks) {
  std::vector<int> counts(measured.ops.size(), -1);
  // One step at a time: ops of different steps never overlap.
  std::map<int, std::vector<std::size_t>> by_step;
  for (std::size_t i = 0; i < measured.ops.size(); ++i) {
    const TraceOp &op = measured.ops[i];
    if (countsAsBusy(op) && op.rank >= 0 && op.rank < ranks) by_step[op.step].push_back(i);
  }
  std::map<std::tuple<int, int, double>, int> pair_counts; // (rank, step, start) of a pair
  for (auto &[step, indices] : by_step) {
    std::vector<std::vector<std::size_t>> by_rank(static_cast<std::size_t>(ranks));
    for (std::size_t i : indices)
      by_rank[static_cast<std::size_t>(measured.ops[i].rank)].push_back(i);
    std::vector<std::vector<std::pair<double, double>>> intervals(by_rank.size());
    for (std::size_t r = 0; r < by_rank.size(); ++r) {
      std::sort(by_rank[r].begin(), by_rank[r].end(), [&](std::size_t a, std::size_t b) {
        return measured.ops[a].start_us < measured.ops[b].start_us;
      });
      for (std::size_t i : by_rank[r])
        intervals[r].push_back({measured.ops[i].start_us, measured.ops[i].end_us});
    }
    const auto others = othersComputingAtMidpoints(intervals);
    for (std::size_t r = 0; r < by_rank.size(); ++r)
      for (std::size_t k = 0; k < by_rank[r].size(); ++k) {
        const TraceOp &op = measured.ops[by_rank[r][k]];
        counts[by_rank[r][k]] = others[r][k];
        if (op.overlapped) pair_counts[{op.rank, op.step, op.start_us}] = others[r][k];
      }
  }
  for (std::size_t i = 0; i < measured.ops.size(); ++i) {
    const TraceOp &op = measured.ops[i];
    if (!countsAsBusy(op))
      if (auto it = pair_counts.find({op.rank, op.step, op.start_us}); it != pair_counts.end())
        counts[i] = it->second;
  }
  return counts;
}

ConcurrencySlowdown fitFromCounts(const Trace &measured, const std::vector<int> &counts,
                                  int ranks) {
  ConcurrencySlowdown fit;
  if (ranks < 2) return fit;
  // group (stage, kind, overlapped) -> others computing -> durations
  std::map<std::tuple<int, int, bool>, std::map<int, std::vector<double>>> groups;
  for (std::size_t i = 0; i < measured.ops.size(); ++i) {
    const TraceOp &op = measured.ops[i];
    if (!countsAsBusy(op) || counts[i] < 0) continue;
    groups[{op.stage, static_cast<int>(op.kind), op.overlapped}][counts[i]].push_back(op.end_us -
                                                                                      op.start_us);
  }
  // A group's durations at one count need two ops: warm-up and cool-down ops run once a step, so
  // two measured steps give two. (With three, a two-step DualPipeV run at M = 32 on one H100
  // fitted no factor below two others computing and missed its bubble by 1.7 points.)
  constexpr std::size_t kMinimumOps = 2;
  const int all = ranks - 1;
  std::vector<std::vector<double>> ratios(static_cast<std::size_t>(ranks));
  for (const auto &[group, by_count] : groups) {
    auto steady = by_count.find(all);
    if (steady == by_count.end() || steady->second.size() < kMinimumOps) continue;
    const double reference = median(steady->second);
    if (!(reference > 0)) continue;
    for (const auto &[count, durations] : by_count)
      if (count != all && durations.size() >= kMinimumOps)
        ratios[static_cast<std::size_t>(count)].push_back(median(durations) / reference);
  }
  fit.factor.assign(static_cast<std::size_t>(ranks), 1.0);
  std::vector<bool> estimated(ratios.size(), false);
  estimated[static_cast<std::size_t>(all)] = true; // the reference: 1 by definition
  for (std::size_t n = 0; n < ratios.size(); ++n)
    if (!ratios[n].empty()) {
      fit.factor[n] = median(ratios[n]);
      estimated[n] = true;
    }
  // A count too rare to fit (the one op of a step that runs alone) takes the nearest fitted
  // count's factor, the busier one on a tie; all of them at P - 1 (1) when none was fitted.
  const std::vector<double> fitted = fit.factor;
  for (std::size_t n = 0; n < fitted.size(); ++n) {
    if (estimated[n]) continue;
    for (std::size_t distance = 1; distance < fitted.size(); ++distance) {
      if (n + distance < fitted.size() && estimated[n + distance]) {
        fit.factor[n] = fitted[n + distance];
        break;
      }
      if (n >= distance && estimated[n - distance]) {
        fit.factor[n] = fitted[n - distance];
        break;
      }
    }
  }
  // Sharing can only slow an op down: fewer others computing never makes it slower. Ratios that
  // say otherwise (ops of noisy durations, a count seen in few ops) are held to that, so a run
  // without contention fits none: each factor at most 1 and at most the next count's.
  for (std::size_t n = fit.factor.size(); n-- > 0;)
    fit.factor[n] = std::min(fit.factor[n], n + 1 < fit.factor.size() ? fit.factor[n + 1] : 1.0);
  return fit;
}

} // namespace

ConcurrencySlowdown fitConcurrencySlowdown(const Trace &measured, int ranks) {
  return fitFromCounts(measured, othersComputingPerOp(measured, ranks), ranks);
}

std::vector<StepMetrics> traceStepMetrics(const Trace &trace) {
  std::map<int, std::vector<const TraceOp *>> by_step;
  int ranks = 0;
  for (const auto &op : trace.ops) {
    by_step[op.step].push_back(&op);
    ranks = std::max(ranks, op.rank + 1);
  }
  std::vector<StepMetrics> steps;
  for (const auto &[step, ops] : by_step) {
    double first = ops.front()->start_us, last = ops.front()->end_us, busy = 0;
    for (const auto *op : ops) {
      first = std::min(first, op->start_us);
      last = std::max(last, op->end_us);
      if (countsAsBusy(*op)) busy += op->end_us - op->start_us;
    }
    StepMetrics metrics;
    metrics.step = step;
    metrics.makespan_us = last - first;
    const double capacity = ranks * metrics.makespan_us;
    metrics.bubble_fraction = capacity > 0 ? 1 - busy / capacity : 0;
    metrics.bubble_ratio = busy > 0 ? (capacity - busy) / busy : 0;
    steps.push_back(metrics);
  }
  return steps;
}

TraceComparison compareTraces(const Trace &predicted, const Trace &measured) {
  TraceComparison comparison;
  const auto predicted_steps = traceStepMetrics(predicted);
  auto measured_steps = traceStepMetrics(measured);
  if (!predicted_steps.empty()) comparison.predicted = predicted_steps.front();
  if (!measured_steps.empty()) {
    std::sort(
        measured_steps.begin(), measured_steps.end(),
        [](const StepMetrics &a, const StepMetrics &b) { return a.makespan_us < b.makespan_us; });
    comparison.measured = measured_steps[measured_steps.size() / 2];
  }
  if (comparison.predicted.makespan_us > 0)
    comparison.makespan_relative_error =
        (comparison.measured.makespan_us - comparison.predicted.makespan_us) /
        comparison.predicted.makespan_us;
  comparison.bubble_fraction_difference =
      comparison.measured.bubble_fraction - comparison.predicted.bubble_fraction;
  comparison.bubble_ratio_difference =
      comparison.measured.bubble_ratio - comparison.predicted.bubble_ratio;

  std::map<OpKey, std::vector<double>> measured_durations;
  for (const auto &op : measured.ops)
    measured_durations[keyOf(op)].push_back(op.end_us - op.start_us);
  std::map<int, std::vector<double>> absolute, signed_errors;
  for (const auto &op : predicted.ops) {
    const auto it = measured_durations.find(keyOf(op));
    if (it == measured_durations.end()) {
      ++comparison.unmatched_ops;
      continue;
    }
    ++comparison.matched_ops;
    const double expected = op.end_us - op.start_us;
    if (expected <= 0) continue;
    const double error = (median(it->second) - expected) / expected;
    absolute[static_cast<int>(op.kind)].push_back(std::abs(error));
    signed_errors[static_cast<int>(op.kind)].push_back(error);
  }
  for (auto &[kind, errors] : absolute) {
    KindError entry;
    entry.kind = static_cast<OpKind>(kind);
    entry.count = static_cast<int>(errors.size());
    entry.worst_relative_error = *std::max_element(errors.begin(), errors.end());
    entry.median_relative_error = median(errors);
    entry.median_signed_error = median(signed_errors[kind]);
    comparison.kinds.push_back(entry);
  }
  return comparison;
}

Result<Costs> calibrateCosts(const Schedule &schedule, const Trace &measured, const Costs &current,
                             bool fit_concurrency) {
  const Placement &placement = schedule.placement;
  const auto stages = static_cast<std::size_t>(placement.stageCount());
  if (measured.ops.empty()) return makeError("the measured trace has no ops to calibrate from");
  for (const auto &op : measured.ops)
    if (op.stage < 0 || static_cast<std::size_t>(op.stage) >= stages ||
        op.rank != placement.rankOf(op.stage))
      return makeError("the measured trace does not belong to this schedule: stage " +
                       std::to_string(op.stage) + " on rank " + std::to_string(op.rank));

  // Ranks that share a device run their ops faster while fewer others compute. Fitted first, so
  // that each stage's times are those of the steady state (all other ranks computing): an op's
  // measured time over its count's factor.
  const std::vector<int> counts = othersComputingPerOp(measured, placement.pp);
  const ConcurrencySlowdown slowdown =
      fit_concurrency ? fitFromCounts(measured, counts, placement.pp) : ConcurrencySlowdown{};
  const auto steadyDuration = [&](const TraceOp &op) {
    const auto i = static_cast<std::size_t>(&op - measured.ops.data());
    const double duration = op.end_us - op.start_us;
    if (!slowdown.matters() || counts[i] < 0) return duration;
    return duration / concurrencyFactor(slowdown.factor, counts[i]);
  };

  // Durations per stage and kind; overlapped pairs separately, as ratios to F + B.
  std::vector<std::vector<double>> forward(stages), input_grad(stages), weight(stages),
      full(stages);
  std::vector<const TraceOp *> pair_forwards;
  for (const auto &op : measured.ops) {
    const double duration = steadyDuration(op);
    const auto s = static_cast<std::size_t>(op.stage);
    if (op.overlapped) {
      if (op.kind == OpKind::Forward) pair_forwards.push_back(&op);
      continue;
    }
    switch (op.kind) {
    case OpKind::Forward: forward[s].push_back(duration); break;
    case OpKind::InputGrad: input_grad[s].push_back(duration); break;
    case OpKind::WeightGrad: weight[s].push_back(duration); break;
    case OpKind::FullBackward: full[s].push_back(duration); break;
    case OpKind::OverlappedPair: break;
    }
  }
  auto base = resolveStageTimes(current, placement);
  if (!base) return base.error();
  Costs calibrated = current;
  calibrated.stage_overrides.resize(stages);
  for (std::size_t s = 0; s < stages; ++s) {
    StageCost cost{base->forward[s], base->full_backward[s], base->weight_grad[s],
                   base->input_grad[s] - (base->full_backward[s] - base->weight_grad[s])};
    if (!forward[s].empty()) cost.forward_us = median(forward[s]);
    if (!weight[s].empty()) cost.weight_us = median(weight[s]);
    if (!input_grad[s].empty()) {
      // A measured lone I is what it is: B is refitted from it, with no split extra on top.
      cost.backward_us = median(input_grad[s]) + cost.weight_us;
      cost.input_grad_split_extra_us = 0;
    } else if (!full[s].empty()) {
      cost.backward_us = median(full[s]);
      // A full backward hides the split; keep the previous W share of B.
      const double share =
          base->full_backward[s] > 0 ? base->weight_grad[s] / base->full_backward[s] : 0.5;
      cost.weight_us = cost.backward_us * share;
    }
    // A stage whose ops measured no time (an all-zero trace, a broken timer) would calibrate
    // into a plan that predicts nothing and that the backend refuses to size.
    const bool measured_forward = !forward[s].empty();
    const bool measured_backward = !input_grad[s].empty() || !full[s].empty();
    for (const auto &[value, what, measured_it] :
         {std::tuple{cost.forward_us, "forward (F)", measured_forward},
          std::tuple{cost.backward_us, "backward (B = I + W)", measured_backward}})
      if (!std::isfinite(value) || value <= 0)
        return makeError(
            "stage " + std::to_string(s) + "'s " + what + " would calibrate to " +
            nlohmann::json(value).dump() + " us: " +
            (measured_it ? std::string("its measured ops last a median of 0 us (an all-zero or "
                                       "broken measurement); measure again")
                         : std::string("the measurement has none of its ops and the current "
                                       "cost is not positive")));
    calibrated.stage_overrides[s] = cost;
  }
  // Overlap factor: a pair's time over the F + B it overlaps.
  if (!pair_forwards.empty()) {
    std::map<std::tuple<int, int>, double> pair_end;
    std::vector<double> ratios;
    for (const auto &op : measured.ops)
      if (op.overlapped && op.kind == OpKind::FullBackward) {
        for (const auto *f : pair_forwards)
          if (f->rank == op.rank && f->step == op.step && f->start_us == op.start_us) {
            const auto &fs = calibrated.stage_overrides[static_cast<std::size_t>(f->stage)];
            const auto &bs = calibrated.stage_overrides[static_cast<std::size_t>(op.stage)];
            if (fs.forward_us + bs.backward_us > 0)
              ratios.push_back(steadyDuration(op) / (fs.forward_us + bs.backward_us));
            break;
          }
      }
    if (!ratios.empty()) {
      // The cost model holds a pair between its longer part and 2(F + B) (Costs::check): a pair
      // measured outside that range (timer noise, a broken measurement) is held to its nearest
      // end. Above F + B is real: halves sharing one device's SMs and memory slow each other.
      const double F = calibrated.forward_us, B = calibrated.backward_us;
      const double lowest = F + B > 0 ? std::max(F, B) / (F + B) : 1.0;
      const double factor = std::clamp(median(ratios), lowest, kMaxOverlapSlowdown);
      calibrated.overlapped_us = factor * (calibrated.forward_us + calibrated.backward_us);
    }
  }
  // Transfers: where a consumer started later than its rank was free, the wait after its
  // producer's end is the transfer time of that boundary.
  std::map<std::tuple<int, int, int, int>, const TraceOp *> by_key; // step, part, stage, mb
  std::map<std::tuple<int, int>, std::vector<const TraceOp *>> by_rank_step;
  for (const auto &op : measured.ops) {
    const int part = op.kind == OpKind::Forward ? 0 : (op.kind == OpKind::WeightGrad ? 2 : 1);
    by_key[{op.step, part, op.stage, op.microbatch}] = &op;
    by_rank_step[{op.rank, op.step}].push_back(&op);
  }
  std::vector<std::vector<double>> waits(stages);
  for (auto &[rank_step, ops] : by_rank_step) {
    std::sort(ops.begin(), ops.end(),
              [](const TraceOp *a, const TraceOp *b) { return a->start_us < b->start_us; });
    double free_at = -1e300;
    for (const auto *op : ops) {
      const int step = std::get<1>(rank_step);
      const TraceOp *producer = nullptr;
      int boundary = -1;
      if (op->kind == OpKind::Forward) {
        const int prev = placement.previousStage(op->stage);
        if (prev >= 0 && placement.rankOf(prev) != op->rank) {
          auto it = by_key.find({step, 0, prev, op->microbatch});
          if (it != by_key.end()) producer = it->second, boundary = prev;
        }
      } else if (op->kind == OpKind::InputGrad || op->kind == OpKind::FullBackward) {
        const int next = placement.nextStage(op->stage);
        if (next >= 0 && placement.rankOf(next) != op->rank) {
          auto it = by_key.find({step, 1, next, op->microbatch});
          if (it != by_key.end()) producer = it->second, boundary = op->stage;
        }
      }
      // boundary indexes the stage whose output crosses: s for s -> s+1 and its gradient back.
      if (producer && op->start_us > free_at + 1e-9 && op->start_us >= producer->end_us)
        waits[static_cast<std::size_t>(boundary)].push_back(op->start_us - producer->end_us);
      free_at = std::max(free_at, op->end_us);
    }
  }
  bool any_wait = false;
  for (const auto &w : waits)
    any_wait = any_wait || !w.empty();
  if (any_wait) {
    calibrated.boundary_transfer_us.assign(stages, 0.0);
    for (std::size_t s = 0; s < stages; ++s) {
      const int next = placement.nextStage(static_cast<int>(s));
      if (next < 0 || placement.rankOf(next) == placement.rankOf(static_cast<int>(s))) continue;
      // Waits bound the transfer from above; the smallest typical wait is the link time.
      calibrated.boundary_transfer_us[s] =
          waits[s].empty() ? base->send_forward[s]
                           : *std::min_element(waits[s].begin(), waits[s].end());
    }
  }
  // Where the measurement shows the slowdown, the calibrated costs carry it, and every
  // simulation of them (compare, the backend's done line, the explorer) replays it.
  calibrated.concurrency_slowdown.clear();
  if (slowdown.matters()) calibrated.concurrency_slowdown = slowdown.factor;
  if (auto status = calibrated.check(placement.stageCount()); !status) return status.error();
  return calibrated;
}

} // namespace pipescope
