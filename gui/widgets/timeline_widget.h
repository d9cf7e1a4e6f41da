#pragma once
// The timeline: one custom-painted widget, a row per pipeline rank (per section), ops colored by
// kind and shaded by microbatch, idle time hatched as bubble, a time axis with units. Wheel
// zooms around the cursor, dragging pans, hovering shows the op, clicking an op highlights its
// microbatch's path through all ranks. A section may carry a measured step: the prediction is
// then drawn as outlined ghosts and the measurement as filled bars inside them. Painting follows
// "preprocess, then paint": a DrawList is built from the model and the TimeMapping, then drawn.
#include <QElapsedTimer>
#include <QTimer>
#include <QWidget>
#include <cmath>
#include <optional>

#include "engine/bubbles.h"
#include "gui/timeline/text_cache.h"
#include "gui/timeline/time_mapping.h"
#include "gui/timeline/timeline_draw_list.h"
#include "gui/timeline/timeline_model.h"
#include "gui/timeline/zoom_stack.h"

namespace pipescope::gui {

class TimelineWidget : public QWidget {
  Q_OBJECT
public:
  explicit TimelineWidget(QWidget *parent = nullptr);

  /// Shows a new model. With `animate`, the previous layout morphs into the new one over
  /// kMorphDurationMs; a fitted view stays fitted, a zoomed one keeps its times.
  void setModel(TimelineModel model, bool animate);
  const TimelineModel &model() const { return model_; }

  /// The visible window on this widget's pixel span (the zoom stack's window).
  const TimeMapping &mapping() const { return mapping_; }
  /// Shows a window (as a pan: not remembered in the zoom history).
  void setMapping(const TimeMapping &mapping);
  /// The zoom state the timeline follows and changes (its own until one is shared).
  ZoomStack *zoomStack() const { return zoom_; }
  /// Follows a zoom stack shared with other views (not owned).
  void setZoomStack(ZoomStack *stack);

  /// The list painted last (built on demand when nothing was painted yet).
  const DrawList &drawList();
  /// The measured overlays' list (empty when no section has one): filled bars drawn over the
  /// prediction, which is then drawn as outlined ghosts.
  const DrawList &measuredDrawList();
  /// Whether any section carries a measured overlay.
  bool hasMeasuredOverlay() const;
  /// The op under a point in widget coordinates; nothing for gaps, folded runs and headers.
  std::optional<OpLocation> opAt(QPoint position);
  /// The global row under a y coordinate, or -1.
  int rowAt(double y) const;
  /// Vertical center of a global row.
  double rowCenterY(int row) const;
  /// Pixel rectangle of one op under the current mapping.
  QRectF opRect(const OpLocation &location) const;

  /// Highlights one microbatch's path in a section (microbatch -1 clears).
  void setHighlightedMicrobatch(int section, int microbatch);
  int highlightedMicrobatch() const { return highlighted_microbatch_; }

  /// Playhead time in microseconds; NaN hides it.
  void setPlayhead(double time_us);
  double playhead() const { return playhead_us_; }

  /// Highlights each predicted section's critical path (engine/bubbles.h): its ops outlined and
  /// joined, every other op dimmed.
  void setCriticalPathShown(bool shown);
  bool criticalPathShown() const { return critical_path_shown_; }
  /// The ops on a section's critical path, in time order (empty when it cannot be analysed).
  std::vector<OpLocation> criticalPathOps(int section);
  /// A predicted section's bubble analysis, computed on first use (hover, critical path) and kept
  /// until the model changes; null for a measured section or when the analysis fails.
  const BubbleAnalysis *bubbles(int section);
  /// The tooltip for a point: the op under it, or the idle interval's cause; empty for nothing.
  QString hoverTextAt(QPoint position);

  bool morphing() const { return morph_.active() && morph_timer_.isActive(); }
  /// Where the time axis's tick labels went in the last paint (widget coordinates).
  const QList<QRectF> &axisLabelRects() const { return axis_label_rects_; }
  /// The section titles as the last paint drew them (after fitting the width), one a section.
  const QStringList &drawnSectionTitles() const { return drawn_section_titles_; }
  /// Ends a running morph at once (tests, screenshots).
  void finishMorph();

  /// Left column with the rank names, and the time axis height.
  static constexpr int kHeaderWidth = 64;
  static constexpr int kAxisHeight = 26;
  static constexpr int kSectionTitleHeight = 18;
  static constexpr int kMorphDurationMs = 250;

signals:
  /// An op was clicked (or the highlight cleared: microbatch -1).
  void microbatchHighlighted(int section, int microbatch);
  /// The hovered op changed; text is empty when nothing is hovered.
  void hoverTextChanged(const QString &text);

protected:
  void paintEvent(QPaintEvent *event) override;
  void resizeEvent(QResizeEvent *event) override;
  void wheelEvent(QWheelEvent *event) override;
  void mousePressEvent(QMouseEvent *event) override;
  void mouseMoveEvent(QMouseEvent *event) override;
  void mouseReleaseEvent(QMouseEvent *event) override;
  void mouseDoubleClickEvent(QMouseEvent *event) override;
  void leaveEvent(QEvent *event) override;

private:
  void updatePixelSpan();
  void rebuildDrawList();
  double rowHeight() const;
  double rowTop(double row, int section) const;
  int visibleRowCount() const;
  void clampVerticalOffset();
  void followZoom(const TimeMapping &mapping);
  void showHoverAt(QPoint position);
  void paintRows(class QPainter &painter, const QRect &area);
  void paintItems(class QPainter &painter, const QRect &area);
  void paintMeasured(class QPainter &painter);
  bool sectionHasMeasured(int section) const;
  void paintPath(class QPainter &painter);
  void paintAxis(class QPainter &painter);
  void paintCriticalPath(class QPainter &painter);
  /// The op (or folded run) under a point: a measured bar first, then the prediction.
  std::optional<DrawItem> itemUnder(QPoint position);
  /// The tooltip text of an op or a folded run.
  QString describeItem(const DrawItem &item) const;
  /// Whether an op is on its section's critical path (only while it is shown).
  bool onCriticalPath(const OpLocation &location) const;
  /// The idle interval of a rank's row at a time, with its cause, as tooltip text; empty if none.
  QString idleTextAt(int section, int rank, double time_us);

  TimelineModel model_;
  TimeMapping mapping_;
  TextCache texts_;
  QList<QRectF> axis_label_rects_;
  QStringList drawn_section_titles_;
  DrawList draw_list_;
  DrawList measured_draw_list_;
  bool draw_list_valid_ = false;

  // Morph from the previous layout: progress comes from elapsed wall time, and the timer runs
  // only while a morph does, so an idle timeline costs nothing.
  TimelineModel previous_model_;
  LayoutMorph morph_;
  QElapsedTimer morph_clock_;
  QTimer morph_timer_;
  double morph_from_end_us_ = 0;

  int highlighted_section_ = 0;
  int highlighted_microbatch_ = -1;
  std::vector<TimelineModel::PathEdge> highlighted_path_;
  double playhead_us_ = std::nan("");
  double vertical_offset_ = 0;

  QPoint press_position_;
  QPoint last_drag_position_;
  bool dragging_ = false;
  std::optional<DrawItem> hovered_;
  QString hover_text_; ///< the tooltip shown now
  /// Per section, computed lazily: the bubble analysis (null until asked for or when it fails),
  /// whether it was tried, and the critical path's ops as flags [rank][index].
  std::vector<std::shared_ptr<const BubbleAnalysis>> bubbles_;
  std::vector<std::uint8_t> bubbles_tried_;
  std::vector<std::vector<std::vector<std::uint8_t>>> critical_ops_;
  bool critical_path_shown_ = false;
  ZoomStack *zoom_ = nullptr;
};

} // namespace pipescope::gui
