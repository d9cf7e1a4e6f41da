#pragma once
// What the window suites share: a window that neither reads nor writes settings and does not
// animate, the example plan on a model + hardware preset, and the explorer executable run
// offscreen as a person or a CI job would.
#include <QCoreApplication>
#include <QProcess>
#include <QStandardPaths>
#include <QString>
#include <QStringList>

#include "engine/plan_file.h"
#include "gui/explorer/explorer_snapshot.h"
#include "gui/widgets/main_window.h"

namespace pipescope::gui::testing {

/// Settings in the test location under the suite's own name, so suites never share or touch a
/// person's settings (call from initTestCase).
inline void useTestSettings(const char *suite) {
  QStandardPaths::setTestModeEnabled(true);
  QCoreApplication::setOrganizationName(QStringLiteral("pipescope-tests"));
  QCoreApplication::setApplicationName(QString::fromLatin1(suite));
}

inline MainWindowOptions quietOptions() {
  MainWindowOptions options;
  options.use_settings = false;
  options.animate = false;
  return options;
}

#ifdef PIPESCOPE_GUI_EXECUTABLE
/// Runs pipescope-gui offscreen; its exit code (-1 when it did not finish in two minutes), with
/// stdout and stderr together in `output`.
inline int runExplorer(const QStringList &arguments, QString *output) {
  QProcess process;
  QProcessEnvironment environment = QProcessEnvironment::systemEnvironment();
  environment.insert(QStringLiteral("QT_QPA_PLATFORM"), QStringLiteral("offscreen"));
  process.setProcessEnvironment(environment);
  process.setProcessChannelMode(QProcess::MergedChannels);
  process.start(QStringLiteral(PIPESCOPE_GUI_EXECUTABLE), arguments);
  if (!process.waitForFinished(120000)) return -1;
  *output = QString::fromUtf8(process.readAll());
  return process.exitCode();
}
#endif

/// The example plan (1F1B, P = 4, M = 8) with llama3-8b on H100 SXM.
inline Plan modelPlan() {
  Plan plan = examplePlan();
  auto model = loadModelSpec("llama3-8b");
  auto hardware = loadHardwareSpec("h100-sxm");
  if (!model || !hardware) qFatal("presets missing");
  plan.model = ModelSetup{*model, *hardware, TrainingSetup{}};
  plan.mesh.gpus_per_node = hardware->gpus_per_node;
  return plan;
}

} // namespace pipescope::gui::testing
