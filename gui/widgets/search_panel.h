#pragma once
// The Search tab: the planner (engine/planner/search.h) from the explorer. The search runs on a
// worker thread with progress and cancel; its results are a scatter chart of tokens/s against
// peak memory (one series per schedule, the Pareto front drawn) and a ranked table. Clicking a
// point or a row loads that plan into the explorer.
#include <QFutureWatcher>
#include <QWidget>
#include <atomic>
#include <memory>
#include <optional>

#include "engine/model/validated_accuracy.h"
#include "engine/planner/search.h"

class QComboBox;
class QDoubleSpinBox;
class QLabel;
class QListWidget;
class QProgressBar;
class QPushButton;
class QSpinBox;
class QShowEvent;
class QMenu;
class QSplitter;
class QTableWidget;

namespace pipescope::gui {

class SearchScatterChart;

class SearchPanel : public QWidget {
  Q_OBJECT
public:
  explicit SearchPanel(QWidget *parent = nullptr);
  ~SearchPanel() override;

  /// The ranked table's columns: the figures a ranking is read by first, so a narrow window
  /// still shows them, then the configuration (each row's tooltip has all of it).
  enum Column {
    kTokensPerSecond,
    kStepMs,
    kMesh,
    kSchedule,
    kPeakGib,
    kMicrobatches,
    kMicrobatchSize,
    kRecompute,
    kZeroStage,
    kAsFast, ///< configurations as fast as the row (double-click lists them)
    kColumnCount
  };

  /// Takes the model, hardware, GPUs (DP × TP × PP), sequence and memory of a plan as the
  /// search's starting point (plans without a model keep the current presets); settings taken
  /// before are left alone, so edits made in the tab stay.
  void takeSettingsFrom(const Plan &plan);
  /// The request the inputs describe, or the reason they describe none.
  Result<SearchRequest> request() const;

  /// Starts a search with the inputs (false, with the reason in the status, when it cannot).
  bool startSearch();
  void cancelSearch();
  bool running() const;
  /// Waits for a running search to end (headless use and tests).
  void waitForSearch();

  /// The last finished search, if any.
  const std::optional<SearchResult> &result() const { return result_; }
  /// The plans on the chart and in the table: the ranked plans, then Pareto plans not in them.
  const std::vector<SearchPlan> &shownPlans() const { return shown_; }
  /// Loads shown plan `index` into the explorer (what a click on its point or row does).
  void loadShownPlan(int index);
  /// The configurations as fast as ranked plan `row` (SearchPlan::alike), one action each that
  /// loads it: what a double-click on the row's "as fast" cell pops up. Null where there are
  /// none. Rebuilt each call; the panel owns it.
  QMenu *alikeMenu(int row);

  SearchScatterChart *chart() const { return chart_; }
  QTableWidget *table() const { return table_; }
  QProgressBar *progressBar() const { return progress_; }
  QLabel *status() const { return status_; }
  QSpinBox *gpusBox() const { return gpus_; }
  QSpinBox *globalBatchBox() const { return global_batch_; }
  QSpinBox *sequenceBox() const { return sequence_; }
  QSpinBox *topBox() const { return top_; }
  QDoubleSpinBox *memoryLimitBox() const { return memory_limit_; }
  QComboBox *modelBox() const { return model_; }
  QComboBox *hardwareBox() const { return hardware_; }
  QListWidget *scheduleList() const { return schedules_; }
  /// Checks exactly these families (names as in `pipescope schedules`).
  void setSchedules(const std::vector<std::string> &names);

protected:
  void showEvent(QShowEvent *event) override;
  void resizeEvent(QResizeEvent *event) override;

signals:
  void planChosen(const pipescope::Plan &plan);
  void runningChanged(bool running);

private:
  void showProgress(const SearchProgress &progress);
  void finished();
  void showResult();
  /// Gives the ranked table the width its columns need and the chart the rest, or where that
  /// leaves no readable chart puts the table under it; until the user moves the splitter.
  void fitTableWidth();
  ValidatedAccuracy shownAccuracy() const;
  QString validatedAccuracyNote() const;
  /// " #1 is N× its speed of light ..." for the status line (empty without a result).
  QString speedOfLightNote() const;
  void setRunning(bool running);

  std::optional<SearchRequest> running_request_;
  std::optional<SearchRequest> shown_request_;
  std::optional<SearchResult> result_;
  std::vector<SearchPlan> shown_;
  std::shared_ptr<std::atomic<bool>> cancel_;
  std::shared_ptr<std::optional<Result<SearchResult>>> outcome_;
  QFutureWatcher<void> watcher_;
  /// From startSearch until its results are shown (the watcher's finished signal handled).
  bool busy_ = false;

  QComboBox *model_ = nullptr, *hardware_ = nullptr;
  QSpinBox *gpus_ = nullptr, *global_batch_ = nullptr, *sequence_ = nullptr, *top_ = nullptr;
  QDoubleSpinBox *memory_limit_ = nullptr;
  QListWidget *schedules_ = nullptr;
  QPushButton *run_ = nullptr;
  QProgressBar *progress_ = nullptr;
  QLabel *status_ = nullptr;
  SearchScatterChart *chart_ = nullptr;
  QTableWidget *table_ = nullptr;
  QSplitter *results_ = nullptr;
  QMenu *alike_menu_ = nullptr;
  bool sized_ = false;
  bool user_sized_ = false; ///< the user dragged the splitter: keep their sizes
  QString taken_from_;      ///< the controls' settings last taken (takeSettingsFrom)
  /// The explorer's GEMM precision and all-reduce algorithm, which every candidate runs with (as
  /// `pipescope search --fp8 --collective-algorithm` pass them through; not searched).
  GemmPrecision gemm_precision_ = GemmPrecision::Bf16;
  CollectiveAlgorithm collective_algorithm_ = CollectiveAlgorithm::Auto;
  std::string moe_dispatcher_ = "alltoall";
  int moe_dispatcher_sms_ = 0;
  double moe_layer_host_us_ = -1;
  bool tp_comm_overlap_ = false, tp_backward_overlap_ = false, fp32_gradients_ = false;
  /// The explorer's own hardware (a file it opened, e.g. one pipescope calibrate fitted, keeps
  /// its preset's name): the search runs on it while the hardware box shows its name.
  std::optional<HardwareSpec> plan_hardware_;
};

} // namespace pipescope::gui
