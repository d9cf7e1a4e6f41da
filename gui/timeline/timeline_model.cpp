#include "gui/timeline/timeline_model.h"

#include <algorithm>
#include <map>

#include "gui/timeline/time_mapping.h"

namespace pipescope::gui {

TimelineModel::TimelineModel(std::vector<TimelineSection> sections)
    : sections_(std::move(sections)) {
  for (const auto &section : sections_) {
    section_first_row_.push_back(row_count_);
    row_count_ += section.rankCount();
    if (!section.evaluation) continue;
    end_time_us_ = std::max(end_time_us_, section.evaluation->simulation.makespan_us);
    op_count_ += section.evaluation->schedule.opCount();
    for (const auto &rank_times : section.evaluation->simulation.op_times)
      if (!rank_times.empty()) end_time_us_ = std::max(end_time_us_, rank_times.back().end_us);
    if (section.measured)
      end_time_us_ = std::max(end_time_us_, section.measured->simulation.makespan_us);
  }
}

std::pair<int, int> TimelineModel::sectionAndRank(int row) const {
  for (int section = static_cast<int>(sections_.size()) - 1; section >= 0; --section)
    if (row >= section_first_row_[static_cast<std::size_t>(section)])
      return {section, row - section_first_row_[static_cast<std::size_t>(section)]};
  return {-1, -1};
}

const Op &TimelineModel::op(const OpLocation &location) const {
  return sections_[static_cast<std::size_t>(location.section)]
      .evaluation->schedule
      .ranks[static_cast<std::size_t>(location.rank)][static_cast<std::size_t>(location.index)];
}

const OpTiming &TimelineModel::timing(const OpLocation &location) const {
  return sections_[static_cast<std::size_t>(location.section)]
      .evaluation->simulation
      .op_times[static_cast<std::size_t>(location.rank)][static_cast<std::size_t>(location.index)];
}

const OpTiming *TimelineModel::measuredTiming(const OpLocation &location) const {
  const auto &measured = sections_[static_cast<std::size_t>(location.section)].measured;
  if (!measured) return nullptr;
  const auto &times = measured->simulation.op_times;
  if (static_cast<std::size_t>(location.rank) >= times.size() ||
      static_cast<std::size_t>(location.index) >=
          times[static_cast<std::size_t>(location.rank)].size())
    return nullptr;
  return &times[static_cast<std::size_t>(location.rank)][static_cast<std::size_t>(location.index)];
}

bool opTouchesMicrobatch(const Op &op, int microbatch) {
  return op.microbatch == microbatch ||
         (op.kind == OpKind::OverlappedPair && op.backward_microbatch == microbatch);
}

std::vector<OpLocation> TimelineModel::microbatchOps(int section, int microbatch) const {
  std::vector<OpLocation> found;
  if (section < 0 || section >= static_cast<int>(sections_.size())) return found;
  const auto &evaluation = sections_[static_cast<std::size_t>(section)].evaluation;
  if (!evaluation) return found;
  const auto &ranks = evaluation->schedule.ranks;
  for (std::size_t rank = 0; rank < ranks.size(); ++rank)
    for (std::size_t index = 0; index < ranks[rank].size(); ++index)
      if (opTouchesMicrobatch(ranks[rank][index], microbatch))
        found.push_back({section, static_cast<int>(rank), static_cast<int>(index)});
  std::sort(found.begin(), found.end(), [this](const OpLocation &a, const OpLocation &b) {
    return timing(a).start_us < timing(b).start_us;
  });
  return found;
}

std::vector<TimelineModel::PathEdge> TimelineModel::microbatchPath(int section,
                                                                   int microbatch) const {
  std::vector<PathEdge> edges;
  const auto ops = microbatchOps(section, microbatch);
  if (ops.empty()) return edges;
  const auto &placement =
      sections_[static_cast<std::size_t>(section)].evaluation->schedule.placement;
  // Index the microbatch's ops by (role, stage): role 0 forward, 1 input-grad or full backward,
  // 2 weight-grad. An overlapped pair plays the forward role for one part, the backward for the
  // other.
  std::map<std::pair<int, int>, OpLocation> by_role;
  for (const auto &location : ops) {
    const Op &item = op(location);
    switch (item.kind) {
    case OpKind::Forward: by_role[{0, item.stage}] = location; break;
    case OpKind::InputGrad:
    case OpKind::FullBackward: by_role[{1, item.stage}] = location; break;
    case OpKind::WeightGrad: by_role[{2, item.stage}] = location; break;
    case OpKind::OverlappedPair:
      if (item.microbatch == microbatch) by_role[{0, item.stage}] = location;
      if (item.backward_microbatch == microbatch) by_role[{1, item.backward_stage}] = location;
      break;
    }
  }
  auto find = [&](int role, int stage) -> const OpLocation * {
    auto it = by_role.find({role, stage});
    return it == by_role.end() ? nullptr : &it->second;
  };
  for (const auto &[key, location] : by_role) {
    const auto [role, stage] = key;
    const OpLocation *target = nullptr;
    if (role == 0) {
      const int next = placement.nextStage(stage);
      target = next >= 0 && placement.onRoute(next, microbatch) ? find(0, next) : find(1, stage);
    } else if (role == 1) {
      const int previous = placement.previousStage(stage);
      if (previous >= 0 && placement.onRoute(previous, microbatch)) target = find(1, previous);
      if (const OpLocation *weight = find(2, stage)) edges.push_back({location, *weight});
    }
    if (target && !(*target == location)) edges.push_back({location, *target});
  }
  return edges;
}

QString describeOp(const Op &op, const OpTiming &timing, int rank) {
  QString text;
  const QString kind =
      QString::fromUtf8(opKindName(op.kind).data(), static_cast<int>(opKindName(op.kind).size()));
  const QString action = QString::fromStdString(formatOp(op));
  if (op.kind == OpKind::OverlappedPair) {
    text = QStringLiteral("<b>%1</b> &nbsp;overlapped pair<br>forward: stage %2, microbatch %3"
                          "<br>full backward: stage %4, microbatch %5")
               .arg(action.toHtmlEscaped())
               .arg(op.stage)
               .arg(op.microbatch)
               .arg(op.backward_stage)
               .arg(op.backward_microbatch);
  } else {
    text = QStringLiteral("<b>%1</b> &nbsp;%2<br>stage %3, microbatch %4")
               .arg(action.toHtmlEscaped(), kind)
               .arg(op.stage)
               .arg(op.microbatch);
  }
  text += QStringLiteral("<br>pipeline rank %1<br>start %2 &nbsp;end %3<br>duration %4")
              .arg(rank)
              .arg(formatDuration(timing.start_us), formatDuration(timing.end_us),
                   formatDuration(timing.end_us - timing.start_us));
  return text;
}

} // namespace pipescope::gui
