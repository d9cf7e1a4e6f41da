#include "gui/run/measurement.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "engine/json_io.h"

namespace pipescope::gui {

QString scheduleLabel(const Schedule &schedule) {
  return QString::fromStdString(pipescope::describeSchedule(schedule));
}

Status checkTraceFitsShownSchedule(const Trace &trace, const Schedule &schedule) {
  auto status = pipescope::checkTraceMatchesSchedule(trace, schedule);
  if (status || trace.ops.empty()) return status;
  return makeError(status.error().message +
                   " Open that plan first (File \u25b8 Open plan\u2026) or set the same "
                   "schedule, P, M and V, then import the trace again.");
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
  positions_ = ScheduleOpIndex(schedule_);
  rebuildTraces();
}

Result<Measurement> Measurement::fromTrace(const Trace &trace, Schedule schedule,
                                           double time_factor) {
  if (auto status = checkTraceFitsShownSchedule(trace, schedule); !status) return status.error();
  Measurement measurement(trace.plan, std::move(schedule), time_factor);
  measurement.device_trace_ = trace;
  measurement.device_trace_.ops.clear();
  for (const auto &op : trace.ops)
    measurement.step_ops_[op.step].push_back(op);
  measurement.rebuildTraces();
  return measurement;
}

int Measurement::positionOf(const TraceOp &op) const {
  return positions_.positionOf(op);
}

Status Measurement::addStep(int step, const std::vector<TraceOp> &ops) {
  if (ops.empty()) return makeError("the step has no ops");
  Trace check;
  check.plan = device_trace_.plan;
  check.ops = ops;
  if (auto status = checkTraceFitsShownSchedule(check, schedule_); !status) return status;
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
  trace_ = inPlannedTime(device_trace_, time_factor_);
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
