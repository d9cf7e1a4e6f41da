#include "gui/backend_output_parser.h"

#include <string>
#include <variant>

#include "engine/run_events.h"

namespace pipescope::gui {

namespace {

QString fromUtf8(const std::string &text) {
  return QString::fromUtf8(text.data(), static_cast<qsizetype>(text.size()));
}

BackendEvent malformed(const QByteArray &line, const QString &problem) {
  BackendEvent event;
  event.type = BackendEventType::Malformed;
  event.text = QString::fromUtf8(line.left(2000));
  event.problem = problem;
  return event;
}

// The engine's typed event in the window's terms.
struct ToBackendEvent {
  BackendEvent &out;

  void operator()(const CheckEvent &e) const {
    out.type = BackendEventType::Check;
    out.rank = e.rank;
    out.text = fromUtf8(e.what);
  }
  void operator()(const StartEvent &e) const {
    out.type = BackendEventType::Start;
    out.device = fromUtf8(e.device);
    out.world_size = e.world_size;
    out.warmup_steps = e.warmup_steps;
    out.measured_steps = e.measured_steps;
    out.time_factor = e.expectedTimeFactor();
  }
  void operator()(const ProgressEvent &e) const {
    out.type = BackendEventType::Progress;
    out.phase = fromUtf8(e.phase);
    out.step = e.step;
    out.of = e.of;
  }
  void operator()(StepEvent &e) const {
    out.type = BackendEventType::Step;
    out.step = e.step;
    out.of = e.of;
    if (e.skipped_ops > 0)
      out.problem = QStringLiteral("%1 of %2 op records skipped: %3")
                        .arg(e.skipped_ops)
                        .arg(e.skipped_ops + e.ops.size())
                        .arg(fromUtf8(e.first_skipped->message));
    out.ops = std::move(e.ops);
    if (e.metrics)
      out.metrics = StepMetrics{e.step, e.metrics->makespan_us, e.metrics->bubble_fraction,
                                e.metrics->bubble_ratio};
  }
  void operator()(const WarningEvent &e) const {
    out.type = BackendEventType::Warning;
    out.rank = e.rank;
    out.text = fromUtf8(e.message);
  }
  void operator()(const ErrorEvent &e) const {
    out.type = BackendEventType::Error;
    out.rank = e.rank;
    out.text = e.message.empty()
                   ? QStringLiteral("(the backend reported an error without a message)")
                   : fromUtf8(e.message);
  }
  void operator()(const DoneEvent &e) const {
    out.type = BackendEventType::Done;
    out.trace_path = fromUtf8(e.trace_path);
  }
  void operator()(const UnknownEvent &) const { out.type = BackendEventType::Other; }
};

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
  // A live view keeps a step's good op records when one is damaged, and says so.
  auto read =
      readRunEventLine(std::string_view(line.constData(), static_cast<std::size_t>(line.size())),
                       OpRecords::SkipBad);
  if (!read) return malformed(line, fromUtf8(read.error().message));
  BackendEvent event;
  event.name = fromUtf8(runEventName(*read));
  std::visit(ToBackendEvent{event}, *read);
  if (event.type == BackendEventType::Other) event.text = QString::fromUtf8(line.left(2000));
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
