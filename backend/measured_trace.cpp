#include "backend/measured_trace.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

#include "engine/calibration.h"

namespace pipescope::backend {

std::vector<double> encodeRecord(const RankStepRecord &record) {
  const StepTimings &t = record.timings;
  std::vector<double> out;
  out.reserve(8 + 2 * t.ops.size() + 2 * t.sends.size() + 2 * t.arrivals.size());
  out.push_back(record.pipeline_rank);
  out.push_back(record.coords.d);
  out.push_back(record.coords.t);
  out.push_back(t.gradient_sync_us);
  out.push_back(t.clock_error_us);
  out.push_back(static_cast<double>(t.ops.size()));
  for (const auto &op : t.ops) {
    out.push_back(op.start_us);
    out.push_back(op.end_us);
  }
  for (const auto *list : {&t.sends, &t.arrivals}) {
    out.push_back(static_cast<double>(list->size()));
    for (const auto &[id, time] : *list) {
      out.push_back(id);
      out.push_back(time);
    }
  }
  return out;
}

Result<RankStepRecord> decodeRecord(const std::vector<double> &values) {
  RankStepRecord record;
  std::size_t at = 0;
  const auto next = [&](double &out) {
    if (at >= values.size()) return false;
    out = values[at++];
    return true;
  };
  double rank = 0, d = 0, t = 0, count = 0;
  if (!next(rank) || !next(d) || !next(t) || !next(record.timings.gradient_sync_us) ||
      !next(record.timings.clock_error_us) || !next(count))
    return makeError("a rank's step record is cut short");
  record.pipeline_rank = static_cast<int>(rank);
  record.coords = {static_cast<int>(d), static_cast<int>(rank), static_cast<int>(t)};
  if (count < 0 || count > static_cast<double>(values.size()))
    return makeError("a rank's step record is malformed");
  record.timings.ops.resize(static_cast<std::size_t>(count));
  for (auto &op : record.timings.ops)
    if (!next(op.start_us) || !next(op.end_us)) return makeError("a rank's op timings are cut");
  for (auto *list : {&record.timings.sends, &record.timings.arrivals}) {
    if (!next(count) || count < 0 || count > static_cast<double>(values.size()))
      return makeError("a rank's transfer records are malformed");
    list->resize(static_cast<std::size_t>(count));
    for (auto &[id, time] : *list) {
      double id_value = 0;
      if (!next(id_value) || !next(time)) return makeError("a rank's transfer records are cut");
      id = static_cast<std::int32_t>(id_value);
    }
  }
  return record;
}

std::vector<double> encodeText(const std::string &text) {
  return std::vector<double>(text.begin(), text.end());
}

std::string decodeText(const std::vector<double> &values) {
  std::string text;
  for (double v : values)
    text.push_back(static_cast<char>(static_cast<int>(v)));
  return text;
}

MeasuredTraceBuilder::MeasuredTraceBuilder(const Plan &plan, const Schedule &schedule,
                                           const LoweredProgram &program,
                                           std::vector<std::string> devices,
                                           double activation_bytes)
    : schedule_(schedule), program_(program), activation_bytes_(activation_bytes) {
  trace_.source = "measured";
  trace_.plan = plan;
  trace_.devices = std::move(devices);
}

Status MeasuredTraceBuilder::addStep(int step, const std::vector<RankStepRecord> &records,
                                     double clock_error_us) {
  const int P = schedule_.pp();
  std::vector<const RankStepRecord *> by_rank(static_cast<std::size_t>(P), nullptr);
  for (const auto &record : records)
    if (record.coords.d == 0 && record.coords.t == 0 && record.pipeline_rank >= 0 &&
        record.pipeline_rank < P)
      by_rank[static_cast<std::size_t>(record.pipeline_rank)] = &record;
  double step_start = std::numeric_limits<double>::infinity(), step_end = -step_start;
  for (int r = 0; r < P; ++r) {
    const auto *record = by_rank[static_cast<std::size_t>(r)];
    if (!record) return makeError("no timings arrived from pipeline rank " + std::to_string(r));
    if (record->timings.ops.size() != schedule_.ranks[static_cast<std::size_t>(r)].size())
      return makeError("pipeline rank " + std::to_string(r) + " reported " +
                       std::to_string(record->timings.ops.size()) + " ops; its list has " +
                       std::to_string(schedule_.ranks[static_cast<std::size_t>(r)].size()));
    for (const auto &t : record->timings.ops) {
      step_start = std::min(step_start, t.start_us);
      step_end = std::max(step_end, t.end_us);
    }
  }
  if (!has_origin_) {
    origin_us_ = std::isfinite(step_start) ? step_start : 0;
    has_origin_ = true;
  }

  MeasuredStep metrics;
  metrics.step = step;
  metrics.makespan_us = std::isfinite(step_start) ? step_end - step_start : 0;
  metrics.busy_us.assign(static_cast<std::size_t>(P), 0.0);
  std::map<std::int32_t, double> sent, arrived;
  for (int r = 0; r < P; ++r) {
    const auto &record = *by_rank[static_cast<std::size_t>(r)];
    const auto &ops = schedule_.ranks[static_cast<std::size_t>(r)];
    metrics.gradient_sync_us = std::max(metrics.gradient_sync_us, record.timings.gradient_sync_us);
    for (std::size_t i = 0; i < ops.size(); ++i) {
      const Op &op = ops[i];
      const OpTiming &t = record.timings.ops[i];
      metrics.busy_us[static_cast<std::size_t>(r)] += t.end_us - t.start_us;
      appendTraceOp(trace_.ops, r, step, static_cast<int>(i), op, t.start_us - origin_us_,
                    t.end_us - origin_us_);
    }
    for (const auto &[id, time] : record.timings.sends)
      sent[id] = time;
    for (const auto &[id, time] : record.timings.arrivals)
      arrived[id] = time;
  }
  for (const auto &[id, start] : sent) {
    const auto it = arrived.find(id);
    if (it == arrived.end() || id < 0 || static_cast<std::size_t>(id) >= program_.messages.size())
      continue;
    const Message &m = program_.messages[static_cast<std::size_t>(id)];
    trace_.transfers.push_back({m.from_rank, m.to_rank, m.stage, m.microbatch, m.gradient,
                                start - origin_us_, std::max(start, it->second) - origin_us_,
                                activation_bytes_});
  }
  double busy = 0;
  for (double b : metrics.busy_us)
    busy += b;
  const double capacity = P * metrics.makespan_us;
  metrics.bubble_fraction = capacity > 0 ? 1 - busy / capacity : 0;
  metrics.bubble_ratio = busy > 0 ? (capacity - busy) / busy : 0;
  steps_.push_back(metrics);

  // Trace metrics: the means over the measured steps.
  const double n = static_cast<double>(steps_.size());
  trace_.makespan_us = trace_.bubble_fraction = trace_.bubble_ratio = 0;
  trace_.ranks.assign(static_cast<std::size_t>(P), {});
  for (const auto &s : steps_) {
    trace_.makespan_us += s.makespan_us / n;
    trace_.bubble_fraction += s.bubble_fraction / n;
    trace_.bubble_ratio += s.bubble_ratio / n;
    for (int r = 0; r < P; ++r) {
      auto &rank = trace_.ranks[static_cast<std::size_t>(r)];
      rank.busy_us += s.busy_us[static_cast<std::size_t>(r)] / n;
      rank.idle_us += (s.makespan_us - s.busy_us[static_cast<std::size_t>(r)]) / n;
    }
  }
  // Every time is within the alignment bound plus the device timer's own mapping bound of rank 0's
  // clock.
  double device_error = 0;
  for (const auto *record : by_rank)
    device_error = std::max(device_error, record->timings.clock_error_us);
  trace_.clock_error_us = std::max(trace_.clock_error_us, clock_error_us + device_error);
  return Ok{};
}

StepEvent MeasuredTraceBuilder::stepEvent(const MeasuredStep &metrics) const {
  StepEvent event;
  event.step = metrics.step;
  event.metrics = RunMetrics{metrics.makespan_us, metrics.bubble_fraction, metrics.bubble_ratio};
  event.gradient_sync_us = metrics.gradient_sync_us;
  event.busy_us = metrics.busy_us;
  for (const auto &op : trace_.ops)
    if (op.step == metrics.step) event.ops.push_back(op);
  return event;
}

nlohmann::json MeasuredTraceBuilder::stepMetricsJson(const MeasuredStep &metrics) const {
  return {{"step", metrics.step},
          {"makespan_us", metrics.makespan_us},
          {"bubble_fraction", metrics.bubble_fraction},
          {"bubble_ratio", metrics.bubble_ratio},
          {"gradient_sync_us", metrics.gradient_sync_us},
          {"busy_us", metrics.busy_us}};
}

std::optional<Evaluation> MeasuredTraceBuilder::calibrated(const Costs &planned) const {
  if (trace_.ops.empty()) return std::nullopt;
  auto costs = calibrateCosts(schedule_, trace_, planned);
  if (!costs) return std::nullopt;
  auto evaluation = evaluateSchedule(schedule_, *costs);
  if (!evaluation) return std::nullopt;
  return std::move(*evaluation);
}

} // namespace pipescope::backend
