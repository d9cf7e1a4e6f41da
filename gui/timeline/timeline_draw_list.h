#pragma once
// Preprocess, then paint (after Tracy's timeline): the visible part of the timeline becomes a
// flat list of rectangles in pixel space before any QPainter runs. Rows off screen are culled,
// the visible time range is found by binary search, and runs of ops narrower than a few pixels
// fold into one block that remembers how many ops it holds, so a million-op step costs about a
// rectangle per pixel column. No painter here: tests check the list directly.
#include <array>
#include <cstdint>
#include <vector>

#include "gui/timeline/time_mapping.h"
#include "gui/timeline/timeline_model.h"

namespace pipescope::gui {

/// One rectangle to paint. A single op (op_count == 1) or a folded run of ops too small to show.
struct DrawItem {
  float x0 = 0, x1 = 0;
  float row = 0;    ///< global row; fractional only while morphing between layouts
  float alpha = 1;  ///< below 1 while an op fades in during a morph
  OpLocation first; ///< the (first) op
  std::int32_t op_count = 1;
  std::int32_t microbatch = 0;   ///< of the single op; of the first op for a folded run
  float busy_share = 1;          ///< folded runs: share of the block's span that is compute
  OpKind kind = OpKind::Forward; ///< single op: its kind; folded run: the kind with most time
  /// Folded runs: each kind's share of the run's compute time, so the run can be drawn as
  /// stacked stripes and a zoomed-out step still shows its mix of F, I, W and B.
  std::array<float, kOpKindCount> kind_share{};

  bool folded() const { return op_count > 1; }
};

/// The items of each visible row, in x order, with per-row offsets for hit testing.
class DrawList {
public:
  std::vector<DrawItem> items;
  /// items of row r are [row_begin[r], row_begin[r + 1]); rows outside the visible range are empty.
  std::vector<std::size_t> row_begin;

  /// The item under pixel x in a row, or the nearest one within tolerance_px, or nullptr.
  const DrawItem *itemAt(int row, double x, double tolerance_px = 2) const;
  std::size_t itemCount() const { return items.size(); }
};

struct DrawListOptions {
  /// Ops narrower than this fold into their neighbours (Tracy uses about 3 px).
  double fold_below_px = 3;
  /// Visible rows [first_row, last_row]; others are culled.
  int first_row = 0;
  int last_row = 1 << 30;
  /// Lists the sections' measured overlays instead of their predictions; sections without one
  /// give no items. Items point at the same op locations as the prediction's.
  bool measured = false;
};

/// Index of the first op of a rank whose end is at or after time_us (ends grow along a rank,
/// because a rank runs its list strictly in order).
std::size_t firstOpEndingAtOrAfter(const std::vector<OpTiming> &times, double time_us);

/// Appends one rank's visible items (ops with pixel extent inside the mapping) to `out`.
void appendRankItems(const std::vector<Op> &ops, const std::vector<OpTiming> &times,
                     const TimeMapping &mapping, int section, int rank, int row,
                     double fold_below_px, std::vector<DrawItem> &out);

/// The draw list of every visible row of the model.
DrawList buildDrawList(const TimelineModel &model, const TimeMapping &mapping,
                       const DrawListOptions &options = {});

/// Where each op of a new layout was in the previous one, so a parameter change can morph the
/// old timeline into the new one. Ops are matched by what they compute (kind, stage,
/// microbatch); ops that did not exist before fade in where they end up.
class LayoutMorph {
public:
  /// Builds the match, or an inactive morph when either side is empty or too large to animate.
  LayoutMorph(const TimelineModel &from, const TimelineModel &to, std::size_t max_ops = 200000);
  LayoutMorph() = default;

  bool active() const { return active_; }
  /// Items at progress t in [0, 1] (0 = old layout, 1 = new one), one per op, unfolded.
  DrawList interpolate(const TimelineModel &to, const TimeMapping &mapping, double progress) const;

private:
  struct Previous {
    float row = -1; ///< -1: the op is new
    double start_us = 0, end_us = 0;
  };
  bool active_ = false;
  /// previous_[section][rank][index], parallel to the new model's ops.
  std::vector<std::vector<std::vector<Previous>>> previous_;
};

/// Smoothstep easing for animations driven by elapsed time.
double easeInOut(double t);

} // namespace pipescope::gui
