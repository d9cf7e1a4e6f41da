// `pipescope calibrate`: a hardware file's GEMM levels fitted to measured steps.
#include "engine/model/hardware_fit.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

namespace pipescope {

double curvePlateau(const std::vector<GemmEfficiencyPoint> &curve, double flat) {
  if (curve.empty()) return flat;
  double plateau = 0;
  for (const auto &point : curve)
    plateau = std::max(plateau, point.efficiency);
  return plateau;
}

namespace {

/// The curve times `factor`, each point kept to four decimals (what a reader of the file can
/// compare) and within (0, 1]; rounding keeps the order, so a monotone curve stays monotone.
std::vector<GemmEfficiencyPoint> scaledCurve(std::vector<GemmEfficiencyPoint> curve,
                                             double factor) {
  for (auto &point : curve)
    point.efficiency = std::clamp(std::round(point.efficiency * factor * 1e4) / 1e4, 1e-4, 1.0);
  return curve;
}

/// The FP8 curve as the cost model reads it: the file's own, else the BF16 curve, else the
/// flat factor as a one-point curve (a curve with one point is flat, gemm_efficiency.h).
std::vector<GemmEfficiencyPoint> effectiveFp8Curve(const HardwareSpec &hardware) {
  if (!hardware.gemm_efficiency_fp8.empty()) return hardware.gemm_efficiency_fp8;
  if (!hardware.gemm_efficiency.empty()) return hardware.gemm_efficiency;
  return {{2.0 * 4096 * 4096 * 4096, hardware.efficiency}};
}

/// `base` with its BF16 curve (and flat factor) at plateau `level`, the FP8 curve moved by the
/// same factor.
HardwareSpec withLevel(const HardwareSpec &base, double level_before, double level) {
  HardwareSpec hardware = base;
  const double factor = level / level_before;
  hardware.gemm_efficiency = scaledCurve(base.gemm_efficiency, factor);
  hardware.efficiency = std::clamp(std::round(base.efficiency * factor * 1e4) / 1e4, 1e-4, 1.0);
  hardware.gemm_efficiency_fp8 = scaledCurve(base.gemm_efficiency_fp8, factor);
  return hardware;
}

/// `hardware` with its FP8 curve at plateau `level`.
HardwareSpec withFp8Level(const HardwareSpec &hardware, double level) {
  HardwareSpec out = hardware;
  const auto curve = effectiveFp8Curve(hardware);
  out.gemm_efficiency_fp8 = scaledCurve(curve, level / curvePlateau(curve, hardware.efficiency));
  return out;
}

/// Levels kHardwareFitStep, 2·kHardwareFitStep, ... up to `highest`.
std::vector<double> levelGrid(double highest) {
  std::vector<double> levels;
  for (int i = 1; i * kHardwareFitStep <= highest + 1e-9; ++i)
    levels.push_back(std::round(i * kHardwareFitStep * 100) / 100);
  return levels;
}

/// errors[row][candidate]: each row's step error on each candidate hardware.
using ErrorTable = std::vector<std::vector<double>>;

Result<ErrorTable> errorTable(const std::vector<const ValidationCase *> &cases,
                              const std::vector<HardwareSpec> &candidates) {
  ErrorTable table(cases.size(), std::vector<double>(candidates.size()));
  for (std::size_t r = 0; r < cases.size(); ++r) {
    ValidationCase c = *cases[r];
    for (std::size_t i = 0; i < candidates.size(); ++i) {
      c.setup.hardware = candidates[i];
      auto result = predictValidationCase(c);
      if (!result) return result.error();
      table[r][i] = *result->step_error;
    }
  }
  return table;
}

/// The candidate with the least mean |error| over `members` (indices into the table's rows,
/// `skip` left out); ties go to the one nearest `prefer`. -1 when no member is left.
int bestCandidate(const ErrorTable &table, const std::vector<int> &members, int skip,
                  const std::vector<double> &levels, double prefer) {
  int best = -1;
  double best_sum = std::numeric_limits<double>::infinity();
  for (std::size_t i = 0; i < levels.size(); ++i) {
    double sum = 0;
    int count = 0;
    for (const int r : members)
      if (r != skip) {
        sum += std::abs(table[r][i]);
        ++count;
      }
    if (count == 0) return -1;
    // Sums of the same rows compare as means; a relative margin keeps rounding out of ties.
    const bool better = sum < best_sum * (1 - 1e-12);
    const bool tied = !better && sum <= best_sum * (1 + 1e-12);
    if (better || (tied && std::abs(levels[i] - prefer) <
                               std::abs(levels[static_cast<std::size_t>(best)] - prefer))) {
      best = static_cast<int>(i);
      best_sum = sum;
    }
  }
  return best;
}

std::string levelText(double level) {
  char text[16];
  std::snprintf(text, sizeof text, "%.2f", level);
  return text;
}

std::string percentText(double fraction) {
  char text[24];
  std::snprintf(text, sizeof text, "%.1f %%", 100 * fraction);
  return text;
}

/// "set: id, id; set: id" of the rows that fitted a level.
std::string rowList(const std::vector<FitRow> &rows, const std::vector<int> &members) {
  std::string text, set;
  for (const int r : members) {
    const FitRow &row = rows[static_cast<std::size_t>(r)];
    if (row.set != set) {
      text += (text.empty() ? "" : "; ") + row.set + ": ";
      set = row.set;
    } else {
      text += ", ";
    }
    text += row.validation_case->id;
  }
  return text;
}

} // namespace

Result<HardwareFit> fitHardware(const std::vector<FitRow> &all_rows, const HardwareSpec &base,
                                const HardwareFitOptions &options) {
  std::vector<FitRow> rows;
  for (const auto &row : all_rows)
    if (row.validation_case->measured_step_s > 0) rows.push_back(row);
  if (rows.empty())
    return makeError("no row with a measured step time to fit on (rows with memory_gib alone "
                     "check memory); add rows whose \"measured\" gives step_time_s or "
                     "tokens_per_s_per_gpu");
  if (!options.level && !options.fp8) return makeError("nothing to fit: ask for level or fp8");

  std::vector<const ValidationCase *> cases;
  std::vector<int> bf16_rows, fp8_rows, every_row;
  for (std::size_t r = 0; r < rows.size(); ++r) {
    cases.push_back(rows[r].validation_case);
    const bool fp8 = rows[r].validation_case->setup.training.gemm_precision == GemmPrecision::Fp8;
    (fp8 ? fp8_rows : bf16_rows).push_back(static_cast<int>(r));
    every_row.push_back(static_cast<int>(r));
  }
  if (!fp8_rows.empty() && base.peak_fp8_tflops <= 0)
    return makeError("row " + cases[static_cast<std::size_t>(fp8_rows[0])]->id +
                     " runs FP8 GEMMs, but " + base.name +
                     " has no FP8 peak (peak_fp8_tflops); give a hardware file with one, or leave "
                     "the FP8 rows out");
  if (options.fp8 && fp8_rows.empty())
    return makeError("no FP8 row to fit the FP8 level on (no row sets training.gemm_precision "
                     "\"fp8\"); fit the level alone (--fit level)");
  if (options.level && options.fp8 && bf16_rows.empty())
    return makeError("no BF16 row to fit the BF16 level on: every row runs FP8 GEMMs; fit the FP8 "
                     "level alone (--fit fp8), or move both curves on every row (--fit level)");

  HardwareFit fit;
  fit.level_before = curvePlateau(base.gemm_efficiency, base.efficiency);
  const bool has_fp8 = base.peak_fp8_tflops > 0;
  fit.fp8_level_before = has_fp8 ? curvePlateau(effectiveFp8Curve(base), base.efficiency) : 0;
  if (fit.level_before <= 0) return makeError(base.name + " has no GEMM efficiency to scale");

  // The level: the BF16 curve at each plateau of the grid (the FP8 curve moved along, so no
  // level may lift it above 1), fitted on the BF16 rows when the FP8 level is fitted after it,
  // else on every row.
  const std::vector<int> &level_members = options.fp8 ? bf16_rows : every_row;
  std::vector<double> levels =
      levelGrid(std::min(1.0, fit.level_before / std::max(fit.level_before, fit.fp8_level_before)));
  std::vector<HardwareSpec> level_candidates;
  level_candidates.reserve(options.level ? levels.size() : 0);
  if (options.level)
    for (const double level : levels)
      level_candidates.push_back(withLevel(base, fit.level_before, level));
  ErrorTable level_table;
  HardwareSpec fitted = base;
  fit.level_after = fit.level_before;
  int level_index = -1;
  if (options.level) {
    auto table = errorTable(cases, level_candidates);
    if (!table) return table.error();
    level_table = std::move(*table);
    level_index = bestCandidate(level_table, level_members, -1, levels, fit.level_before);
    fit.level_after = levels[static_cast<std::size_t>(level_index)];
    fitted = level_candidates[static_cast<std::size_t>(level_index)];
    fit.level_rows = static_cast<int>(level_members.size());
  }
  fit.fp8_level_after = has_fp8 ? curvePlateau(effectiveFp8Curve(fitted), fitted.efficiency) : 0;

  // The FP8 level over the FP8 rows, at the level just fitted, never above it.
  ErrorTable fp8_table;
  std::vector<double> fp8_levels;
  int fp8_index = -1;
  if (options.fp8) {
    fp8_levels = levelGrid(std::min(1.0, fit.level_after));
    std::vector<HardwareSpec> candidates;
    candidates.reserve(fp8_levels.size());
    for (const double level : fp8_levels)
      candidates.push_back(withFp8Level(fitted, level));
    auto table = errorTable(cases, candidates);
    if (!table) return table.error();
    fp8_table = std::move(*table);
    fp8_index = bestCandidate(fp8_table, fp8_rows, -1, fp8_levels, fit.fp8_level_after);
    fit.fp8_level_after = fp8_levels[static_cast<std::size_t>(fp8_index)];
    fitted = candidates[static_cast<std::size_t>(fp8_index)];
    fit.fp8_rows = static_cast<int>(fp8_rows.size());
    // Held at the BF16 level: would the grid have gone on falling past its top?
    if (fp8_index + 1 == static_cast<int>(fp8_levels.size())) {
      HardwareSpec above = withFp8Level(fitted, std::min(1.0, fit.level_after + kHardwareFitStep));
      double sum_at = 0, sum_above = 0;
      for (const int r : fp8_rows) {
        ValidationCase c = *cases[static_cast<std::size_t>(r)];
        c.setup.hardware = above;
        auto result = predictValidationCase(c);
        if (!result) return result.error();
        sum_above += std::abs(*result->step_error);
        sum_at +=
            std::abs(fp8_table[static_cast<std::size_t>(r)][static_cast<std::size_t>(fp8_index)]);
      }
      fit.fp8_held_at_level = fit.level_after < 1 && sum_above < sum_at;
    }
  }

  // Before and after, and each row held out: its levels refitted on the other rows (the table
  // already holds every candidate's errors, so this is a search over it, not a new fit).
  auto before = errorTable(cases, {base});
  if (!before) return before.error();
  auto after = errorTable(cases, {fitted});
  if (!after) return after.error();
  for (std::size_t r = 0; r < rows.size(); ++r) {
    FittedRow row;
    row.validation_case = cases[r];
    row.set = rows[r].set;
    row.fp8 = cases[r]->setup.training.gemm_precision == GemmPrecision::Fp8;
    row.before = (*before)[r][0];
    row.after = (*after)[r][0];
    const int self = static_cast<int>(r);
    const bool in_level = options.level && std::find(level_members.begin(), level_members.end(),
                                                     self) != level_members.end();
    const bool in_fp8 = options.fp8 && row.fp8;
    if (in_level) {
      const int i = bestCandidate(level_table, level_members, self, levels, fit.level_before);
      if (i >= 0) row.held_out = level_table[r][static_cast<std::size_t>(i)];
    } else if (in_fp8) {
      const int j = bestCandidate(fp8_table, fp8_rows, self, fp8_levels, fit.fp8_level_after);
      if (j >= 0) row.held_out = fp8_table[r][static_cast<std::size_t>(j)];
    } else if (!(options.fp8 && row.fp8)) {
      row.held_out = row.after; // no fit saw this row
    }
    fit.before.add(row.before);
    fit.after.add(row.after);
    if (row.held_out) fit.held_out.add(*row.held_out);
    fit.rows.push_back(std::move(row));
  }

  // The fitted file says where its levels come from, then what the base's said.
  const auto summary = [&](const std::vector<int> &members) {
    StepErrorSummary was, now, held;
    for (const int r : members) {
      const FittedRow &row = fit.rows[static_cast<std::size_t>(r)];
      was.add(row.before);
      now.add(row.after);
      if (row.held_out) held.add(*row.held_out);
    }
    return "mean |error| " + percentText(was.mean()) + " before, " + percentText(now.mean()) +
           " after" +
           (held.runs > 0 ? ", " + percentText(held.mean()) + " with each row held out" : "");
  };
  if (options.level)
    fitted.gemm_efficiency_source =
        "Level " + levelText(fit.level_after) +
        " of peak at the plateau, fitted by pipescope calibrate in steps of 0.01 on " +
        std::to_string(level_members.size()) + " measured steps (" + rowList(rows, level_members) +
        "; " + summary(level_members) + "). The shape, and the level " +
        levelText(fit.level_before) + " before the fit, are " + base.name +
        "'s: " + base.gemm_efficiency_source;
  if (options.fp8)
    fitted.gemm_efficiency_fp8_source =
        "Level " + levelText(fit.fp8_level_after) +
        " of the FP8 peak at the plateau, fitted by pipescope calibrate in steps of 0.01, at most "
        "the BF16 level, on " +
        std::to_string(fp8_rows.size()) + " measured FP8 steps (" + rowList(rows, fp8_rows) + "; " +
        summary(fp8_rows) + "). The shape is " + base.name + "'s: " +
        (base.gemm_efficiency_fp8_source.empty() ? base.gemm_efficiency_source
                                                 : base.gemm_efficiency_fp8_source);
  else if (options.level && !fitted.gemm_efficiency_fp8.empty())
    fitted.gemm_efficiency_fp8_source =
        "Moved with the BF16 level, from " + levelText(fit.level_before) + " to " +
        levelText(fit.level_after) + ", by pipescope calibrate. " + base.gemm_efficiency_fp8_source;
  // What plans on the file quote as the error to expect: the held-out errors (none when every
  // level had one row, which a fit matches by construction).
  fitted.calibration.reset();
  if (fit.held_out.runs > 0) {
    HardwareCalibration calibration;
    double signed_sum = 0;
    std::vector<std::string> sets;
    for (const auto &row : fit.rows)
      if (row.held_out) {
        signed_sum += *row.held_out;
        if (std::find(sets.begin(), sets.end(), row.set) == sets.end()) sets.push_back(row.set);
      }
    calibration.runs = fit.held_out.runs;
    calibration.mean_abs_step_error = fit.held_out.mean();
    calibration.worst_abs_step_error = fit.held_out.worst;
    calibration.mean_step_error = signed_sum / fit.held_out.runs;
    for (const auto &set : sets)
      calibration.sets += (calibration.sets.empty() ? "" : ", ") + set;
    fitted.calibration = calibration;
  }
  fit.hardware = std::move(fitted);
  return fit;
}

} // namespace pipescope
