#include "gui/backend_output_parser.h"

#include <cmath>
#include <limits>
#include <string>

#include "engine/json_io.h"

namespace pipescope::gui {

using nlohmann::json;

namespace {

QString fromUtf8(const std::string &text) {
  return QString::fromUtf8(text.data(), static_cast<qsizetype>(text.size()));
}

// A field as a string, or empty.
QString textField(const json &object, const char *key) {
  const auto it = object.find(key);
  if (it == object.end()) return {};
  if (it->is_string()) return fromUtf8(it->get<std::string>());
  if (it->is_null()) return {};
  return fromUtf8(it->dump());
}

std::optional<double> numberField(const json &object, const char *key) {
  const auto it = object.find(key);
  if (it == object.end() || !it->is_number()) return std::nullopt;
  const double value = it->get<double>();
  if (!std::isfinite(value)) return std::nullopt;
  return value;
}

// A whole number that fits an int (3 and 3.0 both count).
std::optional<int> intField(const json &object, const char *key) {
  const auto value = numberField(object, key);
  if (!value || *value != std::floor(*value) || std::abs(*value) > std::numeric_limits<int>::max())
    return std::nullopt;
  return static_cast<int>(*value);
}

std::optional<OpKind> kindFromText(const std::string &text) {
  for (int k = 0; k < kOpKindCount; ++k) {
    const auto kind = static_cast<OpKind>(k);
    if (text == opKindLetter(kind) || text == opKindName(kind)) return kind;
  }
  if (text == "forward" || text == "f") return OpKind::Forward;
  if (text == "input_grad" || text == "input-grad" || text == "i") return OpKind::InputGrad;
  if (text == "weight_grad" || text == "weight-grad" || text == "w") return OpKind::WeightGrad;
  if (text == "backward" || text == "full_backward" || text == "b") return OpKind::FullBackward;
  return std::nullopt;
}

// One op record of a step line; the error says which field is wrong.
std::optional<TraceOp> opFromJson(const json &record, int default_step, QString &problem) {
  if (!record.is_object()) {
    problem = QStringLiteral("an op record is not an object");
    return std::nullopt;
  }
  TraceOp op;
  const auto rank = intField(record, "rank");
  const auto stage = intField(record, "stage");
  const auto microbatch = intField(record, "microbatch");
  auto start = numberField(record, "start_us");
  if (!start) start = numberField(record, "start");
  auto end = numberField(record, "end_us");
  if (!end) end = numberField(record, "end");
  const auto kind_it = record.find("kind");
  std::optional<OpKind> kind;
  if (kind_it != record.end() && kind_it->is_string())
    kind = kindFromText(kind_it->get<std::string>());
  if (!rank || *rank < 0)
    problem = QStringLiteral("an op record has no valid \"rank\"");
  else if (!kind)
    problem = QStringLiteral("an op record has no known \"kind\" (F, I, W or B)");
  else if (!stage || *stage < 0)
    problem = QStringLiteral("an op record has no valid \"stage\"");
  else if (!microbatch || *microbatch < 0)
    problem = QStringLiteral("an op record has no valid \"microbatch\"");
  else if (!start || !end)
    problem = QStringLiteral("an op record has no \"start_us\" and \"end_us\"");
  else if (*end < *start)
    problem = QStringLiteral("an op record ends before it starts");
  else {
    op.rank = *rank;
    op.kind = *kind;
    op.stage = *stage;
    op.microbatch = *microbatch;
    op.start_us = *start;
    op.end_us = *end;
    op.step = intField(record, "step").value_or(default_step);
    op.index = intField(record, "index").value_or(-1);
    op.lane = intField(record, "lane").value_or(0);
    const auto overlapped = record.find("overlapped");
    op.overlapped =
        overlapped != record.end() && overlapped->is_boolean() && overlapped->get<bool>();
    return op;
  }
  return std::nullopt;
}

BackendEvent malformed(const QByteArray &line, const QString &problem) {
  BackendEvent event;
  event.type = BackendEventType::Malformed;
  event.text = QString::fromUtf8(line.left(2000));
  event.problem = problem;
  return event;
}

} // namespace

std::optional<BackendEvent> BackendOutputParser::parseLine(const QByteArray &raw) {
  const QByteArray line = raw.trimmed();
  if (line.isEmpty()) return std::nullopt;
  if (!line.startsWith('{')) {
    BackendEvent event;
    event.type = BackendEventType::Text;
    event.text = QString::fromUtf8(line.left(4000));
    return event;
  }
  auto parsed =
      parseJsonLimited(std::string_view(line.constData(), static_cast<std::size_t>(line.size())));
  if (!parsed) return malformed(line, QString::fromStdString(parsed.error().message));
  const json &object = *parsed;
  if (!object.is_object()) return malformed(line, QStringLiteral("not a JSON object"));
  BackendEvent event;
  event.name = textField(object, "event");
  if (event.name.isEmpty()) event.name = textField(object, "type");
  if (event.name.isEmpty()) return malformed(line, QStringLiteral("no \"event\" field"));
  event.rank = intField(object, "rank").value_or(-1);
  event.step = intField(object, "step").value_or(-1);
  event.of = intField(object, "of").value_or(0);
  const QString name = event.name.toLower();
  if (name == QStringLiteral("start")) {
    event.type = BackendEventType::Start;
    event.device = textField(object, "device");
    event.world_size = intField(object, "world_size").value_or(0);
    event.warmup_steps = intField(object, "warmup_steps").value_or(-1);
    event.measured_steps = intField(object, "measured_steps").value_or(-1);
    const auto workload = object.find("workload");
    if (workload != object.end() && workload->is_object())
      event.time_factor = numberField(*workload, "expected_time_factor").value_or(0);
  } else if (name == QStringLiteral("check")) {
    event.type = BackendEventType::Check;
    event.text = textField(object, "what");
  } else if (name == QStringLiteral("progress")) {
    event.type = BackendEventType::Progress;
    event.phase = textField(object, "phase");
  } else if (name == QStringLiteral("step")) {
    event.type = BackendEventType::Step;
    if (event.step < 0)
      return malformed(line, QStringLiteral("a step event without a \"step\" number"));
    const auto ops = object.find("ops");
    if (ops == object.end() || !ops->is_array())
      return malformed(line, QStringLiteral("a step event without an \"ops\" array"));
    event.ops.reserve(ops->size());
    int skipped = 0;
    QString first_problem;
    for (const auto &record : *ops) {
      QString problem;
      if (auto op = opFromJson(record, event.step, problem)) {
        event.ops.push_back(*op);
      } else {
        if (first_problem.isEmpty()) first_problem = problem;
        ++skipped;
      }
    }
    if (skipped > 0)
      event.problem = QStringLiteral("%1 of %2 op records skipped: %3")
                          .arg(skipped)
                          .arg(ops->size())
                          .arg(first_problem);
    if (const auto makespan = numberField(object, "makespan_us")) {
      StepMetrics metrics;
      metrics.step = event.step;
      metrics.makespan_us = *makespan;
      metrics.bubble_fraction = numberField(object, "bubble_fraction").value_or(0);
      metrics.bubble_ratio = numberField(object, "bubble_ratio").value_or(0);
      event.metrics = metrics;
    }
  } else if (name == QStringLiteral("warning")) {
    event.type = BackendEventType::Warning;
    event.text = textField(object, "message");
  } else if (name == QStringLiteral("error")) {
    event.type = BackendEventType::Error;
    event.text = textField(object, "message");
    if (event.text.isEmpty())
      event.text = QStringLiteral("(the backend reported an error without a message)");
  } else if (name == QStringLiteral("done")) {
    event.type = BackendEventType::Done;
    event.trace_path = textField(object, "trace");
  } else {
    event.type = BackendEventType::Other;
    event.text = QString::fromUtf8(line.left(2000));
  }
  return event;
}

std::vector<BackendEvent> BackendOutputParser::feed(const QByteArray &chunk) {
  std::vector<BackendEvent> events;
  qsizetype at = 0;
  while (at < chunk.size()) {
    const qsizetype newline = chunk.indexOf('\n', at);
    const qsizetype end = newline < 0 ? chunk.size() : newline;
    if (discarding_) {
      discarded_ += end - at;
    } else {
      buffer_.append(chunk.constData() + at, end - at);
      if (buffer_.size() > max_line_bytes_) {
        discarding_ = true;
        discarded_ = buffer_.size();
        buffer_.clear();
        buffer_.squeeze();
      }
    }
    if (newline < 0) break;
    if (discarding_) {
      events.push_back(malformed(
          QByteArray(),
          QStringLiteral("a line of %1 bytes was longer than the %2-byte limit and was skipped")
              .arg(discarded_)
              .arg(max_line_bytes_)));
      discarding_ = false;
      discarded_ = 0;
    } else if (auto event = parseLine(buffer_)) {
      events.push_back(std::move(*event));
    }
    buffer_.clear();
    at = newline + 1;
  }
  return events;
}

std::vector<BackendEvent> BackendOutputParser::finish() {
  std::vector<BackendEvent> events = feed(QByteArray("\n"));
  buffer_.clear();
  return events;
}

void RunProgress::setPlanned(int warmup_steps, int measured_steps) {
  *this = RunProgress();
  warmup_steps_ = std::max(0, warmup_steps);
  measured_steps_ = std::max(0, measured_steps);
}

void RunProgress::apply(const BackendEvent &event) {
  switch (event.type) {
  case BackendEventType::Start:
    started_ = true;
    if (event.warmup_steps >= 0) warmup_steps_ = event.warmup_steps;
    if (event.measured_steps >= 0) measured_steps_ = event.measured_steps;
    break;
  case BackendEventType::Progress:
    started_ = true;
    if (event.phase.isEmpty() || event.phase.startsWith(QStringLiteral("warm"))) {
      if (event.of > 0) warmup_steps_ = event.of;
      warmup_done_ = std::max(warmup_done_, std::min(event.step + 1, warmup_steps_));
    } else if (event.phase.startsWith(QStringLiteral("measure"))) {
      if (event.of > 0) measured_steps_ = event.of;
      measured_done_ = std::max(measured_done_, std::min(event.step + 1, measured_steps_));
    }
    break;
  case BackendEventType::Step:
    started_ = true;
    warmup_done_ = warmup_steps_;
    if (event.of > 0) measured_steps_ = event.of;
    measured_done_ = std::max(measured_done_,
                              std::min(event.step + 1, std::max(measured_steps_, event.step + 1)));
    measured_steps_ = std::max(measured_steps_, measured_done_);
    break;
  case BackendEventType::Done:
    finished_ = true;
    warmup_done_ = warmup_steps_;
    measured_done_ = measured_steps_;
    break;
  default: break;
  }
}

QString RunProgress::text() const {
  if (finished_) return QStringLiteral("done");
  if (!started_) return QStringLiteral("starting up");
  if (warmup_done_ < warmup_steps_ && measured_done_ == 0)
    return QStringLiteral("warm-up step %1 of %2").arg(warmup_done_ + 1).arg(warmup_steps_);
  if (measured_done_ < measured_steps_)
    return QStringLiteral("measured step %1 of %2").arg(measured_done_ + 1).arg(measured_steps_);
  return QStringLiteral("finishing");
}

} // namespace pipescope::gui
