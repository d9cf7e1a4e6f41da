#pragma once
// Every use of Qt Charts lives behind the classes in this file (STYLE.md §16): Qt Charts is
// deprecated from Qt 6.10 in favour of Qt Graphs, and keeping it here keeps that swap small.
// Charts are fed in bulk (replace()) with animations off. The memory-over-time view is painted
// like the timeline instead (widgets/memory_time_view.h): it must follow every slider move in
// the same frame.
#include <QColor>
#include <QPointF>
#include <QString>
#include <QWidget>
#include <cmath>
#include <vector>

#include "gui/explorer/explorer_snapshot.h"

class QChart;
class QLabel;
class QChartView;
class QBarSet;
class QBarCategoryAxis;
class QValueAxis;
class QLineSeries;
class QScatterSeries;
class QStackedBarSeries;

namespace pipescope::gui {

/// The numbers behind the memory bars, per pipeline rank, in the chart's unit.
struct MemoryBars {
  bool bytes = false; ///< GiB from a model; otherwise activation sets without bytes
  QString unit;       ///< "GiB" or "activation sets (microbatches)"
  std::vector<double> params, grads, optimizer, activations;
  std::vector<bool> over_capacity;
  double capacity = 0;      ///< device memory in the unit, 0 when unknown
  bool at_playhead = false; ///< activations at the playhead rather than at their peak

  int rankCount() const { return static_cast<int>(activations.size()); }
  double total(int rank) const;
  friend bool operator==(const MemoryBars &, const MemoryBars &) = default;
};

/// Memory bars of a snapshot: the model report's figures (activations at their peak, or at the
/// playhead when one is given), or without a model the peak in-flight activation sets.
MemoryBars memoryBarsFor(const ExplorerSnapshot &snapshot, double playhead_us = std::nan(""));

/// Stacked bars per rank (params, grads, optimizer, activations) against the device capacity
/// line; ranks over capacity are marked in their axis label and the title.
class MemoryBarsChart : public QWidget {
  Q_OBJECT
public:
  explicit MemoryBarsChart(QWidget *parent = nullptr);
  void setBars(const MemoryBars &bars);
  const MemoryBars &bars() const { return bars_; }
  /// Value of one bar segment as shown (0 params, 1 grads, 2 optimizer, 3 activations).
  double shownValue(int segment, int rank) const;
  QString title() const;
  QStringList categories() const;
  /// The top of the value axis as drawn: kept while the tallest bar stays in its upper 40 %,
  /// so a drag does not relayout the chart on every move.
  double valueAxisTop() const;
  /// The value axis's tick labels as drawn ("0", "100", ... for a step of 100).
  QStringList valueAxisLabels() const;
  /// How often the value axis was set since the chart was made: each time Qt Charts relayouts
  /// the whole chart, whether or not nice numbers then give the same top.
  int valueAxisSets() const { return value_axis_sets_; }
  /// Whether the rank labels stand upright, whole: past 8 ranks or with a rank out of memory
  /// ("3 OOM"), where a label is wider than its bar.
  bool rankLabelsUpright() const;

private:
  QChartView *view_ = nullptr;
  QChart *chart_ = nullptr;
  QStackedBarSeries *series_ = nullptr;
  QBarSet *sets_[4] = {};
  QLineSeries *capacity_ = nullptr;
  QBarCategoryAxis *rank_axis_ = nullptr;
  QValueAxis *value_axis_ = nullptr;
  double axis_asked_ = 0; ///< the top the value axis was last set for, before nice numbers
  int value_axis_sets_ = 0;
  QLabel *legend_ = nullptr;
  MemoryBars bars_;
};

/// One curve per schedule: bubble fraction against M.
struct BubbleCurve {
  QString name;
  std::vector<QPointF> points; ///< (M, bubble fraction in %)
};

class BubbleCurveChart : public QWidget {
  Q_OBJECT
public:
  explicit BubbleCurveChart(QWidget *parent = nullptr);
  void setCurves(const std::vector<BubbleCurve> &curves, const QString &subtitle);
  int curveCount() const { return static_cast<int>(series_.size()); }
  /// The legend under the chart (a label, so that it wraps between its entries).
  QLabel *legend() const { return legend_; }

private:
  QChartView *view_ = nullptr;
  QChart *chart_ = nullptr;
  QValueAxis *m_axis_ = nullptr;
  QValueAxis *bubble_axis_ = nullptr;
  std::vector<QLineSeries *> series_;
  QLabel *legend_ = nullptr; ///< wraps where Qt Charts' own legend would elide the names
};

/// The planner's results as the scatter chart shows them: one series per schedule, each point a
/// plan (peak memory in GiB, tokens/s) with the text of its tooltip.
struct ScatterPoint {
  QPointF value;   ///< (peak memory GiB, tokens/s)
  QString details; ///< tooltip (rich text)
  int plan = -1;   ///< the caller's index of the plan
};
struct ScatterGroup {
  QString name;
  QColor color;
  std::vector<ScatterPoint> points;
};

/// Tokens/s against peak memory per GPU, one scatter series per schedule, the Pareto front as a
/// line, the memory limit as a dashed vertical line. Hovering a point shows its details; clicking
/// one emits pointClicked with the caller's plan index.
class SearchScatterChart : public QWidget {
  Q_OBJECT
public:
  explicit SearchScatterChart(QWidget *parent = nullptr);
  /// `front`: the Pareto points in order of memory; `limit_gib`: 0 for none.
  void setResults(const std::vector<ScatterGroup> &groups, const std::vector<QPointF> &front,
                  double limit_gib, const QString &title);
  void clear();
  int seriesCount() const { return static_cast<int>(series_.size()); }
  int pointCount() const;
  int frontPointCount() const;
  QString seriesName(int index) const;
  QColor seriesColor(int index) const;
  QString xTitle() const;
  QString yTitle() const;
  /// The tick labels of the x (memory) or y (tokens/s) axis as drawn; empty while the axis has
  /// no data to scale it.
  QStringList tickLabels(Qt::Orientation orientation) const;
  /// The details shown on hovering the point of plan `plan` (what a tooltip shows).
  QString detailsOf(int plan) const;
  /// Marks the plan loaded into the explorer (-1: none).
  void setChosen(int plan);

signals:
  void pointClicked(int plan);
  void pointHovered(int plan, const QString &details); ///< plan -1 when the pointer leaves

private:
  const ScatterPoint *find(int series, const QPointF &value) const;

  QChartView *view_ = nullptr;
  QChart *chart_ = nullptr;
  QValueAxis *memory_axis_ = nullptr;
  QValueAxis *tokens_axis_ = nullptr;
  QColor labels_color_;
  bool memory_scaled_ = false, tokens_scaled_ = false;
  QLineSeries *front_ = nullptr;
  QLineSeries *limit_ = nullptr;
  QScatterSeries *chosen_ = nullptr;
  std::vector<QScatterSeries *> series_;
  std::vector<ScatterGroup> groups_;
  QLabel *legend_ = nullptr;
};

} // namespace pipescope::gui
