#pragma once
// One immutable result of evaluating the window's settings. It is computed on the GUI thread
// for small settings and on a worker thread for large ones, then handed to every view as a
// shared pointer to const, so no view ever locks or sees a half-built result (STYLE.md §15).
#include <QString>
#include <memory>
#include <optional>
#include <vector>

#include "engine/evaluation.h"
#include "engine/model/model_setup.h"
#include "engine/plan_file.h"

namespace pipescope::gui {

/// How the bubble of one setting would move if one slider moved, for the Explain panel.
struct SliderEffect {
  QString control;      ///< "M", "P", "V"
  int from = 0, to = 0; ///< the slider value now and the one tried
  double bubble_fraction_from = 0, bubble_fraction_to = 0;
  int peak_inflight_from = 0, peak_inflight_to = 0; ///< rank 0, in activation sets
  /// With a model: what a planner weighs the bubble against. The step, tokens/s per GPU (the
  /// mesh's size moves with P) and the largest rank's memory, now and tried.
  bool with_model = false;
  double step_s_from = 0, step_s_to = 0;
  double tokens_per_gpu_from = 0, tokens_per_gpu_to = 0;
  double peak_gib_from = 0, peak_gib_to = 0;
};

struct ExplorerSnapshot {
  Plan plan;                                    ///< the settings this snapshot answers
  std::shared_ptr<const Evaluation> evaluation; ///< null when `error` is set
  std::optional<ModelDerivation> derivation;    ///< when the plan has a model
  std::optional<ModelReport> report;            ///< when the plan has a model
  QString error;                                ///< why the settings cannot be evaluated
  double compute_ms = 0;                        ///< wall time of the evaluation

  bool ok() const { return evaluation != nullptr; }
};

using SnapshotPointer = std::shared_ptr<const ExplorerSnapshot>;

/// How the bubble would move if M, P or V moved one step (the Explain panel's "Try it"): each
/// variant is a whole evaluation of a larger schedule (with a model, its costs derived again for
/// the new placement, and a custom layer layout spread over the new stage count, as the sliders
/// spread it), so it is computed when the panel is shown, not on every slider move. Plans up to
/// kResimulatedOpLimit ops; empty otherwise, or for a custom schedule.
std::vector<SliderEffect> sliderEffects(const ExplorerSnapshot &snapshot);

/// Rough op count of a plan's schedule, to decide between inline and worker evaluation.
std::size_t estimatedOpCount(const Plan &plan);

/// The largest plan (estimatedOpCount) whose variants the Explain panel re-simulates on the GUI
/// thread: the "Try it" slider steps and the closed form's departures. Each simulation of it
/// takes 1-2 ms (15 of them for the shares of four departures: about 25 ms).
inline constexpr std::size_t kResimulatedOpLimit = 20000;

/// Everything the window needs for one plan. Never throws; failures land in `error`.
SnapshotPointer computeSnapshot(const Plan &plan);

/// The built-in example plan (resources/plans/example-1f1b.json), or a 1F1B default when the
/// resource cannot be read.
Plan examplePlan();

/// Activation bytes (or, without a model, microbatch-equivalent activation sets) held by a rank
/// at a time, from the simulation's memory timeline.
double activationsAt(const SimulationResult &simulation, int rank, double time_us, bool bytes);

} // namespace pipescope::gui
