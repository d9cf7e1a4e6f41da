#pragma once
// What the window suites share: a window that neither reads nor writes settings and does not
// animate, and the example plan on a model + hardware preset.
#include "engine/plan_file.h"
#include "gui/explorer/explorer_snapshot.h"
#include "gui/widgets/main_window.h"

namespace pipescope::gui::test {

inline MainWindowOptions quietOptions() {
  MainWindowOptions options;
  options.use_settings = false;
  options.animate = false;
  return options;
}

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

} // namespace pipescope::gui::test
