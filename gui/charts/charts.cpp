#include "gui/charts/charts.h"

#include <QBarCategoryAxis>
#include <QBarSet>
#include <QChart>
#include <QChartView>
#include <QLabel>
#include <QLegendMarker>
#include <QLineSeries>
#include <QStackedBarSeries>
#include <QVBoxLayout>
#include <QValueAxis>
#include <algorithm>

#include "gui/timeline/timeline_model.h"

namespace pipescope::gui {

namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
// Columns of a memory-over-time line: about one per pixel of a typical chart; a step function
// with fewer changes than twice this is drawn exactly.
constexpr int kMemoryChartColumns = 300;

// A legend in a QLabel under the chart: it wraps, where Qt Charts' own legend elides names.
QLabel *addWrappingLegend(QChart *chart, QWidget *parent) {
  chart->legend()->setVisible(false);
  auto *legend = new QLabel(parent);
  legend->setWordWrap(true);
  legend->setTextFormat(Qt::RichText);
  legend->setContentsMargins(6, 0, 6, 4);
  parent->layout()->addWidget(legend);
  return legend;
}

QString legendHtml(const std::vector<QLineSeries *> &series) {
  QString html;
  for (auto *line : series)
    html += QStringLiteral("<span style='color:%1; font-size:11pt'>\u25a0</span>&nbsp;%2 &nbsp; ")
                .arg(line->pen().color().name(), line->name().toHtmlEscaped());
  return html;
}

QChartView *makeView(QChart *chart, QWidget *parent) {
  chart->setAnimationOptions(QChart::NoAnimation);
  chart->setMargins(QMargins(4, 4, 4, 4));
  chart->setBackgroundRoundness(0);
  chart->legend()->setAlignment(Qt::AlignBottom);
  QFont font = chart->legend()->font();
  font.setPointSizeF(8);
  chart->legend()->setFont(font);
  auto *view = new QChartView(chart, parent);
  view->setRenderHint(QPainter::Antialiasing);
  auto *layout = new QVBoxLayout(parent);
  layout->setContentsMargins(0, 0, 0, 0);
  layout->addWidget(view);
  return view;
}

void styleAxis(QValueAxis *axis) {
  QFont font = axis->labelsFont();
  font.setPointSizeF(8);
  axis->setLabelsFont(font);
  QFont title = axis->titleFont();
  title.setPointSizeF(8);
  title.setBold(false);
  axis->setTitleFont(title);
}

} // namespace

double MemoryBars::total(int rank) const {
  const auto r = static_cast<std::size_t>(rank);
  return params[r] + grads[r] + optimizer[r] + activations[r];
}

MemoryBars memoryBarsFor(const ExplorerSnapshot &snapshot, double playhead_us) {
  MemoryBars bars;
  if (!snapshot.evaluation) return bars;
  const auto &simulation = snapshot.evaluation->simulation;
  const int ranks = static_cast<int>(simulation.ranks.size());
  bars.at_playhead = !std::isnan(playhead_us);
  bars.params.assign(static_cast<std::size_t>(ranks), 0);
  bars.grads = bars.optimizer = bars.activations = bars.params;
  bars.over_capacity.assign(static_cast<std::size_t>(ranks), false);
  if (snapshot.report && static_cast<int>(snapshot.report->memory.size()) == ranks) {
    bars.bytes = true;
    bars.unit = QStringLiteral("GiB");
    for (int rank = 0; rank < ranks; ++rank) {
      const auto &memory = snapshot.report->memory[static_cast<std::size_t>(rank)];
      const auto r = static_cast<std::size_t>(rank);
      bars.params[r] = memory.params / kGiB;
      bars.grads[r] = memory.grads / kGiB;
      bars.optimizer[r] = memory.optimizer / kGiB;
      bars.activations[r] = (bars.at_playhead ? activationsAt(simulation, rank, playhead_us, true)
                                              : memory.activations_peak) /
                            kGiB;
      bars.capacity = std::max(bars.capacity, memory.capacity / kGiB);
      bars.over_capacity[r] =
          bars.at_playhead ? bars.total(rank) > memory.capacity / kGiB : !memory.fits;
    }
  } else {
    bars.unit = QStringLiteral("activation sets");
    for (int rank = 0; rank < ranks; ++rank)
      bars.activations[static_cast<std::size_t>(rank)] =
          bars.at_playhead
              ? activationsAt(simulation, rank, playhead_us, false)
              : simulation.ranks[static_cast<std::size_t>(rank)].peak_inflight_microbatches;
  }
  return bars;
}

std::vector<QPointF> capStepSeries(const std::vector<QPointF> &steps, double start, double end,
                                   int bins) {
  std::vector<QPointF> out;
  if (steps.empty() || bins <= 0 || !(end > start)) return out;
  if (static_cast<int>(steps.size()) <= bins * 2) {
    // Small enough: draw the exact step function (a vertical then a horizontal move per change).
    out.reserve(steps.size() * 2 + 1);
    for (std::size_t i = 0; i < steps.size(); ++i) {
      if (i > 0) out.emplace_back(steps[i].x(), steps[i - 1].y());
      out.push_back(steps[i]);
    }
    out.emplace_back(end, steps.back().y());
    return out;
  }
  // Per column, the maximum level held anywhere in it (Tracy keeps min and max per pixel; for
  // memory the maximum is what matters).
  const double width = (end - start) / bins;
  std::vector<double> column_max(static_cast<std::size_t>(bins), -1);
  double level = 0;
  std::size_t index = 0;
  for (int column = 0; column < bins; ++column) {
    const double column_end = start + (column + 1) * width;
    double maximum = level;
    while (index < steps.size() && steps[index].x() < column_end) {
      level = steps[index].y();
      maximum = std::max(maximum, level);
      ++index;
    }
    column_max[static_cast<std::size_t>(column)] = maximum;
  }
  out.reserve(static_cast<std::size_t>(bins) * 2);
  for (int column = 0; column < bins; ++column) {
    out.emplace_back(start + column * width, column_max[static_cast<std::size_t>(column)]);
    out.emplace_back(start + (column + 1) * width, column_max[static_cast<std::size_t>(column)]);
  }
  return out;
}

// ---------------------------------------------------------------------------------------------

MemoryBarsChart::MemoryBarsChart(QWidget *parent) : QWidget(parent) {
  chart_ = new QChart;
  view_ = makeView(chart_, this);
  series_ = new QStackedBarSeries(chart_);
  const char *names[4] = {"params", "grads", "optimizer", "activations"};
  const QColor colors[4] = {QColor(0x6b, 0x7f, 0x99), QColor(0x9b, 0xad, 0xc4),
                            QColor(0xc7, 0xb2, 0x8a), QColor(0x3f, 0x7c, 0xc4)};
  for (int segment = 0; segment < 4; ++segment) {
    sets_[segment] = new QBarSet(QString::fromLatin1(names[segment]));
    sets_[segment]->setColor(colors[segment]);
    sets_[segment]->setBorderColor(colors[segment].darker(115));
    series_->append(sets_[segment]);
  }
  series_->setBarWidth(0.7);
  legend_ = addWrappingLegend(chart_, this);
  chart_->addSeries(series_);
  capacity_ = new QLineSeries(chart_);
  capacity_->setName(tr("capacity"));
  capacity_->setPen(QPen(QColor(0xc0, 0x20, 0x20), 2, Qt::DashLine));
  chart_->addSeries(capacity_);
  rank_axis_ = new QBarCategoryAxis(chart_);
  value_axis_ = new QValueAxis(chart_);
  styleAxis(value_axis_);
  QFont font = rank_axis_->labelsFont();
  font.setPointSizeF(8);
  rank_axis_->setLabelsFont(font);
  chart_->addAxis(rank_axis_, Qt::AlignBottom);
  chart_->addAxis(value_axis_, Qt::AlignLeft);
  series_->attachAxis(rank_axis_);
  series_->attachAxis(value_axis_);
  capacity_->attachAxis(rank_axis_);
  capacity_->attachAxis(value_axis_);
  QFont title_font = chart_->titleFont();
  title_font.setPointSizeF(9);
  title_font.setBold(true);
  chart_->setTitleFont(title_font);
  setMinimumSize(220, 180);
}

void MemoryBarsChart::setBars(const MemoryBars &bars) {
  const bool same_shape = bars.rankCount() == bars_.rankCount() && bars.bytes == bars_.bytes &&
                          bars.over_capacity == bars_.over_capacity;
  bars_ = bars;
  const std::vector<double> *values[4] = {&bars.params, &bars.grads, &bars.optimizer,
                                          &bars.activations};
  for (int segment = 0; segment < 4; ++segment) {
    QBarSet *set = sets_[segment];
    const auto &source = *values[segment];
    if (set->count() == static_cast<int>(source.size())) {
      for (int rank = 0; rank < set->count(); ++rank)
        set->replace(rank, source[static_cast<std::size_t>(rank)]);
    } else {
      set->remove(0, set->count());
      QList<qreal> list(source.begin(), source.end());
      set->append(list);
    }
  }
  if (!same_shape) {
    // Past a couple of dozen ranks no label fits under its bar: say the range in the title.
    rank_axis_->setLabelsVisible(bars.rankCount() <= 24);
    QStringList categories;
    for (int rank = 0; rank < bars.rankCount(); ++rank) {
      // Label every rank while they fit; beyond that every k-th (Qt Charts needs unique names).
      const int every = std::max(1, bars.rankCount() / 16);
      QString label = rank % every == 0 ? QString::number(rank) : QString(rank, QLatin1Char(' '));
      if (bars.over_capacity[static_cast<std::size_t>(rank)])
        label = QStringLiteral("%1 OOM").arg(rank);
      categories << label;
    }
    rank_axis_->clear();
    rank_axis_->append(categories);
  }
  double top = bars.capacity;
  for (int rank = 0; rank < bars.rankCount(); ++rank)
    top = std::max(top, bars.total(rank));
  // A stable axis during playback: the peak totals, not the playhead values, decide the range.
  value_axis_->setRange(0, std::max(top * 1.08, 1e-9));
  value_axis_->setTitleText(bars.unit);
  value_axis_->applyNiceNumbers();
  capacity_->setVisible(bars.capacity > 0);
  if (bars.capacity > 0)
    capacity_->replace(QList<QPointF>{QPointF(-0.5, bars.capacity),
                                      QPointF(bars.rankCount() - 0.5, bars.capacity)});
  chart_->setTitle(title());
  QString legend;
  for (int segment = bars.bytes ? 0 : 3; segment < 4; ++segment)
    legend += QStringLiteral("<span style='color:%1; font-size:11pt'>\u25a0</span>&nbsp;%2 &nbsp; ")
                  .arg(sets_[segment]->color().name(), sets_[segment]->label());
  if (!bars.bytes)
    legend += tr("<span style='color:#666'>(in microbatch equivalents; a model + hardware preset "
                 "gives bytes)</span> ");
  if (bars.capacity > 0)
    legend += tr("<span style='color:#c02020'><b>- -</b></span>&nbsp;device memory &nbsp; ");
  if (bars.rankCount() > 24)
    legend += tr("<span style='color:#666'>ranks 0\u2013%1, left to right</span>")
                  .arg(bars.rankCount() - 1);
  legend_->setText(legend);
}

double MemoryBarsChart::shownValue(int segment, int rank) const {
  if (segment < 0 || segment > 3 || rank < 0 || rank >= sets_[segment]->count())
    return std::nan("");
  return sets_[segment]->at(rank);
}

QString MemoryBarsChart::title() const {
  int over = 0;
  for (bool flag : bars_.over_capacity)
    over += flag ? 1 : 0;
  QString text = bars_.bytes ? tr("Memory per rank") : tr("Activations per rank");
  text += bars_.at_playhead ? tr(" (playhead)") : tr(" (peak)");
  if (over > 0) text += tr(" \u2014 %n over capacity", nullptr, over);
  return text;
}

QStringList MemoryBarsChart::categories() const {
  return rank_axis_->categories();
}

// ---------------------------------------------------------------------------------------------

MemoryTimeChart::MemoryTimeChart(QWidget *parent) : QWidget(parent) {
  chart_ = new QChart;
  view_ = makeView(chart_, this);
  time_axis_ = new QValueAxis(chart_);
  value_axis_ = new QValueAxis(chart_);
  styleAxis(time_axis_);
  styleAxis(value_axis_);
  time_axis_->setTitleText(tr("time (\u00b5s)"));
  chart_->addAxis(time_axis_, Qt::AlignBottom);
  chart_->addAxis(value_axis_, Qt::AlignLeft);
  playhead_ = new QLineSeries(chart_);
  playhead_->setPen(QPen(QColor(0x20, 0x20, 0x20), 1.5));
  chart_->addSeries(playhead_);
  playhead_->attachAxis(time_axis_);
  playhead_->attachAxis(value_axis_);
  for (auto *marker : chart_->legend()->markers(playhead_))
    marker->setVisible(false);
  // Ticks at the same 1-2-5 steps as the timeline's axis.
  time_axis_->setTickType(QValueAxis::TicksDynamic);
  time_axis_->setTickAnchor(0);
  QFont title_font = chart_->titleFont();
  title_font.setPointSizeF(9);
  title_font.setBold(true);
  chart_->setTitleFont(title_font);
  chart_->setTitle(tr("Activations held over time"));
  legend_ = addWrappingLegend(chart_, this);
  apply_timer_ = new QTimer(this);
  apply_timer_->setSingleShot(true);
  apply_timer_->setInterval(0);
  connect(apply_timer_, &QTimer::timeout, this, &MemoryTimeChart::applyPendingSnapshot);
  setMinimumSize(220, 180);
}

int MemoryTimeChart::seriesCount() const {
  return static_cast<int>(series_.size());
}

void MemoryTimeChart::setSnapshot(const SnapshotPointer &snapshot) {
  snapshot_ = snapshot;
  pending_ = true;
  if (isVisible()) apply_timer_->start();
}

void MemoryTimeChart::showEvent(QShowEvent *event) {
  QWidget::showEvent(event);
  if (pending_) applyPendingSnapshot();
}

void MemoryTimeChart::applyPendingSnapshot() {
  if (!pending_) return;
  pending_ = false;
  apply_timer_->stop();
  if (!snapshot_ || !snapshot_->evaluation) return;
  const auto &simulation = snapshot_->evaluation->simulation;
  const std::size_t ranks = simulation.memory.size();
  bytes_ = snapshot_->report.has_value();
  // More than eight lines stop being readable: show the first ranks and say so.
  const std::size_t shown = std::min<std::size_t>(ranks, 8);
  while (series_.size() > shown) {
    chart_->removeSeries(series_.back());
    delete series_.back();
    series_.pop_back();
  }
  while (series_.size() < shown) {
    auto *series = new QLineSeries(chart_);
    chart_->addSeries(series);
    series->attachAxis(time_axis_);
    series->attachAxis(value_axis_);
    series_.push_back(series);
  }
  peak_ = 0;
  for (std::size_t rank = 0; rank < ranks; ++rank)
    for (const auto &point : simulation.memory[rank])
      peak_ = std::max(peak_, bytes_ ? point.activation_bytes / kGiB : point.inflight_microbatches);
  value_axis_->setTitleText(bytes_ ? tr("activations (GiB)") : tr("activation sets"));
  value_axis_->setRange(0, std::max(peak_ * 1.1, 1e-9));
  value_axis_->applyNiceNumbers();
  chart_->setTitle(
      shown < ranks
          ? tr("Activations held over time (ranks 0\u2013%1 of %2)").arg(shown - 1).arg(ranks)
          : tr("Activations held over time"));
  // The visible window follows the timeline (setVisibleRange); only the unit follows the step.
  const double makespan = std::max(simulation.makespan_us, 1e-6);
  const double unit = makespan >= 2e6 ? 1e6 : makespan >= 2e3 ? 1e3 : 1;
  if (unit != time_unit_us_) {
    // Pass through a one-tick state in the old unit first, so the tick interval never meets a
    // range a million times its size.
    time_axis_->setTickInterval(std::max(time_axis_->tickInterval(), makespan / time_unit_us_));
    time_axis_->setRange(0, makespan / time_unit_us_);
    time_axis_->setRange(0, makespan / unit);
    time_unit_us_ = unit;
  }
  time_axis_->setTitleText(time_unit_us_ == 1e6   ? tr("time (s)")
                           : time_unit_us_ == 1e3 ? tr("time (ms)")
                                                  : tr("time (\u00b5s)"));
  rebuildSeries();
  setPlayhead(playhead_us_);
}

void MemoryTimeChart::rebuildSeries() {
  if (!snapshot_ || !snapshot_->evaluation) return;
  const auto &simulation = snapshot_->evaluation->simulation;
  const double makespan = std::max(simulation.makespan_us, 1e-6);
  for (std::size_t rank = 0; rank < series_.size(); ++rank) {
    std::vector<QPointF> steps;
    steps.reserve(simulation.memory[rank].size() + 1);
    steps.emplace_back(0, 0);
    for (const auto &point : simulation.memory[rank])
      steps.emplace_back(point.time_us / time_unit_us_,
                         bytes_ ? point.activation_bytes / kGiB : point.inflight_microbatches);
    const auto capped = capStepSeries(steps, 0, makespan / time_unit_us_, kMemoryChartColumns);
    series_[rank]->replace(QList<QPointF>(capped.begin(), capped.end()));
    series_[rank]->setName(tr("rank %1").arg(rank));
    series_[rank]->setPen(
        QPen(QColor::fromHsv(
                 static_cast<int>(rank * 360 / std::max<std::size_t>(series_.size(), 1)) % 360, 170,
                 190),
             1.5));
  }
  legend_->setText(legendHtml(series_));
  applyTimeRange(start_us_, end_us_);
}

void MemoryTimeChart::setVisibleRange(const TimeMapping &mapping) {
  start_us_ = mapping.viewStart();
  end_us_ = mapping.viewEnd();
  applyTimeRange(start_us_, end_us_);
}

void MemoryTimeChart::applyTimeRange(double start_us, double end_us) {
  const double start = start_us / time_unit_us_,
               end = std::max(end_us / time_unit_us_, start + 1e-12);
  // About five labeled ticks across the chart, on the timeline's nice 1-2-5 steps.
  const auto ticks = axisTicks(TimeMapping(start, end, 0, 100), 20);
  const double step = ticks.size() >= 2 ? ticks[1].time_us - ticks[0].time_us : end - start;
  if (step >= time_axis_->tickInterval()) {
    time_axis_->setTickInterval(step);
    time_axis_->setRange(start, end);
  } else {
    time_axis_->setRange(start, end);
    time_axis_->setTickInterval(step);
  }
  time_axis_->setLabelFormat(step >= 1     ? QStringLiteral("%.0f")
                             : step >= 0.1 ? QStringLiteral("%.1f")
                                           : QStringLiteral("%.3g"));
}

void MemoryTimeChart::setPlayhead(double time_us) {
  playhead_us_ = time_us;
  if (std::isnan(time_us)) {
    playhead_->clear();
    return;
  }
  const double x = time_us / time_unit_us_;
  playhead_->replace(QList<QPointF>{QPointF(x, 0), QPointF(x, peak_ * 1.1)});
}

// ---------------------------------------------------------------------------------------------

BubbleCurveChart::BubbleCurveChart(QWidget *parent) : QWidget(parent) {
  chart_ = new QChart;
  view_ = makeView(chart_, this);
  m_axis_ = new QValueAxis(chart_);
  bubble_axis_ = new QValueAxis(chart_);
  styleAxis(m_axis_);
  styleAxis(bubble_axis_);
  m_axis_->setTitleText(tr("M (microbatches)"));
  m_axis_->setLabelFormat(QStringLiteral("%d"));
  bubble_axis_->setTitleText(tr("bubble fraction (%)"));
  chart_->addAxis(m_axis_, Qt::AlignBottom);
  chart_->addAxis(bubble_axis_, Qt::AlignLeft);
  QFont title_font = chart_->titleFont();
  title_font.setPointSizeF(9);
  title_font.setBold(true);
  chart_->setTitleFont(title_font);
  legend_ = addWrappingLegend(chart_, this);
  bubble_axis_->setLabelFormat(QStringLiteral("%.0f"));
  m_axis_->setTickCount(5);
  setMinimumSize(220, 180);
}

void BubbleCurveChart::setCurves(const std::vector<BubbleCurve> &curves, const QString &subtitle) {
  for (auto *series : series_) {
    chart_->removeSeries(series);
    delete series;
  }
  series_.clear();
  double max_m = 1, max_bubble = 1;
  int index = 0;
  for (const auto &curve : curves) {
    auto *series = new QLineSeries(chart_);
    series->setName(curve.name);
    series->setPointsVisible(curve.points.size() < 40);
    series->replace(QList<QPointF>(curve.points.begin(), curve.points.end()));
    series->setPen(QPen(QColor::fromHsv((index * 47) % 360, 190, 200), 2));
    chart_->addSeries(series);
    series->attachAxis(m_axis_);
    series->attachAxis(bubble_axis_);
    series_.push_back(series);
    for (const auto &point : curve.points) {
      max_m = std::max(max_m, point.x());
      max_bubble = std::max(max_bubble, point.y());
    }
    ++index;
  }
  m_axis_->setRange(0, max_m);
  m_axis_->applyNiceNumbers();
  legend_->setText(legendHtml(series_));
  bubble_axis_->setRange(0, std::min(100.0, max_bubble * 1.1));
  bubble_axis_->applyNiceNumbers();
  chart_->setTitle(tr("Bubble against M"));
  setToolTip(subtitle);
}

} // namespace pipescope::gui
