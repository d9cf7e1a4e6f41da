#include "gui/widgets/document_actions.h"

#include <QAction>
#include <QFileDialog>
#include <QFileInfo>
#include <QMenu>
#include <QSettings>

#include "engine/output_file.h"
#include "engine/trace_file.h"
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
    : QObject(parent), parts_(parts), use_settings_(use_settings) {}

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
