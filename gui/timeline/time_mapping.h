#pragma once
// The time <-> pixel mapping of the timeline as a small value type (after hotspot's
// TimeLineData): every view that draws against time (timeline, axis, memory-over-time chart,
// compare view) uses one, and tests check it row by row.
#include <QString>
#include <vector>

#include "gui/explorer/labels.h"

namespace pipescope::gui {

/// Maps a visible time window [view_start_us, view_end_us] onto the pixel span
/// [x_left, x_left + width_px]. Zoom and pan return new mappings clamped to the full range, so
/// the view can never leave the step or zoom past a sane limit.
class TimeMapping {
public:
  TimeMapping() = default;
  /// A mapping that shows the whole range [full_start_us, full_end_us].
  TimeMapping(double full_start_us, double full_end_us, double x_left, double width_px);

  double mapTimeToX(double time_us) const;
  double mapXToTime(double x) const;
  /// Microseconds covered by one pixel.
  double microsecondsPerPixel() const;

  /// Zooms by `factor` (> 1 zooms in) keeping the time under pixel x where it is.
  TimeMapping zoomedAround(double x, double factor) const;
  /// Moves the view by dx pixels (positive dx shows earlier times, as when dragging right).
  TimeMapping pannedByPixels(double dx) const;
  /// Shows [start_us, end_us], clamped to the full range and the zoom limit.
  TimeMapping showing(double start_us, double end_us) const;
  /// The whole range again.
  TimeMapping fitted() const { return showing(full_start_us_, full_end_us_); }
  /// Same view over a new pixel span (after a resize).
  TimeMapping withPixelSpan(double x_left, double width_px) const;
  /// Same relative view over a new full range (after a re-simulation): a fitted view stays
  /// fitted, a zoomed one keeps its times where they still exist.
  TimeMapping withFullRange(double full_start_us, double full_end_us) const;

  bool isFitted() const;
  double viewStart() const { return view_start_us_; }
  double viewEnd() const { return view_end_us_; }
  double viewSpan() const { return view_end_us_ - view_start_us_; }
  double fullStart() const { return full_start_us_; }
  double fullEnd() const { return full_end_us_; }
  double xLeft() const { return x_left_; }
  double widthPx() const { return width_px_; }

  /// Smallest visible span relative to the full range: deep enough to see one op of a
  /// million-op step at full width, shallow enough to stay clear of double rounding.
  static constexpr double kMaxZoomRatio = 1e9;

  friend bool operator==(const TimeMapping &, const TimeMapping &) = default;

private:
  double full_start_us_ = 0, full_end_us_ = 1;
  double view_start_us_ = 0, view_end_us_ = 1;
  double x_left_ = 0, width_px_ = 1;
};

/// One tick of the time axis.
struct AxisTick {
  double x = 0;
  double time_us = 0;
  QString label;
  bool major = true;
};

/// Ticks at 1, 2 or 5 × 10^k microseconds, at least `min_spacing_px` apart, labeled in the unit
/// that suits the visible span (ns, µs, ms or s).
std::vector<AxisTick> axisTicks(const TimeMapping &mapping, double min_spacing_px = 80);

} // namespace pipescope::gui
