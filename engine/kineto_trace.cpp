// PyTorch profiler (Kineto) Chrome traces, read event by event. The shapes read here are those of
// torch.profiler's export_chrome_trace as of PyTorch 2.15 (tests/data/torch_runs): a root object
// with "traceEvents" (complete events {"ph":"X","cat","name","ts","dur",...} in microseconds),
// "distributedInfo" {"backend","rank","world_size",...} and "host_name". The pipelining runtime
// wraps each action in record_function("PP:<action>") (torch/distributed/pipelining/schedules.py,
// _get_profiler_function_name), seen as "user_annotation" events on the CPU and
// "gpu_user_annotation" on GPUs; ScheduleGPipe labels "Forward i" / "Backward i"; the profiler's
// schedule marks each step with a "ProfilerStep#N" user_annotation.
#include <charconv>
#include <cmath>
#include <string>
#include <string_view>
#include <utility>

#include "engine/json_dom_builder.h"
#include "engine/json_io.h"
#include "engine/run_import.h"
#include "engine/schedule.h"

namespace pipescope {

namespace {

using nlohmann::json;

/// Most values built as a document outside the event list (distributedInfo, deviceProperties...).
constexpr std::size_t kMaxKinetoHeaderValues = std::size_t{1} << 20;
/// Most actions and step markers kept per rank: far beyond any schedule pipescope simulates.
constexpr std::size_t kMaxRecordedActions = kMaxScheduleOps;

// "Forward 12" -> 12; -1 when `name` is not "<prefix><non-negative integer>".
int numberAfter(std::string_view name, std::string_view prefix) {
  if (!name.starts_with(prefix) || name.size() == prefix.size()) return -1;
  int value = -1;
  const char *begin = name.data() + prefix.size(), *end = name.data() + name.size();
  auto [after, error] = std::from_chars(begin, end, value);
  if (error != std::errc() || after != end || value < 0) return -1;
  return value;
}

class KinetoSax : public nlohmann::json_sax<json> {
public:
  KinetoSax(RankRecording &recording, const std::function<bool()> &on_progress)
      : recording_(recording), on_progress_(on_progress) {}

  bool null() override { return scalar(nullptr); }
  bool boolean(bool v) override { return scalar(v); }
  bool number_integer(number_integer_t v) override { return number(static_cast<double>(v), v); }
  bool number_unsigned(number_unsigned_t v) override { return number(static_cast<double>(v), v); }
  bool number_float(number_float_t v, const string_t &) override { return number(v, v); }
  bool string(string_t &v) override {
    if (in_events_) {
      if (depth_ == kEventDepth) {
        // Copied, not moved: moving would take the lexer's buffer, which it then reallocates
        // for every string of the file.
        if (field_ == Field::Name)
          name_.assign(v);
        else if (field_ == Field::Category)
          category_.assign(v);
        else if (field_ == Field::Phase)
          complete_ = v == "X";
      }
      return true;
    }
    return scalar(std::move(v));
  }
  bool binary(binary_t &) override { return fail("binary values are not JSON"); }
  bool start_object(std::size_t) override { return open(json::object()); }
  bool start_array(std::size_t) override { return open(json::array()); }
  bool end_object() override { return close(); }
  bool end_array() override { return close(); }
  bool key(string_t &name) override {
    if (in_events_) {
      if (depth_ == kEventDepth) field_ = fieldOf(name);
      return true;
    }
    if (depth_ == 1) root_key_ = name;
    header_.key(name);
    return true;
  }
  bool parse_error(std::size_t, const std::string &,
                   const nlohmann::detail::exception &e) override {
    return fail(describeJsonParseError(e.what()));
  }

  const std::string &error() const { return error_; }
  bool sawEvents() const { return saw_events_; }
  json &header() { return header_.root(); }

private:
  static constexpr int kEventDepth = 3; // root object > traceEvents array > event object
  enum class Field { Other, Phase, Category, Name, Start, Duration };

  static Field fieldOf(std::string_view key) {
    switch (key.size()) {
    case 2: return key == "ph" ? Field::Phase : key == "ts" ? Field::Start : Field::Other;
    case 3: return key == "cat" ? Field::Category : key == "dur" ? Field::Duration : Field::Other;
    case 4: return key == "name" ? Field::Name : Field::Other;
    default: return Field::Other;
    }
  }

  bool fail(std::string message) {
    if (error_.empty()) error_ = std::move(message);
    return false;
  }
  template <typename Value> bool scalar(Value &&v) {
    if (in_events_) return true;
    if (++header_values_ > kMaxKinetoHeaderValues)
      return fail("more than " + std::to_string(kMaxKinetoHeaderValues) +
                  " JSON values outside traceEvents; a profiler trace has a few");
    header_.value(std::forward<Value>(v));
    return true;
  }
  template <typename Value> bool number(double as_double, Value v) {
    if (!in_events_) return scalar(v);
    if (depth_ == kEventDepth) {
      if (field_ == Field::Start) {
        start_ = as_double;
        has_start_ = true;
      } else if (field_ == Field::Duration) {
        duration_ = as_double;
        has_duration_ = true;
      }
    }
    return true;
  }
  bool open(json container) {
    if (++depth_ > kMaxJsonDepth)
      return fail("the JSON nests deeper than " + std::to_string(kMaxJsonDepth) +
                  " levels; a profiler trace is a few levels deep");
    if (in_events_) {
      if (depth_ == kEventDepth) beginEvent();
      return true;
    }
    if (depth_ == 2 && root_key_ == "traceEvents" && container.is_array()) {
      header_.root().erase("traceEvents"); // the member key() made; the events go elsewhere
      in_events_ = true;
      saw_events_ = true;
      return true;
    }
    if (depth_ == 1 && !container.is_object())
      return fail("the root is not an object; a profiler trace is {\"traceEvents\": [...], ...}");
    if (++header_values_ > kMaxKinetoHeaderValues)
      return fail("more than " + std::to_string(kMaxKinetoHeaderValues) +
                  " JSON values outside traceEvents; a profiler trace has a few");
    header_.open(std::move(container));
    return true;
  }
  bool close() {
    if (in_events_) {
      if (depth_ == kEventDepth && !endEvent()) return false;
      if (depth_ == 2) in_events_ = false;
    } else {
      header_.close();
    }
    --depth_;
    return true;
  }
  void beginEvent() {
    field_ = Field::Other;
    complete_ = has_start_ = has_duration_ = false;
    name_.clear();
    category_.clear();
  }
  bool endEvent() {
    ++recording_.events;
    if (on_progress_ && (recording_.events & 0xFFFF) == 0 && !on_progress_())
      return fail(kImportCancelled);
    if (!complete_) return true;
    if (category_ == "cpu_op") {
      ++recording_.cpu_ops;
      return true;
    }
    if (category_ == "kernel") {
      ++recording_.kernels;
      return true;
    }
    const bool cpu = category_ == "user_annotation";
    if (!cpu && category_ != "gpu_user_annotation") return true;
    const std::string_view name = name_;
    std::optional<PytorchAction> action;
    if (name.starts_with("PP:")) {
      action = parsePytorchAction(name.substr(3));
      if (!action)
        return fail("event " + std::to_string(recording_.events - 1) + " \"" +
                    escapeControlCharacters(name) +
                    "\" is not an action in PyTorch's grammar (e.g. PP:2F0, PP:1I3, PP:0W2, "
                    "PP:3SEND_F1, PP:(0F7;7B3)OVERLAP_F_B)");
    } else if (const int forward = numberAfter(name, "Forward "); forward >= 0) {
      action = PytorchAction{PytorchActionType::Compute, forwardOp(-1, forward), 0, -1};
      recording_.single_stage_labels = true;
    } else if (const int backward = numberAfter(name, "Backward "); backward >= 0) {
      action = PytorchAction{PytorchActionType::Compute, fullBackwardOp(-1, backward), 0, -1};
      recording_.single_stage_labels = true;
    } else if (const int step = numberAfter(name, "ProfilerStep#"); step >= 0 && cpu) {
      if (!timed()) return false;
      if (recording_.steps.size() >= kMaxRecordedActions) return tooMany();
      recording_.steps.push_back({step, start_, start_ + duration_});
      return true;
    } else {
      return true;
    }
    const int stage_limit = kMaxPipelineRanks * kMaxChunks;
    const Op &op = action->op;
    if (op.stage >= stage_limit || op.backward_stage >= stage_limit ||
        op.microbatch >= kMaxMicrobatches || op.backward_microbatch >= kMaxMicrobatches ||
        action->stage >= stage_limit || action->microbatch >= kMaxMicrobatches)
      return fail("event " + std::to_string(recording_.events - 1) + " \"" +
                  escapeControlCharacters(name) +
                  "\" names a stage or microbatch beyond pipescope's limits (" +
                  std::to_string(stage_limit) + " stages, " + std::to_string(kMaxMicrobatches) +
                  " microbatches)");
    if (!timed()) return false;
    auto &list = action->type != PytorchActionType::Compute ? recording_.communication
                 : cpu                                      ? recording_.cpu_compute
                                                            : recording_.gpu_compute;
    if (action->type != PytorchActionType::Compute && !cpu) return true;
    if (list.size() >= kMaxRecordedActions) return tooMany();
    list.push_back({*action, start_, start_ + duration_});
    return true;
  }
  bool timed() {
    if (has_start_ && has_duration_ && start_ >= 0 && duration_ >= 0 && start_ < 1e18 &&
        duration_ < 1e15) {
      if (!has_base_) {
        recording_.time_base_us = std::floor(start_ / 1e6) * 1e6;
        has_base_ = true;
      }
      start_ -= recording_.time_base_us; // exact: both are near each other in magnitude
      return true;
    }
    return fail("event " + std::to_string(recording_.events - 1) + " \"" +
                escapeControlCharacters(name_) +
                "\" has no usable \"ts\" and \"dur\" (microseconds, non-negative)");
  }
  bool tooMany() {
    return fail("more than " + std::to_string(kMaxRecordedActions) +
                " pipeline actions on one rank; pipescope imports at most that many");
  }

  RankRecording &recording_;
  const std::function<bool()> &on_progress_;
  JsonDomBuilder header_;
  std::size_t header_values_ = 0;
  int depth_ = 0;
  bool in_events_ = false, saw_events_ = false;
  std::string root_key_;
  Field field_ = Field::Other;
  bool complete_ = false, has_start_ = false, has_duration_ = false, has_base_ = false;
  double start_ = 0, duration_ = 0;
  std::string name_, category_;
  std::string error_;
};

} // namespace

Result<RankRecording> readKinetoTrace(std::istream &input, const std::string &path,
                                      const std::function<bool()> &on_progress) {
  RankRecording recording;
  recording.path = path;
  KinetoSax sax(recording, on_progress);
  const std::string where = escapeControlCharacters(path) + ": ";
  const bool parsed = json::sax_parse(input, &sax);
  if (!parsed || !sax.error().empty())
    return makeError(where + (sax.error().empty() ? std::string("not valid JSON") : sax.error()));
  if (!sax.sawEvents()) {
    const json &header = sax.header();
    const bool megatron = header.is_object() && (header.contains("forward-0-start") ||
                                                 header.contains("forward-0-0-start"));
    return makeError(where + "no \"traceEvents\" array, so this is not a PyTorch profiler trace" +
                     (megatron ? "; it looks like a Megatron-LM PP timer dump: use --format "
                                 "megatron"
                               : "; give the rank{r}_trace.json files that torch.profiler's "
                                 "export_chrome_trace writes"));
  }
  const json &header = sax.header();
  if (const auto info = header.find("distributedInfo"); info != header.end() && info->is_object()) {
    const auto integer = [&](const char *key) {
      const auto it = info->find(key);
      return it != info->end() && it->is_number_integer() && it->get<long long>() >= 0 &&
                     it->get<long long>() <= kMaxWorldSize
                 ? static_cast<int>(it->get<long long>())
                 : -1;
    };
    recording.rank = integer("rank");
    recording.world_size = integer("world_size");
    if (const auto it = info->find("backend"); it != info->end() && it->is_string())
      recording.backend = it->get<std::string>();
  }
  if (const auto it = header.find("host_name"); it != header.end() && it->is_string())
    recording.host = it->get<std::string>();
  return recording;
}

} // namespace pipescope
