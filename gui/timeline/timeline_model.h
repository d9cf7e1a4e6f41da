#pragma once
// What the timeline shows, before any pixel: sections of pipeline ranks (one section in the main
// view, one per schedule in the compare view), each backed by an immutable evaluation shared with
// the rest of the window. Nothing here paints, so all of it is tested directly.
#include <QColor>
#include <QString>
#include <memory>
#include <optional>
#include <vector>

#include "engine/bubbles.h"
#include "engine/evaluation.h"
#include "engine/model/cost_breakdown.h"
#include "gui/explorer/labels.h"
#include "gui/timeline/palette.h"

namespace pipescope::gui {

/// One stacked block of rows: the ranks of one evaluated schedule.
struct TimelineSection {
  QString title; ///< shown above the rows when there is more than one section
  std::shared_ptr<const Evaluation> evaluation;
  /// A measured step drawn over the prediction on the same rows: its schedule is the
  /// evaluation's and op_times[r][i] is when ranks[r][i] ran (gui/measurement.h). Null: none.
  std::shared_ptr<const Evaluation> measured = nullptr;
  /// The bubble analysis of the measured step drawn here (over the prediction, or as this
  /// section), in the measured clock: hovering its idle time names the cause. Null: none.
  std::shared_ptr<const BubbleAnalysis> measured_bubbles = nullptr;
  /// What each stage's F, I and W are made of when the plan has a model (the derivation's
  /// stage_breakdown): the hover shows an op's parts. Null: a plan with typed-in costs.
  std::shared_ptr<const std::vector<StageBreakdown>> cost_breakdown = nullptr;
  /// The factor on an overlapped pair's compute (dispatcherSmShare of the plan's model), for the
  /// hover's "+ dispatcher SMs" part; 1 when no dispatcher holds SMs.
  double pair_compute_stretch = 1;

  int rankCount() const {
    return evaluation ? static_cast<int>(evaluation->schedule.ranks.size()) : 0;
  }
  /// Where the title does not fit the width: "name: figures" (e.g. "Interleaved 1F1B: 5.648 s,
  /// 13.3 %, V = 2"), the name elided in the middle before the figures are cut. Empty: the title
  /// is elided at the right.
  QString short_name = {};
  QString short_figures = {};
};

/// Where one op lives: section, pipeline rank and position in that rank's list.
struct OpLocation {
  int section = -1;
  int rank = -1;
  int index = -1;
  bool valid() const { return section >= 0 && rank >= 0 && index >= 0; }
  friend bool operator==(const OpLocation &, const OpLocation &) = default;
};

/// The sections stacked on one time axis, with global row numbers (row = section offset + rank).
class TimelineModel {
public:
  TimelineModel() = default;
  explicit TimelineModel(std::vector<TimelineSection> sections);

  const std::vector<TimelineSection> &sections() const { return sections_; }
  bool empty() const { return row_count_ == 0; }
  int rowCount() const { return row_count_; }
  /// The latest op end over all sections, measured overlays included (the longest step).
  double endTime() const { return end_time_us_; }
  std::size_t opCount() const { return op_count_; }

  /// First global row of a section.
  int sectionFirstRow(int section) const {
    return section_first_row_[static_cast<std::size_t>(section)];
  }
  /// Section and rank of a global row.
  std::pair<int, int> sectionAndRank(int row) const;

  const Op &op(const OpLocation &location) const;
  const OpTiming &timing(const OpLocation &location) const;
  /// The measured timing of an op, when its section has a measured overlay.
  const OpTiming *measuredTiming(const OpLocation &location) const;

  /// Every op of a microbatch in one section (forward and backward parts of overlapped pairs
  /// both count), in order of start time.
  std::vector<OpLocation> microbatchOps(int section, int microbatch) const;

  /// The dependency edges of a microbatch's path: each F to the next stage's F (or to the loss
  /// backward at the last stage), each backward to the previous stage's backward, each I to its W.
  struct PathEdge {
    OpLocation from, to;
  };
  std::vector<PathEdge> microbatchPath(int section, int microbatch) const;

private:
  std::vector<TimelineSection> sections_;
  std::vector<int> section_first_row_;
  int row_count_ = 0;
  double end_time_us_ = 0;
  std::size_t op_count_ = 0;
};

/// Whether an op touches a microbatch (either part of an overlapped pair).
bool opTouchesMicrobatch(const Op &op, int microbatch);

/// Human text for one op, for tooltips: kind, stage, microbatch, start, end, duration.
QString describeOp(const Op &op, const OpTiming &timing, int rank);

} // namespace pipescope::gui
