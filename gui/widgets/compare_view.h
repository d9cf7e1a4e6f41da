#pragma once
// Compare: two or more schedules for the same settings stacked on one time axis, and a chart of
// bubble against M for every schedule family. Evaluated on a worker thread while visible.
#include <QFutureWatcher>
#include <QWidget>
#include <optional>

#include "gui/charts/charts.h"
#include "gui/timeline/time_mapping.h"
#include "gui/timeline/timeline_model.h"

class QListWidget;
class QLabel;

namespace pipescope::gui {

class TimelineWidget;

struct ComparisonResult {
  std::vector<TimelineSection> sections; ///< one per schedule that accepts the settings
  QStringList refused;                   ///< "name: why" for those that do not
  std::vector<BubbleCurve> curves;       ///< bubble against M, every family
  QString subtitle;
};

/// The request a family gets when compared at a plan's settings: same P and M; V from the plan
/// where the family takes it, 2 where its placement fixes it, 1 otherwise.
ScheduleRequest comparisonRequest(const Plan &plan, const std::string &family);
/// The M values of the bubble-against-M curves for pipeline depth P.
std::vector<int> microbatchLadder(int pp, int current_microbatches);
/// Evaluates the chosen families (and, with `with_curves`, every family along the M ladder).
ComparisonResult computeComparison(const Plan &plan, const QStringList &families, bool with_curves);

class CompareView : public QWidget {
  Q_OBJECT
public:
  explicit CompareView(QWidget *parent = nullptr);
  void setPlan(const Plan &plan);
  /// Shows the time window of the window's zoom stack (fitted when it is fitted).
  void followZoom(const pipescope::gui::TimeMapping &mapping);
  QStringList checkedFamilies() const;
  void setCheckedFamilies(const QStringList &families);
  /// Blocks until the running comparison has been shown (tests, screenshots).
  void waitForIdle();
  TimelineWidget *timeline() const { return timeline_; }
  BubbleCurveChart *bubbleChart() const { return bubble_chart_; }
  QListWidget *familyList() const { return family_list_; }
  const ComparisonResult &result() const { return result_; }

protected:
  void showEvent(QShowEvent *event) override;

private:
  void recompute();
  void showResult();

  QListWidget *family_list_ = nullptr;
  TimelineWidget *timeline_ = nullptr;
  BubbleCurveChart *bubble_chart_ = nullptr;
  QLabel *refused_label_ = nullptr;
  QFutureWatcher<ComparisonResult> watcher_;
  std::optional<Plan> plan_;
  bool dirty_ = false;
  /// A computation was started and its finished signal has not been handled yet (the watcher
  /// stops running before that queued signal arrives).
  bool awaiting_result_ = false;
  bool curves_dirty_ = true;
  ComparisonResult result_;
};

} // namespace pipescope::gui
