#include "engine/trace_file.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <istream>
#include <optional>
#include <tuple>
#include <utility>

#include "engine/json_dom_builder.h"
#include "engine/json_fields.h"
#include "engine/json_io.h"
#include "engine/json_text.h"
#include "engine/output_file.h"
#include "engine/run_events.h"

namespace pipescope {

using nlohmann::json;

namespace {

// The record(s) of one executed op, handed to `emit`: one, or for an overlapped F&B pair its
// two parts with the same start and end, each marked `overlapped`.
template <typename Emit>
void forEachRecordOf(int rank, int step, int index, const Op &op, double start_us, double end_us,
                     Emit &&emit) {
  TraceOp record{rank, step, index, op.kind, op.stage, op.microbatch, start_us, end_us, 0, false};
  if (op.kind == OpKind::OverlappedPair) {
    record.kind = OpKind::Forward;
    record.overlapped = true;
    emit(record);
    record.kind = OpKind::FullBackward;
    record.stage = op.backward_stage;
    record.microbatch = op.backward_microbatch;
  }
  emit(record);
}

} // namespace

void appendTraceOp(std::vector<TraceOp> &ops, int rank, int step, int index, const Op &op,
                   double start_us, double end_us) {
  forEachRecordOf(rank, step, index, op, start_us, end_us,
                  [&](const TraceOp &record) { ops.push_back(record); });
}

Trace traceFromEvaluation(const Plan &plan, const Evaluation &evaluation) {
  Trace trace;
  trace.source = "simulated";
  trace.plan = plan;
  const auto &schedule = evaluation.schedule;
  const auto &simulation = evaluation.simulation;
  trace.ops.reserve(schedule.opCount());
  for (std::size_t r = 0; r < schedule.ranks.size(); ++r) {
    for (std::size_t i = 0; i < schedule.ranks[r].size(); ++i) {
      const OpTiming &t = simulation.op_times[r][i];
      appendTraceOp(trace.ops, static_cast<int>(r), 0, static_cast<int>(i), schedule.ranks[r][i],
                    t.start_us, t.end_us);
    }
  }
  const double bytes = plan.costs.activation_bytes;
  trace.transfers.reserve(evaluation.program.messages.size());
  for (std::size_t id = 0; id < evaluation.program.messages.size(); ++id) {
    const Message &m = evaluation.program.messages[id];
    const TransferTiming &t = simulation.transfers[id];
    trace.transfers.push_back(
        {m.from_rank, m.to_rank, m.stage, m.microbatch, m.gradient, t.start_us, t.end_us, bytes});
  }
  trace.makespan_us = simulation.makespan_us;
  trace.bubble_fraction = simulation.bubble_fraction;
  trace.bubble_ratio = simulation.bubble_ratio;
  for (const auto &rank : simulation.ranks)
    trace.ranks.push_back(
        {rank.busy_us, rank.idle_us, rank.peak_inflight, rank.peak_inflight_microbatches});
  trace.memory = simulation.memory;
  return trace;
}

namespace {

std::string opPointer(std::size_t i) {
  return "/ops/" + std::to_string(i);
}

std::string describeTraceOp(const TraceOp &op) {
  return "rank " + std::to_string(op.rank) + " " + std::string(opKindLetter(op.kind)) + " stage " +
         std::to_string(op.stage) + " microbatch " + std::to_string(op.microbatch) +
         (op.step != 0 ? " step " + std::to_string(op.step) : std::string());
}

// Virtual stages of the plan's schedule, without generating it.
int planStageCount(const Plan &plan) {
  if (plan.custom) return plan.custom->placement.stageCount();
  const ScheduleFamily *family = findScheduleFamily(plan.request.name);
  const bool loop = !family || family->placement == PlacementKind::Loop;
  return plan.request.pp * (loop ? plan.request.chunks : 2);
}

// What no real run records: an op on a rank, stage or microbatch the plan does not have, the same
// op twice in one step, or two ops at once on one lane of a rank. The two parts of an overlapped
// F&B pair share their start and end on purpose; they are the one exception.
Status checkTraceOps(const Trace &trace) {
  const auto &ops = trace.ops;
  const int pp = trace.plan.request.pp;
  const int stages = planStageCount(trace.plan);
  const int microbatches = trace.plan.request.microbatches;
  for (std::size_t i = 0; i < ops.size(); ++i) {
    const TraceOp &op = ops[i];
    if (op.rank >= pp)
      return makeError(opPointer(i) + "/rank: " + std::to_string(op.rank) +
                       " is not a pipeline rank of the plan, which has P=" + std::to_string(pp));
    if (op.stage >= stages)
      return makeError(opPointer(i) + "/stage: " + std::to_string(op.stage) +
                       " is not a stage of the plan, which has " + std::to_string(stages));
    if (op.microbatch >= microbatches)
      return makeError(
          opPointer(i) + "/microbatch: " + std::to_string(op.microbatch) +
          " is not a microbatch of the plan, which has M=" + std::to_string(microbatches));
  }
  std::vector<std::size_t> order(ops.size());
  for (std::size_t i = 0; i < order.size(); ++i)
    order[i] = i;
  // Duplicates: equal (rank, step, kind, stage, microbatch) sort next to each other, the first
  // record first; the one reported is the earliest record that repeats another.
  const auto identity = [&](std::size_t i) {
    const TraceOp &op = ops[i];
    return std::tuple(op.rank, op.step, static_cast<int>(op.kind), op.stage, op.microbatch);
  };
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return std::pair(identity(a), a) < std::pair(identity(b), b);
  });
  std::optional<std::pair<std::size_t, std::size_t>> duplicate; // (repeat, first)
  for (std::size_t k = 1; k < order.size(); ++k) {
    if (identity(order[k]) != identity(order[k - 1])) continue;
    std::size_t first = order[k - 1];
    while (k < order.size() && identity(order[k]) == identity(first)) {
      if (!duplicate || order[k] < duplicate->first) duplicate = std::pair(order[k], first);
      ++k;
    }
  }
  if (duplicate)
    return makeError(opPointer(duplicate->first) + ": duplicate of " +
                     opPointer(duplicate->second) + " (" + describeTraceOp(ops[duplicate->second]) +
                     ")");
  // Overlaps: on each (rank, lane), by start, every record begins where the latest end so far
  // is, or later. A tiny tolerance absorbs rounding in measured and rescaled times.
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    const TraceOp &x = ops[a], &y = ops[b];
    return std::tuple(x.rank, x.lane, x.start_us, x.end_us, a) <
           std::tuple(y.rank, y.lane, y.start_us, y.end_us, b);
  });
  std::optional<std::pair<std::size_t, std::size_t>> overlap; // (later, earlier)
  for (std::size_t k = 1, latest = order[0]; k < order.size(); ++k) {
    const TraceOp &op = ops[order[k]];
    const TraceOp &before = ops[latest];
    if (op.rank != before.rank || op.lane != before.lane) {
      latest = order[k];
      continue;
    }
    const double tolerance = 1e-3 + 1e-9 * std::abs(before.end_us);
    const bool pair = op.overlapped && before.overlapped &&
                      std::abs(op.start_us - before.start_us) <= tolerance &&
                      std::abs(op.end_us - before.end_us) <= tolerance;
    if (op.start_us < before.end_us - tolerance && !pair) {
      const std::size_t later = std::max(order[k], latest), earlier = std::min(order[k], latest);
      if (!overlap || later < overlap->first) overlap = std::pair(later, earlier);
    }
    if (op.end_us > before.end_us) latest = order[k];
  }
  if (overlap) {
    const TraceOp &a = ops[overlap->first], &b = ops[overlap->second];
    return makeError(opPointer(overlap->first) + ": overlaps " + opPointer(overlap->second) +
                     " on rank " + std::to_string(a.rank) + " lane " + std::to_string(a.lane) +
                     " (" + std::string(opKindLetter(a.kind)) + " stage " +
                     std::to_string(a.stage) + " microbatch " + std::to_string(a.microbatch) +
                     " runs " + json(a.start_us).dump() + "-" + json(a.end_us).dump() + " us, " +
                     describeTraceOp(b) + " runs " + json(b.start_us).dump() + "-" +
                     json(b.end_us).dump() + " us); one lane runs one op at a time");
  }
  return Ok{};
}

} // namespace

namespace {

constexpr double kHuge = kMaxRecordedValue;

// One comm record; `at` is its JSON pointer ("/comms/3").
Result<TraceTransfer> traceTransferFromJson(const json &record, const std::string &at) {
  JsonFields f(record, at);
  TraceTransfer t;
  std::string kind;
  f.integer("from_rank", t.from_rank, 0, kMaxWorldSize, true)
      .integer("to_rank", t.to_rank, 0, kMaxWorldSize, true)
      .integer("stage", t.stage, 0, kMaxPipelineRanks * kMaxChunks, true)
      .integer("microbatch", t.microbatch, 0, kMaxMicrobatches, true)
      .text("kind", kind, true)
      .number("start_us", t.start_us, 0, kHuge, true)
      .number("end_us", t.end_us, 0, kHuge, true)
      .number("bytes", t.bytes, 0, kHuge);
  if (!f.ok()) return f.error();
  if (kind != "activation" && kind != "gradient")
    return makeError(at + "/kind: expected \"activation\" or \"gradient\", got \"" +
                     escapeControlCharacters(kind) + "\"");
  t.gradient = kind == "gradient";
  return t;
}

std::string tooManyRecords(const char *array, std::size_t limit) {
  return std::string("/") + array + ": more than " + std::to_string(limit) +
         " records; pipescope reads at most that many (twice the ops of the largest schedule it "
         "simulates)";
}

// The records of the `ops` and `comms` arrays, decoded one by one (by the streaming reader as it
// parses, or out of a whole document), up to the first bad one.
struct TraceRecords {
  bool ops_read = false, comms_read = false; ///< the key held an array, decoded here
  std::vector<TraceOp> ops;
  std::vector<TraceTransfer> transfers;
  std::optional<Error> ops_error, comms_error; ///< the first bad record, if any
};

// The trace from the rest of its document and its decoded records, checked in the order the
// fields are read, so both readers give the same first error for the same file. `document`'s
// `ops` and `comms` are looked at only when they were not decoded (absent or not arrays).
Result<Trace> assembleTrace(const json &document, TraceRecords records) {
  if (auto status = checkFormatAndVersion(document, kTraceFormat, kTraceVersion); !status)
    return status.error();
  Trace trace;
  JsonFields root(document, "");
  root.text("source", trace.source, true);
  const auto *plan = root.object("plan", true);
  if (!records.ops_read) root.array("ops", true);
  if (!records.comms_read) root.array("comms");
  const auto *metrics = root.object("metrics");
  root.number("clock_error_us", trace.clock_error_us, 0, 1e12);
  if (!root.ok()) return root.error();
  if (trace.source != "simulated" && trace.source != "measured")
    return makeError("/source: expected \"simulated\" or \"measured\", got \"" +
                     escapeControlCharacters(trace.source) + "\"");
  auto parsed_plan = planFromJson(*plan);
  if (!parsed_plan)
    return makeError("/plan" +
                     (parsed_plan.error().message.starts_with("/") ? "" : std::string(": ")) +
                     parsed_plan.error().message);
  trace.plan = std::move(*parsed_plan);
  if (records.ops_error) return *records.ops_error;
  trace.ops = std::move(records.ops);
  if (auto status = checkTraceOps(trace); !status) return status.error();
  if (records.comms_error) return *records.comms_error;
  trace.transfers = std::move(records.transfers);
  if (metrics) {
    JsonFields f(*metrics, "/metrics");
    f.number("makespan", trace.makespan_us, 0, kHuge)
        .number("bubble_fraction", trace.bubble_fraction, -1, 1)
        .number("bubble_ratio", trace.bubble_ratio, -1, kHuge);
    const auto *ranks = f.array("ranks");
    if (!f.ok()) return f.error();
    if (ranks) {
      for (std::size_t i = 0; i < ranks->size(); ++i) {
        JsonFields rf((*ranks)[i], "/metrics/ranks/" + std::to_string(i));
        TraceRank r;
        rf.number("busy", r.busy_us, 0, kHuge)
            .number("idle", r.idle_us, -kHuge, kHuge)
            .integer("peak_inflight", r.peak_inflight, 0, 1 << 30)
            .number("peak_inflight_microbatches", r.peak_inflight_microbatches, 0, kHuge);
        if (!rf.ok()) return rf.error();
        trace.ranks.push_back(r);
      }
    }
  }
  if (const auto it = document.find("devices"); it != document.end() && it->is_array())
    for (const auto &d : *it)
      if (d.is_string()) trace.devices.push_back(d.get<std::string>());
  return trace;
}

using DomBuilder = JsonDomBuilder;

// The streaming trace reader: the root object's `ops` and `comms` arrays are decoded record by
// record into TraceOps and TraceTransfers as they are parsed (each record built as a small JSON
// object and decoded by the shared per-record code, then dropped); the rest of the document, which
// is small, is built. The depth limit applies everywhere; the value cap applies to what is built
// at once (the rest and the record being read); the streamed arrays are capped by record count.
class TraceSax : public nlohmann::json_sax<json> {
public:
  explicit TraceSax(const TraceReadLimits &limits) : limits_(limits) {}

  bool null() override { return scalar(nullptr); }
  bool boolean(bool v) override { return scalar(v); }
  bool number_integer(number_integer_t v) override { return scalar(v); }
  bool number_unsigned(number_unsigned_t v) override { return scalar(v); }
  bool number_float(number_float_t v, const string_t &) override { return scalar(v); }
  bool string(string_t &v) override { return scalar(std::move(v)); }
  bool binary(binary_t &) override { return fail("binary values are not JSON"); }
  bool start_object(std::size_t) override { return open(json::object()); }
  bool start_array(std::size_t) override { return open(json::array()); }
  bool end_object() override { return close(); }
  bool end_array() override { return close(); }
  bool key(string_t &name) override {
    if (stream_ != Stream::None) {
      if (!skipping()) record_.key(name);
      return true;
    }
    if (depth_ == 1) {
      root_key_ = name;
      // A repeated key replaces the earlier value, as in json::parse.
      if (name == "ops") resetOps();
      if (name == "comms") resetComms();
    }
    rest_.key(name);
    return true;
  }
  bool parse_error(std::size_t, const std::string &,
                   const nlohmann::detail::exception &e) override {
    if (error_.empty()) error_ = describeJsonParseError(e.what());
    return false;
  }

  const std::string &error() const { return error_; }
  json &rest() { return rest_.root(); }
  TraceRecords &records() { return records_; }

private:
  enum class Stream { None, Ops, Comms };

  bool fail(std::string message) {
    if (error_.empty()) error_ = std::move(message);
    return false;
  }
  bool count() {
    if (++values_ <= limits_.json.max_values) return true;
    return fail("the JSON holds more than " + std::to_string(limits_.json.max_values) +
                " values outside its op and comm records; pipescope reads at most that many");
  }
  bool skipping() const {
    return stream_ == Stream::Ops ? records_.ops_error.has_value()
                                  : records_.comms_error.has_value();
  }
  void resetOps() {
    records_.ops_read = false;
    records_.ops.clear();
    records_.ops_error.reset();
  }
  void resetComms() {
    records_.comms_read = false;
    records_.transfers.clear();
    records_.comms_error.reset();
  }
  // A record begins (at the streamed array's level): counted against the record cap.
  bool beginRecord() {
    const std::size_t read = stream_ == Stream::Ops ? ops_seen_ : comms_seen_;
    if (read >= limits_.max_records)
      return fail(tooManyRecords(stream_ == Stream::Ops ? "ops" : "comms", limits_.max_records));
    record_.reset();
    record_values_ = 0;
    return true;
  }
  // A record is complete: decoded, kept, and its values given back to the cap.
  void endRecord() {
    values_ -= record_values_;
    if (stream_ == Stream::Ops) {
      const std::size_t i = ops_seen_++;
      if (records_.ops_error) return;
      auto op = readTraceOpRecord(record_.root(), opPointer(i));
      if (op)
        records_.ops.push_back(*op);
      else
        records_.ops_error = op.error();
    } else {
      const std::size_t i = comms_seen_++;
      if (records_.comms_error) return;
      auto t = traceTransferFromJson(record_.root(), "/comms/" + std::to_string(i));
      if (t)
        records_.transfers.push_back(*t);
      else
        records_.comms_error = t.error();
    }
    record_.reset();
  }
  template <typename Value> bool scalar(Value &&v) {
    if (stream_ == Stream::None) {
      if (!count()) return false;
      rest_.value(std::forward<Value>(v));
      return true;
    }
    const bool alone = depth_ == stream_depth_; // a record that is not an object
    if (alone && !beginRecord()) return false;
    if (!skipping()) {
      if (!count()) return false;
      ++record_values_;
      record_.value(std::forward<Value>(v));
    }
    if (alone) endRecord();
    return true;
  }
  bool open(json container) {
    if (++depth_ > limits_.json.max_depth)
      return fail("the JSON nests deeper than " + std::to_string(limits_.json.max_depth) +
                  " levels; pipescope files are a few levels deep, so this is not one");
    if (stream_ != Stream::None) {
      if (depth_ == stream_depth_ + 1 && !beginRecord()) return false;
      if (!skipping()) {
        if (!count()) return false;
        ++record_values_;
        record_.open(std::move(container));
      }
      return true;
    }
    if (depth_ == 1) root_is_object_ = container.is_object();
    if (depth_ == 2 && root_is_object_ && container.is_array() &&
        (root_key_ == "ops" || root_key_ == "comms")) {
      rest_.root().erase(root_key_); // the member key() made; the records go elsewhere
      stream_ = root_key_ == "ops" ? Stream::Ops : Stream::Comms;
      stream_depth_ = depth_;
      if (stream_ == Stream::Ops) {
        records_.ops_read = true;
        ops_seen_ = 0;
      } else {
        records_.comms_read = true;
        comms_seen_ = 0;
      }
      return true;
    }
    if (!count()) return false;
    rest_.open(std::move(container));
    return true;
  }
  bool close() {
    if (stream_ != Stream::None) {
      if (depth_ == stream_depth_) {
        stream_ = Stream::None;
      } else {
        if (!skipping()) record_.close();
        if (depth_ == stream_depth_ + 1) endRecord();
      }
    } else {
      rest_.close();
    }
    --depth_;
    return true;
  }

  const TraceReadLimits &limits_;
  DomBuilder rest_, record_;
  TraceRecords records_;
  Stream stream_ = Stream::None;
  int depth_ = 0, stream_depth_ = 0;
  bool root_is_object_ = false;
  std::string root_key_;
  std::size_t values_ = 0, record_values_ = 0, ops_seen_ = 0, comms_seen_ = 0;
  std::string error_;
};

} // namespace

Result<Trace> traceFromJson(const json &document) {
  TraceRecords records;
  if (document.is_object()) {
    if (const auto ops = document.find("ops"); ops != document.end() && ops->is_array()) {
      if (ops->size() > kMaxTraceRecords) return makeError(tooManyRecords("ops", kMaxTraceRecords));
      records.ops_read = true;
      records.ops.reserve(ops->size());
      for (std::size_t i = 0; i < ops->size() && !records.ops_error; ++i) {
        auto op = readTraceOpRecord((*ops)[i], opPointer(i));
        if (op)
          records.ops.push_back(*op);
        else
          records.ops_error = op.error();
      }
    }
    if (const auto comms = document.find("comms"); comms != document.end() && comms->is_array()) {
      if (comms->size() > kMaxTraceRecords)
        return makeError(tooManyRecords("comms", kMaxTraceRecords));
      records.comms_read = true;
      records.transfers.reserve(comms->size());
      for (std::size_t i = 0; i < comms->size() && !records.comms_error; ++i) {
        auto t = traceTransferFromJson((*comms)[i], "/comms/" + std::to_string(i));
        if (t)
          records.transfers.push_back(*t);
        else
          records.comms_error = t.error();
      }
    }
  }
  return assembleTrace(document, std::move(records));
}

Result<TraceDocument> readTraceDocument(std::istream &input, const TraceReadLimits &limits) {
  TraceSax sax(limits);
  const bool parsed = json::sax_parse(input, &sax);
  if (!parsed || !sax.error().empty())
    return makeError(
        escapeControlCharacters(sax.error().empty() ? std::string("not valid JSON") : sax.error()));
  auto trace = assembleTrace(sax.rest(), std::move(sax.records()));
  if (!trace) return trace.error();
  return TraceDocument{std::move(*trace), std::move(sax.rest())};
}

Result<TraceDocument> loadTraceDocument(const std::string &path, const TraceReadLimits &limits) {
  ReadLimits read;
  read.max_bytes = limits.json.max_bytes;
  auto file = InputFile::open(path, read);
  if (!file) return file.error();
  std::istream input(file->get());
  auto document = readTraceDocument(input, limits);
  // Damaged gzip first shows to the parser as bad text: read on to find the real reason.
  if (!document && (*file)->compressed())
    while ((*file)->error().empty() && input.rdbuf()->sbumpc() != std::char_traits<char>::eof()) {
    }
  // A read that stopped early (size limit, silent pipe) shows to the parser as a truncated file;
  // the reason is the reader's.
  if (!(*file)->error().empty()) return makeError((*file)->error());
  if (!document) return makeError(escapeControlCharacters(path) + ": " + document.error().message);
  return document;
}

Result<Trace> loadTrace(const std::string &path) {
  auto document = loadTraceDocument(path);
  if (!document) return document.error();
  return std::move(document->trace);
}

// ---------------------------------------------------------------------------------------------
// Writing, record by record: a trace of millions of ops never exists as one JSON document.

namespace {

using json_text::appendField;
using json_text::appendFields;
using json_text::appendKey;
using json_text::appendNumber;

// What the writers read: a Trace, or an evaluation's schedule and simulation without copying
// them into one.
struct TraceView {
  std::string source;
  const Plan *plan = nullptr;
  std::function<void(const std::function<void(const TraceOp &)> &)> for_each_op;
  std::function<void(const std::function<void(const TraceTransfer &)> &)> for_each_transfer;
  double makespan_us = 0, bubble_fraction = 0, bubble_ratio = 0;
  std::vector<TraceRank> ranks;
  const std::vector<std::string> *devices = nullptr;
  double clock_error_us = 0;
  const std::vector<std::vector<MemoryPoint>> *memory = nullptr;
};

TraceView viewOf(const Trace &trace) {
  TraceView view;
  view.source = trace.source;
  view.plan = &trace.plan;
  view.for_each_op = [&trace](const std::function<void(const TraceOp &)> &emit) {
    for (const auto &op : trace.ops)
      emit(op);
  };
  view.for_each_transfer = [&trace](const std::function<void(const TraceTransfer &)> &emit) {
    for (const auto &t : trace.transfers)
      emit(t);
  };
  view.makespan_us = trace.makespan_us;
  view.bubble_fraction = trace.bubble_fraction;
  view.bubble_ratio = trace.bubble_ratio;
  view.ranks = trace.ranks;
  view.devices = &trace.devices;
  view.clock_error_us = trace.clock_error_us;
  view.memory = &trace.memory;
  return view;
}

// The same records traceFromEvaluation would build, produced on the fly.
TraceView viewOf(const Plan &plan, const Evaluation &evaluation) {
  TraceView view;
  view.source = "simulated";
  view.plan = &plan;
  view.for_each_op = [&evaluation](const std::function<void(const TraceOp &)> &emit) {
    const auto &schedule = evaluation.schedule;
    for (std::size_t r = 0; r < schedule.ranks.size(); ++r)
      for (std::size_t i = 0; i < schedule.ranks[r].size(); ++i) {
        const OpTiming &t = evaluation.simulation.op_times[r][i];
        forEachRecordOf(static_cast<int>(r), 0, static_cast<int>(i), schedule.ranks[r][i],
                        t.start_us, t.end_us, emit);
      }
  };
  view.for_each_transfer = [&plan,
                            &evaluation](const std::function<void(const TraceTransfer &)> &emit) {
    const auto &messages = evaluation.program.messages;
    for (std::size_t id = 0; id < messages.size(); ++id) {
      const Message &m = messages[id];
      const TransferTiming &t = evaluation.simulation.transfers[id];
      emit({m.from_rank, m.to_rank, m.stage, m.microbatch, m.gradient, t.start_us, t.end_us,
            plan.costs.activation_bytes});
    }
  };
  const auto &simulation = evaluation.simulation;
  view.makespan_us = simulation.makespan_us;
  view.bubble_fraction = simulation.bubble_fraction;
  view.bubble_ratio = simulation.bubble_ratio;
  for (const auto &rank : simulation.ranks)
    view.ranks.push_back(
        {rank.busy_us, rank.idle_us, rank.peak_inflight, rank.peak_inflight_microbatches});
  view.memory = &simulation.memory;
  return view;
}

void streamTraceView(const TextSink &write, const TraceView &view, const json &extra_fields) {
  std::string text = "{\"format\":";
  text += json(kTraceFormat).dump();
  text += ",\"version\":" + json(kTraceVersion).dump();
  text += ",\"source\":" + json(view.source).dump();
  text += ",\"plan\":" + planToJson(*view.plan).dump();
  text += ",\n\"ops\":[";
  write(text);
  bool first = true;
  std::string record;
  view.for_each_op([&](const TraceOp &op) {
    record.assign(first ? "\n" : ",\n");
    first = false;
    appendTraceOpRecord(record, op);
    write(record);
  });
  write("\n],\n\"comms\":[");
  first = true;
  view.for_each_transfer([&](const TraceTransfer &t) {
    record.assign(first ? "\n{" : ",\n{");
    first = false;
    appendFields(record, "from_rank", t.from_rank, "to_rank", t.to_rank, "stage", t.stage,
                 "microbatch", t.microbatch, "kind", t.gradient ? "gradient" : "activation",
                 "start_us", t.start_us, "end_us", t.end_us, "bytes", t.bytes);
    record += '}';
    write(record);
  });
  json ranks = json::array();
  for (const auto &r : view.ranks)
    ranks.push_back({{"busy", r.busy_us},
                     {"idle", r.idle_us},
                     {"peak_inflight", r.peak_inflight},
                     {"peak_inflight_microbatches", r.peak_inflight_microbatches}});
  const json metrics = {{"makespan", view.makespan_us},
                        {"bubble_fraction", view.bubble_fraction},
                        {"bubble_ratio", view.bubble_ratio},
                        {"ranks", std::move(ranks)}};
  text = "\n],\n\"metrics\":" + metrics.dump();
  if (view.source == "measured") {
    text += ",\"devices\":" + (view.devices ? json(*view.devices) : json::array()).dump();
    text += ",\"clock_error_us\":" + json(view.clock_error_us).dump();
  }
  if (extra_fields.is_object())
    for (const auto &[key, value] : extra_fields.items())
      text += ",\n" + json(key).dump() + ":" + value.dump();
  text += "}\n";
  write(text);
}

void streamChromeView(const TextSink &write, const TraceView &view) {
  int max_rank = -1;
  view.for_each_op([&](const TraceOp &op) { max_rank = std::max(max_rank, op.rank); });
  write("{\"displayTimeUnit\":\"ns\",\"traceEvents\":[");
  bool first = true;
  std::string record;
  const auto begin = [&] {
    record.assign(first ? "\n{" : ",\n{");
    first = false;
  };
  for (int r = 0; r <= max_rank; ++r) {
    begin();
    record += "\"name\":\"process_name\",\"ph\":\"M\",";
    appendField(record, "pid", r);
    record += ",\"args\":{";
    appendField(record, "name", "rank " + std::to_string(r));
    record += "}},\n{\"name\":\"thread_name\",\"ph\":\"M\",";
    appendField(record, "pid", r);
    record +=
        ",\"tid\":0,\"args\":{\"name\":\"compute\"}},\n{\"name\":\"thread_name\",\"ph\":\"M\",";
    appendField(record, "pid", r);
    record += ",\"tid\":1,\"args\":{\"name\":\"p2p\"}}";
    write(record);
  }
  view.for_each_op([&](const TraceOp &op) {
    begin();
    appendKey(record, "name");
    json_text::appendString(record, std::string(opKindLetter(op.kind)) +
                                        std::to_string(op.microbatch) + " (stage " +
                                        std::to_string(op.stage) + ")");
    record += ',';
    appendField(record, "cat", opKindName(op.kind));
    record += ",\"ph\":\"X\",";
    appendFields(record, "pid", op.rank, "tid", op.lane, "ts", op.start_us, "dur",
                 op.end_us - op.start_us);
    record += ",\"args\":{";
    appendFields(record, "stage", op.stage, "microbatch", op.microbatch, "kind",
                 opKindName(op.kind), "step", op.step);
    if (op.overlapped) record += ",\"overlapped\":true";
    record += "}}";
    write(record);
  });
  // Each transfer: a slice on the sender's p2p lane and a flow arrow to the receiver.
  std::size_t id = 0;
  view.for_each_transfer([&](const TraceTransfer &t) {
    begin();
    appendKey(record, "name");
    json_text::appendString(
        record, std::string(t.gradient ? "grad " : "act ") + std::to_string(t.stage) + ":" +
                    std::to_string(t.microbatch) + " → rank " + std::to_string(t.to_rank));
    record += ",\"cat\":\"p2p\",\"ph\":\"X\",";
    appendField(record, "pid", t.from_rank);
    record += ",\"tid\":1,";
    appendFields(record, "ts", t.start_us, "dur", std::max(0.0, t.end_us - t.start_us));
    record += ",\"args\":{";
    appendFields(record, "bytes", t.bytes, "to_rank", t.to_rank);
    record += "}},\n{\"name\":\"p2p\",\"cat\":\"p2p\",\"ph\":\"s\",";
    appendFields(record, "id", id, "pid", t.from_rank);
    record += ",\"tid\":1,";
    appendField(record, "ts", t.start_us);
    record += "},\n{\"name\":\"p2p\",\"cat\":\"p2p\",\"ph\":\"f\",\"bp\":\"e\",";
    appendFields(record, "id", id, "pid", t.to_rank);
    record += ",\"tid\":0,";
    appendField(record, "ts", t.end_us);
    record += '}';
    write(record);
    ++id;
  });
  if (view.memory)
    for (std::size_t r = 0; r < view.memory->size(); ++r)
      for (const auto &point : (*view.memory)[r]) {
        begin();
        record += "\"name\":\"in-flight activations\",\"ph\":\"C\",";
        appendFields(record, "pid", static_cast<int>(r), "ts", point.time_us);
        record += ",\"args\":{";
        appendFields(record, "chunks", point.inflight_chunks, "microbatches",
                     point.inflight_microbatches);
        record += "}}";
        write(record);
      }
  write("\n]}\n");
}

TextSink sinkOf(OutputFile &out) {
  return [&out](std::string_view text) { out.write(text); };
}

json parsedText(const std::function<void(const TextSink &)> &produce) {
  std::string text;
  produce([&text](std::string_view piece) { text += piece; });
  return json::parse(text);
}

template <typename Write> Status saveTo(const std::string &path, Write &&write) {
  auto out = OutputFile::open(path);
  if (!out) return out.error();
  write(sinkOf(*out));
  return out->commit();
}

} // namespace

void streamTrace(const TextSink &write, const Trace &trace, const json &extra_fields) {
  streamTraceView(write, viewOf(trace), extra_fields);
}

void streamSimulatedTrace(const TextSink &write, const Plan &plan, const Evaluation &evaluation) {
  streamTraceView(write, viewOf(plan, evaluation), nullptr);
}

void streamChromeTrace(const TextSink &write, const Trace &trace) {
  streamChromeView(write, viewOf(trace));
}

void streamSimulatedChromeTrace(const TextSink &write, const Plan &plan,
                                const Evaluation &evaluation) {
  streamChromeView(write, viewOf(plan, evaluation));
}

json traceToJson(const Trace &trace) {
  return parsedText([&](const TextSink &write) { streamTrace(write, trace); });
}

json chromeTrace(const Trace &trace) {
  return parsedText([&](const TextSink &write) { streamChromeTrace(write, trace); });
}

Status saveTrace(const std::string &path, const Trace &trace, const json &extra_fields) {
  return saveTo(path, [&](const TextSink &write) { streamTrace(write, trace, extra_fields); });
}

Status saveChromeTrace(const std::string &path, const Trace &trace) {
  return saveTo(path, [&](const TextSink &write) { streamChromeTrace(write, trace); });
}

} // namespace pipescope
