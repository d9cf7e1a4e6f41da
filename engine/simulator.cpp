#include "engine/simulator.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <iterator>
#include <string>
#include <utility>

#include "engine/dependencies.h"

namespace pipescope {

double overlappedPairPeakBytes(double held_before, double forward, double backward,
                               double granule) {
  // The forward's layers run ahead of the backward's by one: what it builds beyond what the
  // backward frees, plus that one layer (never more than the forward's whole chunk, nor more of
  // the backward's than it holds).
  const double ahead = std::min({granule, forward, backward});
  return held_before + std::max(0.0, forward - backward) + ahead;
}

namespace {

// Parts of a (stage, microbatch) whose completion same-rank consumers check.
enum Part : std::uint8_t { kForwardDone = 1, kBackwardInputDone = 2 };

struct RankState {
  std::size_t pc = 0;
  double clock = 0;        // when the rank's compute lane is free
  double inputs_ready = 0; // latest arrival among the recvs before the next compute
  double last_end = 0;     // end of the last compute, when following sends leave
  int inflight = 0;
  double inflight_microbatches = 0;
  double activation_bytes = 0;
  bool blocked_on_self = false; // waits for an op later in its own list
};

std::string describeOp(const Op &op) {
  return formatOp(op);
}

} // namespace

std::string formatScheduleGrid(const Schedule &schedule, const std::vector<int> &marked_steps) {
  std::size_t longest = 0;
  for (const auto &ops : schedule.ranks)
    longest = std::max(longest, ops.size());
  int first = 0, last = static_cast<int>(longest) - 1;
  constexpr int kWindow = 8;
  int lo = static_cast<int>(longest), hi = -1;
  for (int mark : marked_steps)
    if (mark >= 0) {
      lo = std::min(lo, mark);
      hi = std::max(hi, mark);
    }
  if (hi >= 0 && longest > 2 * kWindow + 1) {
    first = std::max(0, lo - kWindow);
    last = std::min(static_cast<int>(longest) - 1, hi + kWindow);
  } else if (longest > std::size_t{4} * kWindow) {
    last = 4 * kWindow - 1;
  }
  std::string text = "        ";
  // Cell width fits the longest action in the window.
  std::size_t cell = 4;
  for (const auto &ops : schedule.ranks)
    for (int i = first; i <= last && i < static_cast<int>(ops.size()); ++i)
      cell = std::max(cell, formatOp(ops[static_cast<std::size_t>(i)]).size() + 3);
  auto pad = [&](std::string s) {
    if (s.size() < cell) s.append(cell - s.size(), ' ');
    return s;
  };
  if (first > 0) text += "... ";
  for (int i = first; i <= last; ++i)
    text += pad("s" + std::to_string(i));
  while (text.back() == ' ')
    text.pop_back();
  text += '\n';
  for (std::size_t r = 0; r < schedule.ranks.size(); ++r) {
    std::string row = "rank " + std::to_string(r);
    row.append(row.size() < 8 ? 8 - row.size() : 1, ' ');
    if (first > 0) row += "... ";
    const auto &ops = schedule.ranks[r];
    const int mark = r < marked_steps.size() ? marked_steps[r] : -1;
    for (int i = first; i <= last; ++i) {
      std::string action =
          i < static_cast<int>(ops.size()) ? formatOp(ops[static_cast<std::size_t>(i)]) : "";
      if (i == mark) action = "[" + action + "]";
      row += pad(action);
    }
    if (last + 1 < static_cast<int>(ops.size())) row += "...";
    while (!row.empty() && row.back() == ' ')
      row.pop_back();
    text += row + '\n';
  }
  return text;
}

namespace {

// One pass of the event simulation with fixed op times (and options.op_duration_scale).
Result<SimulationResult> simulateOnce(const Schedule &schedule, const LoweredProgram &program,
                                      const StageTimes &times, const SimulationOptions &options) {
  const Placement &placement = schedule.placement;
  const int pp = placement.pp;
  const auto microbatches = static_cast<std::size_t>(placement.microbatches);
  SimulationResult result;
  result.op_times.resize(schedule.ranks.size());
  for (std::size_t r = 0; r < schedule.ranks.size(); ++r)
    result.op_times[r].resize(schedule.ranks[r].size());
  result.transfers.resize(program.messages.size());
  result.ranks.resize(static_cast<std::size_t>(pp));
  if (options.memory_timeline) result.memory.resize(static_cast<std::size_t>(pp));

  // Completion flags per (stage, microbatch) for dependencies on the same rank; cross-rank
  // dependencies arrive through recvs.
  std::vector<std::uint8_t> done(static_cast<std::size_t>(placement.stageCount()) * microbatches,
                                 0);
  constexpr double kUnknown = -1;
  std::vector<double> arrival(program.messages.size(), kUnknown);
  std::vector<std::int32_t> waiter(program.messages.size(), -1);
  std::vector<RankState> state(static_cast<std::size_t>(pp));
  const bool track_bytes =
      options.stage_activation_bytes.size() == static_cast<std::size_t>(placement.stageCount());
  const bool track_granules = track_bytes && options.stage_activation_granule_bytes.size() ==
                                                 static_cast<std::size_t>(placement.stageCount());
  const bool scale_durations = !options.op_duration_scale.empty();
  if (scale_durations) {
    bool fits = options.op_duration_scale.size() == static_cast<std::size_t>(pp);
    for (std::size_t r = 0; fits && r < options.op_duration_scale.size(); ++r)
      fits = options.op_duration_scale[r].size() == schedule.ranks[r].size();
    if (!fits)
      return makeError("op_duration_scale: needs one factor per op of every rank (" +
                       std::to_string(pp) + " ranks)");
  }
  std::vector<int> runnable;
  runnable.reserve(static_cast<std::size_t>(pp));
  for (int r = pp - 1; r >= 0; --r)
    runnable.push_back(r);

  auto key = [microbatches](int stage, int microbatch) {
    return static_cast<std::size_t>(stage) * microbatches + static_cast<std::size_t>(microbatch);
  };
  // Cross-rank inputs arrive through the recvs before each compute; same-rank ones are checked
  // against these completion flags (the dependency rules themselves live in dependencies.h).
  const OpDependencies dependencies(placement);
  const auto part = [](OpOutput output) {
    return output == OpOutput::Forward ? kForwardDone : kBackwardInputDone;
  };

  while (!runnable.empty()) {
    const int rank = runnable.back();
    runnable.pop_back();
    auto &st = state[static_cast<std::size_t>(rank)];
    const auto &code = program.ranks[static_cast<std::size_t>(rank)];
    const auto &ops = schedule.ranks[static_cast<std::size_t>(rank)];
    auto &op_times = result.op_times[static_cast<std::size_t>(rank)];
    auto &stats = result.ranks[static_cast<std::size_t>(rank)];
    auto *memory =
        options.memory_timeline ? &result.memory[static_cast<std::size_t>(rank)] : nullptr;
    while (st.pc < code.size()) {
      const Instruction &instruction = code[st.pc];
      if (instruction.kind == InstructionKind::Recv) {
        const double at = arrival[static_cast<std::size_t>(instruction.index)];
        if (at == kUnknown) {
          waiter[static_cast<std::size_t>(instruction.index)] = rank;
          break;
        }
        st.inputs_ready = std::max(st.inputs_ready, at);
        ++st.pc;
        continue;
      }
      if (instruction.kind == InstructionKind::Send) {
        const auto id = static_cast<std::size_t>(instruction.index);
        const Message &message = program.messages[id];
        const double link = message.gradient
                                ? times.send_backward[static_cast<std::size_t>(message.stage)]
                                : times.send_forward[static_cast<std::size_t>(message.stage)];
        result.transfers[id] = {st.last_end, st.last_end + link};
        arrival[id] = st.last_end + link;
        if (waiter[id] >= 0) {
          runnable.push_back(waiter[id]);
          waiter[id] = -1;
        }
        ++st.pc;
        continue;
      }
      // Compute.
      const Op &op = ops[static_cast<std::size_t>(instruction.index)];
      bool inputs_done = true;
      dependencies.forEachInput(op, [&](const OpInput &input) {
        if (!input.crosses_ranks &&
            !(done[key(input.stage, input.microbatch)] & part(input.output)))
          inputs_done = false;
      });
      if (!inputs_done) {
        st.blocked_on_self = true;
        break;
      }
      const double duration =
          opDuration(op, times) *
          (scale_durations ? options.op_duration_scale[static_cast<std::size_t>(rank)]
                                                      [static_cast<std::size_t>(instruction.index)]
                           : 1.0);
      const double start = std::max(st.clock, st.inputs_ready);
      const double end = start + duration;
      op_times[static_cast<std::size_t>(instruction.index)] = {start, end};
      st.clock = end;
      st.last_end = end;
      st.inputs_ready = 0;
      stats.busy_us += duration;

      // Activation memory: held from the start of F until the end of the backward that frees
      // it (B, or W when the backward is split).
      const auto share = [&](int stage) {
        return placement.stage_share[static_cast<std::size_t>(stage)];
      };
      const auto bytes = [&](int stage) {
        return track_bytes ? options.stage_activation_bytes[static_cast<std::size_t>(stage)] : 0.0;
      };
      const auto granule = [&](int stage) {
        return track_granules
                   ? options.stage_activation_granule_bytes[static_cast<std::size_t>(stage)]
                   : bytes(stage);
      };
      const bool acquires = op.kind == OpKind::Forward || op.kind == OpKind::OverlappedPair;
      if (acquires) {
        ++st.inflight;
        st.inflight_microbatches += share(op.stage);
        stats.peak_inflight = std::max(stats.peak_inflight, st.inflight);
        stats.peak_inflight_microbatches =
            std::max(stats.peak_inflight_microbatches, st.inflight_microbatches);
        // A pair's backward frees its chunk layer by layer as the forward builds the new one.
        const double held =
            op.kind == OpKind::OverlappedPair
                ? overlappedPairPeakBytes(st.activation_bytes, bytes(op.stage),
                                          bytes(op.backward_stage), granule(op.stage))
                : st.activation_bytes + bytes(op.stage);
        st.activation_bytes += bytes(op.stage);
        stats.peak_activation_bytes = std::max(stats.peak_activation_bytes, held);
        if (memory) memory->push_back({start, st.inflight, st.inflight_microbatches, held});
      }
      forEachOutput(op, [&](int stage, int microbatch, OpOutput output) {
        done[key(stage, microbatch)] |= part(output);
      });
      int released_stage = -1;
      switch (op.kind) {
      case OpKind::Forward:
      case OpKind::InputGrad: break;
      case OpKind::FullBackward:
      case OpKind::WeightGrad: released_stage = op.stage; break;
      case OpKind::OverlappedPair: released_stage = op.backward_stage; break;
      }
      if (released_stage >= 0) {
        --st.inflight;
        st.inflight_microbatches -= share(released_stage);
        st.activation_bytes -= bytes(released_stage);
        if (memory)
          memory->push_back({end, st.inflight, st.inflight_microbatches, st.activation_bytes});
      }
      ++st.pc;
    }
  }

  // Anything left unfinished is a deadlock: report every blocked rank and what it waits for.
  std::vector<int> marked(static_cast<std::size_t>(pp), -1);
  std::string reasons, first_reason;
  int blocked_ranks = 0;
  for (int r = 0; r < pp; ++r) {
    const auto &st = state[static_cast<std::size_t>(r)];
    const auto &code = program.ranks[static_cast<std::size_t>(r)];
    if (st.pc >= code.size()) continue;
    // The blocked instruction belongs to the next compute at or after pc.
    std::size_t compute_pc = st.pc;
    while (compute_pc < code.size() && code[compute_pc].kind != InstructionKind::Compute)
      ++compute_pc;
    if (compute_pc >= code.size()) continue;
    const int step = code[compute_pc].index;
    const Op &op = schedule.ranks[static_cast<std::size_t>(r)][static_cast<std::size_t>(step)];
    marked[static_cast<std::size_t>(r)] = step;
    std::string waits;
    const Instruction &blocked = code[st.pc];
    if (blocked.kind == InstructionKind::Recv) {
      const Message &m = program.messages[static_cast<std::size_t>(blocked.index)];
      waits = std::string(m.gradient ? "the gradient of " : "the activation of ") +
              formatOp(m.gradient ? fullBackwardOp(m.stage, m.microbatch)
                                  : forwardOp(m.stage, m.microbatch)) +
              " from rank " + std::to_string(m.from_rank) + ", which rank " +
              std::to_string(m.from_rank) + " has not sent";
      if (m.gradient) {
        // Name the op as the schedule calls it (I or B).
        waits = "the gradient from stage " + std::to_string(m.stage) + ", microbatch " +
                std::to_string(m.microbatch) + " (rank " + std::to_string(m.from_rank) +
                "), which has not been computed";
      }
    } else {
      waits = "an input produced later in rank " + std::to_string(r) + "'s own list";
    }
    const std::string reason = "rank " + std::to_string(r) + " at step " + std::to_string(step) +
                               " (" + describeOp(op) + ") waits for " + waits;
    if (blocked_ranks++ == 0) first_reason = reason;
    reasons += "\n  " + reason;
  }
  if (blocked_ranks > 0)
    return makeError("the schedule deadlocks: " + first_reason +
                     (blocked_ranks > 1
                          ? " (and " + std::to_string(blocked_ranks - 1) + " more blocked ranks)"
                          : "") +
                     "; reorder the ops so each input is produced before it is needed" +
                     "\nblocked ranks:" + reasons + "\n" + formatScheduleGrid(schedule, marked));

  // Step metrics (DESIGN.md §3). The step starts at 0: the first op starts at time 0.
  double makespan = 0, busy_total = 0;
  for (int r = 0; r < pp; ++r) {
    auto &stats = result.ranks[static_cast<std::size_t>(r)];
    const auto &op_times = result.op_times[static_cast<std::size_t>(r)];
    stats.end_us = (op_times.empty() ? 0.0 : op_times.back().end_us) + times.gradient_sync;
    makespan = std::max(makespan, stats.end_us);
    busy_total += stats.busy_us;
  }
  for (auto &stats : result.ranks)
    stats.idle_us = makespan - stats.busy_us;
  result.makespan_us = makespan;
  const double capacity = static_cast<double>(pp) * makespan;
  result.bubble_fraction = capacity > 0 ? 1.0 - busy_total / capacity : 0.0;
  result.bubble_ratio = busy_total > 0 ? (capacity - busy_total) / busy_total : 0.0;
  return result;
}

} // namespace

std::vector<std::vector<int>>
othersComputingAtMidpoints(const std::vector<std::vector<std::pair<double, double>>> &intervals) {
  std::vector<std::vector<int>> counts(intervals.size());
  for (std::size_t r = 0; r < intervals.size(); ++r) {
    counts[r].resize(intervals[r].size(), 0);
    for (std::size_t i = 0; i < intervals[r].size(); ++i) {
      const double middle = 0.5 * (intervals[r][i].first + intervals[r][i].second);
      for (std::size_t other = 0; other < intervals.size(); ++other) {
        if (other == r) continue;
        const auto &list = intervals[other];
        // The last interval starting at or before the midpoint.
        auto it = std::upper_bound(
            list.begin(), list.end(), middle,
            [](double t, const std::pair<double, double> &interval) { return t < interval.first; });
        if (it != list.begin() && std::prev(it)->second > middle) ++counts[r][i];
      }
    }
  }
  return counts;
}

Result<SimulationResult> simulate(const Schedule &schedule, const LoweredProgram &program,
                                  const StageTimes &times, const SimulationOptions &options) {
  auto result = simulateOnce(schedule, program, times, options);
  if (!result || times.concurrency_slowdown.empty() || !options.op_duration_scale.empty())
    return result;
  // Ranks that share a device: each op's time scaled by the factor for the number of other
  // ranks computing at its midpoint, which depends on the timeline it shapes. Iterate from the
  // steady state (every op at its costs' time) until the makespan settles; after a few rounds
  // damp (half the old scale, half the new) so that the counts cannot flip back and forth.
  const auto &factor = times.concurrency_slowdown;
  constexpr int kRounds = 12, kUndampedRounds = 3;
  SimulationOptions scaled = options;
  for (int round = 0; round < kRounds; ++round) {
    std::vector<std::vector<std::pair<double, double>>> intervals(result->op_times.size());
    for (std::size_t r = 0; r < intervals.size(); ++r)
      for (const auto &t : result->op_times[r])
        intervals[r].push_back({t.start_us, t.end_us});
    const auto counts = othersComputingAtMidpoints(intervals);
    std::vector<std::vector<double>> scale(counts.size());
    for (std::size_t r = 0; r < counts.size(); ++r) {
      scale[r].resize(counts[r].size());
      for (std::size_t i = 0; i < counts[r].size(); ++i) {
        scale[r][i] = concurrencyFactor(factor, counts[r][i]);
        if (round >= kUndampedRounds && !scaled.op_duration_scale.empty())
          scale[r][i] = 0.5 * (scale[r][i] + scaled.op_duration_scale[r][i]);
      }
    }
    scaled.op_duration_scale = std::move(scale);
    auto next = simulateOnce(schedule, program, times, scaled);
    if (!next) return next;
    const bool settled =
        std::abs(next->makespan_us - result->makespan_us) <= 1e-6 * result->makespan_us;
    result = std::move(next);
    if (settled) break;
  }
  return result;
}

} // namespace pipescope
