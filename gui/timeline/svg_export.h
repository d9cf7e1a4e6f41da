#pragma once
// SVG export of the timeline, written directly from the draw list: QtSvg is optional on the
// target distributions, and the draw list already holds every rectangle (folded as on screen).
#include <QSize>
#include <QString>

#include "gui/timeline/time_mapping.h"
#include "gui/timeline/timeline_model.h"

namespace pipescope::gui {

/// An SVG document of the timeline's visible window at the given size.
QString timelineSvg(const TimelineModel &model, const TimeMapping &window, QSize size);

} // namespace pipescope::gui
