#include "gui/explorer/playback.h"

#include <algorithm>

namespace pipescope::gui {

namespace {
constexpr int kFrameMs = 16;
constexpr qint64 kSettledIntervalMs = 33; // about 30 Hz
} // namespace

Playback::Playback(QObject *parent) : QObject(parent) {
  timer_.setInterval(kFrameMs);
  connect(&timer_, &QTimer::timeout, this, &Playback::advance);
}

double Playback::makespan() const {
  return snapshot_ && snapshot_->evaluation ? snapshot_->evaluation->simulation.makespan_us : 0;
}

void Playback::setSnapshot(const SnapshotPointer &snapshot) {
  if (!snapshot || !snapshot->ok()) return;
  snapshot_ = snapshot;
  event_times_.clear();
  if (!std::isnan(playhead_us_)) playhead_us_ = std::min(playhead_us_, makespan());
}

void Playback::setPlaying(bool playing) {
  if (!snapshot_) return;
  if (playing) {
    if (std::isnan(playhead_us_) || playhead_us_ >= makespan()) setPlayhead(0);
    clock_.start();
    timer_.start();
  } else {
    timer_.stop();
  }
  emit playingChanged(playing);
}

void Playback::stop() {
  setPlaying(false);
  setPlayhead(std::nan(""));
}

void Playback::setPlayhead(double time_us) {
  playhead_us_ = time_us;
  emit playheadChanged(time_us);
  emit playheadSettled(time_us);
}

void Playback::advance() {
  if (!snapshot_) return;
  const double end = makespan();
  const double seconds = static_cast<double>(clock_.restart()) / 1000.0;
  const double next =
      (std::isnan(playhead_us_) ? 0 : playhead_us_) + seconds * speed_ * end / kPlaySeconds;
  playhead_us_ = std::min(next, end);
  emit playheadChanged(playhead_us_);
  const qint64 now = clock_.msecsSinceReference();
  if (now - last_settled_ms_ >= kSettledIntervalMs || playhead_us_ >= end) {
    last_settled_ms_ = now;
    emit playheadSettled(playhead_us_);
  }
  if (playhead_us_ >= end) setPlaying(false);
}

const std::vector<double> &Playback::eventTimes() {
  if (event_times_.empty() && snapshot_) {
    for (const auto &rank_times : snapshot_->evaluation->simulation.op_times)
      for (const auto &timing : rank_times) {
        event_times_.push_back(timing.start_us);
        event_times_.push_back(timing.end_us);
      }
    std::sort(event_times_.begin(), event_times_.end());
    event_times_.erase(std::unique(event_times_.begin(), event_times_.end()), event_times_.end());
  }
  return event_times_;
}

void Playback::step(int direction) {
  if (!snapshot_) return;
  setPlaying(false);
  const auto &times = eventTimes();
  if (times.empty()) return;
  const double now =
      std::isnan(playhead_us_) ? (direction > 0 ? -1 : times.back() + 1) : playhead_us_;
  if (direction > 0) {
    auto it = std::upper_bound(times.begin(), times.end(), now);
    setPlayhead(it == times.end() ? times.back() : *it);
  } else {
    auto it = std::lower_bound(times.begin(), times.end(), now);
    setPlayhead(it == times.begin() ? times.front() : *(it - 1));
  }
}

} // namespace pipescope::gui
