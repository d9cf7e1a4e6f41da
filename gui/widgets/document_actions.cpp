#include "gui/widgets/document_actions.h"

#include <QAction>
#include <QCoreApplication>
#include <QFileDialog>
#include <QFileInfo>
#include <QInputDialog>
#include <QMenu>
#include <QProgressDialog>
#include <QSettings>
#include <QtConcurrent>

#include "engine/json_io.h"
#include "engine/model/megatron_args.h"
#include "engine/model/megatron_log.h"
#include "engine/output_file.h"
#include "engine/trace_file.h"
#include "gui/explorer/labels.h"
#include "gui/timeline/svg_export.h"
#include "gui/widgets/controls_panel.h"
#include "gui/widgets/run_panel.h"
#include "gui/widgets/timeline_widget.h"

namespace pipescope::gui {

namespace {
constexpr int kMaxRecentFiles = 8;
constexpr int kMessageMs = 5000;
constexpr int kWarningMs = 8000;
const QString kRecentFilesKey = QStringLiteral("files/recent");
} // namespace

DocumentActions::DocumentActions(const Parts &parts, bool use_settings, QObject *parent)
    : QObject(parent), parts_(parts), use_settings_(use_settings) {
  import_progress_timer_.setInterval(100);
  connect(&import_progress_timer_, &QTimer::timeout, this, [this] {
    if (!import_dialog_ || !import_state_) return;
    // The dialog counts in KiB so that a multi-gigabyte run fits its int range.
    const auto [done, total] = realRunImportProgress();
    import_dialog_->setMaximum(static_cast<int>(std::max<std::size_t>(total / 1024, 1)));
    import_dialog_->setValue(static_cast<int>(std::min(done, total) / 1024));
    import_dialog_->setLabelText(tr("Reading %1 of %2 MB\u2026")
                                     .arg(static_cast<double>(done) / 1e6, 0, 'f', 1)
                                     .arg(static_cast<double>(total) / 1e6, 0, 'f', 1));
  });
}

DocumentActions::~DocumentActions() {
  cancelRealRunImport();
}

bool DocumentActions::report(const Status &status, const QString &done) {
  if (!status) {
    emit failed(QString::fromStdString(status.error().message));
    return false;
  }
  emit message(done, kMessageMs);
  return true;
}

bool DocumentActions::openPlan(const QString &path) {
  auto plan = loadPlan(path.toStdString());
  if (!plan) {
    emit failed(QString::fromStdString(plan.error().message));
    return false;
  }
  emit planOpened(*plan);
  addRecentFile(path);
  emit message(tr("Opened %1").arg(path), kMessageMs);
  return true;
}

bool DocumentActions::openHardwareFile(const QString &path) {
  return report(parts_.controls->addHardwareFile(path),
                tr("Hardware %1: the costs now come from its curves and links").arg(path));
}

bool DocumentActions::openMegatronLaunch(const QString &path, int gpus) {
  auto text = readTextFile(path.toStdString());
  if (!text) {
    emit failed(QString::fromStdString(text.error().message));
    return false;
  }
  MegatronTarget target;
  target.gpus = gpus;
  target.name = launchName(path.toStdString());
  std::optional<MegatronLog> log;
  auto launch = readMegatronLaunchOrLog(*text, target, &log);
  if (!launch) {
    emit failed(path + QStringLiteral(": ") + QString::fromStdString(launch.error().message));
    return false;
  }
  // A log also says what a step took: the run opens as a published run does, Metrics then
  // setting the measurement beside the prediction.
  QString measured;
  std::optional<MegatronLogStep> step;
  if (log)
    if (auto logged = measuredStep(log->iterations)) step = *logged;
  if (step) {
    PublishedRun run;
    run.set_name = path.toStdString();
    run.set_title = tr("Megatron-LM log %1: the median of iterations %2-%3")
                        .arg(QFileInfo(path).fileName())
                        .arg(step->first_kept)
                        .arg(step->last_kept)
                        .toStdString();
    run.row = launch->configuration;
    run.row.id = target.name;
    run.row.measured_step_s = step->step_s;
    run.row.measured_how = "the log's median elapsed time per iteration";
    emit publishedRunChosen(run);
    measured = tr("; the log measured %1 a step").arg(formatDuration(step->step_s * 1e6));
  } else {
    emit planOpened(validationCasePlan(launch->configuration));
  }
  QStringList unpriced;
  for (const auto &line : launch->translation.not_priced)
    unpriced << QString::fromStdString(line.substr(0, line.find(':')));
  const int world = launch->configuration.mesh.worldSize();
  emit message(tr("Opened the Megatron-LM %1 %2 on %3: %4 of Megatron's defaults taken%5 "
                  "(pipescope megatron lists them)%6")
                   .arg(log ? tr("log") : tr("launch"), path,
                        world == 1 ? tr("1 GPU") : tr("%1 GPUs").arg(world))
                   .arg(launch->translation.assumed.size())
                   .arg(unpriced.isEmpty()
                            ? QString()
                            : tr("; not priced: %1").arg(unpriced.join(QStringLiteral(", "))),
                        measured),
               kMessageMs);
  return true;
}

int DocumentActions::launchGpus(const QString &path) {
  auto text = readTextFile(path.toStdString());
  if (!text) return 0;
  if (looksLikeMegatronLog(*text)) {
    auto log = parseMegatronLog(*text);
    return log ? log->world_size : 0;
  }
  auto arguments = parseMegatronArguments(*text);
  return arguments ? torchrunWorldSize(*arguments) : 0;
}

bool DocumentActions::savePlanTo(const QString &path) {
  if (!report(savePlan(path.toStdString(), parts_.controls->plan()), tr("Saved %1").arg(path)))
    return false;
  addRecentFile(path);
  return true;
}

bool DocumentActions::exportPng(const QString &path) {
  if (!parts_.timeline->grab().save(path, "PNG")) {
    emit failed(tr("could not write the PNG file %1").arg(path));
    return false;
  }
  emit message(tr("Exported %1").arg(path), kMessageMs);
  return true;
}

bool DocumentActions::exportSvg(const QString &path) {
  const TimelineWidget *timeline = parts_.timeline;
  const QString svg = timelineSvg(timeline->model(), timeline->mapping(), timeline->size());
  return report(writeTextFile(path.toStdString(), svg.toStdString()), tr("Exported %1").arg(path));
}

bool DocumentActions::exportChromeTrace(const QString &path) {
  const SnapshotPointer shown = parts_.shown();
  if (!shown) return false;
  return report(
      saveChromeTrace(path.toStdString(), traceFromEvaluation(shown->plan, *shown->evaluation)),
      tr("Exported %1").arg(path));
}

bool DocumentActions::importMeasuredTrace(const QString &path) {
  emit importStarted();
  auto file = loadMeasuredTrace(path.toStdString());
  if (!file) {
    parts_.run_panel->showImportFailure(QString::fromStdString(file.error().message));
    emit message(tr("Could not import %1").arg(path), kWarningMs);
    return false;
  }
  auto status = parts_.run_panel->importTrace(*file);
  if (!status) {
    emit message(tr("Not imported: %1").arg(QString::fromStdString(status.error().message)), 10000);
    return false;
  }
  emit message(tr("Imported %1").arg(path), kMessageMs);
  return true;
}

bool DocumentActions::exportMeasuredChromeTrace(const QString &path) {
  if (!parts_.run_panel->hasMeasurement()) {
    emit message(tr("No measurement to export: run the plan or import a measured trace first"),
                 kWarningMs);
    return false;
  }
  return report(saveChromeTrace(path.toStdString(), parts_.run_panel->measurement()->deviceTrace()),
                tr("Exported %1").arg(path));
}

bool DocumentActions::startRealRunImport(const QStringList &paths) {
  if (import_watcher_) {
    emit message(tr("An import is under way; cancel it or wait for it to finish"), kWarningMs);
    return false;
  }
  import_paths_ = paths;
  import_state_ = std::make_shared<ImportState>();
  std::vector<std::string> files;
  for (const QString &path : paths)
    files.push_back(path.toStdString());
  ImportOptions options;
  // The worker writes only these atomics; the dialog reads them on the GUI thread.
  const std::shared_ptr<ImportState> state = import_state_;
  options.progress = [state](std::size_t done, std::size_t total) {
    state->total = total;
    state->done = done;
  };
  options.cancelled = [state] { return state->cancelled.load(); };
  import_watcher_ = new QFutureWatcher<Result<ImportedRun>>(this);
  connect(import_watcher_, &QFutureWatcherBase::finished, this,
          &DocumentActions::finishRealRunImport);
  import_dialog_ =
      new QProgressDialog(tr("Reading the run\u2026"), tr("Cancel"), 0, 1, parts_.dialog_parent);
  import_dialog_->setWindowTitle(tr("Import real run"));
  import_dialog_->setWindowModality(Qt::WindowModal);
  import_dialog_->setMinimumDuration(400); // a small run imports before it would flash
  import_dialog_->setAutoClose(false);
  import_dialog_->setAutoReset(false);
  connect(import_dialog_, &QProgressDialog::canceled, this, &DocumentActions::cancelRealRunImport);
  import_progress_timer_.start();
  emit message(tr("Importing %1\u2026").arg(paths.join(QStringLiteral(", "))), 0);
  import_watcher_->setFuture(
      QtConcurrent::run([files, options] { return importRun(files, options); }));
  return true;
}

void DocumentActions::cancelRealRunImport() {
  if (import_state_) import_state_->cancelled = true;
}

std::pair<std::size_t, std::size_t> DocumentActions::realRunImportProgress() const {
  if (!import_state_) return {0, 0};
  return {import_state_->done.load(), import_state_->total.load()};
}

void DocumentActions::waitForRealRunImport() {
  while (import_watcher_) {
    import_watcher_->waitForFinished();
    QCoreApplication::processEvents();
  }
}

void DocumentActions::finishRealRunImport() {
  import_progress_timer_.stop();
  Result<ImportedRun> result = import_watcher_->result();
  const bool cancelled = import_state_->cancelled.load();
  import_watcher_->deleteLater();
  import_watcher_ = nullptr;
  import_state_.reset();
  if (import_dialog_) {
    import_dialog_->hide();
    import_dialog_->deleteLater();
    import_dialog_ = nullptr;
  }
  const QString paths = import_paths_.join(QStringLiteral(", "));
  if (cancelled) {
    // Nothing read is kept: the window shows what it showed before.
    emit message(tr("Import cancelled"), kMessageMs);
    emit realRunImportFinished(false);
    return;
  }
  if (!result) {
    emit importStarted();
    parts_.run_panel->showImportFailure(QString::fromStdString(result.error().message));
    emit message(tr("Could not import %1").arg(paths), kWarningMs);
    emit realRunImportFinished(false);
    return;
  }
  emit importStarted();
  emit realRunImported(*result);
  const ImportSummary &summary = result->summary;
  emit message(tr("Imported %1: P=%2, M=%3, V=%4, %5 ops, %6 step(s), %7 timing")
                   .arg(paths)
                   .arg(summary.pp)
                   .arg(summary.microbatches)
                   .arg(summary.virtual_stages)
                   .arg(summary.ops)
                   .arg(summary.steps.size())
                   .arg(QString::fromStdString(summary.timing)),
               kMessageMs);
  emit realRunImportFinished(true);
}

void DocumentActions::addToMenu(QMenu *file, QWidget *shortcut_owner) {
  QWidget *dialogs = parts_.dialog_parent;
  auto add = [this, file, shortcut_owner](const QString &text, const QKeySequence &keys,
                                          auto slot) {
    QAction *action = file->addAction(text);
    action->setShortcut(keys);
    action->setShortcutContext(Qt::WindowShortcut);
    connect(action, &QAction::triggered, this, slot);
    shortcut_owner->addAction(action);
    return action;
  };
  // A file chosen in a dialog, then the operation on it.
  auto saving = [this, dialogs](const QString &title, const QString &name, const QString &filter,
                                bool (DocumentActions::*operation)(const QString &)) {
    return [this, dialogs, title, name, filter, operation] {
      const QString path = QFileDialog::getSaveFileName(dialogs, title, name, filter);
      if (!path.isEmpty()) (this->*operation)(path);
    };
  };
  auto opening = [this, dialogs](const QString &title, const QString &filter,
                                 bool (DocumentActions::*operation)(const QString &)) {
    return [this, dialogs, title, filter, operation] {
      const QString path = QFileDialog::getOpenFileName(dialogs, title, QString(), filter);
      if (!path.isEmpty()) (this->*operation)(path);
    };
  };
  add(tr("&Open plan\u2026"), QKeySequence::Open,
      opening(tr("Open plan"), tr("Plans (*.json);;All files (*)"), &DocumentActions::openPlan));
  recent_menu_ = file->addMenu(tr("Open &recent"));
  add(tr("Open p&ublished run\u2026"), QKeySequence(tr("Ctrl+Shift+O")), [this, dialogs] {
    PublishedRunsDialog dialog(dialogs, use_settings_);
    // A hardware file calibrated on the user's runs joins the hardware box at once.
    connect(&dialog, &PublishedRunsDialog::hardwareCalibrated, this,
            [this](const QString &path) { openHardwareFile(path); });
    if (dialog.exec() != QDialog::Accepted) return;
    if (auto run = dialog.selected()) emit publishedRunChosen(*run);
  });
  add(tr("Open &Megatron-LM launch\u2026"), QKeySequence(), [this, dialogs] {
    const QString path = QFileDialog::getOpenFileName(
        dialogs,
        tr("Open Megatron-LM launch: a training script, a command line, a CI "
           "model_config.yaml or a training log"),
        QString(), tr("Launches and logs (*.sh *.yaml *.yml *.txt *.log);;All files (*)"));
    if (path.isEmpty()) return;
    const int from_file = launchGpus(path);
    bool ok = false;
    const int gpus = QInputDialog::getInt(
        dialogs, tr("GPUs of the launch"),
        tr("World size (GPUs) the launch runs on%1:")
            .arg(from_file > 0 ? tr(" (from the file: torchrun's, or the log's)") : QString()),
        from_file > 0 ? from_file : 8, 1, kMaxWorldSize, 1, &ok);
    if (ok) openMegatronLaunch(path, gpus);
  });
  add(tr("Open &hardware file\u2026"), QKeySequence(),
      opening(tr("Open hardware file: a pipescope.hardware JSON, e.g. from pipescope calibrate"),
              tr("Hardware files (*.json);;All files (*)"), &DocumentActions::openHardwareFile));
  add(tr("&Save plan\u2026"), QKeySequence::Save,
      saving(tr("Save plan"), QStringLiteral("plan.json"), tr("Plans (*.json)"),
             &DocumentActions::savePlanTo));
  file->addSeparator();
  add(tr("Export timeline as &PNG\u2026"), QKeySequence(tr("Ctrl+E")),
      saving(tr("Export PNG"), QStringLiteral("timeline.png"), tr("PNG (*.png)"),
             &DocumentActions::exportPng));
  add(tr("Export timeline as S&VG\u2026"), QKeySequence(tr("Ctrl+Shift+E")),
      saving(tr("Export SVG"), QStringLiteral("timeline.svg"), tr("SVG (*.svg)"),
             &DocumentActions::exportSvg));
  add(tr("Export &Chrome trace\u2026"), QKeySequence(tr("Ctrl+Shift+T")),
      saving(tr("Export Chrome trace"), QStringLiteral("trace.json"), tr("Chrome trace (*.json)"),
             &DocumentActions::exportChromeTrace));
  file->addSeparator();
  add(tr("&Import measured trace\u2026"), QKeySequence(tr("Ctrl+I")),
      opening(tr("Import measured trace"), tr("Traces (*.json);;All files (*)"),
              &DocumentActions::importMeasuredTrace));
  // A real run: its rank files (one dialog, several files), or the folder that holds them.
  add(tr("Import real &run (files)\u2026"), QKeySequence(tr("Ctrl+Shift+I")), [this, dialogs] {
    const QStringList paths = QFileDialog::getOpenFileNames(
        dialogs, tr("Import real run: the ranks' profiler traces or Megatron timer dumps"),
        QString(), tr("Profiler traces and timer dumps (*.json *.json.gz *.gz);;All files (*)"));
    if (!paths.isEmpty()) startRealRunImport(paths);
  });
  add(tr("Import real run (&folder)\u2026"), QKeySequence(), [this, dialogs] {
    const QString folder = QFileDialog::getExistingDirectory(
        dialogs, tr("Import real run: the folder of the ranks' traces"));
    if (!folder.isEmpty()) startRealRunImport({folder});
  });
  export_measured_ =
      add(tr("Export &measured trace as Chrome trace\u2026"), QKeySequence(),
          saving(tr("Export measured trace"), QStringLiteral("measured-trace.json"),
                 tr("Chrome trace (*.json)"), &DocumentActions::exportMeasuredChromeTrace));
  export_measured_->setEnabled(false);
  rebuildRecentMenu();
}

void DocumentActions::addRecentFile(const QString &path) {
  if (!use_settings_) return;
  QSettings settings;
  QStringList files = settings.value(kRecentFilesKey).toStringList();
  const QString absolute = QFileInfo(path).absoluteFilePath();
  files.removeAll(absolute);
  files.prepend(absolute);
  while (files.size() > kMaxRecentFiles)
    files.removeLast();
  settings.setValue(kRecentFilesKey, files);
  rebuildRecentMenu();
}

void DocumentActions::rebuildRecentMenu() {
  if (!recent_menu_) return;
  recent_menu_->clear();
  const QStringList files =
      use_settings_ ? QSettings().value(kRecentFilesKey).toStringList() : QStringList();
  for (const QString &path : files)
    connect(recent_menu_->addAction(path), &QAction::triggered, this,
            [this, path] { openPlan(path); });
  recent_menu_->setEnabled(!files.isEmpty());
}

} // namespace pipescope::gui
