#pragma once
// Checks shared by the engine suites: that a simulated schedule respects every dependency.
#include <map>
#include <string>
#include <tuple>

#include "engine/evaluation.h"

namespace pipescope::testing {

/// Returns an empty string when every op starts after its inputs are done and delivered, else a
/// description of the first violation.
inline std::string findDependencyViolation(const Evaluation &e) {
  const auto &placement = e.schedule.placement;
  // End time of each part: 0 = forward, 1 = backward-input (I or B), 2 = weight.
  std::map<std::tuple<int, int, int>, std::pair<double, int>> ends;
  for (std::size_t r = 0; r < e.schedule.ranks.size(); ++r)
    for (std::size_t i = 0; i < e.schedule.ranks[r].size(); ++i) {
      const Op &op = e.schedule.ranks[r][i];
      const double end = e.simulation.op_times[r][i].end_us;
      const int rank = static_cast<int>(r);
      switch (op.kind) {
      case OpKind::Forward: ends[{0, op.stage, op.microbatch}] = {end, rank}; break;
      case OpKind::InputGrad:
      case OpKind::FullBackward: ends[{1, op.stage, op.microbatch}] = {end, rank}; break;
      case OpKind::WeightGrad: ends[{2, op.stage, op.microbatch}] = {end, rank}; break;
      case OpKind::OverlappedPair:
        ends[{0, op.stage, op.microbatch}] = {end, rank};
        ends[{1, op.backward_stage, op.backward_microbatch}] = {end, rank};
        break;
      }
    }
  constexpr double kEpsilon = 1e-9;
  auto ready = [&](int part, int stage, int microbatch, double link, int consumer_rank) {
    const auto &[end, rank] = ends.at({part, stage, microbatch});
    return end + (rank == consumer_rank ? 0.0 : link);
  };
  for (std::size_t r = 0; r < e.schedule.ranks.size(); ++r)
    for (std::size_t i = 0; i < e.schedule.ranks[r].size(); ++i) {
      const Op &op = e.schedule.ranks[r][i];
      const double start = e.simulation.op_times[r][i].start_us;
      const int rank = static_cast<int>(r);
      auto check_forward = [&](int stage, int microbatch) -> std::string {
        const int prev = placement.previousStage(stage);
        if (prev >= 0 &&
            ready(0, prev, microbatch, e.times.send_forward[prev], rank) > start + kEpsilon)
          return formatOp(op) + " on rank " + std::to_string(r) + " starts before its input";
        return {};
      };
      auto check_backward = [&](int stage, int microbatch) -> std::string {
        if (ready(0, stage, microbatch, 0, rank) > start + kEpsilon)
          return formatOp(op) + " starts before its own forward ends";
        const int next = placement.nextStage(stage);
        if (next >= 0 &&
            ready(1, next, microbatch, e.times.send_backward[next], rank) > start + kEpsilon)
          return formatOp(op) + " on rank " + std::to_string(r) +
                 " starts before its gradient arrives";
        return {};
      };
      std::string problem;
      switch (op.kind) {
      case OpKind::Forward: problem = check_forward(op.stage, op.microbatch); break;
      case OpKind::InputGrad:
      case OpKind::FullBackward: problem = check_backward(op.stage, op.microbatch); break;
      case OpKind::WeightGrad:
        if (ready(1, op.stage, op.microbatch, 0, rank) > start + kEpsilon)
          problem = formatOp(op) + " starts before its input-grad ends";
        break;
      case OpKind::OverlappedPair:
        problem = check_forward(op.stage, op.microbatch);
        if (problem.empty()) problem = check_backward(op.backward_stage, op.backward_microbatch);
        break;
      }
      if (!problem.empty()) return problem;
      if (i > 0 && e.simulation.op_times[r][i - 1].end_us > start + kEpsilon)
        return "rank " + std::to_string(r) + " runs two ops at once at step " + std::to_string(i);
    }
  return {};
}

} // namespace pipescope::testing
