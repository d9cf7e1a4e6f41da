#include "gui/timeline/timeline_draw_list.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <unordered_map>

namespace pipescope::gui {

const DrawItem *DrawList::itemAt(int row, double x, double tolerance_px) const {
  if (row < 0 || static_cast<std::size_t>(row) + 1 >= row_begin.size()) return nullptr;
  const auto begin =
      items.begin() + static_cast<std::ptrdiff_t>(row_begin[static_cast<std::size_t>(row)]);
  const auto end =
      items.begin() + static_cast<std::ptrdiff_t>(row_begin[static_cast<std::size_t>(row) + 1]);
  // First item that ends at or after x.
  auto it = std::lower_bound(begin, end, x,
                             [](const DrawItem &item, double value) { return item.x1 < value; });
  const DrawItem *best = nullptr;
  double best_distance = tolerance_px;
  for (auto candidate = it == begin ? it : it - 1; candidate != end && candidate <= it;
       ++candidate) {
    double distance = 0;
    if (x < candidate->x0)
      distance = candidate->x0 - x;
    else if (x > candidate->x1)
      distance = x - candidate->x1;
    if (distance <= best_distance) {
      best = &*candidate;
      best_distance = distance;
      if (distance == 0) break;
    }
  }
  return best;
}

std::size_t firstOpEndingAtOrAfter(const std::vector<OpTiming> &times, double time_us) {
  auto it =
      std::lower_bound(times.begin(), times.end(), time_us,
                       [](const OpTiming &timing, double value) { return timing.end_us < value; });
  return static_cast<std::size_t>(it - times.begin());
}

void appendRankItems(const std::vector<Op> &ops, const std::vector<OpTiming> &times,
                     const TimeMapping &mapping, int section, int rank, int row,
                     double fold_below_px, std::vector<DrawItem> &out) {
  const std::size_t count = std::min(ops.size(), times.size());
  std::size_t index = firstOpEndingAtOrAfter(times, mapping.viewStart());
  const double view_end = mapping.viewEnd();
  while (index < count && times[index].start_us <= view_end) {
    const double x0 = mapping.mapTimeToX(times[index].start_us);
    const double x1 = mapping.mapTimeToX(times[index].end_us);
    DrawItem item;
    item.row = static_cast<float>(row);
    item.first = {section, rank, static_cast<int>(index)};
    item.microbatch = ops[index].microbatch;
    item.kind = ops[index].kind;
    item.x0 = static_cast<float>(x0);
    item.x1 = static_cast<float>(x1);
    if (x1 - x0 >= fold_below_px) {
      out.push_back(item);
      ++index;
      continue;
    }
    // A run of narrow ops: absorb followers until a wide op or a visible gap (bubble) ends it,
    // so idle time wider than the fold threshold stays visible at every zoom.
    std::array<double, kOpKindCount> kind_time{};
    double busy = times[index].end_us - times[index].start_us;
    kind_time[static_cast<std::size_t>(ops[index].kind)] += busy;
    double run_end_x = x1;
    std::size_t next = index + 1;
    while (next < count && times[next].start_us <= view_end) {
      const double next_x0 = mapping.mapTimeToX(times[next].start_us);
      const double next_x1 = mapping.mapTimeToX(times[next].end_us);
      if (next_x1 - next_x0 >= fold_below_px || next_x0 - run_end_x > fold_below_px) break;
      const double duration = times[next].end_us - times[next].start_us;
      busy += duration;
      kind_time[static_cast<std::size_t>(ops[next].kind)] += duration;
      run_end_x = next_x1;
      ++next;
    }
    item.op_count = static_cast<std::int32_t>(next - index);
    // Keep at least a pixel so that a lone tiny op stays visible.
    item.x1 = static_cast<float>(std::max(run_end_x, x0 + 1));
    if (item.folded()) {
      const double span = times[next - 1].end_us - times[index].start_us;
      item.busy_share = span > 0 ? static_cast<float>(std::min(1.0, busy / span)) : 1.0f;
      item.kind = static_cast<OpKind>(std::max_element(kind_time.begin(), kind_time.end()) -
                                      kind_time.begin());
      for (std::size_t kind = 0; kind < kind_time.size(); ++kind)
        item.kind_share[kind] = busy > 0 ? static_cast<float>(kind_time[kind] / busy) : 0.0f;
    }
    out.push_back(item);
    index = next;
  }
}

DrawList buildDrawList(const TimelineModel &model, const TimeMapping &mapping,
                       const DrawListOptions &options) {
  DrawList list;
  list.row_begin.assign(static_cast<std::size_t>(model.rowCount()) + 1, 0);
  for (int row = 0; row < model.rowCount(); ++row) {
    list.row_begin[static_cast<std::size_t>(row)] = list.items.size();
    if (row < options.first_row || row > options.last_row) continue;
    const auto [section, rank] = model.sectionAndRank(row);
    const auto &info = model.sections()[static_cast<std::size_t>(section)];
    const auto &evaluation = options.measured ? info.measured : info.evaluation;
    if (!evaluation) continue;
    appendRankItems(evaluation->schedule.ranks[static_cast<std::size_t>(rank)],
                    evaluation->simulation.op_times[static_cast<std::size_t>(rank)], mapping,
                    section, rank, row, options.fold_below_px, list.items);
  }
  list.row_begin.back() = list.items.size();
  return list;
}

namespace {

// What an op computes, independent of where and when it runs.
struct OpKey {
  Op op;
  friend bool operator==(const OpKey &, const OpKey &) = default;
};

struct OpKeyHash {
  std::size_t operator()(const OpKey &key) const {
    std::size_t hash = static_cast<std::size_t>(key.op.kind);
    for (std::int32_t part :
         {key.op.stage, key.op.microbatch, key.op.backward_stage, key.op.backward_microbatch})
      hash = hash * 1000003u ^ static_cast<std::size_t>(static_cast<std::uint32_t>(part));
    return hash;
  }
};

} // namespace

LayoutMorph::LayoutMorph(const TimelineModel &from, const TimelineModel &to, std::size_t max_ops) {
  if (from.empty() || to.empty() || from.opCount() > max_ops || to.opCount() > max_ops) return;
  // Only sections at the same position match each other (the compare view keeps its order).
  previous_.resize(to.sections().size());
  for (std::size_t section = 0; section < to.sections().size(); ++section) {
    const auto &new_evaluation = to.sections()[section].evaluation;
    if (!new_evaluation) continue;
    std::unordered_map<OpKey, Previous, OpKeyHash> old_positions;
    if (section < from.sections().size() && from.sections()[section].evaluation) {
      const auto &old_evaluation = *from.sections()[section].evaluation;
      const int first_row = from.sectionFirstRow(static_cast<int>(section));
      for (std::size_t rank = 0; rank < old_evaluation.schedule.ranks.size(); ++rank)
        for (std::size_t index = 0; index < old_evaluation.schedule.ranks[rank].size(); ++index) {
          const auto &timing = old_evaluation.simulation.op_times[rank][index];
          old_positions[{old_evaluation.schedule.ranks[rank][index]}] = {
              static_cast<float>(first_row + static_cast<int>(rank)), timing.start_us,
              timing.end_us};
        }
    }
    auto &section_previous = previous_[section];
    section_previous.resize(new_evaluation->schedule.ranks.size());
    for (std::size_t rank = 0; rank < new_evaluation->schedule.ranks.size(); ++rank) {
      const auto &ops = new_evaluation->schedule.ranks[rank];
      section_previous[rank].resize(ops.size());
      for (std::size_t index = 0; index < ops.size(); ++index) {
        auto it = old_positions.find({ops[index]});
        if (it != old_positions.end()) section_previous[rank][index] = it->second;
      }
    }
  }
  active_ = true;
}

DrawList LayoutMorph::interpolate(const TimelineModel &to, const TimeMapping &mapping,
                                  double progress) const {
  DrawList list;
  const double t = std::clamp(progress, 0.0, 1.0);
  list.row_begin.assign(static_cast<std::size_t>(to.rowCount()) + 1, 0);
  for (int row = 0; row < to.rowCount(); ++row) {
    list.row_begin[static_cast<std::size_t>(row)] = list.items.size();
    const auto [section, rank] = to.sectionAndRank(row);
    const auto &evaluation = to.sections()[static_cast<std::size_t>(section)].evaluation;
    if (!evaluation || static_cast<std::size_t>(section) >= previous_.size()) continue;
    const auto &ops = evaluation->schedule.ranks[static_cast<std::size_t>(rank)];
    const auto &times = evaluation->simulation.op_times[static_cast<std::size_t>(rank)];
    const auto &previous =
        previous_[static_cast<std::size_t>(section)][static_cast<std::size_t>(rank)];
    for (std::size_t index = 0; index < ops.size(); ++index) {
      const Previous &before = previous[index];
      const bool is_new = before.row < 0;
      const double start = is_new ? times[index].start_us
                                  : before.start_us + (times[index].start_us - before.start_us) * t;
      const double end =
          is_new ? times[index].end_us : before.end_us + (times[index].end_us - before.end_us) * t;
      DrawItem item;
      item.x0 = static_cast<float>(mapping.mapTimeToX(start));
      item.x1 = static_cast<float>(std::max(mapping.mapTimeToX(end), item.x0 + 1.0));
      item.row = is_new
                     ? static_cast<float>(row)
                     : static_cast<float>(before.row + (static_cast<double>(row) - before.row) * t);
      item.alpha = is_new ? static_cast<float>(t) : 1.0f;
      item.first = {section, rank, static_cast<int>(index)};
      item.microbatch = ops[index].microbatch;
      item.kind = ops[index].kind;
      list.items.push_back(item);
    }
  }
  list.row_begin.back() = list.items.size();
  return list;
}

double easeInOut(double t) {
  t = std::clamp(t, 0.0, 1.0);
  return t * t * (3 - 2 * t);
}

} // namespace pipescope::gui
