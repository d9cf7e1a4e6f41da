#pragma once
// How the explorer writes its figures and op kinds in words: Qt Core only, so the run session's
// item models, the widgets and the SVG export all say "12.5 µs" and "B full backward" the same way.
#include <QString>

#include "engine/op.h"

namespace pipescope::gui {

/// The unit a duration of this size reads best in: its size in microseconds and its name.
struct DurationUnit {
  double microseconds;
  const char *name; ///< "s", "ms", "µs" or "ns" (UTF-8)
};
DurationUnit durationUnitFor(double microseconds);

/// "12.5 µs", "3.20 ms", "1.05 s": a duration in the unit that suits its size.
QString formatDuration(double microseconds);
/// "27.27 %"
QString formatPercent(double fraction);
/// "1.50 GiB", "320 MiB", "12 B"
QString formatBytes(double bytes);

/// What the letters mean, for legends and tooltips: "F = forward", "I = input-grad", ...
QString opKindLegend(OpKind kind);
/// The same in two or three words, for the legend line above the timeline.
QString opKindShortLegend(OpKind kind);

} // namespace pipescope::gui
