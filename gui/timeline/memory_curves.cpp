#include "gui/timeline/memory_curves.h"

#include <algorithm>
#include <cmath>

namespace pipescope::gui {

namespace {
constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
}

MemorySteps memoryStepsFor(const ExplorerSnapshot &snapshot, int max_ranks) {
  MemorySteps steps;
  if (!snapshot.evaluation) return steps;
  const auto &simulation = snapshot.evaluation->simulation;
  steps.bytes = snapshot.report.has_value();
  steps.total_ranks = static_cast<int>(simulation.memory.size());
  const int shown = std::min(steps.total_ranks, std::max(max_ranks, 0));
  steps.ranks.resize(static_cast<std::size_t>(shown));
  for (int rank = 0; rank < steps.total_ranks; ++rank) {
    const auto &points = simulation.memory[static_cast<std::size_t>(rank)];
    std::vector<QPointF> *line =
        rank < shown ? &steps.ranks[static_cast<std::size_t>(rank)] : nullptr;
    if (line) {
      line->reserve(points.size() + 1);
      line->emplace_back(0, 0);
    }
    for (const auto &point : points) {
      const double level =
          steps.bytes ? point.activation_bytes / kGiB : point.inflight_microbatches;
      steps.peak = std::max(steps.peak, level);
      if (!line) continue;
      // A backward that frees at t and a forward that acquires at t are two points at one
      // instant; drawn apart they make a dip of zero width that no rank ever held. The level
      // after the instant is what the rank holds.
      if (line->size() > 1 && line->back().x() == point.time_us)
        line->back().setY(level);
      else
        line->emplace_back(point.time_us, level);
    }
  }
  return steps;
}

std::vector<QPointF> capStepSeries(const std::vector<QPointF> &steps, double start, double end,
                                   int bins) {
  std::vector<QPointF> out;
  if (steps.empty() || bins <= 0 || !(end > start)) return out;
  const auto by_time = [](const QPointF &point, double time) { return point.x() < time; };
  // The changes inside (start, end), and the level held when the window opens.
  auto first = std::lower_bound(steps.begin(), steps.end(), start, by_time);
  while (first != steps.end() && first->x() <= start)
    ++first;
  double level = first == steps.begin() ? 0 : std::prev(first)->y();
  const auto last = std::lower_bound(first, steps.end(), end, by_time);
  if (last - first <= 2 * static_cast<std::ptrdiff_t>(bins)) {
    out.reserve(static_cast<std::size_t>(last - first) * 2 + 2);
    out.emplace_back(start, level);
    for (auto it = first; it != last; ++it) {
      out.emplace_back(it->x(), level);
      level = it->y();
      out.emplace_back(it->x(), level);
    }
    out.emplace_back(end, level);
    return out;
  }
  const double width = (end - start) / bins;
  out.reserve(static_cast<std::size_t>(bins) * 2);
  auto it = first;
  for (int column = 0; column < bins; ++column) {
    const double column_end = start + (column + 1) * width;
    double maximum = level;
    for (; it != last && it->x() < column_end; ++it) {
      level = it->y();
      maximum = std::max(maximum, level);
    }
    out.emplace_back(start + column * width, maximum);
    out.emplace_back(column_end, maximum);
  }
  return out;
}

std::vector<QRect> stepLineBands(const std::vector<QPoint> &pixels) {
  std::vector<QRect> bands;
  if (pixels.empty()) return bands;
  QPoint from = pixels.front(), to = from; // the run being drawn
  const auto close = [&] {
    bands.emplace_back(QPoint(std::min(from.x(), to.x()), std::min(from.y(), to.y())),
                       QPoint(std::max(from.x(), to.x()) + 1, std::max(from.y(), to.y()) + 1));
  };
  const auto same_way = [](int a, int b, int c) { return (b - a > 0) == (c - b > 0); };
  // Extends the run to `pixel`, a move along x or along y.
  const auto extend = [&](QPoint pixel) {
    if (pixel == to) return;
    const bool goes_on =
        from == to ||
        (from.y() == to.y() && pixel.y() == to.y() && same_way(from.x(), to.x(), pixel.x())) ||
        (from.x() == to.x() && pixel.x() == to.x() && same_way(from.y(), to.y(), pixel.y()));
    if (!goes_on) {
      close();
      from = to;
    }
    to = pixel;
  };
  for (std::size_t i = 1; i < pixels.size(); ++i) {
    const QPoint pixel = pixels[i];
    if (pixel.x() != to.x() && pixel.y() != to.y()) extend(QPoint(pixel.x(), to.y()));
    extend(pixel);
  }
  close();
  return bands;
}

double niceValueStep(double maximum, int count) {
  if (!(maximum > 0) || count <= 0) return 1;
  const double raw = maximum / count;
  const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  for (double factor : {1.0, 2.0, 5.0})
    if (raw <= factor * magnitude) return factor * magnitude;
  return 10 * magnitude;
}

} // namespace pipescope::gui
