#pragma once
// Every use of Qt Charts lives behind the classes in this file (STYLE.md §16): Qt Charts is
// deprecated from Qt 6.10 in favour of Qt Graphs, and keeping it here keeps that swap small.
// Charts are fed in bulk (replace()) with animations off, and long series are capped per pixel.
#include <QPointF>
#include <QString>
#include <QTimer>
#include <QWidget>
#include <cmath>
#include <vector>

#include "gui/explorer/explorer_snapshot.h"
#include "gui/timeline/time_mapping.h"

class QChart;
class QLabel;
class QChartView;
class QBarSet;
class QBarCategoryAxis;
class QValueAxis;
class QLineSeries;
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
};

/// Memory bars of a snapshot: the model report's figures (activations at their peak, or at the
/// playhead when one is given), or without a model the peak in-flight activation sets.
MemoryBars memoryBarsFor(const ExplorerSnapshot &snapshot, double playhead_us = std::nan(""));

/// Downsamples a step function to at most `bins` columns keeping each column's maximum, so a
/// million-change memory timeline draws as fast as a short one and no peak is lost.
std::vector<QPointF> capStepSeries(const std::vector<QPointF> &steps, double start, double end,
                                   int bins);

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

private:
  QChartView *view_ = nullptr;
  QChart *chart_ = nullptr;
  QStackedBarSeries *series_ = nullptr;
  QBarSet *sets_[4] = {};
  QLineSeries *capacity_ = nullptr;
  QBarCategoryAxis *rank_axis_ = nullptr;
  QValueAxis *value_axis_ = nullptr;
  QLabel *legend_ = nullptr;
  MemoryBars bars_;
};

/// Activations held over time per rank (a step line each), following the timeline's visible
/// window and playhead. Qt Charts strokes every line point by point, so a new snapshot is applied
/// on the next turn of the event loop (coalescing a burst of slider moves) and only while the
/// chart is visible: the timeline and the metrics answer a slider move within its frame.
class MemoryTimeChart : public QWidget {
  Q_OBJECT
public:
  explicit MemoryTimeChart(QWidget *parent = nullptr);
  void setSnapshot(const SnapshotPointer &snapshot);
  /// Applies a pending snapshot now.
  void applyPendingSnapshot();
  void setVisibleRange(const TimeMapping &mapping);
  void setPlayhead(double time_us);
  int seriesCount() const;

protected:
  void showEvent(QShowEvent *event) override;

private:
  void rebuildSeries();
  /// Sets the time axis to [start_us, end_us] with 1-2-5 ticks, never passing through a state
  /// with a tick interval tiny against the range (Qt Charts would create every tick item).
  void applyTimeRange(double start_us, double end_us);
  QChartView *view_ = nullptr;
  QChart *chart_ = nullptr;
  QValueAxis *time_axis_ = nullptr;
  QValueAxis *value_axis_ = nullptr;
  std::vector<QLineSeries *> series_;
  QLineSeries *playhead_ = nullptr;
  QLabel *legend_ = nullptr; ///< wraps where Qt Charts' own legend would elide the names
  SnapshotPointer snapshot_;
  double start_us_ = 0, end_us_ = 1;
  double peak_ = 1;
  bool bytes_ = false;
  double time_unit_us_ = 1; ///< the axis counts in µs, ms or s, whichever suits the step
  bool pending_ = false;
  QTimer *apply_timer_ = nullptr;
  double playhead_us_ = std::nan("");
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

private:
  QChartView *view_ = nullptr;
  QChart *chart_ = nullptr;
  QValueAxis *m_axis_ = nullptr;
  QValueAxis *bubble_axis_ = nullptr;
  std::vector<QLineSeries *> series_;
  QLabel *legend_ = nullptr; ///< wraps where Qt Charts' own legend would elide the names
};

} // namespace pipescope::gui
