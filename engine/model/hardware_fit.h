#pragma once
// The GEMM level of a hardware file fitted to measured steps (`pipescope calibrate`,
// docs/cost-model.md "Calibrating the GEMM level to your runs"). The shipped presets' levels were
// fitted this way on published runs (docs/validation.md); a user's own runs, on their cluster and
// software, fit their own. The curve keeps its shape (efficiency over GEMM size) and takes one
// level, as the shipped fits do: a handful of step times cannot tell a curve's shape, and one
// factor is what they do determine.
#include <optional>
#include <string>
#include <vector>

#include "engine/model/model_setup.h"
#include "engine/model/validation.h"
#include "engine/result.h"

namespace pipescope {

/// What to fit, each on its own rows and in this order, each at the fits before it (as the
/// shipped figures were fitted: the H100 level on BF16 dense rows, the FP8 level on FP8 dense
/// rows, the MoE host time on MoE rows):
/// - `moe_host`: the MoE layers' host time (HardwareSpec::moe_layer_host_us), on the MoE rows
///   that leave theirs to the hardware (training.moe_layer_host_us unset);
/// - `fp8`: the FP8 curve's level alone, never above the BF16 level (FP8 GEMMs reach no larger a
///   share of their peak than BF16 ones, docs/cost-model.md), on the FP8 rows the host time
///   does not take;
/// - `level`: the BF16 curve's level, the FP8 curve moved with it (so its ratio to the BF16
///   curve stays), on every other row.
/// - `overhead`: every transformer layer's fixed time (HardwareSpec::layer_overhead_us), with the
///   level on the level's rows: a fixed time per layer and a GEMM level trade against each
///   other, so each overhead of its grid takes its own best level and the pair with the least
///   mean |error| wins (alone, without `level`, the overhead over the same rows at the base's
///   level). Only rows of different tokens per microbatch tell the two apart.
/// - `step`: the step's fixed overhead (HardwareSpec::step_overhead_us), with the level on the
///   level's rows, as `overhead` is (and beside it when both are asked: the layer overhead for
///   what grows with microbatches, the step's for what does not). It adds the same time to
///   every step, so each candidate's best overhead is found exactly, not on a grid of
///   predictions: the weighted median of what each row's step misses, at least 0. Only rows of
///   different microbatch counts tell it from the level.
struct HardwareFitOptions {
  bool level = true;
  bool fp8 = false;
  bool moe_host = false;
  bool overhead = false;
  bool step = false;
};

/// The levels are fitted in steps of this much of peak, from one step up to 1, as the shipped
/// fits are (docs/measurements/fit_h100_levels.py).
inline constexpr double kHardwareFitStep = 0.01;
/// The MoE host time is fitted in steps of 0.5 ms from 0 to 30 ms, as the shipped one was
/// (docs/measurements/fit_moe_host.py).
inline constexpr double kMoeHostFitStepUs = 500, kMoeHostFitMaxUs = 30000;
/// The layer overhead is fitted in steps of 125 us from 0 to 3 ms (docs/cost-model.md, "A
/// layer's fixed overhead"); beside it the level is searched from kOverheadLevelMargin below the
/// level fitted without one (an overhead only adds time, so it only raises the level), which
/// keeps the fit to about half the candidates of a full grid.
inline constexpr double kOverheadFitStepUs = 125, kOverheadFitMaxUs = 3000;
inline constexpr double kOverheadLevelMargin = 0.05;
/// The step overhead is fitted to 0.1 ms (what a step's time shows; `calibrate` prints ms).
inline constexpr double kStepOverheadFitStepUs = 100;

/// One timed row and its step error on the hardware before and after the fit.
struct FittedRow {
  const ValidationCase *validation_case = nullptr;
  std::string set; ///< the validation set it came from
  bool fp8 = false;
  double before = 0; ///< (predicted − measured) / measured on the base hardware
  double after = 0;  ///< the same on the fitted hardware
  /// The same with the levels fitted on the other rows alone (leave one out): the error to
  /// expect on a run the fit has not seen. None when no other row fits its level.
  std::optional<double> held_out;
};

struct HardwareFit {
  HardwareSpec hardware; ///< the base with the fitted curves (and sources that say so)
  /// The BF16 curve's plateau (its largest efficiency; the flat factor without a curve), of the
  /// BF16 peak, before and after; equal when the level was not fitted.
  double level_before = 0, level_after = 0;
  /// The same for the FP8 curve (the BF16 curve's where the file has none), of the FP8 peak; 0
  /// without an FP8 peak.
  double fp8_level_before = 0, fp8_level_after = 0;
  /// The FP8 fit would have gone above the BF16 level and was held at it.
  bool fp8_held_at_level = false;
  /// The MoE layers' host time (µs) plans on the hardware take by default, before and after.
  double moe_host_before_us = 0, moe_host_after_us = 0;
  /// Every transformer layer's fixed time (µs per layer and microbatch), before and after.
  double overhead_before_us = 0, overhead_after_us = 0;
  /// The step's fixed overhead (µs per step), before and after.
  double step_before_us = 0, step_after_us = 0;
  int level_rows = 0, fp8_rows = 0, moe_host_rows = 0; ///< the rows each figure was fitted on
  std::vector<FittedRow> rows;
  StepErrorSummary before, after, held_out;
  /// With the layer or the step overhead (or both) fitted beside the level: the level's rows
  /// held out on the figures fitted, and on the level alone (no overhead), the comparison that
  /// says whether the overheads earn their place. Empty otherwise.
  StepErrorSummary overhead_held_out, level_alone_held_out;
};

/// A row to fit on: the case and the set it came from.
struct FitRow {
  const ValidationCase *validation_case = nullptr;
  std::string set;
};

/// Takes out of `rows` the timed rows measured faster than their configuration's speed of light
/// on `base` (speedOfLightStepS, each row run on `base`): they did not run as written, so a fit
/// leaves them out as it leaves set-aside rows, unless the user names them. Returns them, each as
/// "SET/ID (X s measured, Y s at speed of light)". A row `base` cannot run stays, for the fit
/// to refuse with its reason.
std::vector<std::string> removeRowsBelowSpeedOfLight(std::vector<FitRow> &rows,
                                                     const HardwareSpec &base);

/// Fits `base`'s GEMM levels to the rows' measured steps (each row predicted on `base`, whatever
/// hardware it names), minimizing the mean |step error| over the rows each level applies to.
/// Rows without a measured step are ignored. Errors name what is missing: no timed row, no row
/// left for a figure asked for (e.g. no BF16 row for the level when the FP8 level is fitted too,
/// no FP8 row or FP8 peak for the FP8 level, no MoE row for the host time, no row for the
/// overhead), or a row that cannot be predicted.
Result<HardwareFit> fitHardware(const std::vector<FitRow> &rows, const HardwareSpec &base,
                                const HardwareFitOptions &options);

/// What the rows ask to fit when the user does not say: the level on dense rows, the FP8 level
/// too when the dense rows mix BF16 and FP8 GEMMs, the MoE host time on MoE rows that leave theirs
/// unset (only the host time when every timed row is such an MoE row).
HardwareFitOptions defaultFitOptions(const std::vector<FitRow> &rows);

/// The hardware (preset name or file) every timed row names: the one a fit starts from. Empty
/// when no row is timed; an error listing the names and their row counts ("h800 (1 row),
/// a100-80gb (18 rows)") when they differ.
Result<std::string> commonHardwareName(const std::vector<FitRow> &rows);

/// The largest efficiency of a curve (`flat` when it is empty).
double curvePlateau(const std::vector<GemmEfficiencyPoint> &curve, double flat);

} // namespace pipescope
