#pragma once
// Frame-time benchmark: how long a slider move (re-simulate + update every view + repaint the
// window) and a pan of the timeline take, offscreen, over a ladder of sizes (DESIGN.md §9).
#include <QTextStream>

namespace pipescope::gui {

/// Runs the ladder and writes a table to `out`. `largest_ops` bounds the ladder (the biggest
/// sizes take seconds to set up). Returns 0.
int runFrameBenchmark(QTextStream &out, std::size_t largest_ops = std::size_t{1} << 21);

} // namespace pipescope::gui
