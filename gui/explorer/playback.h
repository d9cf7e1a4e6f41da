#pragma once
// Playback of one step (DESIGN.md §8 "Animation"): the playhead, its clock and its speed. The
// position comes from elapsed wall time (a slow frame never slows the playback down) and the
// timer runs only while playing, so an idle window costs nothing. Views follow the signals.
#include <QElapsedTimer>
#include <QObject>
#include <QTimer>
#include <cmath>
#include <vector>

#include "gui/explorer/explorer_snapshot.h"

namespace pipescope::gui {

class Playback : public QObject {
  Q_OBJECT
public:
  /// Seconds one step takes to play at 1x.
  static constexpr double kPlaySeconds = 4.0;

  explicit Playback(QObject *parent = nullptr);

  /// The step played; a playhead past its end moves to the end.
  void setSnapshot(const SnapshotPointer &snapshot);
  void setPlaying(bool playing);
  bool playing() const { return timer_.isActive(); }
  /// Playhead time in microseconds; NaN: no playhead (the views show peaks).
  void setPlayhead(double time_us);
  double playhead() const { return playhead_us_; }
  /// Pauses and moves to the next (direction > 0) or previous op start or end.
  void step(int direction);
  /// Pauses and clears the playhead.
  void stop();
  /// 1 plays a step in kPlaySeconds.
  void setSpeed(double speed) { speed_ = speed; }
  double speed() const { return speed_; }

signals:
  /// Every move of the playhead (every frame while playing).
  void playheadChanged(double time_us);
  /// The same at most 30 times a second while playing, and on every other move: for views that
  /// relayout (the memory bars).
  void playheadSettled(double time_us);
  void playingChanged(bool playing);

private:
  void advance();
  /// Op starts and ends of the step, sorted, built on the first step command.
  const std::vector<double> &eventTimes();
  double makespan() const;

  SnapshotPointer snapshot_;
  QTimer timer_;
  QElapsedTimer clock_;
  double playhead_us_ = std::nan("");
  double speed_ = 1;
  std::vector<double> event_times_;
  qint64 last_settled_ms_ = 0;
};

} // namespace pipescope::gui
