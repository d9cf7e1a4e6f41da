#include "engine/bubbles.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

#include "engine/dependencies.h"
#include "engine/json_text.h"
#include "engine/trace_matching.h"

namespace pipescope {

namespace {

constexpr double kNever = -std::numeric_limits<double>::infinity();

// Floating-point dust: a gap this small is no gap. Simulated times are the simulator's own doubles
// (a JSON round trip keeps them exact), so this only matters where times were rescaled.
double dust(double time_us) {
  return 1e-6 + 1e-12 * std::abs(time_us);
}

std::string microseconds(double value) {
  char buffer[48];
  std::snprintf(buffer, sizeof buffer, "%.1f us", value);
  return buffer;
}

bool hasForwardPart(OpKind kind) {
  return kind == OpKind::Forward || kind == OpKind::OverlappedPair;
}

bool hasBackwardPart(OpKind kind) {
  return kind == OpKind::InputGrad || kind == OpKind::FullBackward ||
         kind == OpKind::OverlappedPair;
}

// Ops and messages by what they produce: (stage, microbatch, output) -> a compact index.
class OutputTable {
public:
  explicit OutputTable(const Placement &placement)
      : microbatches_(static_cast<std::size_t>(placement.microbatches)),
        stages_(static_cast<std::size_t>(placement.stageCount())) {}

  std::size_t size() const { return stages_ * microbatches_ * 2; }
  /// The key, or size() when (stage, microbatch) is outside the placement.
  std::size_t key(int stage, int microbatch, OpOutput output) const {
    if (stage < 0 || microbatch < 0 || static_cast<std::size_t>(stage) >= stages_ ||
        static_cast<std::size_t>(microbatch) >= microbatches_)
      return size();
    return (static_cast<std::size_t>(stage) * microbatches_ +
            static_cast<std::size_t>(microbatch)) *
               2 +
           (output == OpOutput::BackwardInput ? 1 : 0);
  }

  /// Per output: the message id of the lowered program that carries it to another rank, or -1.
  std::vector<std::int32_t> messages(const LoweredProgram &program) const {
    std::vector<std::int32_t> ids(size(), -1);
    for (std::size_t id = 0; id < program.messages.size(); ++id) {
      const Message &m = program.messages[id];
      const std::size_t k =
          key(m.stage, m.microbatch, m.gradient ? OpOutput::BackwardInput : OpOutput::Forward);
      if (k < size()) ids[k] = static_cast<std::int32_t>(id);
    }
    return ids;
  }

  /// Per output: the op that produces it.
  std::vector<OpRef> producers(const Schedule &schedule) const {
    std::vector<OpRef> refs(size());
    for (std::size_t r = 0; r < schedule.ranks.size(); ++r)
      for (std::size_t i = 0; i < schedule.ranks[r].size(); ++i)
        forEachOutput(schedule.ranks[r][i], [&](int stage, int microbatch, OpOutput output) {
          const std::size_t k = key(stage, microbatch, output);
          if (k < size()) refs[k] = {static_cast<std::int32_t>(r), static_cast<std::int32_t>(i)};
        });
    return refs;
  }

private:
  std::size_t microbatches_, stages_;
};

// The ops of a schedule numbered 0..N-1, rank by rank.
struct OpNumbering {
  std::vector<std::size_t> offset; // first id of each rank, and N at the end
  std::vector<OpRef> refs;

  explicit OpNumbering(const Schedule &schedule) {
    offset.reserve(schedule.ranks.size() + 1);
    offset.push_back(0);
    for (const auto &ops : schedule.ranks)
      offset.push_back(offset.back() + ops.size());
    refs.reserve(offset.back());
    for (std::size_t r = 0; r < schedule.ranks.size(); ++r)
      for (std::size_t i = 0; i < schedule.ranks[r].size(); ++i)
        refs.push_back({static_cast<std::int32_t>(r), static_cast<std::int32_t>(i)});
  }
  std::size_t size() const { return refs.size(); }
  std::int32_t id(OpRef ref) const {
    return static_cast<std::int32_t>(offset[static_cast<std::size_t>(ref.rank)] +
                                     static_cast<std::size_t>(ref.position));
  }
};

const Op &opAt(const Schedule &schedule, OpRef ref) {
  return schedule.ranks[static_cast<std::size_t>(ref.rank)][static_cast<std::size_t>(ref.position)];
}

} // namespace

std::string_view bubbleCauseName(BubbleCause cause) {
  switch (cause) {
  case BubbleCause::Fill: return "fill";
  case BubbleCause::Drain: return "drain";
  case BubbleCause::Dependency: return "dependency";
  case BubbleCause::Transfer: return "transfer";
  case BubbleCause::Unexplained: return "unexplained";
  case BubbleCause::GradientSync: return "gradient_sync";
  }
  return "?";
}

std::string_view pathSegmentKindName(PathSegmentKind kind) {
  switch (kind) {
  case PathSegmentKind::Compute: return "compute";
  case PathSegmentKind::Transfer: return "transfer";
  case PathSegmentKind::Overhead: return "overhead";
  case PathSegmentKind::GradientSync: return "gradient_sync";
  }
  return "?";
}

std::size_t CriticalPath::opCount() const {
  return static_cast<std::size_t>(
      std::count_if(segments.begin(), segments.end(),
                    [](const PathSegment &s) { return s.kind == PathSegmentKind::Compute; }));
}

Result<BubbleAnalysis> explainBubbles(const Schedule &schedule, const LoweredProgram &program,
                                      const StepTimeline &timeline) {
  const Placement &placement = schedule.placement;
  const std::size_t rank_count = schedule.ranks.size();
  if (timeline.op_times.size() != rank_count)
    return makeError("the step has times for " + std::to_string(timeline.op_times.size()) +
                     " ranks; the schedule has " + std::to_string(rank_count));
  for (std::size_t r = 0; r < rank_count; ++r)
    if (timeline.op_times[r].size() != schedule.ranks[r].size())
      return makeError("the step has times for " + std::to_string(timeline.op_times[r].size()) +
                       " ops on rank " + std::to_string(r) + "; the schedule has " +
                       std::to_string(schedule.ranks[r].size()));
  const std::size_t messages = program.messages.size();
  if ((!timeline.transfers.empty() && timeline.transfers.size() != messages) ||
      (!timeline.transfer_recorded.empty() && timeline.transfer_recorded.size() != messages))
    return makeError("the step has times for " + std::to_string(timeline.transfers.size()) +
                     " transfers; the lowered program has " + std::to_string(messages));
  const OpNumbering numbering(schedule);
  const std::size_t n = numbering.size();
  if (n == 0) return makeError("the step has no ops");
  std::vector<double> start(n), end(n);
  double step_start = std::numeric_limits<double>::infinity();
  for (std::size_t id = 0; id < n; ++id) {
    const OpRef ref = numbering.refs[id];
    const OpTiming &t =
        timeline
            .op_times[static_cast<std::size_t>(ref.rank)][static_cast<std::size_t>(ref.position)];
    if (!std::isfinite(t.start_us) || !std::isfinite(t.end_us) || t.end_us < t.start_us)
      return makeError("op " + formatOp(opAt(schedule, ref)) + " on rank " +
                       std::to_string(ref.rank) + " has no valid time (" +
                       std::to_string(t.start_us) + " to " + std::to_string(t.end_us) + " us)");
    start[id] = t.start_us;
    end[id] = t.end_us;
    step_start = std::min(step_start, t.start_us);
  }
  const double sync = std::max(0.0, timeline.gradient_sync_us);

  const OutputTable outputs(placement);
  const OpDependencies dependencies(placement);
  const std::vector<OpRef> producer_refs = outputs.producers(schedule);
  const std::vector<std::int32_t> message_of = outputs.messages(program);
  const auto recorded = [&](std::int32_t message) {
    return message >= 0 && !timeline.transfers.empty() &&
           (timeline.transfer_recorded.empty() ||
            timeline.transfer_recorded[static_cast<std::size_t>(message)] != 0);
  };

  // Each rank's ops in the order they ran (a simulation's are already in list order).
  std::vector<std::vector<std::int32_t>> order(rank_count);
  std::vector<double> rank_end(rank_count, step_start);
  std::vector<std::int32_t> rank_last(rank_count, -1); // the op that ends last on each rank
  double step_end = step_start;
  for (std::size_t r = 0; r < rank_count; ++r) {
    auto &ids = order[r];
    ids.resize(schedule.ranks[r].size());
    for (std::size_t i = 0; i < ids.size(); ++i)
      ids[i] = static_cast<std::int32_t>(numbering.offset[r] + i);
    const auto by_start = [&](std::int32_t a, std::int32_t b) {
      return start[static_cast<std::size_t>(a)] < start[static_cast<std::size_t>(b)];
    };
    if (!std::is_sorted(ids.begin(), ids.end(), by_start))
      std::stable_sort(ids.begin(), ids.end(), by_start);
    for (const std::int32_t id : ids)
      if (end[static_cast<std::size_t>(id)] >= rank_end[r]) {
        rank_end[r] = end[static_cast<std::size_t>(id)];
        rank_last[r] = id;
      }
    if (!ids.empty()) step_end = std::max(step_end, rank_end[r] + sync);
  }

  BubbleAnalysis analysis;
  analysis.step_start_us = step_start;
  analysis.step_end_us = step_end;
  analysis.measured = timeline.measured;
  analysis.ranks.resize(rank_count);
  analysis.waited_for.resize(rank_count);
  for (std::size_t r = 0; r < rank_count; ++r)
    analysis.waited_for[r].assign(schedule.ranks[r].size(), OpRef{});

  // Per op: the input whose arrival set its start (-1: the rank's previous op or T0 did), when
  // that input's producer ended and when it arrived; and the op that last freed the rank before it.
  std::vector<std::int32_t> bound_input(n, -1), previous(n, -1);
  std::vector<double> bound_arrival(n, kNever), bound_producer_end(n, kNever);
  std::vector<std::int32_t> interval_waits; // global id of each interval's waits_for, in order

  for (std::size_t r = 0; r < rank_count; ++r) {
    RankBubbles &bubbles = analysis.ranks[r];
    const auto &ids = order[r];
    // Where the rank's steady state begins and ends (see the header: fill and drain).
    double first_backward_start = std::numeric_limits<double>::infinity();
    double last_forward_end = kNever;
    for (const std::int32_t id : ids) {
      const OpKind kind = opAt(schedule, numbering.refs[static_cast<std::size_t>(id)]).kind;
      if (hasBackwardPart(kind))
        first_backward_start = std::min(first_backward_start, start[static_cast<std::size_t>(id)]);
      if (hasForwardPart(kind))
        last_forward_end = std::max(last_forward_end, end[static_cast<std::size_t>(id)]);
    }
    const auto add = [&](double from, double to, BubbleCause cause, std::int32_t waits_for,
                         std::int32_t before) {
      if (!(to > from)) return;
      IdleInterval interval;
      interval.start_us = from;
      interval.end_us = to;
      interval.cause = cause;
      if (before >= 0) interval.before = numbering.refs[static_cast<std::size_t>(before)];
      bubbles.intervals.push_back(interval);
      interval_waits.push_back(waits_for);
      bubbles.cause_us[static_cast<std::size_t>(cause)] += to - from;
    };

    double free = step_start;
    std::int32_t freed_by = -1;
    for (const std::int32_t id : ids) {
      const auto i = static_cast<std::size_t>(id);
      const OpRef ref = numbering.refs[i];
      const Op &op = opAt(schedule, ref);
      // The latest-arriving input (ties: the one from another rank, whose wait is the news).
      std::int32_t latest = -1;
      double arrival = kNever, produced = kNever;
      bool latest_crosses = false;
      dependencies.forEachInput(op, [&](const OpInput &input) {
        const std::size_t k = outputs.key(input.stage, input.microbatch, input.output);
        if (k >= outputs.size() || !producer_refs[k].valid()) return;
        const std::int32_t from = numbering.id(producer_refs[k]);
        const double producer_end = end[static_cast<std::size_t>(from)];
        double arrives = producer_end;
        if (input.crosses_ranks && recorded(message_of[k]))
          arrives =
              std::max(arrives, timeline.transfers[static_cast<std::size_t>(message_of[k])].end_us);
        if (arrives > arrival || (arrives == arrival && input.crosses_ranks && !latest_crosses)) {
          latest = from;
          arrival = arrives;
          produced = producer_end;
          latest_crosses = input.crosses_ranks;
        }
      });
      previous[i] = freed_by;
      bound_arrival[i] = arrival;
      bound_producer_end[i] = produced;
      if (latest >= 0 && arrival >= free - dust(free)) {
        bound_input[i] = latest;
        analysis.waited_for[r][static_cast<std::size_t>(ref.position)] =
            numbering.refs[static_cast<std::size_t>(latest)];
      }
      const double begins = start[i];
      if (begins > free + dust(free)) {
        if (latest >= 0) {
          const double produced_at = std::clamp(produced, free, begins);
          const double arrived_at = std::clamp(arrival, produced_at, begins);
          const BubbleCause wait = begins <= first_backward_start ? BubbleCause::Fill
                                   : begins >= last_forward_end   ? BubbleCause::Drain
                                                                  : BubbleCause::Dependency;
          add(free, produced_at, wait, latest, id);
          add(produced_at, arrived_at, BubbleCause::Transfer, latest, id);
          add(arrived_at, begins, BubbleCause::Unexplained, -1, id);
        } else {
          add(free, begins, BubbleCause::Unexplained, -1, id);
        }
      }
      if (end[i] > free) {
        bubbles.busy_us += end[i] - std::max(begins, free);
        free = end[i];
        freed_by = id;
      }
    }
    // Trailing idle: the modeled gradient sync, then nothing left to do until the step ends.
    if (!ids.empty() && sync > 0) {
      add(free, std::min(free + sync, step_end), BubbleCause::GradientSync, -1, -1);
      free = std::min(free + sync, step_end);
    }
    add(free, step_end, BubbleCause::Drain, -1, -1);
    for (const auto &interval : bubbles.intervals)
      bubbles.idle_us += interval.durationUs();
    for (int c = 0; c < kBubbleCauseCount; ++c)
      analysis.cause_us[static_cast<std::size_t>(c)] +=
          bubbles.cause_us[static_cast<std::size_t>(c)];
    analysis.idle_us += bubbles.idle_us;
    analysis.busy_us += bubbles.busy_us;
  }

  // Chains of waits: each op's chain start and length, following bound_input (a subgraph of the
  // dependency DAG: forwards go down the route, backwards up it, so it has no cycle).
  std::vector<std::int32_t> chain_start(n, -1), chain_length(n, 0);
  std::vector<std::int32_t> stack;
  for (std::size_t id = 0; id < n; ++id) {
    std::int32_t x = static_cast<std::int32_t>(id);
    while (chain_length[static_cast<std::size_t>(x)] == 0 && stack.size() <= n) {
      stack.push_back(x);
      if (bound_input[static_cast<std::size_t>(x)] < 0) break;
      x = bound_input[static_cast<std::size_t>(x)];
    }
    std::int32_t base_start = -1, base_length = 0;
    if (chain_length[static_cast<std::size_t>(x)] > 0) {
      base_start = chain_start[static_cast<std::size_t>(x)];
      base_length = chain_length[static_cast<std::size_t>(x)];
    }
    while (!stack.empty()) {
      const auto y = static_cast<std::size_t>(stack.back());
      stack.pop_back();
      if (base_start < 0) base_start = static_cast<std::int32_t>(y); // the chain's own start
      chain_start[y] = base_start;
      chain_length[y] = ++base_length;
    }
  }
  std::size_t next_interval = 0;
  for (auto &bubbles : analysis.ranks)
    for (auto &interval : bubbles.intervals) {
      const std::int32_t waits = interval_waits[next_interval++];
      if (waits < 0) continue;
      const auto w = static_cast<std::size_t>(waits);
      interval.waits_for = numbering.refs[w];
      interval.chain_start = numbering.refs[static_cast<std::size_t>(chain_start[w])];
      interval.chain_length = chain_length[w];
    }

  // The critical path, walked back from the end of the step.
  CriticalPath &path = analysis.critical_path;
  double cursor = step_end;
  const auto push = [&](PathSegment segment) {
    segment.end_us = std::min(segment.end_us, cursor);
    segment.start_us = std::clamp(segment.start_us, step_start, segment.end_us);
    if (segment.end_us < cursor) // a hole can only be time nothing explains
      path.segments.push_back(
          {PathSegmentKind::Overhead, segment.end_us, cursor, {}, segment.rank, -1, -1, -1, false});
    if (segment.end_us > segment.start_us || segment.kind == PathSegmentKind::Compute)
      path.segments.push_back(segment);
    cursor = segment.start_us;
  };
  std::size_t last_rank = 0;
  for (std::size_t r = 0; r < rank_count; ++r)
    if (rank_last[r] >= 0 && (rank_last[last_rank] < 0 || rank_end[r] > rank_end[last_rank]))
      last_rank = r;
  if (sync > 0)
    push({PathSegmentKind::GradientSync,
          rank_end[last_rank],
          rank_end[last_rank] + sync,
          {},
          static_cast<int>(last_rank),
          -1,
          -1,
          -1,
          false});
  std::vector<std::uint8_t> on_path(n, 0);
  for (std::int32_t x = rank_last[last_rank]; x >= 0;) {
    const auto i = static_cast<std::size_t>(x);
    if (on_path[i]) break;
    on_path[i] = 1;
    const OpRef ref = numbering.refs[i];
    push({PathSegmentKind::Compute, start[i], end[i], ref, ref.rank, -1, -1, -1, false});
    const std::int32_t input = bound_input[i];
    if (input < 0) {
      x = previous[i];
      continue;
    }
    const OpRef from = numbering.refs[static_cast<std::size_t>(input)];
    if (bound_arrival[i] < cursor)
      push({PathSegmentKind::Overhead, bound_arrival[i], cursor, {}, ref.rank, -1, -1, -1, false});
    if (from.rank != ref.rank) {
      // Name what travels: the input of this op that the producer makes.
      PathSegment transfer{PathSegmentKind::Transfer,
                           bound_producer_end[i],
                           bound_arrival[i],
                           from,
                           from.rank,
                           ref.rank,
                           -1,
                           -1,
                           false};
      dependencies.forEachInput(opAt(schedule, ref), [&](const OpInput &in) {
        const std::size_t k = outputs.key(in.stage, in.microbatch, in.output);
        if (in.crosses_ranks && k < outputs.size() && producer_refs[k] == from) {
          transfer.stage = in.stage;
          transfer.microbatch = in.microbatch;
          transfer.gradient = in.output == OpOutput::BackwardInput;
        }
      });
      push(transfer);
    }
    x = input;
  }
  if (cursor > step_start) {
    const int rank = path.segments.empty() ? 0 : path.segments.back().rank;
    path.segments.push_back(
        {PathSegmentKind::Overhead, step_start, cursor, {}, rank, -1, -1, -1, false});
  }
  std::reverse(path.segments.begin(), path.segments.end());
  for (const auto &segment : path.segments)
    path.kind_us[static_cast<std::size_t>(segment.kind)] += segment.end_us - segment.start_us;
  return analysis;
}

Result<BubbleAnalysis> explainBubbles(const Evaluation &evaluation) {
  StepTimeline timeline;
  timeline.op_times = evaluation.simulation.op_times;
  timeline.transfers = evaluation.simulation.transfers;
  timeline.gradient_sync_us = evaluation.times.gradient_sync;
  return explainBubbles(evaluation.schedule, evaluation.program, timeline);
}

std::vector<int> traceSteps(const Trace &trace) {
  std::vector<int> steps;
  for (const auto &op : trace.ops)
    if (steps.empty() || steps.back() != op.step) steps.push_back(op.step);
  std::sort(steps.begin(), steps.end());
  steps.erase(std::unique(steps.begin(), steps.end()), steps.end());
  return steps;
}

Result<StepTimeline> stepTimelineFromTrace(const Trace &trace, const Schedule &schedule,
                                           const LoweredProgram &program, int step) {
  const ScheduleOpIndex index(schedule);
  StepTimeline timeline;
  timeline.measured = trace.source == "measured";
  const std::size_t rank_count = schedule.ranks.size();
  timeline.op_times.resize(rank_count);
  std::vector<std::vector<std::uint8_t>> seen(rank_count);
  for (std::size_t r = 0; r < rank_count; ++r) {
    timeline.op_times[r].resize(schedule.ranks[r].size());
    seen[r].assign(schedule.ranks[r].size(), 0);
  }
  std::size_t found = 0;
  double step_end = kNever;
  for (const auto &op : trace.ops) {
    if (op.step != step) continue;
    const int position = index.positionOf(op);
    if (position < 0 || static_cast<std::size_t>(op.rank) >= rank_count)
      return makeError("step " + std::to_string(step) + " has " +
                       std::string(opKindLetter(op.kind)) + "(" + std::to_string(op.stage) + "," +
                       std::to_string(op.microbatch) + ") on rank " + std::to_string(op.rank) +
                       ", which the schedule (" + describeSchedule(schedule) + ") does not have");
    const auto r = static_cast<std::size_t>(op.rank);
    const auto p = static_cast<std::size_t>(position);
    if (!seen[r][p]) ++found;
    seen[r][p] = 1;
    timeline.op_times[r][p] = {op.start_us, op.end_us};
    step_end = std::max(step_end, op.end_us);
  }
  if (found != schedule.opCount())
    return makeError("step " + std::to_string(step) + " has " + std::to_string(found) + " of the " +
                     std::to_string(schedule.opCount()) + " ops of the schedule (" +
                     describeSchedule(schedule) + ")");

  // Each rank ran its ops in the schedule's order, or the trace is of another schedule (with the
  // same ops, as GPipe's and 1F1B's are).
  for (std::size_t r = 0; r < rank_count; ++r) {
    const auto &times = timeline.op_times[r];
    for (std::size_t i = 1; i < times.size(); ++i)
      if (times[i].start_us < times[i - 1].start_us - dust(times[i - 1].start_us))
        return makeError(
            "step " + std::to_string(step) + ": rank " + std::to_string(r) + " ran " +
            describeOpShort(schedule.ranks[r][i]) + " at " + microseconds(times[i].start_us) +
            ", before " + describeOpShort(schedule.ranks[r][i - 1]) + " at " +
            microseconds(times[i - 1].start_us) + ", but the schedule (" +
            describeSchedule(schedule) + ") runs " + describeOpShort(schedule.ranks[r][i - 1]) +
            " first: the trace is of another schedule");
  }

  // Each message's record: the first to leave after its producer started, among those that
  // arrive before the step ends (a trace of several steps holds one per step).
  const OutputTable outputs(schedule.placement);
  const std::vector<OpRef> producers = outputs.producers(schedule);
  const std::vector<std::int32_t> message_of = outputs.messages(program);
  timeline.transfers.resize(program.messages.size());
  timeline.transfer_recorded.assign(program.messages.size(), 0);
  const double slack = trace.clock_error_us + dust(step_end);
  for (const auto &t : trace.transfers) {
    const std::size_t k = outputs.key(t.stage, t.microbatch,
                                      t.gradient ? OpOutput::BackwardInput : OpOutput::Forward);
    if (k >= outputs.size() || message_of[k] < 0 || !producers[k].valid()) continue;
    const auto id = static_cast<std::size_t>(message_of[k]);
    const OpTiming &producer = timeline.op_times[static_cast<std::size_t>(producers[k].rank)]
                                                [static_cast<std::size_t>(producers[k].position)];
    if (t.start_us < producer.start_us - slack || t.end_us > step_end + slack) continue;
    if (timeline.transfer_recorded[id] && timeline.transfers[id].start_us <= t.start_us) continue;
    timeline.transfers[id] = {t.start_us, t.end_us};
    timeline.transfer_recorded[id] = 1;
  }
  return timeline;
}

std::vector<OpRef> waitChain(const BubbleAnalysis &analysis, OpRef op) {
  std::vector<OpRef> chain;
  std::size_t limit = 0;
  for (const auto &rank : analysis.waited_for)
    limit += rank.size();
  while (op.valid() && chain.size() <= limit) {
    chain.push_back(op);
    op = analysis
             .waited_for[static_cast<std::size_t>(op.rank)][static_cast<std::size_t>(op.position)];
  }
  return chain;
}

std::string describeOpShort(const Op &op) {
  const auto one = [](std::string_view letter, int stage, int microbatch) {
    return std::string(letter) + "(" + std::to_string(stage) + "," + std::to_string(microbatch) +
           ")";
  };
  if (op.kind == OpKind::OverlappedPair)
    return one("F", op.stage, op.microbatch) + "&" +
           one("B", op.backward_stage, op.backward_microbatch);
  return one(opKindLetter(op.kind), op.stage, op.microbatch);
}

std::string describeIdleInterval(const Schedule &schedule, const BubbleAnalysis &analysis,
                                 const IdleInterval &interval) {
  const auto name = [&](OpRef ref) {
    return describeOpShort(opAt(schedule, ref)) + " on rank " + std::to_string(ref.rank);
  };
  const std::string cause(bubbleCauseName(interval.cause));
  switch (interval.cause) {
  case BubbleCause::GradientSync:
    return "gradient_sync: the step's tail after the rank's last op: the exposed DP gradient "
           "sync (with the GEMMs its hidden part slowed), the tied-embedding sum, the "
           "optimizer step and any step overhead the hardware file prices";
  case BubbleCause::Unexplained: {
    if (!interval.before.valid()) return cause + ": nothing in the schedule explains it";
    const Op &op = opAt(schedule, interval.before);
    bool has_inputs = false;
    OpDependencies(schedule.placement).forEachInput(op, [&](const OpInput &) {
      has_inputs = true;
    });
    return cause + ": " + describeOpShort(op) +
           (has_inputs ? "'s inputs had arrived" : " needs no input") + " and rank " +
           std::to_string(interval.before.rank) +
           " was free, yet it had not started (host, launch or framework overhead)";
  }
  case BubbleCause::Fill:
  case BubbleCause::Drain:
  case BubbleCause::Dependency:
  case BubbleCause::Transfer: break;
  }
  if (!interval.waits_for.valid()) return cause + ": the rank has finished its ops of the step";
  std::string text = cause + (interval.cause == BubbleCause::Transfer
                                  ? ": the output of " + name(interval.waits_for) + " is in flight"
                                  : ": waits for " + name(interval.waits_for));
  if (interval.chain_length <= 1) return text;
  // The first links, then the start of the chain.
  constexpr std::size_t kLinks = 3;
  const std::vector<OpRef> chain = waitChain(analysis, interval.waits_for);
  for (std::size_t k = 1; k < chain.size() && k <= kLinks; ++k) {
    if (k + 1 == chain.size()) break;
    text += k == 1 ? ", which waited for " : " <- ";
    text += name(chain[k]);
  }
  if (chain.size() > kLinks + 2)
    text += " <- ... (" + std::to_string(chain.size() - kLinks - 2) + " more)";
  text += "; started by " + name(chain.back());
  return text;
}

namespace {

using json_text::appendField;
using json_text::appendFields;
using json_text::appendKey;

void appendOp(std::string &out, const Schedule &schedule, OpRef ref) {
  const Op &op = opAt(schedule, ref);
  out += '{';
  appendFields(out, "rank", ref.rank, "kind", opKindLetter(op.kind), "stage", op.stage,
               "microbatch", op.microbatch);
  if (op.kind == OpKind::OverlappedPair) {
    out += ',';
    appendFields(out, "backward_stage", op.backward_stage, "backward_microbatch",
                 op.backward_microbatch);
  }
  out += '}';
}

void appendCauses(std::string &out, const std::array<double, kBubbleCauseCount> &causes) {
  out += '{';
  for (int c = 0; c < kBubbleCauseCount; ++c) {
    if (c) out += ',';
    appendField(out, bubbleCauseName(static_cast<BubbleCause>(c)),
                causes[static_cast<std::size_t>(c)]);
  }
  out += '}';
}

// "busy_us":..,"idle_us":..,"causes":{...}
void appendTotals(std::string &out, double busy_us, double idle_us,
                  const std::array<double, kBubbleCauseCount> &causes) {
  appendFields(out, "busy_us", busy_us, "idle_us", idle_us);
  out += ",\"causes\":";
  appendCauses(out, causes);
}

} // namespace

void streamBubbleJson(const TextSink &write, const Schedule &schedule,
                      const BubbleAnalysis &analysis, const nlohmann::json &header) {
  std::string text = "{";
  if (header.is_object())
    for (const auto &[key, value] : header.items()) {
      appendKey(text, key);
      text += value.dump() + ",";
    }
  appendFields(text, "step_start_us", analysis.step_start_us, "step_end_us", analysis.step_end_us,
               "makespan_us", analysis.makespanUs());
  text += ',';
  appendTotals(text, analysis.busy_us, analysis.idle_us, analysis.cause_us);
  text += ",\n\"ranks\":[";
  write(text);
  std::string record;
  for (std::size_t r = 0; r < analysis.ranks.size(); ++r) {
    const RankBubbles &rank = analysis.ranks[r];
    record.assign(r ? ",\n{" : "\n{");
    appendField(record, "rank", static_cast<int>(r));
    record += ',';
    appendTotals(record, rank.busy_us, rank.idle_us, rank.cause_us);
    record += ",\"intervals\":[";
    write(record);
    for (std::size_t k = 0; k < rank.intervals.size(); ++k) {
      const IdleInterval &interval = rank.intervals[k];
      record.assign(k ? ",\n{" : "\n{");
      appendFields(record, "start_us", interval.start_us, "end_us", interval.end_us, "cause",
                   bubbleCauseName(interval.cause));
      if (interval.waits_for.valid()) {
        record += ",\"waits_for\":";
        appendOp(record, schedule, interval.waits_for);
        record += ",\"chain_start\":";
        appendOp(record, schedule, interval.chain_start);
        record += ',';
        appendField(record, "chain_length", interval.chain_length);
      }
      if (interval.before.valid()) {
        record += ",\"before\":";
        appendOp(record, schedule, interval.before);
      }
      record += '}';
      write(record);
    }
    write("]}");
  }
  const CriticalPath &path = analysis.critical_path;
  text.assign("\n],\n\"critical_path_us\":{");
  for (int k = 0; k < 4; ++k) {
    if (k) text += ',';
    appendField(text, pathSegmentKindName(static_cast<PathSegmentKind>(k)),
                path.kind_us[static_cast<std::size_t>(k)]);
  }
  text += "},\n\"critical_path\":[";
  write(text);
  for (std::size_t k = 0; k < path.segments.size(); ++k) {
    const PathSegment &segment = path.segments[k];
    record.assign(k ? ",\n{" : "\n{");
    appendField(record, "type", pathSegmentKindName(segment.kind));
    record += ',';
    if (segment.kind == PathSegmentKind::Compute) {
      // The op's own fields, flat: rank, kind, stage, microbatch.
      std::string op;
      appendOp(op, schedule, segment.op);
      record.append(op, 1, op.size() - 2);
    } else if (segment.kind == PathSegmentKind::Transfer) {
      appendFields(record, "from_rank", segment.rank, "to_rank", segment.to_rank, "kind",
                   segment.gradient ? "gradient" : "activation", "stage", segment.stage,
                   "microbatch", segment.microbatch);
    } else {
      appendField(record, "rank", segment.rank);
    }
    record += ',';
    appendFields(record, "start_us", segment.start_us, "end_us", segment.end_us);
    record += '}';
    write(record);
  }
  write("\n]}\n");
}

} // namespace pipescope
