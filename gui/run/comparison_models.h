#pragma once
// The Run tab's two tables as item models (Qt Core only, read by QTableViews and by tests):
// the step metrics measured against predicted, and the per-op-kind duration errors. With a
// calibration shown, each table has a "before" and an "after" group of columns.
#include <QAbstractTableModel>

#include "engine/calibration.h"

namespace pipescope::gui {

/// Rows: step time, bubble fraction, bubble ratio. Columns: measured, then predicted and error
/// (or predicted and error before, then after, calibration).
class StepErrorModel : public QAbstractTableModel {
  Q_OBJECT
public:
  using QAbstractTableModel::QAbstractTableModel;
  /// `now` null: no rows filled; `before` non-null: before and after columns.
  void setComparisons(const TraceComparison *now, const TraceComparison *before);

  int rowCount(const QModelIndex &parent = {}) const override;
  int columnCount(const QModelIndex &parent = {}) const override;
  QVariant data(const QModelIndex &index, int role) const override;
  QVariant headerData(int section, Qt::Orientation orientation, int role) const override;

private:
  /// The comparison a column reads and whether the column is its error, or null (measured).
  const TraceComparison *columnComparison(int column, bool &error) const;
  std::optional<TraceComparison> now_, before_;
};

/// Rows: one per op kind measured. Columns: median and worst |error| (before, then after,
/// calibration when one is shown).
class KindErrorModel : public QAbstractTableModel {
  Q_OBJECT
public:
  using QAbstractTableModel::QAbstractTableModel;
  void setComparisons(const TraceComparison *now, const TraceComparison *before);

  int rowCount(const QModelIndex &parent = {}) const override;
  int columnCount(const QModelIndex &parent = {}) const override;
  QVariant data(const QModelIndex &index, int role) const override;
  QVariant headerData(int section, Qt::Orientation orientation, int role) const override;

private:
  std::optional<TraceComparison> now_, before_;
};

} // namespace pipescope::gui
