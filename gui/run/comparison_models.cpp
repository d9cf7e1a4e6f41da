#include "gui/run/comparison_models.h"

#include "gui/explorer/labels.h"
#include "gui/run/measurement.h"

namespace pipescope::gui {

namespace {

constexpr int kStepRows = 3; // step time, bubble fraction, bubble ratio

QVariant rightAligned() {
  return QVariant::fromValue(Qt::Alignment(Qt::AlignRight | Qt::AlignVCenter));
}

void copy(std::optional<TraceComparison> &target, const TraceComparison *source) {
  if (source)
    target = *source;
  else
    target.reset();
}

} // namespace

// ---------------------------------------------------------------------------------------------

void StepErrorModel::setComparisons(const TraceComparison *now, const TraceComparison *before) {
  beginResetModel();
  copy(now_, now);
  copy(before_, now ? before : nullptr);
  endResetModel();
}

int StepErrorModel::rowCount(const QModelIndex &parent) const {
  return parent.isValid() ? 0 : kStepRows;
}

int StepErrorModel::columnCount(const QModelIndex &parent) const {
  return parent.isValid() ? 0 : before_ ? 5 : 3;
}

const TraceComparison *StepErrorModel::columnComparison(int column, bool &error) const {
  error = column % 2 == 0;
  if (column == 0 || !now_) return nullptr;
  if (before_ && column <= 2) return &*before_;
  return &*now_;
}

QVariant StepErrorModel::data(const QModelIndex &index, int role) const {
  if (!index.isValid() || !now_) return {};
  if (role == Qt::TextAlignmentRole) return rightAligned();
  const int row = index.row();
  bool error = false;
  const TraceComparison *comparison = columnComparison(index.column(), error);
  if (role == Qt::ToolTipRole) {
    if (index.column() == 0 && row == 0)
      return tr("The median measured step (by step time), in planned time");
    if (!comparison || !error) return {};
    return row == 0 ? tr("(measured \u2212 predicted) / predicted")
                    : tr("measured \u2212 predicted, in percentage points");
  }
  if (role != Qt::DisplayRole) return {};
  if (!comparison) { // measured
    const auto &measured = now_->measured;
    return row == 0   ? formatDuration(measured.makespan_us)
           : row == 1 ? formatPercent(measured.bubble_fraction)
                      : formatPercent(measured.bubble_ratio);
  }
  if (!error) {
    const auto &predicted = comparison->predicted;
    return row == 0   ? formatDuration(predicted.makespan_us)
           : row == 1 ? formatPercent(predicted.bubble_fraction)
                      : formatPercent(predicted.bubble_ratio);
  }
  return row == 0   ? formatSignedPercent(comparison->makespan_relative_error)
         : row == 1 ? formatPointDifference(comparison->bubble_fraction_difference)
                    : formatPointDifference(comparison->bubble_ratio_difference);
}

QVariant StepErrorModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (orientation == Qt::Vertical) {
    if (role == Qt::DisplayRole)
      return section == 0   ? tr("Step time")
             : section == 1 ? tr("Bubble fraction")
                            : tr("Bubble ratio");
    if (role == Qt::ToolTipRole && section == 1)
      return tr("bubble_fraction = 1 \u2212 \u03a3 busy / (P\u00b7T): idle share of the step");
    if (role == Qt::ToolTipRole && section == 2)
      return tr("bubble_ratio = (P\u00b7T \u2212 \u03a3 busy) / \u03a3 busy: idle time per unit "
                "of compute");
    if (role == Qt::TextAlignmentRole)
      return QVariant::fromValue(Qt::Alignment(Qt::AlignLeft | Qt::AlignVCenter));
    return {};
  }
  if (role == Qt::TextAlignmentRole) return rightAligned();
  if (role != Qt::DisplayRole) return {};
  if (section == 0) return tr("Measured");
  if (!before_) return section == 1 ? tr("Predicted") : tr("Error");
  switch (section) {
  case 1: return tr("Predicted\nbefore");
  case 2: return tr("Error\nbefore");
  case 3: return tr("Predicted\nafter");
  default: return tr("Error\nafter");
  }
}

// ---------------------------------------------------------------------------------------------

void KindErrorModel::setComparisons(const TraceComparison *now, const TraceComparison *before) {
  beginResetModel();
  copy(now_, now);
  copy(before_, now ? before : nullptr);
  endResetModel();
}

int KindErrorModel::rowCount(const QModelIndex &parent) const {
  return parent.isValid() || !now_ ? 0 : static_cast<int>(now_->kinds.size());
}

int KindErrorModel::columnCount(const QModelIndex &parent) const {
  return parent.isValid() ? 0 : before_ ? 4 : 2;
}

QVariant KindErrorModel::data(const QModelIndex &index, int role) const {
  if (!index.isValid() || !now_) return {};
  if (role == Qt::TextAlignmentRole) return rightAligned();
  const TraceComparison &comparison = before_ && index.column() < 2 ? *before_ : *now_;
  const auto row = static_cast<std::size_t>(index.row());
  if (row >= comparison.kinds.size()) return {};
  const KindError &entry = comparison.kinds[row];
  const bool worst = index.column() % 2 == 1;
  if (role == Qt::ToolTipRole)
    return worst ? tr("the largest |measured \u2212 predicted| / predicted over the op's instances")
                 : tr("median signed error %1: measured %2 than predicted")
                       .arg(formatSignedPercent(entry.median_signed_error),
                            entry.median_signed_error >= 0 ? tr("slower") : tr("faster"));
  if (role != Qt::DisplayRole) return {};
  return formatPercent(worst ? entry.worst_relative_error : entry.median_relative_error);
}

QVariant KindErrorModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (orientation == Qt::Vertical) {
    if (role == Qt::DisplayRole && now_ && section < static_cast<int>(now_->kinds.size())) {
      const KindError &entry = now_->kinds[static_cast<std::size_t>(section)];
      return tr("%1 (%n ops)", nullptr, entry.count).arg(opKindShortLegend(entry.kind));
    }
    if (role == Qt::TextAlignmentRole)
      return QVariant::fromValue(Qt::Alignment(Qt::AlignLeft | Qt::AlignVCenter));
    return {};
  }
  if (role == Qt::TextAlignmentRole) return rightAligned();
  if (role == Qt::ToolTipRole)
    return tr("|measured \u2212 predicted| / predicted duration of each op, its median over the "
              "measured steps");
  if (role != Qt::DisplayRole) return {};
  if (!before_) return section == 0 ? tr("Median |error|") : tr("Worst |error|");
  switch (section) {
  case 0: return tr("Median\nbefore");
  case 1: return tr("Worst\nbefore");
  case 2: return tr("Median\nafter");
  default: return tr("Worst\nafter");
  }
}

} // namespace pipescope::gui
