#include "engine/run_events.h"

#include <utility>

#include "engine/json_fields.h"
#include "engine/json_io.h"
#include "engine/json_text.h"

namespace pipescope {

using nlohmann::json;

namespace {

template <typename... Alternatives> struct Overloaded : Alternatives... {
  using Alternatives::operator()...;
};
template <typename... Alternatives> Overloaded(Alternatives...) -> Overloaded<Alternatives...>;

Result<OpKind> kindFromLetter(const std::string &letter, const std::string &pointer) {
  for (const OpKind kind :
       {OpKind::Forward, OpKind::InputGrad, OpKind::WeightGrad, OpKind::FullBackward})
    if (letter == opKindLetter(kind)) return kind;
  return makeError(pointer + ": expected one of F, I, W, B, got \"" +
                   escapeControlCharacters(letter) + "\"");
}

constexpr int kMaxStep = 1 << 30;

json metricsJson(const RunMetrics &metrics) {
  return {{"makespan_us", metrics.makespan_us},
          {"bubble_fraction", metrics.bubble_fraction},
          {"bubble_ratio", metrics.bubble_ratio}};
}

// The bubble bounds of the trace file's metrics: a measured step counts an overlapped pair's two
// parts as busy, so its fraction can fall below 0, never below -1.
void readMetricFields(JsonFields &fields, double &makespan_us, double &bubble_fraction,
                      double &bubble_ratio, bool required) {
  fields.number("makespan_us", makespan_us, 0, kMaxRecordedValue, required)
      .number("bubble_fraction", bubble_fraction, -1, 1, required)
      .number("bubble_ratio", bubble_ratio, -1, kMaxRecordedValue, required);
}

// The metrics object at `key` into `out` when present; a wrong type is left in `fields`.
Status readMetrics(JsonFields &fields, const char *key, std::optional<RunMetrics> &out) {
  const json *object = fields.object(key);
  if (!object) return Ok{};
  JsonFields inner(*object, fields.pointerTo(key));
  RunMetrics metrics;
  readMetricFields(inner, metrics.makespan_us, metrics.bubble_fraction, metrics.bubble_ratio, true);
  if (!inner.ok()) return inner.error();
  out = metrics;
  return Ok{};
}

std::string eventLine(json object, const char *name) {
  object["event"] = name;
  return object.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string stepLine(const StepEvent &event) {
  json head = {{"event", "step"},          {"step", event.step},
               {"of", event.of},           {"gradient_sync_us", event.gradient_sync_us},
               {"busy_us", event.busy_us}, {"clock_error_us", event.clock_error_us}};
  if (event.metrics) head.update(metricsJson(*event.metrics));
  // The ops go last, record by record, so a step of a million ops is never one document.
  std::string line = head.dump(-1, ' ', false, json::error_handler_t::replace);
  line.pop_back(); // the closing brace
  line += ",\"ops\":[";
  for (std::size_t i = 0; i < event.ops.size(); ++i) {
    if (i) line += ',';
    appendTraceOpRecord(line, event.ops[i]);
  }
  line += "]}";
  return line;
}

Result<RunEvent> readCheck(JsonFields &f) {
  CheckEvent event;
  f.integer("rank", event.rank, 0, kMaxWorldSize)
      .text("what", event.what)
      .number("max_relative_error", event.max_relative_error, 0, kMaxRecordedValue)
      .boolean("ok", event.ok);
  if (!f.ok()) return f.error();
  return RunEvent(std::move(event));
}

Result<RunEvent> readStart(JsonFields &f) {
  StartEvent event;
  f.text("device", event.device, true)
      .text("launch", event.launch)
      .text("channel", event.channel)
      .integer("world_size", event.world_size, 1, kMaxWorldSize, true)
      .text("plan", event.plan_path)
      .text("schedule", event.schedule)
      .integer("pp", event.pp, 1, kMaxPipelineRanks)
      .integer("microbatches", event.microbatches, 1, kMaxMicrobatches)
      .integer("virtual_stages", event.virtual_stages, 1, kMaxChunks)
      .integer("warmup_steps", event.warmup_steps, 0, kMaxStep, true)
      .integer("measured_steps", event.measured_steps, 0, kMaxStep, true);
  if (const json *mesh = f.object("mesh")) {
    JsonFields m(*mesh, f.pointerTo("mesh"));
    m.integer("dp", event.mesh_dp, 1, kMaxWorldSize)
        .integer("tp", event.mesh_tp, 1, kMaxWorldSize)
        .integer("pp", event.mesh_pp, 1, kMaxPipelineRanks);
    if (!m.ok()) return m.error();
  }
  if (const json *workload = f.object("workload")) {
    JsonFields w(*workload, f.pointerTo("workload"));
    double factor = 0;
    w.number("expected_time_factor", factor, 0, kMaxRecordedValue);
    if (!w.ok()) return w.error();
    event.workload = *workload;
  }
  std::optional<RunMetrics> simulated;
  if (auto status = readMetrics(f, "simulated", simulated); !status) return status.error();
  if (!f.ok()) return f.error();
  if (simulated) event.simulated = *simulated;
  return RunEvent(std::move(event));
}

Result<RunEvent> readProgress(JsonFields &f) {
  ProgressEvent event;
  f.text("phase", event.phase, true)
      .integer("step", event.step, 0, kMaxStep, true)
      .integer("of", event.of, 0, kMaxStep)
      .number("wall_us", event.wall_us, 0, kMaxRecordedValue);
  if (!f.ok()) return f.error();
  return RunEvent(std::move(event));
}

Result<RunEvent> readStep(const json &object, JsonFields &f, OpRecords op_records) {
  StepEvent event;
  f.integer("step", event.step, 0, kMaxStep, true).integer("of", event.of, 0, kMaxStep);
  if (object.contains("makespan_us") || object.contains("bubble_fraction") ||
      object.contains("bubble_ratio")) {
    RunMetrics metrics;
    readMetricFields(f, metrics.makespan_us, metrics.bubble_fraction, metrics.bubble_ratio, true);
    event.metrics = metrics;
  }
  f.number("gradient_sync_us", event.gradient_sync_us, 0, kMaxRecordedValue)
      .number("clock_error_us", event.clock_error_us, 0, kMaxRecordedValue);
  const json *busy = f.array("busy_us");
  const json *ops = f.array("ops", true);
  if (!f.ok()) return f.error();
  if (busy) {
    event.busy_us.reserve(busy->size());
    for (std::size_t r = 0; r < busy->size(); ++r) {
      const json &value = (*busy)[r];
      const std::string at = f.pointerTo("busy_us") + "/" + std::to_string(r);
      if (!value.is_number() || value.get<double>() < 0 || value.get<double>() > kMaxRecordedValue)
        return makeError(at + ": expected a number between 0 and " +
                         json(kMaxRecordedValue).dump() + ", got " +
                         (value.is_number() ? value.dump() : jsonTypeName(value)));
      event.busy_us.push_back(value.get<double>());
    }
  }
  if (ops->size() > kMaxTraceRecords)
    return makeError(f.pointerTo("ops") + ": more than " + std::to_string(kMaxTraceRecords) +
                     " records; a step has at most that many");
  TraceOp defaults;
  defaults.step = event.step;
  event.ops.reserve(ops->size());
  for (std::size_t i = 0; i < ops->size(); ++i) {
    auto op = readTraceOpRecord((*ops)[i], f.pointerTo("ops") + "/" + std::to_string(i), defaults);
    if (op) {
      event.ops.push_back(*op);
      continue;
    }
    if (op_records == OpRecords::Strict) return op.error();
    if (!event.first_skipped) event.first_skipped = op.error();
    ++event.skipped_ops;
  }
  return RunEvent(std::move(event));
}

Result<RunEvent> readDone(JsonFields &f) {
  DoneEvent event;
  f.text("trace", event.trace_path, true)
      .integer("steps", event.steps, 0, kMaxStep)
      .number("clock_error_us", event.clock_error_us, 0, kMaxRecordedValue)
      .number("mean_op_us", event.mean_op_us, 0, kMaxRecordedValue)
      .number("timing_overhead_fraction", event.timing_overhead_fraction, 0, kMaxRecordedValue);
  std::optional<RunMetrics> measured, simulated;
  for (auto [key, out] : {std::pair("measured", &measured), std::pair("simulated", &simulated),
                          std::pair("calibrated", &event.calibrated)})
    if (auto status = readMetrics(f, key, *out); !status) return status.error();
  if (measured) event.measured = *measured;
  if (simulated) {
    event.simulated = *simulated;
    JsonFields s(*f.object("simulated"), f.pointerTo("simulated"));
    s.number("expected_makespan_us", event.expected_makespan_us, 0, kMaxRecordedValue);
    if (!s.ok()) return s.error();
  }
  if (const json *throughput = f.object("throughput")) event.throughput = *throughput;
  if (!f.ok()) return f.error();
  return RunEvent(std::move(event));
}

} // namespace

void appendTraceOpRecord(std::string &out, const TraceOp &op) {
  using json_text::appendField;
  using json_text::appendFields;
  out += '{';
  appendFields(out, "rank", op.rank, "step", op.step, "index", op.index, "kind",
               opKindLetter(op.kind), "stage", op.stage, "microbatch", op.microbatch, "start_us",
               op.start_us, "end_us", op.end_us, "lane", op.lane);
  if (op.overlapped) out += ",\"overlapped\":true";
  out += '}';
}

json traceOpRecord(const TraceOp &op) {
  std::string text;
  appendTraceOpRecord(text, op);
  return json::parse(text);
}

Result<TraceOp> readTraceOpRecord(const json &record, const std::string &pointer,
                                  const TraceOp &defaults) {
  JsonFields f(record, pointer);
  TraceOp op = defaults;
  std::string kind;
  f.integer("rank", op.rank, 0, kMaxWorldSize, true)
      .integer("step", op.step, 0, kMaxStep)
      .integer("index", op.index, 0, kMaxStep)
      .text("kind", kind, true)
      .integer("stage", op.stage, 0, kMaxPipelineRanks * kMaxChunks, true)
      .integer("microbatch", op.microbatch, 0, kMaxMicrobatches, true)
      .number("start_us", op.start_us, 0, kMaxRecordedValue, true)
      .number("end_us", op.end_us, 0, kMaxRecordedValue, true)
      .integer("lane", op.lane, 0, 1 << 16)
      .boolean("overlapped", op.overlapped);
  if (!f.ok()) return f.error();
  auto k = kindFromLetter(kind, f.pointerTo("kind"));
  if (!k) return k.error();
  op.kind = *k;
  if (op.end_us < op.start_us)
    return makeError(f.pointerTo("end_us") + ": ends before it starts (" + json(op.end_us).dump() +
                     " < " + json(op.start_us).dump() + ")");
  return op;
}

double StartEvent::expectedTimeFactor() const {
  if (!workload.is_object()) return 0;
  const auto it = workload.find("expected_time_factor");
  return it != workload.end() && it->is_number() ? it->get<double>() : 0;
}

std::string runEventName(const RunEvent &event) {
  return std::visit(Overloaded{[](const CheckEvent &) { return std::string("check"); },
                               [](const StartEvent &) { return std::string("start"); },
                               [](const ProgressEvent &) { return std::string("progress"); },
                               [](const StepEvent &) { return std::string("step"); },
                               [](const WarningEvent &) { return std::string("warning"); },
                               [](const ErrorEvent &) { return std::string("error"); },
                               [](const DoneEvent &) { return std::string("done"); },
                               [](const UnknownEvent &e) { return e.name; }},
                    event);
}

std::string runEventLine(const RunEvent &event) {
  return std::visit(
      Overloaded{[](const CheckEvent &e) {
                   return eventLine({{"rank", e.rank},
                                     {"what", e.what},
                                     {"max_relative_error", e.max_relative_error},
                                     {"ok", e.ok}},
                                    "check");
                 },
                 [](const StartEvent &e) {
                   return eventLine(
                       {{"device", e.device},
                        {"launch", e.launch},
                        {"channel", e.channel},
                        {"world_size", e.world_size},
                        {"plan", e.plan_path},
                        {"schedule", e.schedule},
                        {"pp", e.pp},
                        {"microbatches", e.microbatches},
                        {"virtual_stages", e.virtual_stages},
                        {"mesh", {{"dp", e.mesh_dp}, {"tp", e.mesh_tp}, {"pp", e.mesh_pp}}},
                        {"warmup_steps", e.warmup_steps},
                        {"measured_steps", e.measured_steps},
                        {"workload", e.workload},
                        {"simulated", metricsJson(e.simulated)}},
                       "start");
                 },
                 [](const ProgressEvent &e) {
                   return eventLine(
                       {{"phase", e.phase}, {"step", e.step}, {"of", e.of}, {"wall_us", e.wall_us}},
                       "progress");
                 },
                 [](const StepEvent &e) { return stepLine(e); },
                 [](const WarningEvent &e) {
                   json object = {{"message", e.message}};
                   if (e.rank >= 0) object["rank"] = e.rank;
                   return eventLine(std::move(object), "warning");
                 },
                 [](const ErrorEvent &e) {
                   json object = {{"message", e.message}};
                   if (e.rank >= 0) object["rank"] = e.rank;
                   if (e.waiting_for_rank >= 0) object["waiting_for_rank"] = e.waiting_for_rank;
                   return eventLine(std::move(object), "error");
                 },
                 [](const DoneEvent &e) {
                   json simulated = metricsJson(e.simulated);
                   simulated["expected_makespan_us"] = e.expected_makespan_us;
                   return eventLine(
                       {{"trace", e.trace_path},
                        {"steps", e.steps},
                        {"measured", metricsJson(e.measured)},
                        {"simulated", std::move(simulated)},
                        {"calibrated", e.calibrated ? metricsJson(*e.calibrated) : json(nullptr)},
                        {"clock_error_us", e.clock_error_us},
                        {"mean_op_us", e.mean_op_us},
                        {"throughput", e.throughput},
                        {"timing_overhead_fraction", e.timing_overhead_fraction}},
                       "done");
                 },
                 [](const UnknownEvent &e) { return eventLine(json::object(), e.name.c_str()); }},
      event);
}

Result<RunEvent> readRunEvent(const json &object, OpRecords op_records) {
  JsonFields f(object, "");
  std::string name;
  f.text("event", name, true);
  if (!f.ok()) return f.error();
  if (name == "check") return readCheck(f);
  if (name == "start") return readStart(f);
  if (name == "progress") return readProgress(f);
  if (name == "step") return readStep(object, f, op_records);
  if (name == "warning" || name == "error") {
    int rank = -1;
    std::string message;
    f.integer("rank", rank, 0, kMaxWorldSize).text("message", message);
    if (name == "warning") {
      if (!f.ok()) return f.error();
      return RunEvent(WarningEvent{rank, std::move(message)});
    }
    int waiting_for_rank = -1;
    f.integer("waiting_for_rank", waiting_for_rank, 0, kMaxWorldSize);
    if (!f.ok()) return f.error();
    return RunEvent(ErrorEvent{rank, std::move(message), waiting_for_rank});
  }
  if (name == "done") return readDone(f);
  return RunEvent(UnknownEvent{std::move(name)});
}

Result<RunEvent> readRunEventLine(std::string_view line, OpRecords op_records) {
  auto parsed = parseJsonLimited(line);
  if (!parsed) return parsed.error();
  return readRunEvent(*parsed, op_records);
}

} // namespace pipescope
