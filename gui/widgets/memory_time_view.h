#pragma once
// Activations held over time per rank, painted the way the timeline is (preprocess, then
// paint): it follows the shared zoom stack, so it always shows the timeline's time window, and
// the playhead. A slider move costs a rebuild of the step functions and one paint, inside the
// frame; no chart library strokes series point by point on a later event-loop turn.
#include <QWidget>
#include <cmath>

#include "gui/explorer/explorer_snapshot.h"
#include "gui/timeline/memory_curves.h"
#include "gui/timeline/text_cache.h"
#include "gui/timeline/zoom_stack.h"

namespace pipescope::gui {

class MemoryTimeView : public QWidget {
  Q_OBJECT
public:
  explicit MemoryTimeView(QWidget *parent = nullptr);

  void setSnapshot(const SnapshotPointer &snapshot);
  /// Follows a zoom stack's window (not owned).
  void setZoomStack(ZoomStack *stack);
  /// Playhead time in microseconds; NaN hides it.
  void setPlayhead(double time_us);

  /// Lines drawn (one per shown rank).
  int seriesCount() const { return steps_.shownRanks(); }
  const MemorySteps &steps() const { return steps_; }
  QString title() const;
  /// The time window drawn, from the zoom stack.
  const TimeMapping &window() const { return window_; }

protected:
  void paintEvent(QPaintEvent *event) override;

private:
  /// The plot area inside the title, axes and legend.
  QRectF plotRect() const;
  int legendHeight() const;

  MemorySteps steps_;
  TimeMapping window_;
  TextCache texts_;
  ZoomStack *zoom_ = nullptr;
  double playhead_us_ = std::nan("");
};

} // namespace pipescope::gui
