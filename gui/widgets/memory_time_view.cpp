#include "gui/widgets/memory_time_view.h"

#include <QPainter>
#include <algorithm>
#include <vector>

#include "gui/timeline/palette.h"

namespace pipescope::gui {

namespace {

constexpr int kTitleHeight = 22;
constexpr int kValueAxisWidth = 52;
constexpr int kTimeAxisHeight = 34;
constexpr int kRightMargin = 14;
constexpr int kLegendRowHeight = 18;
constexpr int kLegendEntryWidth = 78;

} // namespace

MemoryTimeView::MemoryTimeView(QWidget *parent) : QWidget(parent) {
  setMinimumSize(220, 180);
  setAttribute(Qt::WA_OpaquePaintEvent);
}

void MemoryTimeView::setSnapshot(const SnapshotPointer &snapshot) {
  steps_ = snapshot ? memoryStepsFor(*snapshot) : MemorySteps();
  update();
}

void MemoryTimeView::setZoomStack(ZoomStack *stack) {
  if (zoom_) disconnect(zoom_, nullptr, this, nullptr);
  zoom_ = stack;
  window_ = zoom_->mapping();
  connect(zoom_, &ZoomStack::zoomChanged, this, [this](const TimeMapping &mapping) {
    window_ = mapping;
    update();
  });
}

void MemoryTimeView::setPlayhead(double time_us) {
  if (std::isnan(time_us) && std::isnan(playhead_us_)) return;
  playhead_us_ = time_us;
  update();
}

QString MemoryTimeView::title() const {
  return steps_.shownRanks() < steps_.total_ranks
             ? tr("Activations held over time (ranks 0\u2013%1 of %2)")
                   .arg(steps_.shownRanks() - 1)
                   .arg(steps_.total_ranks)
             : tr("Activations held over time");
}

int MemoryTimeView::legendHeight() const {
  const int per_row = std::max(1, (width() - 16) / kLegendEntryWidth);
  const int rows = (steps_.shownRanks() + per_row - 1) / per_row;
  return std::max(rows, 1) * kLegendRowHeight + 4;
}

QRectF MemoryTimeView::plotRect() const {
  const double bottom = height() - legendHeight() - kTimeAxisHeight;
  return QRectF(kValueAxisWidth, kTitleHeight + 4,
                std::max(1, width() - kValueAxisWidth - kRightMargin),
                std::max(1.0, bottom - kTitleHeight - 4));
}

void MemoryTimeView::paintEvent(QPaintEvent *) {
  QPainter painter(this);
  painter.fillRect(rect(), palette::background());
  QFont font = painter.font();
  font.setPointSizeF(8);
  QFont bold = font;
  bold.setPointSizeF(9);
  bold.setBold(true);
  painter.setFont(bold);
  painter.setPen(palette::sectionTitle());
  texts_.draw(painter, QRectF(0, 2, width(), kTitleHeight), Qt::AlignCenter, title());
  painter.setFont(font);
  if (steps_.ranks.empty()) return;

  const QRectF plot = plotRect();
  painter.fillRect(plot, palette::rowBackground().lighter(104));
  // The window the timeline shows, on this plot's pixels.
  const TimeMapping mapping = window_.withPixelSpan(plot.left(), plot.width());
  const double top_value = std::max(steps_.peak * 1.1, 1e-9);
  const double value_step = niceValueStep(top_value, 5);
  const double value_max = std::ceil(top_value / value_step - 1e-9) * value_step;
  const auto y_of = [&](double value) { return plot.bottom() - value / value_max * plot.height(); };

  // Value axis: grid lines and labels, then the unit, turned.
  const int decimals = value_step >= 1 ? 0 : value_step >= 0.1 ? 1 : 2;
  for (int tick = 0; tick * value_step <= value_max * (1 + 1e-9); ++tick) {
    const double value = tick * value_step;
    const double y = y_of(value);
    painter.setPen(palette::gridLine());
    painter.drawLine(QPointF(plot.left(), y), QPointF(plot.right(), y));
    painter.setPen(palette::text());
    texts_.draw(painter, QRectF(14, y - 8, kValueAxisWidth - 18, 16),
                Qt::AlignRight | Qt::AlignVCenter, QString::number(value, 'f', decimals));
  }
  painter.save();
  painter.translate(2, plot.center().y());
  painter.rotate(-90);
  painter.setPen(palette::rowLabel());
  painter.drawText(QRectF(-plot.height() / 2, 0, plot.height(), 12), Qt::AlignCenter,
                   steps_.bytes ? tr("activations (GiB)") : tr("activation sets"));
  painter.restore();

  // Time axis: the timeline's ticks and labels, for the same window.
  painter.setPen(palette::axisLine());
  painter.drawLine(plot.bottomLeft(), plot.bottomRight());
  for (const auto &tick : axisTicks(mapping, 70)) {
    painter.setPen(palette::gridLine());
    painter.drawLine(QPointF(tick.x, plot.top()), QPointF(tick.x, plot.bottom()));
    painter.setPen(palette::minorTick());
    painter.drawLine(QPointF(tick.x, plot.bottom()), QPointF(tick.x, plot.bottom() + 4));
    painter.setPen(palette::text());
    texts_.draw(painter, QRectF(tick.x - 50, plot.bottom() + 4, 100, 14), Qt::AlignCenter,
                tick.label);
  }
  painter.setPen(palette::rowLabel());
  texts_.draw(painter, QRectF(plot.left(), plot.bottom() + 18, plot.width(), 14), Qt::AlignCenter,
              tr("time"));

  // One line per rank, at most one column per pixel of the visible window.
  painter.save();
  painter.setClipRect(plot.adjusted(0, -2, 0, 1));
  const int bins = std::max(1, static_cast<int>(plot.width()));
  painter.setPen(Qt::NoPen);
  std::vector<QPoint> pixels;
  for (int rank = 0; rank < steps_.shownRanks(); ++rank) {
    const auto points = capStepSeries(steps_.ranks[static_cast<std::size_t>(rank)],
                                      mapping.viewStart(), mapping.viewEnd(), bins);
    pixels.clear();
    pixels.reserve(points.size());
    for (const QPointF &point : points)
      pixels.emplace_back(qRound(mapping.mapTimeToX(point.x())), qRound(y_of(point.y())));
    // Filled on the raster engine's rectangle path: two one-pixel polylines a pixel apart through
    // the cosmetic stroker cost a fifth of a slider move, and a 2 px pen through the stroker more.
    const std::vector<QRect> bands = stepLineBands(pixels);
    painter.setBrush(palette::rankSeries(rank, steps_.shownRanks()));
    painter.drawRects(bands.data(), static_cast<int>(bands.size()));
  }
  if (!std::isnan(playhead_us_)) {
    const double x = mapping.mapTimeToX(playhead_us_);
    painter.setPen(QPen(palette::playhead(), 0));
    painter.drawLine(QPointF(x, plot.top()), QPointF(x, plot.bottom()));
    painter.drawLine(QPointF(x + 1, plot.top()), QPointF(x + 1, plot.bottom()));
  }
  painter.restore();

  // Legend, wrapping under the axis.
  const int per_row = std::max(1, (width() - 16) / kLegendEntryWidth);
  const double legend_top = height() - legendHeight() + 2;
  for (int rank = 0; rank < steps_.shownRanks(); ++rank) {
    const int column = rank % per_row, row = rank / per_row; // whole entries per row
    const double x = 8 + column * kLegendEntryWidth;
    const double y = legend_top + row * kLegendRowHeight;
    painter.fillRect(QRectF(x, y + 4, 10, 10), palette::rankSeries(rank, steps_.shownRanks()));
    painter.setPen(palette::text());
    texts_.draw(painter, QRectF(x + 14, y, kLegendEntryWidth - 16, kLegendRowHeight),
                Qt::AlignLeft | Qt::AlignVCenter, tr("rank %1").arg(rank));
  }
}

} // namespace pipescope::gui
