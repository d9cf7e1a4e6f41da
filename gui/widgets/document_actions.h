#pragma once
// The File menu's work, out of the window: open and save plans, export the timeline (PNG, SVG,
// Chrome trace), import a measured trace and export it, and the recent files. It reads what it
// saves from the window's parts and reports by signal; the window only shows the results.
#include <QFutureWatcher>
#include <QObject>
#include <QString>
#include <QStringList>
#include <QTimer>
#include <atomic>
#include <functional>
#include <memory>

#include "engine/run_import.h"

#include "gui/explorer/explorer_snapshot.h"
#include "gui/widgets/published_runs_dialog.h"

class QAction;
class QMenu;
class QProgressDialog;
class QWidget;

namespace pipescope::gui {

class ControlsPanel;
class RunPanel;
class TimelineWidget;

class DocumentActions : public QObject {
  Q_OBJECT
public:
  /// What the actions read and write. `dialog_parent` parents the file dialogs.
  struct Parts {
    QWidget *dialog_parent = nullptr;
    ControlsPanel *controls = nullptr;
    TimelineWidget *timeline = nullptr;
    RunPanel *run_panel = nullptr;
    std::function<SnapshotPointer()> shown; ///< the snapshot on screen
  };
  /// With `use_settings`, recent files persist in QSettings.
  DocumentActions(const Parts &parts, bool use_settings, QObject *parent = nullptr);
  /// Cancels an import under way: the worker stops at its next poll.
  ~DocumentActions() override;

  /// Loads a plan file and emits planOpened; false (failed emitted) when it cannot be read.
  bool openPlan(const QString &path);
  /// Reads a Megatron-LM launch (a training script, a command line, a CI model_config.yaml or
  /// a training log; engine/model/megatron_args.h, megatron_log.h) on `gpus` GPUs (0: torchrun's
  /// or the log's, from the file) as a plan and emits planOpened; the status line counts the
  /// Megatron defaults taken, names the arguments not priced and gives a log's measured step.
  /// False (failed emitted, nothing changed) when it cannot be read.
  bool openMegatronLaunch(const QString &path, int gpus);
  /// Adds a hardware file to the hardware box and selects it (ControlsPanel::addHardwareFile);
  /// false (failed emitted, nothing changed) when it does not load.
  bool openHardwareFile(const QString &path);
  /// GPUs the launch's torchrun line gives (--nproc-per-node × --nnodes) or a log's world size,
  /// 0 if none.
  static int launchGpus(const QString &path);
  bool savePlanTo(const QString &path);
  bool exportPng(const QString &path);
  bool exportSvg(const QString &path);
  bool exportChromeTrace(const QString &path);
  /// Loads a measured trace into the run session; false (with the reason in the Run tab) when
  /// it cannot be read or is of another plan.
  bool importMeasuredTrace(const QString &path);
  /// Writes the measurement (as measured, in device time) as a Chrome trace.
  bool exportMeasuredChromeTrace(const QString &path);

  /// Imports a real training run (PyTorch profiler traces or Megatron-LM timer dumps: files or
  /// folders of them, engine/run_import.h) on a worker thread, with a progress dialog whose
  /// Cancel stops it. realRunImported follows on success; on failure the Run tab says why; a
  /// cancelled import changes nothing. False when an import is already under way.
  bool startRealRunImport(const QStringList &paths);
  /// Stops the import under way (the dialog's Cancel); it ends with realRunImportFinished(false).
  void cancelRealRunImport();
  bool importingRealRun() const { return import_watcher_ != nullptr; }
  /// Waits for the import under way to end, its signals delivered (headless use, tests).
  void waitForRealRunImport();
  /// Bytes read so far and in all by the import under way (what the progress dialog shows).
  std::pair<std::size_t, std::size_t> realRunImportProgress() const;

  /// Adds the file actions (with their shortcuts and dialogs) and the recent files to `menu`;
  /// the actions are also added to `shortcut_owner` so their shortcuts work everywhere.
  void addToMenu(QMenu *menu, QWidget *shortcut_owner);
  /// Enabled while there is a measurement to export.
  QAction *exportMeasuredAction() const { return export_measured_; }

signals:
  void planOpened(const pipescope::Plan &plan);
  /// File > Open published run chose a run: the window opens its plan beside its measurement.
  void publishedRunChosen(const pipescope::gui::PublishedRun &run);
  /// An operation failed; the message says why (for the window's banner).
  void failed(const QString &message);
  /// A line for the status bar.
  void message(const QString &text, int timeout_ms);
  /// Import shows the Run tab.
  void importStarted();
  /// A real run was imported: the window loads its plan and draws the run over the prediction.
  void realRunImported(const pipescope::ImportedRun &run);
  /// The real-run import ended: imported, or failed or cancelled (`imported` false).
  void realRunImportFinished(bool imported);

private:
  void addRecentFile(const QString &path);
  void rebuildRecentMenu();
  /// Reports a status' outcome: `done` on success, failed(message) otherwise.
  bool report(const Status &status, const QString &done);

  void finishRealRunImport();

  Parts parts_;
  // The real-run import under way: the worker's result, its progress (written by the worker,
  // read by the dialog's timer) and the cancel flag the worker polls.
  struct ImportState {
    std::atomic<std::size_t> done{0}, total{0};
    std::atomic<bool> cancelled{false};
  };
  std::shared_ptr<ImportState> import_state_;
  QFutureWatcher<Result<ImportedRun>> *import_watcher_ = nullptr;
  QProgressDialog *import_dialog_ = nullptr;
  QTimer import_progress_timer_;
  QStringList import_paths_;
  bool use_settings_ = true;
  QMenu *recent_menu_ = nullptr;
  QAction *export_measured_ = nullptr;
};

} // namespace pipescope::gui
