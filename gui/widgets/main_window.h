#pragma once
// The explorer window: controls on the left, the timeline with its transport bar in the middle,
// memory, mesh, explanation and comparison in tabs below it, the metrics on the right. Settings
// flow one way: controls -> Plan -> ExplorerEvaluator -> immutable snapshot -> every view.
#include <QElapsedTimer>
#include <QMainWindow>
#include <QTimer>
#include <cmath>
#include <optional>
#include <vector>

#include "engine/trace_matching.h"

#include "gui/explorer/explorer_evaluator.h"
#include "gui/explorer/explorer_snapshot.h"
#include "gui/widgets/published_runs_dialog.h"

class QLabel;
class QComboBox;
class QToolButton;
class QTabWidget;
class QMenu;
class QAction;
class QDockWidget;

namespace pipescope::gui {

class ControlsPanel;
class TimelineWidget;
class MetricsPanel;
class MemoryBarsChart;
class MemoryTimeView;
class ZoomStack;
class Playback;
class DocumentActions;
class MeshWidget;
class ExplainPanel;
class CompareView;
class RunPanel;
class SearchPanel;

/// How a measurement (a run's or an imported trace's) is drawn against the prediction.
enum class OverlayMode {
  Overlay,    ///< measured bars inside the predicted ops' outlines, on the same rows
  SideBySide, ///< the prediction, and below it the measured step, on the same axis
  Hidden,     ///< the prediction only
};

struct MainWindowOptions {
  /// Restore and store geometry, the last plan and recent files through QSettings.
  bool use_settings = true;
  /// Morph the timeline after parameter changes.
  bool animate = true;
};

class MainWindow : public QMainWindow {
  Q_OBJECT
public:
  explicit MainWindow(const MainWindowOptions &options = {}, QWidget *parent = nullptr);
  ~MainWindow() override;

  /// Shows a plan in the controls and evaluates it (a published run opened before is let go).
  void setPlan(const Plan &plan);
  /// Shows a published run's plan (File > Open published run) with its measurement beside the
  /// prediction in the Metrics panel, for as long as the settings are the published ones.
  void openPublishedRun(const PublishedRun &run);
  /// File operations (the DocumentActions'): false with the reason shown in the window.
  DocumentActions *documents() const { return documents_; }
  /// Loads a plan file; false (with the message in the window) when it cannot be read.
  bool openPlan(const QString &path);
  bool savePlanTo(const QString &path);
  bool exportPng(const QString &path);
  bool exportSvg(const QString &path);
  bool exportChromeTrace(const QString &path);
  /// Loads a measured trace and draws it over the prediction; false (with the reason in the
  /// Run tab) when it cannot be read or is of another plan.
  bool importMeasuredTrace(const QString &path);
  /// Writes the measurement (as measured, in device time) as a Chrome trace.
  bool exportMeasuredChromeTrace(const QString &path);
  /// Imports a real run (File > Import real run, engine/run_import.h), waits for it, shows its
  /// plan and draws the run over that plan's prediction; false (with the reason in the Run tab)
  /// when it cannot be read or shown. Headless use and tests; the menu imports without waiting.
  bool importRealRun(const QStringList &paths);
  /// Highlights the critical path on the timeline (View > Critical path).
  void setCriticalPathShown(bool shown);
  bool criticalPathShown() const;
  void setOverlayMode(OverlayMode mode);
  OverlayMode overlayMode() const;
  /// Which measured step the timeline shows; -1 = the latest (follows a run live).
  void setMeasuredStep(int step);
  int measuredStep() const;
  /// Waits for evaluations, comparisons and morphs to settle (tests, screenshots, benchmarks).
  void settle();
  /// Renders the whole window into an image.
  QImage renderWindow();

  ControlsPanel *controls() const { return controls_; }
  TimelineWidget *timeline() const { return timeline_; }
  MetricsPanel *metrics() const { return metrics_; }
  MemoryBarsChart *memoryBars() const { return memory_bars_; }
  MemoryTimeView *memoryTime() const { return memory_time_; }
  /// The zoom state the timeline, the memory-over-time view and the compare view follow.
  ZoomStack *zoomStack() const { return zoom_; }
  MeshWidget *mesh() const { return mesh_; }
  ExplainPanel *explain() const { return explain_; }
  CompareView *compare() const { return compare_; }
  RunPanel *runPanel() const { return run_panel_; }
  SearchPanel *search() const { return search_; }
  QTabWidget *tabs() const { return tabs_; }
  /// The settings (left) and metrics (right) docks; View > Settings / Metrics hides and shows
  /// each, so the explorer fits a narrower screen.
  QDockWidget *settingsDock() const { return settings_dock_; }
  QDockWidget *metricsDock() const { return metrics_dock_; }
  ExplorerEvaluator *evaluator() { return &evaluator_; }
  /// The last snapshot shown (the last one that evaluated without error).
  const SnapshotPointer &snapshot() const { return shown_; }
  /// The message shown for settings that cannot be evaluated (empty when they can).
  QString errorMessage() const;

  /// Playback: a playhead sweeps the step; the memory bars follow it.
  Playback *playback() const { return playback_; }
  void setPlaying(bool playing);
  bool playing() const;
  void setPlayhead(double time_us);
  double playhead() const;
  void stepPlayhead(int direction);
  void stopPlayback();

protected:
  void closeEvent(QCloseEvent *event) override;
  bool eventFilter(QObject *watched, QEvent *event) override;

private:
  void buildDocks();
  QWidget *buildCentralArea();
  void connectViews();
  void buildDocumentActions();
  Plan restoreSession();
  void buildMenus();
  QWidget *buildTransportBar();
  void requestEvaluation(const Plan &plan);
  void showSnapshot(const SnapshotPointer &snapshot);
  void showError(const QString &message);
  /// The timeline's sections from the shown snapshot and the measurement, if one applies.
  void rebuildTimeline(bool animate);
  void updateMeasuredControls();
  /// Drops calibrated per-stage costs that no longer fit an edited plan.
  Plan withoutStaleCalibration(const Plan &edited);
  void updateMemoryBars();
  void updateLegend();
  void updateTransportLabel();
  void storeSettings();

  MainWindowOptions options_;
  ExplorerEvaluator evaluator_;
  SnapshotPointer shown_;
  QString error_message_;
  bool first_snapshot_ = true;

  ControlsPanel *controls_ = nullptr;
  TimelineWidget *timeline_ = nullptr;
  MetricsPanel *metrics_ = nullptr;
  MemoryBarsChart *memory_bars_ = nullptr;
  MemoryTimeView *memory_time_ = nullptr;
  ZoomStack *zoom_ = nullptr;
  Playback *playback_ = nullptr;
  DocumentActions *documents_ = nullptr;
  MeshWidget *mesh_ = nullptr;
  ExplainPanel *explain_ = nullptr;
  CompareView *compare_ = nullptr;
  RunPanel *run_panel_ = nullptr;
  SearchPanel *search_ = nullptr;
  QTabWidget *tabs_ = nullptr;
  QWidget *measured_controls_ = nullptr;
  QComboBox *overlay_box_ = nullptr;
  QComboBox *measured_step_box_ = nullptr;
  QAction *run_action_ = nullptr;
  QAction *cancel_action_ = nullptr;
  QAction *calibrate_action_ = nullptr;
  QAction *critical_path_action_ = nullptr;
  QDockWidget *settings_dock_ = nullptr, *metrics_dock_ = nullptr;
  /// An imported real run waiting for its plan's snapshot, to be drawn over it.
  std::optional<MeasuredTraceFile> pending_run_;
  QLabel *banner_ = nullptr;
  QLabel *legend_ = nullptr;
  /// Whether the mouse hint fits on the legend's line beside its colours, for the colours and
  /// width it was measured at (updateLegend measures again only when one of them changes).
  QString legend_measured_colours_;
  int legend_measured_width_ = -1;
  bool legend_hint_fits_ = false;
  bool legend_colours_fit_ = true; ///< else the legend wraps between its colours
  QLabel *transport_label_ = nullptr;
  QLabel *busy_label_ = nullptr;
  QToolButton *play_button_ = nullptr;
  QComboBox *speed_box_ = nullptr;
};

} // namespace pipescope::gui
