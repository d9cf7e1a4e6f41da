#include "gui/measurement.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "engine/json_io.h"

namespace pipescope::gui {

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

std::unordered_map<std::uint64_t, int> positionsOf(const Schedule &schedule) {
  std::unordered_map<std::uint64_t, int> positions;
  positions.reserve(schedule.opCount() * 2);
  for (std::size_t r = 0; r < schedule.ranks.size(); ++r) {
    const int rank = static_cast<int>(r);
    for (std::size_t i = 0; i < schedule.ranks[r].size(); ++i) {
      const Op &op = schedule.ranks[r][i];
      const int index = static_cast<int>(i);
      if (op.kind == OpKind::OverlappedPair) {
        positions[opKey(rank, OpKind::Forward, op.stage, op.microbatch)] = index;
        positions[opKey(rank, OpKind::FullBackward, op.backward_stage, op.backward_microbatch)] =
            index;
      } else {
        positions[opKey(rank, op.kind, op.stage, op.microbatch)] = index;
      }
    }
  }
  return positions;
}

int lookUp(const std::unordered_map<std::uint64_t, int> &positions, const TraceOp &op) {
  if (!keyable(op)) return -1;
  const auto it = positions.find(opKey(op.rank, op.kind, op.stage, op.microbatch));
  return it == positions.end() ? -1 : it->second;
}

QString describeRequest(const Plan &plan) {
  if (plan.custom) return describeSchedule(*plan.custom);
  const ScheduleFamily *family = findScheduleFamily(plan.request.name);
  QString text = QStringLiteral("%1, P=%2, M=%3")
                     .arg(family ? QString::fromStdString(family->title)
                                 : QString::fromStdString(plan.request.name))
                     .arg(plan.request.pp)
                     .arg(plan.request.microbatches);
  if (family && family->uses_chunks) text += QStringLiteral(", V=%1").arg(plan.request.chunks);
  return text;
}

QString actionText(const TraceOp &op) {
  return QStringLiteral("%1%2%3")
      .arg(op.stage)
      .arg(QString::fromUtf8(opKindLetter(op.kind).data()))
      .arg(op.microbatch);
}

} // namespace

Result<MeasuredTraceFile> loadMeasuredTrace(const std::string &path) {
  auto text = readTextFile(path);
  if (!text) return text.error();
  auto json = parseJsonLimited(*text);
  if (!json) return makeError(path + ": " + json.error().message);
  auto trace = traceFromJson(*json);
  if (!trace) return makeError(path + ": " + trace.error().message);
  MeasuredTraceFile file;
  file.trace = std::move(*trace);
  // pipescope-backend keeps its run's details beside the trace; the factor between planned and
  // device time is among them.
  const auto backend = json->find("backend");
  if (backend != json->end() && backend->is_object()) {
    const auto workload = backend->find("workload");
    if (workload != backend->end() && workload->is_object()) {
      const auto factor = workload->find("expected_time_factor");
      if (factor != workload->end() && factor->is_number()) {
        const double value = factor->get<double>();
        if (std::isfinite(value) && value > 0) file.time_factor = value;
      }
    }
  }
  return file;
}

QString describeSchedule(const Schedule &schedule) {
  const ScheduleFamily *family = findScheduleFamily(schedule.name);
  QString text = QStringLiteral("%1, P=%2, M=%3")
                     .arg(family ? QString::fromStdString(family->title)
                                 : (schedule.name.empty() ? QStringLiteral("custom")
                                                          : QString::fromStdString(schedule.name)))
                     .arg(schedule.pp())
                     .arg(schedule.microbatches());
  if (schedule.chunks() > 1) text += QStringLiteral(", V=%1").arg(schedule.chunks());
  return text;
}

Status checkTraceMatchesSchedule(const Trace &trace, const Schedule &schedule) {
  if (trace.ops.empty()) return makeError("the trace has no ops");
  const auto positions = positionsOf(schedule);
  const auto another = [&](const QString &what) {
    return makeError(
        QStringLiteral(
            "this trace is of another plan: %1 It measured %2; open that plan first (File \u25b8 "
            "Open "
            "plan\u2026) or set the same schedule, P, M and V, then import the trace again.")
            .arg(what, describeRequest(trace.plan))
            .toStdString());
  };
  // Every op of every step belongs to the schedule, and every step has all of them (a smaller
  // plan's ops are a subset of a larger one's, so membership alone would let it through).
  std::map<int, std::vector<std::vector<bool>>> seen;
  for (const auto &op : trace.ops) {
    const int position = lookUp(positions, op);
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
    const QString where =
        op.rank >= 0 && op.rank < schedule.pp()
            ? QStringLiteral("op %1 on pipeline rank %2").arg(actionText(op)).arg(op.rank)
            : QStringLiteral("pipeline rank %1").arg(op.rank);
    return another(QStringLiteral("it has %1, which the schedule shown (%2) does not.")
                       .arg(where, describeSchedule(schedule)));
  }
  for (const auto &[step, ranks] : seen) {
    std::size_t found = 0;
    for (const auto &rank : ranks)
      found += static_cast<std::size_t>(std::count(rank.begin(), rank.end(), true));
    if (found != schedule.opCount())
      return another(QStringLiteral("its step %1 has %2 of the %3 ops of the schedule shown (%4).")
                         .arg(step)
                         .arg(found)
                         .arg(schedule.opCount())
                         .arg(describeSchedule(schedule)));
  }
  return Ok{};
}

bool sameSchedule(const Schedule &a, const Schedule &b) {
  return a.placement.pp == b.placement.pp && a.placement.chunks == b.placement.chunks &&
         a.placement.microbatches == b.placement.microbatches && a.ranks == b.ranks;
}

Measurement::Measurement(Plan plan, Schedule schedule, double time_factor)
    : schedule_(std::move(schedule)),
      time_factor_(time_factor > 0 && std::isfinite(time_factor) ? time_factor : 1) {
  device_trace_.source = "measured";
  device_trace_.plan = std::move(plan);
  positions_ = positionsOf(schedule_);
  rebuildTraces();
}

Result<Measurement> Measurement::fromTrace(const Trace &trace, Schedule schedule,
                                           double time_factor) {
  if (auto status = checkTraceMatchesSchedule(trace, schedule); !status) return status.error();
  Measurement measurement(trace.plan, std::move(schedule), time_factor);
  measurement.device_trace_ = trace;
  measurement.device_trace_.ops.clear();
  for (const auto &op : trace.ops)
    measurement.step_ops_[op.step].push_back(op);
  measurement.rebuildTraces();
  return measurement;
}

int Measurement::positionOf(const TraceOp &op) const {
  return lookUp(positions_, op);
}

Status Measurement::addStep(int step, const std::vector<TraceOp> &ops) {
  if (ops.empty()) return makeError("the step has no ops");
  Trace check;
  check.plan = device_trace_.plan;
  check.ops = ops;
  if (auto status = checkTraceMatchesSchedule(check, schedule_); !status) return status;
  auto &stored = step_ops_[step];
  stored = ops;
  for (auto &op : stored)
    op.step = step;
  aligned_.erase(step);
  rebuildTraces();
  return Ok{};
}

void Measurement::setTimeFactor(double time_factor) {
  if (!(time_factor > 0) || !std::isfinite(time_factor) || time_factor == time_factor_) return;
  time_factor_ = time_factor;
  aligned_.clear();
  rebuildTraces();
}

void Measurement::rebuildTraces() {
  device_trace_.source = "measured";
  device_trace_.ops.clear();
  for (const auto &[step, ops] : step_ops_)
    device_trace_.ops.insert(device_trace_.ops.end(), ops.begin(), ops.end());
  // The trace-wide metrics: the mean over the steps, as the backend writes them.
  const auto metrics = traceStepMetrics(device_trace_);
  device_trace_.makespan_us = device_trace_.bubble_fraction = device_trace_.bubble_ratio = 0;
  for (const auto &step : metrics) {
    const double n = static_cast<double>(metrics.size());
    device_trace_.makespan_us += step.makespan_us / n;
    device_trace_.bubble_fraction += step.bubble_fraction / n;
    device_trace_.bubble_ratio += step.bubble_ratio / n;
  }
  trace_ = device_trace_;
  for (auto &op : trace_.ops) {
    op.start_us /= time_factor_;
    op.end_us /= time_factor_;
  }
  for (auto &transfer : trace_.transfers) {
    transfer.start_us /= time_factor_;
    transfer.end_us /= time_factor_;
  }
  trace_.makespan_us /= time_factor_;
}

std::vector<int> Measurement::steps() const {
  std::vector<int> steps;
  for (const auto &[step, ops] : step_ops_)
    steps.push_back(step);
  return steps;
}

double Measurement::deviceMakespan(int step) const {
  const auto it = step_ops_.find(step);
  if (it == step_ops_.end() || it->second.empty()) return 0;
  double first = std::numeric_limits<double>::infinity(), last = -first;
  for (const auto &op : it->second) {
    first = std::min(first, op.start_us);
    last = std::max(last, op.end_us);
  }
  return last - first;
}

std::shared_ptr<const Evaluation> Measurement::alignedStep(int step) const {
  if (const auto cached = aligned_.find(step); cached != aligned_.end()) return cached->second;
  const auto it = step_ops_.find(step);
  if (it == step_ops_.end() || it->second.empty()) return nullptr;
  auto evaluation = std::make_shared<Evaluation>();
  evaluation->schedule = schedule_;
  auto &simulation = evaluation->simulation;
  const double nan = std::numeric_limits<double>::quiet_NaN();
  simulation.op_times.resize(schedule_.ranks.size());
  for (std::size_t r = 0; r < schedule_.ranks.size(); ++r)
    simulation.op_times[r].assign(schedule_.ranks[r].size(), {nan, nan});
  double origin = std::numeric_limits<double>::infinity();
  for (const auto &op : it->second)
    origin = std::min(origin, op.start_us);
  for (const auto &op : it->second) {
    // Prefer the record's own position when it says one and it agrees; else look it up.
    int position = -1;
    if (op.index >= 0 && op.rank >= 0 &&
        static_cast<std::size_t>(op.rank) < schedule_.ranks.size() &&
        static_cast<std::size_t>(op.index) <
            schedule_.ranks[static_cast<std::size_t>(op.rank)].size()) {
      const Op &listed =
          schedule_.ranks[static_cast<std::size_t>(op.rank)][static_cast<std::size_t>(op.index)];
      const bool agrees =
          listed.kind == OpKind::OverlappedPair
              ? (op.kind == OpKind::Forward && listed.stage == op.stage &&
                 listed.microbatch == op.microbatch) ||
                    (op.kind == OpKind::FullBackward && listed.backward_stage == op.stage &&
                     listed.backward_microbatch == op.microbatch)
              : listed.kind == op.kind && listed.stage == op.stage &&
                    listed.microbatch == op.microbatch;
      if (agrees) position = op.index;
    }
    if (position < 0) position = positionOf(op);
    if (position < 0) continue;
    auto &timing =
        simulation.op_times[static_cast<std::size_t>(op.rank)][static_cast<std::size_t>(position)];
    timing.start_us = (op.start_us - origin) / time_factor_;
    timing.end_us = (op.end_us - origin) / time_factor_;
  }
  // Ops the step lacks take no time where the rank left off, so ends stay ordered along a rank.
  simulation.ranks.resize(schedule_.ranks.size());
  double makespan = 0, busy_total = 0;
  for (std::size_t r = 0; r < simulation.op_times.size(); ++r) {
    double previous_end = 0, busy = 0;
    for (auto &timing : simulation.op_times[r]) {
      if (std::isnan(timing.start_us)) timing = {previous_end, previous_end};
      busy += timing.end_us - timing.start_us;
      previous_end = std::max(previous_end, timing.end_us);
    }
    simulation.ranks[r].busy_us = busy;
    busy_total += busy;
    makespan = std::max(makespan, previous_end);
  }
  for (auto &rank : simulation.ranks)
    rank.idle_us = makespan - rank.busy_us;
  simulation.makespan_us = makespan;
  const double capacity = static_cast<double>(simulation.op_times.size()) * makespan;
  simulation.bubble_fraction = capacity > 0 ? 1 - busy_total / capacity : 0;
  simulation.bubble_ratio = busy_total > 0 ? (capacity - busy_total) / busy_total : 0;
  std::shared_ptr<const Evaluation> shared = std::move(evaluation);
  aligned_[step] = shared;
  return shared;
}

QString formatSignedPercent(double fraction) {
  if (!std::isfinite(fraction)) return QStringLiteral("\u2014");
  const int decimals = std::abs(fraction) >= 1 ? 0 : 1;
  const double scale = decimals == 0 ? 1 : 10;
  // Rounded first, so a tiny negative error reads "+0.0 %" rather than "-0.0 %".
  const double percent = std::round(fraction * 100 * scale) / scale + 0.0;
  return QStringLiteral("%1%2 %")
      .arg(percent >= 0 ? QStringLiteral("+") : QString())
      .arg(percent, 0, 'f', decimals);
}

QString formatPointDifference(double fraction_difference) {
  if (!std::isfinite(fraction_difference)) return QStringLiteral("\u2014");
  const double points = std::round(fraction_difference * 1000) / 10 + 0.0;
  return QStringLiteral("%1%2 pts")
      .arg(points >= 0 ? QStringLiteral("+") : QString())
      .arg(points, 0, 'f', 1);
}

} // namespace pipescope::gui
