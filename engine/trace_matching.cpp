#include "engine/trace_matching.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <vector>

#include "engine/json_io.h"

namespace pipescope {

namespace {

// rank < 2^14, kind < 2^3, stage < 2^20, microbatch < 2^22 (the engine's size limits).
std::uint64_t opKey(int rank, OpKind kind, int stage, int microbatch) {
  return ((static_cast<std::uint64_t>(rank) * 8 + static_cast<std::uint64_t>(kind)) << 42) |
         (static_cast<std::uint64_t>(stage) << 22) | static_cast<std::uint64_t>(microbatch);
}

bool keyable(const TraceOp &op) {
  return op.rank >= 0 && op.rank < (1 << 14) && op.stage >= 0 && op.stage < (1 << 20) &&
         op.microbatch >= 0 && op.microbatch < (1 << 22);
}

std::string describe(const std::string &name, int pp, int microbatches, int chunks,
                     bool show_chunks) {
  const ScheduleFamily *family = findScheduleFamily(name);
  std::string text = (family ? family->title : (name.empty() ? std::string("custom") : name)) +
                     ", P=" + std::to_string(pp) + ", M=" + std::to_string(microbatches);
  if (show_chunks) text += ", V=" + std::to_string(chunks);
  return text;
}

std::string actionText(const TraceOp &op) {
  return std::to_string(op.stage) + std::string(opKindLetter(op.kind)) +
         std::to_string(op.microbatch);
}

} // namespace

ScheduleOpIndex::ScheduleOpIndex(const Schedule &schedule) {
  positions_.reserve(schedule.opCount() * 2);
  for (std::size_t r = 0; r < schedule.ranks.size(); ++r) {
    const int rank = static_cast<int>(r);
    for (std::size_t i = 0; i < schedule.ranks[r].size(); ++i) {
      const Op &op = schedule.ranks[r][i];
      const int index = static_cast<int>(i);
      if (op.kind == OpKind::OverlappedPair) {
        positions_[opKey(rank, OpKind::Forward, op.stage, op.microbatch)] = index;
        positions_[opKey(rank, OpKind::FullBackward, op.backward_stage, op.backward_microbatch)] =
            index;
      } else {
        positions_[opKey(rank, op.kind, op.stage, op.microbatch)] = index;
      }
    }
  }
}

int ScheduleOpIndex::positionOf(const TraceOp &op) const {
  if (!keyable(op)) return -1;
  const auto it = positions_.find(opKey(op.rank, op.kind, op.stage, op.microbatch));
  return it == positions_.end() ? -1 : it->second;
}

std::string describeSchedule(const Schedule &schedule) {
  return describe(schedule.name, schedule.pp(), schedule.microbatches(), schedule.chunks(),
                  schedule.chunks() > 1);
}

std::string describePlanRequest(const Plan &plan) {
  if (plan.custom) return describeSchedule(*plan.custom);
  const ScheduleFamily *family = findScheduleFamily(plan.request.name);
  return describe(plan.request.name, plan.request.pp, plan.request.microbatches,
                  plan.request.chunks, family && family->uses_chunks);
}

Status checkTraceMatchesSchedule(const Trace &trace, const Schedule &schedule) {
  if (trace.ops.empty()) return makeError("the trace has no ops");
  const ScheduleOpIndex index(schedule);
  const auto another = [&](const std::string &what) {
    return makeError("this trace is of another plan: " + what + " It measured " +
                     describePlanRequest(trace.plan) + ".");
  };
  // Every op of every step belongs to the schedule, and every step has all of them (a smaller
  // plan's ops are a subset of a larger one's, so membership alone would let it through).
  std::map<int, std::vector<std::vector<bool>>> seen;
  for (const auto &op : trace.ops) {
    const int position = index.positionOf(op);
    if (position >= 0) {
      auto &ranks = seen[op.step];
      if (ranks.empty()) {
        ranks.resize(schedule.ranks.size());
        for (std::size_t r = 0; r < ranks.size(); ++r)
          ranks[r].assign(schedule.ranks[r].size(), false);
      }
      ranks[static_cast<std::size_t>(op.rank)][static_cast<std::size_t>(position)] = true;
      continue;
    }
    const std::string where =
        op.rank >= 0 && op.rank < schedule.pp()
            ? "op " + actionText(op) + " on pipeline rank " + std::to_string(op.rank)
            : "pipeline rank " + std::to_string(op.rank);
    return another("it has " + where + ", which the schedule shown (" + describeSchedule(schedule) +
                   ") does not.");
  }
  for (const auto &[step, ranks] : seen) {
    std::size_t found = 0;
    for (const auto &rank : ranks)
      found += static_cast<std::size_t>(std::count(rank.begin(), rank.end(), true));
    if (found != schedule.opCount())
      return another("its step " + std::to_string(step) + " has " + std::to_string(found) +
                     " of the " + std::to_string(schedule.opCount()) +
                     " ops of the schedule shown (" + describeSchedule(schedule) + ").");
  }
  return Ok{};
}

Result<MeasuredTraceFile> loadMeasuredTrace(const std::string &path) {
  auto document = loadTraceDocument(path);
  if (!document) return document.error();
  MeasuredTraceFile file;
  file.trace = std::move(document->trace);
  // pipescope-backend keeps its run's details beside the trace; the factor between planned and
  // device time is among them.
  const nlohmann::json &rest = document->rest;
  const auto backend = rest.find("backend");
  if (backend != rest.end() && backend->is_object()) {
    const auto workload = backend->find("workload");
    if (workload != backend->end() && workload->is_object()) {
      const auto factor = workload->find("expected_time_factor");
      if (factor != workload->end() && !factor->is_null()) {
        // Every measured time is divided by it: 0, a negative or a non-finite factor would turn
        // the comparison into nonsense, so the file is refused rather than read as factor 1.
        const double value = factor->is_number() ? factor->get<double>() : 0;
        if (!factor->is_number() || !std::isfinite(value) || value <= 0)
          return makeError(path +
                           ": /backend/workload/expected_time_factor: expected a positive, "
                           "finite number (device microseconds per planned microsecond), got " +
                           factor->dump());
        file.time_factor = value;
      }
    }
  }
  return file;
}

Trace inPlannedTime(Trace trace, double time_factor) {
  if (!(time_factor > 0) || !std::isfinite(time_factor) || time_factor == 1) return trace;
  for (auto &op : trace.ops) {
    op.start_us /= time_factor;
    op.end_us /= time_factor;
  }
  for (auto &transfer : trace.transfers) {
    transfer.start_us /= time_factor;
    transfer.end_us /= time_factor;
  }
  for (auto &rank : trace.ranks) {
    rank.busy_us /= time_factor;
    rank.idle_us /= time_factor;
  }
  trace.makespan_us /= time_factor;
  trace.clock_error_us /= time_factor;
  return trace;
}

} // namespace pipescope
