#include "gui/timeline/time_mapping.h"

#include "gui/explorer/labels.h"

#include <algorithm>
#include <cmath>

namespace pipescope::gui {

TimeMapping::TimeMapping(double full_start_us, double full_end_us, double x_left, double width_px)
    : full_start_us_(full_start_us), full_end_us_(std::max(full_end_us, full_start_us + 1e-9)),
      view_start_us_(full_start_us_), view_end_us_(full_end_us_), x_left_(x_left),
      width_px_(std::max(width_px, 1.0)) {}

double TimeMapping::mapTimeToX(double time_us) const {
  return x_left_ + (time_us - view_start_us_) / viewSpan() * width_px_;
}

double TimeMapping::mapXToTime(double x) const {
  return view_start_us_ + (x - x_left_) / width_px_ * viewSpan();
}

double TimeMapping::microsecondsPerPixel() const {
  return viewSpan() / width_px_;
}

TimeMapping TimeMapping::showing(double start_us, double end_us) const {
  TimeMapping result = *this;
  const double full_span = full_end_us_ - full_start_us_;
  const double min_span = full_span / kMaxZoomRatio;
  double span = std::clamp(end_us - start_us, min_span, full_span);
  double start = std::clamp(start_us, full_start_us_, full_end_us_ - span);
  result.view_start_us_ = start;
  result.view_end_us_ = start + span;
  return result;
}

TimeMapping TimeMapping::zoomedAround(double x, double factor) const {
  if (!(factor > 0)) return *this;
  const double anchor = mapXToTime(x);
  const double new_span = viewSpan() / factor;
  const double full_span = full_end_us_ - full_start_us_;
  const double clamped_span = std::clamp(new_span, full_span / kMaxZoomRatio, full_span);
  // Keep the anchor time under the same pixel.
  const double fraction = (x - x_left_) / width_px_;
  return showing(anchor - fraction * clamped_span, anchor - fraction * clamped_span + clamped_span);
}

TimeMapping TimeMapping::pannedByPixels(double dx) const {
  const double shift = -dx * microsecondsPerPixel();
  return showing(view_start_us_ + shift, view_end_us_ + shift);
}

TimeMapping TimeMapping::withPixelSpan(double x_left, double width_px) const {
  TimeMapping result = *this;
  result.x_left_ = x_left;
  result.width_px_ = std::max(width_px, 1.0);
  return result;
}

TimeMapping TimeMapping::withFullRange(double full_start_us, double full_end_us) const {
  TimeMapping result(full_start_us, full_end_us, x_left_, width_px_);
  if (isFitted()) return result;
  return result.showing(view_start_us_, view_end_us_);
}

bool TimeMapping::isFitted() const {
  const double tolerance = (full_end_us_ - full_start_us_) * 1e-9;
  return view_start_us_ <= full_start_us_ + tolerance && view_end_us_ >= full_end_us_ - tolerance;
}

namespace {

// Digits after the point so that a step of `step` in `unit` shows distinct labels.
int decimalsFor(double step, double unit) {
  const double step_in_unit = step / unit;
  if (step_in_unit >= 1) return 0;
  return std::clamp(static_cast<int>(std::ceil(-std::log10(step_in_unit) - 1e-9)), 0, 9);
}

} // namespace

std::vector<AxisTick> axisTicks(const TimeMapping &mapping, double min_spacing_px) {
  std::vector<AxisTick> ticks;
  const double min_step = mapping.microsecondsPerPixel() * std::max(min_spacing_px, 1.0);
  if (!(min_step > 0) || !std::isfinite(min_step)) return ticks;
  const double power = std::pow(10.0, std::floor(std::log10(min_step)));
  double step = power;
  for (double multiple : {1.0, 2.0, 5.0, 10.0}) {
    step = multiple * power;
    if (step >= min_step) break;
  }
  const DurationUnit unit = durationUnitFor(std::max(std::abs(mapping.viewEnd()), step));
  const int decimals = decimalsFor(step, unit.microseconds);
  const double first = std::ceil(mapping.viewStart() / step) * step;
  for (double time = first; time <= mapping.viewEnd() + step * 1e-9; time += step) {
    AxisTick tick;
    tick.time_us = std::abs(time) < step * 1e-9 ? 0 : time;
    tick.x = mapping.mapTimeToX(tick.time_us);
    tick.label = QString::number(tick.time_us / unit.microseconds, 'f', decimals) +
                 QLatin1Char(' ') + QString::fromUtf8(unit.name);
    ticks.push_back(tick);
    if (ticks.size() > 10000) break; // a corrupt mapping must not allocate without bound
  }
  return ticks;
}

} // namespace pipescope::gui
