#pragma once
// The numbers behind the memory-over-time view, without a painter: per rank, the activations
// held as a step function of time, and its reduction to at most one column per pixel over the
// visible window (Tracy keeps a min and max per pixel for its plots; for memory the maximum is
// what matters, so no peak is ever lost).
#include <QPointF>
#include <QRect>
#include <vector>

#include "gui/explorer/explorer_snapshot.h"

namespace pipescope::gui {

/// Activations held over time, one step function per shown rank.
struct MemorySteps {
  bool bytes = false; ///< GiB from a model; otherwise activation sets (microbatch equivalents)
  /// Per shown rank, (time µs, level) at each change, starting with (0, 0).
  std::vector<std::vector<QPointF>> ranks;
  int total_ranks = 0; ///< ranks of the step; the first `ranks.size()` are shown
  double peak = 0;     ///< the highest level of any rank, shown or not

  int shownRanks() const { return static_cast<int>(ranks.size()); }
};

/// More lines than this stop being readable: the view shows the first ranks and says so.
constexpr int kMaxMemoryRanksShown = 8;

/// The step functions of a snapshot (empty when it has no evaluation).
MemorySteps memoryStepsFor(const ExplorerSnapshot &snapshot, int max_ranks = kMaxMemoryRanksShown);

/// The step function over [start, end] as a polyline of at most about 2·`bins` points: exact
/// (a horizontal then a vertical move per change) while it has at most 2·`bins` changes in the
/// window, otherwise each of `bins` equal columns at the maximum level held anywhere in it. The
/// level at `start` is the one set by the last change before it.
std::vector<QPointF> capStepSeries(const std::vector<QPointF> &steps, double start, double end,
                                   int bins);

/// The rectangles that draw a step line through `pixels` (a polyline of horizontal and vertical
/// moves, as capStepSeries gives once mapped to whole pixels) two pixels wide: one per run, a run
/// going on while the line keeps its direction (a level that dips and comes back inside one pixel
/// column is two runs). A move in both x and y (rounding can put a step's ends a pixel apart)
/// goes along x first.
std::vector<QRect> stepLineBands(const std::vector<QPoint> &pixels);

/// Nice 1-2-5 steps for a value axis from 0 to at least `maximum`, about `count` of them.
double niceValueStep(double maximum, int count);

} // namespace pipescope::gui
