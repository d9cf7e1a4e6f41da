#pragma once
// The zoom state of every view drawn against time, in one object (after hotspot's
// FilterAndZoomStack): the visible time window, the history of earlier windows, the zoom
// actions and one zoomChanged signal that the timeline, the memory-over-time view and the
// compare view all follow. Views differ only in their pixel spans: each maps the window onto its
// own with TimeMapping::withPixelSpan.
#include <QElapsedTimer>
#include <QObject>
#include <vector>

#include "gui/timeline/time_mapping.h"

class QAction;

namespace pipescope::gui {

class ZoomStack : public QObject {
  Q_OBJECT
public:
  explicit ZoomStack(QObject *parent = nullptr);

  /// The visible window, on the pixel span of the last view that set it.
  const TimeMapping &mapping() const { return mapping_; }
  /// Earlier windows, newest last.
  const std::vector<TimeMapping> &history() const { return history_; }

  /// A new full range (a new simulation): a fitted view stays fitted, a zoomed one keeps its
  /// times where they still exist; the history follows.
  void setFullRange(double start_us, double end_us);
  /// Pans or resizes: shows `mapping` without remembering the current window.
  void setMapping(const TimeMapping &mapping);
  /// A zoom gesture: remembers the current window (a burst of steps counts as one gesture),
  /// then shows `mapping`.
  void zoomTo(const TimeMapping &mapping);

  /// Menu and button actions (Ctrl+=, Ctrl+-, Ctrl+0, Alt+Left), owned by the stack.
  QAction *zoomInAction() const { return zoom_in_; }
  QAction *zoomOutAction() const { return zoom_out_; }
  QAction *resetZoomAction() const { return reset_zoom_; }
  QAction *zoomBackAction() const { return zoom_back_; }

  /// How much one zoom-in step magnifies.
  static constexpr double kZoomStep = 1.5;

public slots:
  void zoomIn();
  void zoomOut();
  /// Shows the whole step (remembered, so zoomBack returns to the zoomed window).
  void resetZoom();
  /// Returns to the window before the last zoom gesture.
  void zoomBack();

signals:
  /// The visible window changed (zoom, pan, reset, a new full range).
  void zoomChanged(const pipescope::gui::TimeMapping &mapping);

private:
  void remember();
  void show(const TimeMapping &mapping);

  TimeMapping mapping_;
  std::vector<TimeMapping> history_;
  QElapsedTimer last_zoom_;
  QAction *zoom_in_ = nullptr, *zoom_out_ = nullptr, *reset_zoom_ = nullptr, *zoom_back_ = nullptr;
};

} // namespace pipescope::gui
