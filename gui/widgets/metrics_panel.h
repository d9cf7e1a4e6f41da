#pragma once
// The numbers of one snapshot: step time, both bubble metrics from the simulation beside the
// published closed form (and whether they agree), peak activations, communication by kind,
// tokens/s and MFU. Each value sits in a label with a stable object name ("metric_<key>") so
// tests read exactly what a person sees.
#include <QMap>
#include <QWidget>

#include "engine/model/validated_accuracy.h"
#include "gui/explorer/explorer_snapshot.h"
#include "gui/explorer/labels.h"
#include "gui/widgets/published_runs_dialog.h"

class QLabel;
class QGridLayout;

namespace pipescope::gui {

/// Whether the simulation matches the analytic closed form, in words.
QString analyticAgreement(const SimulationResult &simulation, const AnalyticMetrics &analytic);

class MetricsPanel : public QWidget {
  Q_OBJECT
public:
  explicit MetricsPanel(QWidget *parent = nullptr);
  void setSnapshot(const SnapshotPointer &snapshot);
  /// The published run the window opened (File > Open published run) and its plan as the
  /// controls first showed it: the "published" row then sets its measurement beside this
  /// prediction while the settings are the published ones, and says when they are not. None
  /// hides the row.
  void setPublishedRun(const std::optional<PublishedRun> &run, const Plan &as_opened = {});
  /// The text shown for a metric key ("step_time", "bubble_fraction", "bubble_fraction_analytic",
  /// "bubble_ratio", "bubble_ratio_analytic", "formula", "agreement", "peak_activations",
  /// "communication_tp", "communication_pp", "communication_dp", "tokens_per_s", "mfu",
  /// "ops", "evaluation_time", "published", "validated").
  QString valueText(const QString &key) const;

private:
  QLabel *addRow(const QString &key, const QString &name, const QString &tooltip);
  QLabel *addSection(const QString &title);
  QGridLayout *grid_ = nullptr;
  void showPublishedRun();
  void showValidatedAccuracy(const ValidatedAccuracy &accuracy);
  QMap<QString, QLabel *> values_;
  QMap<QString, QLabel *> names_;
  SnapshotPointer snapshot_;
  std::optional<PublishedRun> published_;
  nlohmann::json published_plan_; ///< planToJson of the plan as opened
  int next_row_ = 0;
};

} // namespace pipescope::gui
