#include "engine/planner/compiled_schedule.h"

#include <algorithm>

#include "engine/simulator.h"

namespace pipescope {

Result<CompiledSchedule> compileSchedule(const Schedule &schedule, const LoweredProgram &program) {
  // The event simulation is the judge of whether the program completes, and its refusal names
  // the blocked ranks; a program it completes has every same-rank input earlier in the rank's
  // own list, so the walk below only has to follow the messages.
  if (auto simulated = simulate(schedule, program, *resolveStageTimes(Costs{}, schedule.placement));
      !simulated)
    return simulated.error();
  const int pp = schedule.pp();
  CompiledSchedule compiled;
  compiled.pp = pp;
  compiled.stage_count = schedule.placement.stageCount();
  compiled.rank_ops = schedule.ranks;
  compiled.ops.reserve(schedule.opCount());
  constexpr std::int32_t kNotSent = -1;
  std::vector<std::int32_t> producer(program.messages.size(), kNotSent);
  std::vector<std::int32_t> waiter(program.messages.size(), -1);
  std::vector<std::size_t> pc(static_cast<std::size_t>(pp), 0);
  std::vector<std::int32_t> last_compute(static_cast<std::size_t>(pp), -1);
  // Recvs passed since the rank's last compute: the next compute's inputs.
  std::vector<std::vector<CompiledSchedule::Input>> pending(static_cast<std::size_t>(pp));
  std::vector<int> runnable;
  for (int r = pp - 1; r >= 0; --r)
    runnable.push_back(r);
  while (!runnable.empty()) {
    const int rank = runnable.back();
    runnable.pop_back();
    const auto r = static_cast<std::size_t>(rank);
    const auto &code = program.ranks[r];
    while (pc[r] < code.size()) {
      const Instruction &instruction = code[pc[r]];
      const auto id = static_cast<std::size_t>(instruction.index);
      if (instruction.kind == InstructionKind::Recv) {
        if (producer[id] == kNotSent) {
          waiter[id] = rank;
          break;
        }
        const Message &message = program.messages[id];
        pending[r].push_back({producer[id], message.stage, message.gradient});
      } else if (instruction.kind == InstructionKind::Send) {
        producer[id] = last_compute[r];
        if (waiter[id] >= 0) {
          runnable.push_back(waiter[id]);
          waiter[id] = -1;
        }
      } else {
        CompiledSchedule::CompiledOp op;
        op.op = schedule.ranks[r][id];
        op.rank = rank;
        op.first_input = static_cast<std::int32_t>(compiled.inputs.size());
        op.input_count = static_cast<std::int32_t>(pending[r].size());
        compiled.inputs.insert(compiled.inputs.end(), pending[r].begin(), pending[r].end());
        pending[r].clear();
        last_compute[r] = static_cast<std::int32_t>(compiled.ops.size());
        compiled.ops.push_back(op);
      }
      ++pc[r];
    }
  }
  if (compiled.ops.size() != schedule.opCount())
    return makeError("the lowered program does not complete; validate the schedule");
  return compiled;
}

CompiledOpTiming timeCompiledOps(const CompiledSchedule &compiled, const StageTimes &times,
                                 std::vector<double> &scratch) {
  const auto pp = static_cast<std::size_t>(compiled.pp);
  // scratch: per op end time, then per rank clock and busy time.
  scratch.resize(compiled.ops.size() + 2 * pp);
  double *end = scratch.data();
  double *clock = end + compiled.ops.size();
  double *busy = clock + pp;
  std::fill(clock, clock + 2 * pp, 0.0);
  const CompiledSchedule::Input *inputs = compiled.inputs.data();
  for (std::size_t i = 0; i < compiled.ops.size(); ++i) {
    const auto &op = compiled.ops[i];
    // The same operations as simulate(): inputs_ready = max of arrivals (producer end + link),
    // start = max(clock, inputs_ready), end = start + duration.
    double inputs_ready = 0;
    for (std::int32_t k = 0; k < op.input_count; ++k) {
      const auto &input = inputs[op.first_input + k];
      const auto stage = static_cast<std::size_t>(input.stage);
      const double link = input.gradient ? times.send_backward[stage] : times.send_forward[stage];
      inputs_ready = std::max(inputs_ready, end[input.producer] + link);
    }
    const auto r = static_cast<std::size_t>(op.rank);
    const double duration = opDuration(op.op, times);
    const double start = std::max(clock[r], inputs_ready);
    end[i] = start + duration;
    clock[r] = end[i];
    busy[r] += duration;
  }
  CompiledOpTiming timing;
  timing.pp = compiled.pp;
  for (std::size_t r = 0; r < pp; ++r) {
    // A rank with no ops ends at 0 (then its gradient sync), as in simulate().
    timing.last_op_end_us = std::max(timing.last_op_end_us, clock[r]);
    timing.busy_total_us += busy[r];
    timing.busiest_rank_us = std::max(timing.busiest_rank_us, busy[r]);
  }
  return timing;
}

CompiledTiming withGradientSync(const CompiledOpTiming &ops, double gradient_sync_us) {
  CompiledTiming timing;
  // simulate() takes the largest clock + sync over the ranks; rounding is monotonic, so that is
  // the largest clock + sync, bitwise.
  timing.makespan_us = ops.pp > 0 ? ops.last_op_end_us + gradient_sync_us : 0.0;
  timing.busiest_rank_us = ops.busiest_rank_us;
  const double capacity = static_cast<double>(ops.pp) * timing.makespan_us;
  timing.bubble_fraction = capacity > 0 ? 1.0 - ops.busy_total_us / capacity : 0.0;
  timing.bubble_ratio =
      ops.busy_total_us > 0 ? (capacity - ops.busy_total_us) / ops.busy_total_us : 0.0;
  return timing;
}

CompiledTiming timeCompiledSchedule(const CompiledSchedule &compiled, const StageTimes &times,
                                    std::vector<double> &scratch) {
  return withGradientSync(timeCompiledOps(compiled, times, scratch), times.gradient_sync);
}

void peakActivationBytes(const CompiledSchedule &compiled,
                         const std::vector<double> &stage_activation_bytes,
                         const std::vector<double> &stage_activation_granule_bytes,
                         std::vector<double> &peak_per_rank) {
  peak_per_rank.assign(static_cast<std::size_t>(compiled.pp), 0.0);
  const bool granules = stage_activation_granule_bytes.size() == stage_activation_bytes.size();
  for (std::size_t r = 0; r < compiled.rank_ops.size(); ++r) {
    double held = 0, peak = 0;
    for (const Op &op : compiled.rank_ops[r]) {
      // As simulate() counts: acquire at F (or the pair's forward, which grows as its backward
      // frees the other chunk: overlappedPairPeakBytes) and release at the end of the B, the W,
      // or the pair's backward part.
      const double forward = stage_activation_bytes[static_cast<std::size_t>(op.stage)];
      if (op.kind == OpKind::Forward) {
        held += forward;
        peak = std::max(peak, held);
      } else if (op.kind == OpKind::OverlappedPair) {
        const double backward = stage_activation_bytes[static_cast<std::size_t>(op.backward_stage)];
        const double granule =
            granules ? stage_activation_granule_bytes[static_cast<std::size_t>(op.stage)] : forward;
        peak = std::max(peak, overlappedPairPeakBytes(held, forward, backward, granule));
        held += forward;
      }
      if (op.kind == OpKind::FullBackward || op.kind == OpKind::WeightGrad)
        held -= stage_activation_bytes[static_cast<std::size_t>(op.stage)];
      else if (op.kind == OpKind::OverlappedPair)
        held -= stage_activation_bytes[static_cast<std::size_t>(op.backward_stage)];
    }
    peak_per_rank[r] = peak;
  }
}

} // namespace pipescope
