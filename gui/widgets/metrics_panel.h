#pragma once
// The numbers of one snapshot: step time, both bubble metrics from the simulation beside the
// published closed form (and whether they agree), peak activations, communication by kind,
// tokens/s and MFU. Each value sits in a label with a stable object name ("metric_<key>") so
// tests read exactly what a person sees.
#include <QFutureWatcher>
#include <QMap>
#include <QWidget>
#include <optional>

#include "engine/model/validated_accuracy.h"
#include "gui/explorer/explorer_snapshot.h"
#include "gui/explorer/labels.h"
#include "gui/widgets/published_runs_dialog.h"

class QLabel;
class QGridLayout;
class QTimer;

namespace pipescope::gui {

/// Whether the simulation matches the analytic closed form, in words, and where it differs which
/// of the formula's assumptions this plan breaks (analyticDepartures), else the regime in which
/// it is exact. Needs evaluation.analytic.
QString analyticAgreement(const Evaluation &evaluation);

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
  /// Every shown row as plain text, a line each ("step time: 1.23 s"), under its section's
  /// title: what the panel's context menu copies (Copy all metrics). The values are not
  /// selectable with the mouse: a selectable label lays its text out as a rich-text document,
  /// and a dozen of them changing on every slider move cost more than the timeline's repaint.
  QString copyableText() const;
  /// One row's value as plain text (its rich-text markup removed); empty for an unknown key.
  QString plainValueText(const QString &key) const;
  /// Waits for the speed of light of the plan shown (worked out off the GUI thread after each
  /// snapshot, so a slider move does not wait for a second evaluation) and shows it.
  void waitForSpeedOfLight();
  /// Fits every row to its value again. While values change (a drag), a row that a value needs
  /// less of keeps its height, so the rows below do not jump on every move; the panel does this
  /// itself once the values have rested for 0.4 s.
  void fitRowsToValues();

protected:
  void contextMenuEvent(QContextMenuEvent *event) override;

private:
  QLabel *addRow(const QString &key, const QString &name, const QString &tooltip);
  QLabel *addSection(const QString &title);
  QGridLayout *grid_ = nullptr;
  void showPublishedRun();
  void showValidatedAccuracy(const ValidatedAccuracy &accuracy);
  /// Starts the speed of light of the snapshot shown, unless one is running: then the newest
  /// snapshot's starts when it ends (a drag queues one evaluation, not one per move).
  void startSpeedOfLight();
  void showSpeedOfLight();
  QFutureWatcher<std::optional<double>> *speed_of_light_ = nullptr;
  /// Starts the speed of light once the settings have stayed put a moment: a drag does not
  /// share the processor with evaluations whose results it would replace at once.
  QTimer *speed_of_light_delay_ = nullptr;
  QTimer *release_heights_ = nullptr;  ///< fits the rows to their values once the values rest
  SnapshotPointer speed_of_light_for_; ///< the snapshot the running evaluation is for
  QMap<QString, QLabel *> values_;
  QMap<QString, QLabel *> names_;
  SnapshotPointer snapshot_;
  std::optional<PublishedRun> published_;
  nlohmann::json published_plan_; ///< planToJson of the plan as opened
  int next_row_ = 0;
};

} // namespace pipescope::gui
