#pragma once
// Frame-time benchmark (`pipescope-gui --bench`): what one slider move costs from the spin box
// to the repainted window, everything it causes included (re-simulate, every view, the
// memory-over-time view, the repaint, and whatever it would leave for a later event-loop turn),
// and one frame of panning the timeline, offscreen, over a ladder of sizes (DESIGN.md §9).
#include <QTextStream>
#include <cstddef>

namespace pipescope::gui {

struct FrameBenchmarkOptions {
  /// One JSON object {"rows": [...]} instead of the table, for scripts checking the budget.
  bool json = false;
  /// Sizes above this many ops are skipped (the biggest take seconds to set up).
  std::size_t largest_ops = std::size_t{1} << 21;
  /// With the critical path highlighted (View > Critical path): each frame then also explains
  /// the new step's bubbles to find it.
  bool critical_path = false;
};

/// Runs the ladder and writes the table (or the JSON object) to `out`. Returns 0.
int runFrameBenchmark(QTextStream &out, const FrameBenchmarkOptions &options = {});

} // namespace pipescope::gui
