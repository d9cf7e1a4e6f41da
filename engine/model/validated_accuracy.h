#pragma once
// How far the cost model was from the published runs most like a plan (docs/validation.md): the
// error a planner should expect of this prediction, from the rows that share its GPU type, GEMM
// precision and kind of model. A planner that ranks candidates 2 % apart on a model that was 5 %
// off on such runs cannot order them; it says so instead of letting a difference look real.
#include <optional>
#include <string>
#include <vector>

#include "engine/model/model_setup.h"
#include "engine/model/validation.h"

namespace pipescope {

/// The shipped validation rows (every set under resources/validation) that check a plan.
struct ValidatedAccuracy {
  /// What the rows share with the plan, most specific first: "h100-sxm, fp8, dense"; a row of
  /// the same GPU type with another precision or kind of model counts only when none shares all
  /// three ("h100-sxm, any precision, MoE"), then "h100-sxm" alone.
  std::string scope;
  /// |error| of the predicted step time over those rows (runs = 0: no published run on this
  /// GPU type checks its time).
  StepErrorSummary step;
  double mean_signed_step_error = 0; ///< mean of (predicted − measured) / measured: + = slow
  /// The same over the rows that publish peak memory on this GPU type (any precision and model).
  StepErrorSummary memory;
  std::vector<std::string> sets; ///< the validation sets the time rows come from
  std::string hardware;          ///< the GPU type (hardware preset name) they ran on
  /// The step figures are the hardware file's own calibration (pipescope calibrate): the user's
  /// runs, each held out, not the published ones.
  bool calibrated = false;
  /// An uncalibrated hardware file named like a preset but pricing steps otherwise (a curve, a
  /// link, an overhead set by hand): the fields it differs in. The figures are the preset's runs,
  /// which did not check those values; the text says so.
  std::vector<std::string> differs_from_preset;
};

/// The fields that price steps (not sources, notes, the calibration or memory_gib, which only
/// sets what fits) in which `hardware` differs from the shipped preset of its name, sorted;
/// empty when it matches it or no preset has its name.
std::vector<std::string> fieldsDifferingFromPreset(const HardwareSpec &hardware);

/// The rows of the shipped sets that match `hardware_name` (a preset name; a plan's own hardware
/// file matches the preset of its name), `precision` and `moe`, widening as ValidatedAccuracy::
/// scope says. Predicting the shipped rows takes about 0.1 s; the first call does it and later
/// calls reuse it (thread-safe).
ValidatedAccuracy validatedAccuracy(const std::string &hardware_name, GemmPrecision precision,
                                    bool moe);
/// The same for a plan's hardware, precision and kind of model; a hardware file that `pipescope
/// calibrate` fitted answers with its calibration's held-out step error instead (the published
/// runs still give the memory figures).
ValidatedAccuracy validatedAccuracy(const HardwareSpec &hardware, GemmPrecision precision,
                                    bool moe);
/// The same for a plan's model setup (its hardware, training precision and experts).
ValidatedAccuracy validatedAccuracy(const ModelSetup &setup);

/// Whether a plan with step time `step_s` is within the validated mean |error| of the best
/// plan's `best_step_s`: no more than that much slower, so the model cannot tell which is faster.
/// False when no published run checks the GPU type (nothing says how close is too close).
bool withinValidatedError(double step_s, double best_step_s, const ValidatedAccuracy &accuracy);

/// One line for a summary: "on 16 published runs (h100-sxm, fp8, dense: nemo-h100,
/// megatron-bridge-h100) the step time was off by 5.5 % mean, 14.4 % worst, 1.2 % slow on
/// average", the same for the runs a calibrated file was fitted on, or that no published run
/// checks the GPU type.
std::string validatedAccuracyText(const ValidatedAccuracy &accuracy);
/// {"scope", "hardware", "calibrated", "runs", "mean_abs_step_error", "worst_abs_step_error",
/// "mean_step_error", "sets", "differs_from_preset", "memory_runs", "mean_abs_memory_error",
/// "worst_abs_memory_error"}.
nlohmann::json validatedAccuracyJson(const ValidatedAccuracy &accuracy);

} // namespace pipescope
