#include "gui/charts/charts.h"

#include <QBarCategoryAxis>
#include <QBarSet>
#include <QChart>
#include <QChartView>
#include <QCursor>
#include <QLabel>
#include <QLegendMarker>
#include <QLineSeries>
#include <QScatterSeries>
#include <QStackedBarSeries>
#include <QToolTip>
#include <QVBoxLayout>
#include <QValueAxis>
#include <algorithm>
#include <cmath>

#include "gui/timeline/palette.h"
#include "gui/timeline/timeline_model.h"

namespace pipescope::gui {

namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

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

// One legend entry that never breaks between its symbol and its name, nor inside its name. A
// name wider than the legend's line ("Combined 1F1B (EP all-to-all overlap)" beside a narrow
// chart) broke at a hyphen, nowrap or not ("all-to-" / "all overlap)"): its hyphens are
// non-breaking, and its parenthesis may go to a line of its own.
QString legendItem(const QString &symbol_html, const QString &name) {
  QString unbroken = name;
  unbroken.replace(QLatin1Char('-'), QChar(0x2011));
  const qsizetype aside = unbroken.indexOf(QStringLiteral(" ("));
  const QString nowrap = QStringLiteral("<span style='white-space:nowrap'>%1</span>");
  const QString head =
      nowrap.arg(symbol_html + QStringLiteral("&nbsp;") + unbroken.left(aside).toHtmlEscaped());
  return (aside < 0
              ? head
              : head + QLatin1Char(' ') + nowrap.arg(unbroken.mid(aside + 1).toHtmlEscaped())) +
         QStringLiteral(" &nbsp; ");
}

// The compare view's bubble-against-M legend wrapped inside names ("ZB-" / "H1", "Combined
// 1F1B (EP all-to-all" / "overlap)"): each entry is one unbreakable item.
QString legendHtml(const std::vector<QLineSeries *> &series) {
  QString html;
  for (auto *line : series)
    html += legendItem(QStringLiteral("<span style='color:%1; font-size:11pt'>\u25a0</span>")
                           .arg(line->pen().color().name()),
                       line->name());
  return html;
}

// `antialiased` for charts with sloped lines (curves, a Pareto front); a chart of bars, grid
// lines and a level line is all axis-aligned, where antialiasing only costs: on a bar chart of
// 16 ranks it took most of a slider move's repaint of the chart (Qt Charts draws each grid line
// and tick as a QGraphicsLineItem, through the antialiasing rasterizer). Text stays
// antialiased either way.
QChartView *makeView(QChart *chart, QWidget *parent, bool antialiased = true) {
  chart->setAnimationOptions(QChart::NoAnimation);
  chart->setMargins(QMargins(4, 4, 4, 4));
  chart->setBackgroundRoundness(0);
  chart->legend()->setAlignment(Qt::AlignBottom);
  QFont font = chart->legend()->font();
  font.setPointSizeF(8);
  chart->legend()->setFont(font);
  auto *view = new QChartView(chart, parent);
  view->setRenderHint(QPainter::Antialiasing, antialiased);
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

// A value axis with its title and label format, styled like the others, added to the chart.
QValueAxis *addValueAxis(QChart *chart, Qt::Alignment alignment, const QString &title,
                         const QString &label_format) {
  auto *axis = new QValueAxis(chart);
  styleAxis(axis);
  axis->setTitleText(title);
  axis->setLabelFormat(label_format);
  chart->addAxis(axis, alignment);
  return axis;
}

// After applyNiceNumbers (ticks 1, 2 or 5 × 10^n apart): as many decimals as the tick step
// needs, so that no two ticks print alike ("%.0f" printed 0, 0, 0, 1, 1 on an axis to 1).
void fitLabelDecimals(QValueAxis *axis) {
  const double step = (axis->max() - axis->min()) / std::max(1, axis->tickCount() - 1);
  const int decimals =
      step > 0 ? std::clamp(static_cast<int>(-std::floor(std::log10(step) + 1e-9)), 0, 6) : 0;
  axis->setLabelFormat(QStringLiteral("%.") + QString::number(decimals) + QStringLiteral("f"));
}

// The labels a value axis draws at its ticks, as its label format prints them.
QStringList axisTickLabels(const QValueAxis *axis) {
  QStringList labels;
  const int ticks = std::max(2, axis->tickCount());
  const QByteArray format = axis->labelFormat().toLatin1();
  for (int i = 0; i < ticks; ++i)
    labels << QString::asprintf(format.constData(),
                                axis->min() + i * (axis->max() - axis->min()) / (ticks - 1));
  return labels;
}

void styleTitle(QChart *chart) {
  QFont title_font = chart->titleFont();
  title_font.setPointSizeF(9);
  title_font.setBold(true);
  chart->setTitleFont(title_font);
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

// ---------------------------------------------------------------------------------------------

MemoryBarsChart::MemoryBarsChart(QWidget *parent) : QWidget(parent) {
  chart_ = new QChart;
  view_ = makeView(chart_, this, /*antialiased=*/false);
  series_ = new QStackedBarSeries(chart_);
  const char *names[4] = {"params", "grads", "optimizer", "activations"};
  for (int segment = 0; segment < 4; ++segment) {
    sets_[segment] = new QBarSet(QString::fromLatin1(names[segment]));
    sets_[segment]->setColor(palette::memorySegment(segment));
    sets_[segment]->setBorderColor(palette::memorySegment(segment).darker(115));
    series_->append(sets_[segment]);
  }
  series_->setBarWidth(0.7);
  legend_ = addWrappingLegend(chart_, this);
  chart_->addSeries(series_);
  capacity_ = new QLineSeries(chart_);
  capacity_->setName(tr("capacity"));
  capacity_->setPen(QPen(palette::capacityLine(), 2, Qt::DashLine));
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
  styleTitle(chart_);
  setMinimumSize(220, 180);
}

void MemoryBarsChart::setBars(const MemoryBars &bars) {
  // Most slider moves leave the bars as they were (1F1B's peak stops growing at M = P): Qt Charts
  // relayouts its axes on every change, so an unchanged picture is left alone.
  if (bars == bars_ && sets_[0]->count() == bars.rankCount()) return;
  const bool same_shape = bars.rankCount() == bars_.rankCount() && bars.bytes == bars_.bytes &&
                          bars.over_capacity == bars_.over_capacity;
  bars_ = bars;
  const std::vector<double> *values[4] = {&bars.params, &bars.grads, &bars.optimizer,
                                          &bars.activations};
  for (int segment = 0; segment < 4; ++segment) {
    QBarSet *set = sets_[segment];
    const auto &source = *values[segment];
    set->remove(0, set->count());
    set->append(QList<qreal>(source.begin(), source.end()));
  }
  if (!same_shape) {
    // Past a couple of dozen ranks no label fits under its bar: say the range in the title.
    rank_axis_->setLabelsVisible(bars.rankCount() <= 24);
    // Beyond 8 ranks a bar is narrower than its number, and an "OOM" label is wider than any bar:
    // Qt Charts put "..." under them. Such labels turn upright, whole (an upright label is as
    // wide as a line of text).
    const bool upright = bars.rankCount() > 8 ||
                         std::find(bars.over_capacity.begin(), bars.over_capacity.end(), true) !=
                             bars.over_capacity.end();
    rank_axis_->setLabelsAngle(upright ? -90 : 0);
    rank_axis_->setTruncateLabels(!upright);
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
  // While the tallest bar stays in the upper part of the axis the range is kept: Qt Charts
  // relayouts the whole chart on a new range, and the bars of one drag stay comparable.
  // "Far under" is against the range asked for, not the one shown: nice numbers can take 602 GiB
  // up to 1000, and the next move's 597 would then be "far under" it on every other move.
  const double wanted = std::max(top * 1.08, 1e-9);
  if (wanted > value_axis_->max() || wanted < 0.6 * axis_asked_ ||
      value_axis_->titleText() != bars.unit) {
    axis_asked_ = wanted;
    ++value_axis_sets_;
    value_axis_->setRange(0, wanted);
    value_axis_->setTitleText(bars.unit);
    value_axis_->applyNiceNumbers();
    fitLabelDecimals(value_axis_); // "400" and "0.5", not "400.0" and "0.5"
  }
  capacity_->setVisible(bars.capacity > 0);
  if (bars.capacity > 0)
    capacity_->replace(QList<QPointF>{QPointF(-0.5, bars.capacity),
                                      QPointF(bars.rankCount() - 0.5, bars.capacity)});
  // Qt Charts relayouts on every title or legend text set, changed or not.
  if (const QString text = title(); chart_->title() != text) chart_->setTitle(text);
  QString legend;
  for (int segment = bars.bytes ? 0 : 3; segment < 4; ++segment)
    legend += QStringLiteral("<span style='color:%1; font-size:11pt'>\u25a0</span>&nbsp;%2 &nbsp; ")
                  .arg(sets_[segment]->color().name(), sets_[segment]->label());
  if (!bars.bytes)
    legend += tr("<span style='color:%1'>(in microbatch equivalents; a model + hardware preset "
                 "gives bytes)</span> ")
                  .arg(palette::hintText().name());
  if (bars.capacity > 0)
    legend += tr("<span style='color:%1'><b>- -</b></span>&nbsp;device memory &nbsp; ")
                  .arg(palette::capacityLine().name());
  if (bars.rankCount() > 24)
    legend += tr("<span style='color:%2'>ranks 0\u2013%1, left to right</span>")
                  .arg(bars.rankCount() - 1)
                  .arg(palette::hintText().name());
  if (legend_->text() != legend) legend_->setText(legend);
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

QStringList MemoryBarsChart::valueAxisLabels() const {
  return axisTickLabels(value_axis_);
}

double MemoryBarsChart::valueAxisTop() const {
  return value_axis_->max();
}

bool MemoryBarsChart::rankLabelsUpright() const {
  return rank_axis_->labelsAngle() != 0 && !rank_axis_->truncateLabels();
}

// ---------------------------------------------------------------------------------------------

BubbleCurveChart::BubbleCurveChart(QWidget *parent) : QWidget(parent) {
  chart_ = new QChart;
  view_ = makeView(chart_, this);
  m_axis_ = addValueAxis(chart_, Qt::AlignBottom, tr("M (microbatches)"), QStringLiteral("%d"));
  bubble_axis_ =
      addValueAxis(chart_, Qt::AlignLeft, tr("bubble fraction (%)"), QStringLiteral("%.0f"));
  styleTitle(chart_);
  legend_ = addWrappingLegend(chart_, this);
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
    series->setPen(QPen(palette::curveSeries(index), 2));
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

// ---------------------------------------------------------------------------------------------

SearchScatterChart::SearchScatterChart(QWidget *parent) : QWidget(parent) {
  chart_ = new QChart;
  view_ = makeView(chart_, this);
  memory_axis_ = addValueAxis(chart_, Qt::AlignBottom, tr("peak memory per GPU (GiB)"),
                              QStringLiteral("%.0f"));
  tokens_axis_ = addValueAxis(chart_, Qt::AlignLeft, tr("tokens/s"), QStringLiteral("%.0f"));
  styleTitle(chart_);
  labels_color_ = memory_axis_->labelsColor();
  front_ = new QLineSeries(chart_);
  front_->setName(tr("Pareto front"));
  front_->setPen(QPen(palette::paretoLine(), 1.5, Qt::DashLine));
  limit_ = new QLineSeries(chart_);
  limit_->setName(tr("memory limit"));
  limit_->setPen(QPen(palette::capacityLine(), 2, Qt::DashLine));
  chosen_ = new QScatterSeries(chart_);
  chosen_->setName(tr("loaded"));
  chosen_->setMarkerSize(16);
  chosen_->setColor(Qt::transparent);
  chosen_->setBorderColor(palette::chosenPoint());
  for (QXYSeries *series : std::initializer_list<QXYSeries *>{front_, limit_, chosen_}) {
    chart_->addSeries(series);
    series->attachAxis(memory_axis_);
    series->attachAxis(tokens_axis_);
  }
  legend_ = addWrappingLegend(chart_, this);
  setMinimumSize(320, 220);
  clear();
}

void SearchScatterChart::clear() {
  setResults({}, {}, 0, tr("No search yet: press Run search"));
}

void SearchScatterChart::setResults(const std::vector<ScatterGroup> &groups,
                                    const std::vector<QPointF> &front, double limit_gib,
                                    const QString &title) {
  for (auto *series : series_) {
    chart_->removeSeries(series);
    delete series;
  }
  series_.clear();
  groups_ = groups;
  double max_memory = limit_gib, max_tokens = 0, min_tokens = 0;
  bool any = false;
  QString legend;
  for (std::size_t index = 0; index < groups_.size(); ++index) {
    const ScatterGroup &group = groups_[index];
    auto *series = new QScatterSeries(chart_);
    series->setName(group.name);
    series->setColor(group.color);
    series->setBorderColor(group.color.darker(130));
    series->setMarkerSize(9);
    QList<QPointF> values;
    for (const auto &point : group.points) {
      values.append(point.value);
      max_memory = std::max(max_memory, point.value.x());
      max_tokens = std::max(max_tokens, point.value.y());
      min_tokens = any ? std::min(min_tokens, point.value.y()) : point.value.y();
      any = true;
    }
    series->replace(values);
    chart_->addSeries(series);
    series->attachAxis(memory_axis_);
    series->attachAxis(tokens_axis_);
    const int series_index = static_cast<int>(index);
    connect(series, &QScatterSeries::hovered, this,
            [this, series_index](const QPointF &value, bool state) {
              const ScatterPoint *point = state ? find(series_index, value) : nullptr;
              if (point)
                QToolTip::showText(QCursor::pos(), point->details, view_);
              else
                QToolTip::hideText();
              emit pointHovered(point ? point->plan : -1, point ? point->details : QString());
            });
    connect(series, &QScatterSeries::clicked, this, [this, series_index](const QPointF &value) {
      if (const ScatterPoint *point = find(series_index, value)) emit pointClicked(point->plan);
    });
    series_.push_back(series);
    legend += legendItem(QStringLiteral("<span style='color:%1; font-size:11pt'>\u25cf</span>")
                             .arg(group.color.name()),
                         group.name);
  }
  front_->replace(QList<QPointF>(front.begin(), front.end()));
  if (!front.empty())
    legend += legendItem(QStringLiteral("<span style='color:%1'>\u2012\u2012</span>")
                             .arg(palette::paretoLine().name()),
                         tr("Pareto front"));
  max_tokens = max_tokens > 0 ? max_tokens * 1.08 : 1;
  max_memory = max_memory > 0 ? max_memory * 1.05 : 1;
  if (limit_gib > 0) {
    limit_->replace({QPointF(limit_gib, 0), QPointF(limit_gib, max_tokens)});
    legend += legendItem(
        QStringLiteral("<span style='color:%1'>\u2506</span>").arg(palette::capacityLine().name()),
        tr("memory limit %1 GiB").arg(limit_gib, 0, 'f', 1));
  } else {
    limit_->clear();
  }
  chosen_->clear();
  memory_axis_->setRange(0, max_memory);
  // Tokens/s from a little under the slowest plan shown: the differences between plans are the
  // point, and they are often a few percent.
  tokens_axis_->setRange(any ? min_tokens * 0.9 : 0, max_tokens);
  memory_axis_->applyNiceNumbers();
  tokens_axis_->applyNiceNumbers();
  fitLabelDecimals(memory_axis_);
  fitLabelDecimals(tokens_axis_);
  // Before a search, or with no plan to show, an axis without data has no scale worth reading.
  // Its labels turn transparent rather than hidden, which would take their space and leave too
  // little for the axis title (elided to "...").
  memory_scaled_ = any || limit_gib > 0;
  tokens_scaled_ = any;
  memory_axis_->setLabelsColor(memory_scaled_ ? labels_color_ : Qt::transparent);
  tokens_axis_->setLabelsColor(tokens_scaled_ ? labels_color_ : Qt::transparent);
  chart_->setTitle(title);
  legend_->setText(legend);
}

const ScatterPoint *SearchScatterChart::find(int series, const QPointF &value) const {
  if (series < 0 || series >= static_cast<int>(groups_.size())) return nullptr;
  const ScatterPoint *nearest = nullptr;
  double best = 0;
  for (const auto &point : groups_[static_cast<std::size_t>(series)].points) {
    const QPointF delta = point.value - value;
    // Relative distance: the axes differ by orders of magnitude.
    const double dx = delta.x() / std::max(1e-9, memory_axis_->max());
    const double dy = delta.y() / std::max(1e-9, tokens_axis_->max());
    const double distance = dx * dx + dy * dy;
    if (!nearest || distance < best) {
      nearest = &point;
      best = distance;
    }
  }
  return nearest;
}

int SearchScatterChart::pointCount() const {
  int count = 0;
  for (auto *series : series_)
    count += static_cast<int>(series->count());
  return count;
}

int SearchScatterChart::frontPointCount() const {
  return static_cast<int>(front_->count());
}

QString SearchScatterChart::seriesName(int index) const {
  return series_.at(static_cast<std::size_t>(index))->name();
}

QColor SearchScatterChart::seriesColor(int index) const {
  return series_.at(static_cast<std::size_t>(index))->color();
}

QString SearchScatterChart::xTitle() const {
  return memory_axis_->titleText();
}

QString SearchScatterChart::yTitle() const {
  return tokens_axis_->titleText();
}

QStringList SearchScatterChart::tickLabels(Qt::Orientation orientation) const {
  const bool horizontal = orientation == Qt::Horizontal;
  const QValueAxis *axis = horizontal ? memory_axis_ : tokens_axis_;
  if (!(horizontal ? memory_scaled_ : tokens_scaled_)) return {};
  return axisTickLabels(axis);
}

QString SearchScatterChart::detailsOf(int plan) const {
  for (const auto &group : groups_)
    for (const auto &point : group.points)
      if (point.plan == plan) return point.details;
  return {};
}

void SearchScatterChart::setChosen(int plan) {
  chosen_->clear();
  for (const auto &group : groups_)
    for (const auto &point : group.points)
      if (point.plan == plan) chosen_->append(point.value);
}

} // namespace pipescope::gui
