#pragma once
// Frame-time benchmark (`pipescope-gui --bench`): what one slider move costs from the spin box
// to the repainted window, everything it causes included (re-simulate, every view, the
// memory-over-time view, the repaint of what changed, and whatever it would leave for a later
// event-loop turn), one frame of panning the timeline and one repaint of the whole window,
// offscreen, over a ladder of sizes (DESIGN.md §9), with op times or a model's costs.
#include <QString>
#include <QStringList>
#include <QTextStream>
#include <cstddef>
#include <functional>
#include <optional>

#include "engine/plan_file.h"
#include "engine/result.h"

namespace pipescope::gui {

struct FrameBenchmarkOptions {
  /// One JSON object {"rows": [...]} instead of the table, for scripts checking the budget.
  bool json = false;
  /// Sizes above this many ops are skipped (the biggest take seconds to set up).
  std::size_t largest_ops = std::size_t{1} << 21;
  /// With the critical path highlighted (View > Critical path): each frame then also explains
  /// the new step's bubbles to find it.
  bool critical_path = false;
  /// The settings every size is applied to, from the explorer's own starting plan (the app's
  /// --model, --hardware, --tp and the other plan flags, as they set up a window): a model makes
  /// every frame derive its costs. Unset, or returning no plan, the explorer's plan as it opens.
  std::function<Result<std::optional<Plan>>(const Plan &explorer_plan)> base_plan;
  /// The tab shown under the timeline while the frames are measured (its title, any case; the
  /// Memory tab by default): a tab in view updates with every move, hidden ones catch up later.
  QString tab;
  /// Only the ladder's sizes of these schedule families (empty: all). A name the ladder does not
  /// hold is refused with the list of those it does.
  QStringList schedules;
};

/// Runs the ladder and writes the table (or the JSON object) to `out`. Returns 0, or 2 after one
/// line on standard error when base_plan refuses its settings.
int runFrameBenchmark(QTextStream &out, const FrameBenchmarkOptions &options = {});

} // namespace pipescope::gui
