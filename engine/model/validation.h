#pragma once
// The cost model against published measurements (docs/validation.md, DESIGN.md §5a): each row is
// a configuration someone ran and measured, with its source; the engine predicts the same run
// with the shipped hardware preset of its GPU type (never a per-row figure) and reports the error.
#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "engine/model/model_setup.h"
#include "engine/plan_file.h"
#include "engine/result.h"
#include "engine/schedule.h"

namespace pipescope {

/// One published run.
struct ValidationCase {
  std::string id;
  std::string published;     ///< the row as the source prints it
  std::string hardware_name; ///< the preset used (one per GPU type)
  ModelSetup setup;
  Mesh mesh;
  ScheduleRequest request;
  /// Iteration time measured or derived from the published rate; 0 for a row that checks memory
  /// only (its published rate is no check, e.g. on a GPU whose peak is not published).
  double measured_step_s = 0;
  std::string measured_how; ///< how measured_step_s follows from the published figure
  /// Why the measured time is not what the configuration costs, with the source that says so
  /// (e.g. the software's maintainers filing it as a regression of that release); empty for a
  /// row that counts. A row set aside is still predicted and shown with its error, but kept out
  /// of every mean and worst over rows, the layout ranking and the rows a fit uses by default.
  std::string set_aside;
  std::optional<double> measured_memory_gib; ///< peak memory per GPU (GiB) where published
  std::string memory_how; ///< what the published memory figure is (e.g. peak reserved)
  /// The pipeline rank whose GPU the published memory is from (-1: the busiest rank). Megatron
  /// logs memory to TensorBoard on its last rank, world − 1, on the last pipeline stage.
  int memory_pipeline_rank = -1;
};

/// A file of published runs ("pipescope.validation"): a title, the source every row cites.
struct ValidationSet {
  std::string name; ///< the file's stem
  std::string title;
  std::string source;
  std::vector<ValidationCase> cases;
};

struct ValidationResult {
  const ValidationCase *validation_case = nullptr;
  double predicted_step_s = 0;
  std::optional<double> step_error; ///< (predicted - measured) / measured, if time is measured
  double predicted_memory_gib = 0;  ///< the busiest rank's total
  std::optional<double> memory_error;
  /// The same configuration at its speed of light (speedOfLightSetup): no measured step can be
  /// below it, so one that is names a row whose published configuration is not what ran (or an
  /// overlap the model misses); how far above it a run lands is its distance from the hardware.
  /// 0 where not asked for (predictValidationCase's with_speed_of_light).
  double speed_of_light_step_s = 0;
  /// What the prediction is made of, to tell why a row errs: the step's report (MFU,
  /// communication per kind with what of it is exposed) and each stage's F, I and W by part.
  ModelReport report;
  std::vector<StageBreakdown> stage_breakdown;
  std::vector<LayerOp> layer_ops, moe_layer_ops;
};

/// A row's prediction taken apart (`compare --published --json`, each row's "explanation"):
/// {"mfu", "tokens_per_s", "communication": {"tp", "pp", "dp"}, "cost_breakdown"} as
/// `simulate --json` gives them for the same configuration.
nlohmann::json explanationJson(const ValidationResult &result);
/// The same as lines of text: each stage's F, I and W by part (per microbatch on one TP rank),
/// then the communication per step, exposed where it is not all on the critical path.
std::vector<std::string> explanationLines(const ValidationResult &result);

/// Megatron-Core's count of one iteration's model FLOPs, as its throughput log divides by
/// (megatron/training/training.py, num_floating_point_operations, at f2e5db402c, July 2024):
/// 12·B·s·l·h²·((1 + g/a + s/h)·(a·d/h) + (f/h)·k·(3/2 if gated) + V/(2·l·h)), counting every
/// attention score (no causal halving) and no recomputation.
double megatronCoreIterationFlops(const ModelSpec &model, double batch);
/// The Megatron-LM iteration FLOPs of Narayanan et al. 2021, eq. 3 (recomputed forward counted):
/// 96·B·s·l·h²·(1 + s/(6h) + V/(16·l·h)) for a global batch of B sequences.
double narayanan2021IterationFlops(double batch, double sequence, double layers, double hidden,
                                   double vocab);

/// The validation sets shipped under resources/validation (compiled in), by name.
std::vector<std::string> validationSetNames();
Result<ValidationSet> loadValidationSet(const std::string &name_or_path);
Result<ValidationSet> validationSetFromJson(const nlohmann::json &json, const std::string &name);

/// The row as a plan: its schedule, mesh and model setup (hardware preset, training settings).
/// Evaluating it is the row's prediction; `compare --published --row ID --save-plan FILE` writes
/// it and the explorer's File > Open published run loads it, so both start from the very
/// configuration the table predicts.
Plan validationCasePlan(const ValidationCase &validation_case);

/// A row's configuration alone ("model", "hardware", "mesh", "schedule", "training"), with no
/// id or measurement: what `pipescope megatron` makes of a launch's arguments. Errors name the
/// field under `pointer`.
Result<ValidationCase> configurationFromJson(const nlohmann::json &row, const std::string &pointer);

/// The predicted peak memory (GiB) the row's published figure is compared with: the rank it
/// was measured on (memory_pipeline_rank), else the busiest rank.
double comparedMemoryGib(const ValidationCase &validation_case, const ModelReport &report);

/// What a planner needs most: does the prediction order the layouts of one workload as they
/// measured? A pair is two timed rows of the same model on the same GPU type and count with the
/// same tokens per step and GEMM precision, on different layouts, whose measured steps differ;
/// it is ordered when the faster one measured is also the faster one predicted. Precision is
/// part of the workload, not of the layout: the planner searches layouts at the precision it is
/// given, so a BF16 run beside an FP8 one would rank GEMM rates, not layouts.
struct LayoutRanking {
  int pairs = 0;
  int ordered = 0;
  /// The pairs predicted the other way round: "a vs b" with a the one measured faster.
  std::vector<std::string> misordered;
};
/// Mean and worst |error| of the iteration time over the timed rows added: what `compare
/// --published` prints over all rows and per set, and the explorer's published-run list per set.
struct StepErrorSummary {
  int runs = 0;
  double sum = 0;   ///< of |error|
  double worst = 0; ///< largest |error|
  void add(double step_error) {
    ++runs;
    sum += std::abs(step_error);
    worst = std::max(worst, std::abs(step_error));
  }
  double mean() const { return runs > 0 ? sum / runs : 0; }
};

/// Whether a row's time error counts in the figures over rows (compare's mean and worst, a
/// plan's validated accuracy, the layout ranking): it has one, and the row is not set aside.
inline bool countsInStepAccuracy(const ValidationResult &result) {
  return result.step_error.has_value() && result.validation_case != nullptr &&
         result.validation_case->set_aside.empty();
}

/// Tokens one step of the row trains on: microbatches × microbatch size × sequence × DP.
double stepTokens(const ValidationCase &validation_case);
/// The layout pairs among `results` (rows of any sets, each with its validation_case).
LayoutRanking layoutRanking(const std::vector<ValidationResult> &results);

/// A timed row measured faster than its speed of light.
inline bool belowSpeedOfLight(const ValidationResult &result) {
  return result.step_error.has_value() && result.validation_case != nullptr &&
         result.validation_case->measured_step_s < result.speed_of_light_step_s;
}

/// How far the measured steps of the rows that count (countsInStepAccuracy) are above their
/// speed of light, and the rows measured below it (set-aside rows among them too: a figure
/// faster than the hardware allows says more than why it was set aside).
struct SpeedOfLightSummary {
  int runs = 0;
  double median = 0, lowest = 0, highest = 0; ///< of measured / speed of light
  std::vector<const ValidationResult *> below;
};
SpeedOfLightSummary speedOfLightSummary(const std::vector<ValidationResult> &results);

/// Predicts one row: evaluates its plan (schedule, derived costs, one simulated step); with
/// `with_speed_of_light`, the same plan at its speed of light too (a second evaluation, which
/// the fits' many candidates and the accuracy summaries do not need).
Result<ValidationResult> predictValidationCase(const ValidationCase &validation_case,
                                               bool with_speed_of_light = false);

} // namespace pipescope
