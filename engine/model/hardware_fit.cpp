// `pipescope calibrate`: a hardware file's GEMM levels fitted to measured steps.
#include "engine/model/hardware_fit.h"

#include "engine/model/layer_costs.h"
#include "engine/model/moe.h"
#include "engine/model/speed_of_light.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <limits>
#include <mutex>
#include <string>
#include <thread>

namespace pipescope {

HardwareFitOptions defaultFitOptions(const std::vector<FitRow> &rows) {
  bool bf16 = false, fp8 = false, dense = false, moe = false;
  for (const auto &row : rows) {
    const ValidationCase &c = *row.validation_case;
    if (c.measured_step_s <= 0) continue;
    if (isMoe(c.setup.model) && c.setup.training.moe_layer_host_us < 0) {
      moe = true;
      continue;
    }
    dense = true;
    (c.setup.training.gemm_precision == GemmPrecision::Fp8 ? fp8 : bf16) = true;
  }
  HardwareFitOptions options;
  options.level = dense;
  options.fp8 = bf16 && fp8;
  options.moe_host = moe;
  return options;
}

Result<std::string> commonHardwareName(const std::vector<FitRow> &rows) {
  std::vector<std::pair<std::string, int>> names; // hardware, timed rows on it
  for (const auto &row : rows) {
    if (row.validation_case->measured_step_s <= 0) continue;
    const std::string &name = row.validation_case->hardware_name;
    auto it = std::find_if(names.begin(), names.end(),
                           [&](const auto &entry) { return entry.first == name; });
    if (it == names.end())
      names.emplace_back(name, 1);
    else
      ++it->second;
  }
  if (names.size() > 1) {
    std::string listed;
    for (const auto &[name, count] : names)
      listed += (listed.empty() ? "" : ", ") + name + " (" + std::to_string(count) +
                (count == 1 ? " row)" : " rows)");
    return makeError("the rows run on " + listed + "; one hardware file is fitted at a time");
  }
  return names.empty() ? std::string() : names.front().first;
}

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

/// The FP8 curve as the cost model reads it: the file's own, else the BF16 curve's at the FP8
/// rate (fp8CurveFromBf16), else the flat factor as a one-point curve (a curve with one point
/// is flat, gemm_efficiency.h).
std::vector<GemmEfficiencyPoint> effectiveFp8Curve(const HardwareSpec &hardware) {
  if (!hardware.gemm_efficiency_fp8.empty()) return hardware.gemm_efficiency_fp8;
  if (!hardware.gemm_efficiency.empty()) return fp8CurveFromBf16(hardware);
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

/// Levels on the kHardwareFitStep grid from `lowest` (at least one step) up to `highest`.
std::vector<double> levelGrid(double highest, double lowest = kHardwareFitStep) {
  std::vector<double> levels;
  for (int i = 1; i * kHardwareFitStep <= highest + 1e-9; ++i)
    if (i * kHardwareFitStep >= lowest - 1e-9)
      levels.push_back(std::round(i * kHardwareFitStep * 100) / 100);
  return levels;
}

/// errors[k][candidate]: the k-th member row's step error on each candidate hardware.
using ErrorTable = std::vector<std::vector<double>>;

/// Each member row predicted on each candidate, on as many threads as the machine has (a fit
/// with the layer overhead predicts some thousand pairs a row); the table and the error, the
/// first pair's in row-major order, are the same on any number.
Result<ErrorTable> errorTable(const std::vector<const ValidationCase *> &cases,
                              const std::vector<int> &members,
                              const std::vector<HardwareSpec> &candidates) {
  ErrorTable table(members.size(), std::vector<double>(candidates.size()));
  const std::size_t pairs = members.size() * candidates.size();
  if (pairs == 0) return table;
  std::atomic<std::size_t> next{0};
  std::mutex failure_mutex;
  std::size_t failed_pair = pairs; ///< the first pair that could not be predicted
  std::string failure;
  const auto work = [&] {
    for (std::size_t pair = next++; pair < pairs; pair = next++) {
      const std::size_t k = pair / candidates.size(), i = pair % candidates.size();
      ValidationCase c = *cases[static_cast<std::size_t>(members[k])];
      c.setup.hardware = candidates[i];
      auto result = predictValidationCase(c);
      if (result) {
        table[k][i] = *result->step_error;
        continue;
      }
      const std::lock_guard lock(failure_mutex);
      if (pair < failed_pair) {
        failed_pair = pair;
        failure = result.error().message;
      }
    }
  };
  const std::size_t threads =
      std::min<std::size_t>(pairs, std::max(1U, std::thread::hardware_concurrency()));
  std::vector<std::thread> workers;
  for (std::size_t t = 1; t < threads; ++t)
    workers.emplace_back(work);
  work();
  for (auto &worker : workers)
    worker.join();
  if (failed_pair < pairs) return makeError(failure);
  return table;
}

/// The candidate with the least mean |error| over the table's rows (`skip` left out, -1: none),
/// among the first `columns` candidates (all by default); ties go to the one nearest `prefer`.
/// -1 when no row is left.
int bestCandidate(const ErrorTable &table, int skip, const std::vector<double> &grid, double prefer,
                  std::size_t columns = std::numeric_limits<std::size_t>::max()) {
  int best = -1;
  double best_sum = std::numeric_limits<double>::infinity();
  for (std::size_t i = 0; i < std::min(grid.size(), columns); ++i) {
    double sum = 0;
    int count = 0;
    for (std::size_t k = 0; k < table.size(); ++k)
      if (static_cast<int>(k) != skip) {
        sum += std::abs(table[k][i]);
        ++count;
      }
    if (count == 0) return -1;
    // Sums of the same rows compare as means; a relative margin keeps rounding out of ties.
    const bool better = sum < best_sum * (1 - 1e-12);
    const bool tied = !better && sum <= best_sum * (1 + 1e-12);
    if (better || (tied && std::abs(grid[i] - prefer) <
                               std::abs(grid[static_cast<std::size_t>(best)] - prefer))) {
      best = static_cast<int>(i);
      best_sum = sum;
    }
  }
  return best;
}

/// One figure fitted: its rows, its grid of values and the hardware each value makes.
struct FitStage {
  std::vector<int> members;
  std::vector<double> grid;
  double before = 0;
  std::vector<HardwareSpec> candidates;
  ErrorTable table;
  int best = -1;
};

/// Fills the stage's table and best value; the fitted hardware is candidates[best]. Candidates
/// added since the last run are predicted and join the table; those already in it are kept.
Status runStage(FitStage &stage, const std::vector<const ValidationCase *> &cases) {
  const std::size_t done = stage.table.empty() ? 0 : stage.table.front().size();
  const std::vector<HardwareSpec> added(stage.candidates.begin() + static_cast<long>(done),
                                        stage.candidates.end());
  auto table = errorTable(cases, stage.members, added);
  if (!table) return table.error();
  stage.table.resize(stage.members.size());
  for (std::size_t k = 0; k < stage.members.size(); ++k)
    stage.table[k].insert(stage.table[k].end(), (*table)[k].begin(), (*table)[k].end());
  stage.best = bestCandidate(stage.table, -1, stage.grid, stage.before);
  return Ok{};
}

/// The step overhead (µs, on the kStepOverheadFitStepUs grid, at least 0) that minimizes the
/// mean |error| of column `column` of `table` (errors at no step overhead) over its rows but
/// `skip`, where row k's measured step is measured_s[k]: an overhead x moves row k's error by
/// x / measured_s[k], so the sum of |error| is convex in x and least at the weighted median of
/// what each row misses (measured − predicted), weighted 1 / measured; of the two grid points
/// around it the lower sum wins (ties to the smaller). -1 when no row is left.
double bestStepOverheadUs(const ErrorTable &table, std::size_t column,
                          const std::vector<double> &measured_s, int skip) {
  std::vector<std::pair<double, double>> misses; // (µs the row misses, weight)
  double total_weight = 0;
  for (std::size_t k = 0; k < table.size(); ++k)
    if (static_cast<int>(k) != skip) {
      misses.emplace_back(-table[k][column] * measured_s[k] * 1e6, 1 / measured_s[k]);
      total_weight += 1 / measured_s[k];
    }
  if (misses.empty()) return -1;
  std::sort(misses.begin(), misses.end());
  double median = misses.back().first, weight = 0;
  for (const auto &[miss, w] : misses) {
    weight += w;
    if (weight >= total_weight / 2) {
      median = miss;
      break;
    }
  }
  const auto sumAt = [&](double us) {
    double sum = 0;
    for (std::size_t k = 0; k < table.size(); ++k)
      if (static_cast<int>(k) != skip) sum += std::abs(table[k][column] + us / 1e6 / measured_s[k]);
    return sum;
  };
  const double low =
      std::max(0.0, std::floor(median / kStepOverheadFitStepUs)) * kStepOverheadFitStepUs;
  const double high =
      std::max(0.0, std::ceil(median / kStepOverheadFitStepUs)) * kStepOverheadFitStepUs;
  return sumAt(high) < sumAt(low) * (1 - 1e-12) ? high : low;
}

/// `table` (errors at no step overhead) with each column moved by its own best step overhead
/// over the rows but `skip` (bestStepOverheadUs), and those overheads in `overheads_us`: what
/// every candidate predicts with the step overhead fitted beside it.
ErrorTable withBestStepOverheads(const ErrorTable &table, const std::vector<double> &measured_s,
                                 int skip, std::vector<double> &overheads_us) {
  ErrorTable shifted = table;
  const std::size_t columns = table.empty() ? 0 : table.front().size();
  overheads_us.assign(columns, 0);
  for (std::size_t i = 0; i < columns; ++i) {
    overheads_us[i] = std::max(0.0, bestStepOverheadUs(table, i, measured_s, skip));
    for (std::size_t k = 0; k < shifted.size(); ++k)
      shifted[k][i] += overheads_us[i] / 1e6 / measured_s[k];
  }
  return shifted;
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
  if (!options.level && !options.fp8 && !options.moe_host && !options.overhead && !options.step)
    return makeError("nothing to fit: ask for level, fp8, moe-host, overhead or step");

  std::vector<const ValidationCase *> cases;
  std::vector<int> fp8_rows, moe_rows, level_rows, fp8_members;
  for (std::size_t r = 0; r < rows.size(); ++r) {
    const ValidationCase &c = *rows[r].validation_case;
    cases.push_back(&c);
    const int index = static_cast<int>(r);
    const bool fp8 = c.setup.training.gemm_precision == GemmPrecision::Fp8;
    if (fp8) fp8_rows.push_back(index);
    // Each row fits one figure: the host time if it is an MoE row that leaves its host time to
    // the hardware, else the FP8 level if it runs FP8 GEMMs, else the level.
    if (options.moe_host && isMoe(c.setup.model) && c.setup.training.moe_layer_host_us < 0)
      moe_rows.push_back(index);
    else if (options.fp8 && fp8)
      fp8_members.push_back(index);
    else
      level_rows.push_back(index);
  }
  if (!fp8_rows.empty() && base.peak_fp8_tflops <= 0)
    return makeError("row " + cases[static_cast<std::size_t>(fp8_rows[0])]->id +
                     " runs FP8 GEMMs, but " + base.name +
                     " has no FP8 peak (peak_fp8_tflops); give a hardware file with one, or leave "
                     "the FP8 rows out");
  if (options.moe_host && moe_rows.empty())
    return makeError("no MoE row to fit the MoE layers' host time on (a model with experts whose "
                     "training leaves moe_layer_host_us unset); leave moe-host out of --fit");
  if (options.fp8 && fp8_members.empty())
    return makeError(
        "no FP8 row to fit the FP8 level on (no row sets training.gemm_precision "
        "\"fp8\"" +
        std::string(options.moe_host ? " but for the MoE rows the host time takes" : "") +
        "); fit the level alone (--fit level)");
  // What took every row from the level's figures, for the refusals below.
  const std::string every_row_taken = std::string("every row ") +
                                      (options.fp8 ? "runs FP8 GEMMs" : "") +
                                      (options.fp8 && options.moe_host ? " or " : "") +
                                      (options.moe_host ? "is an MoE row the host time takes" : "");
  for (const auto &[asked, overhead] :
       {std::pair{options.overhead, "layer overhead"}, std::pair{options.step, "step overhead"}})
    if (asked && level_rows.empty())
      return makeError(std::string("no row left to fit the ") + overhead +
                       " on (it is fitted on the level's rows, those no other figure takes): " +
                       every_row_taken + "; leave fp8 or moe-host out of --fit");
  if (options.level && level_rows.empty())
    return makeError("no row left to fit the BF16 level on: " + every_row_taken +
                     "; leave level out of --fit, or fit it alone (--fit level moves both curves "
                     "on every row)");

  HardwareFit fit;
  fit.level_before = curvePlateau(base.gemm_efficiency, base.efficiency);
  const bool has_fp8 = base.peak_fp8_tflops > 0;
  fit.fp8_level_before = has_fp8 ? curvePlateau(effectiveFp8Curve(base), base.efficiency) : 0;
  fit.moe_host_before_us = defaultMoeLayerHostUs(base);
  fit.overhead_before_us = fit.overhead_after_us = base.layer_overhead_us;
  fit.step_before_us = fit.step_after_us = base.step_overhead_us;
  if (fit.level_before <= 0) return makeError(base.name + " has no GEMM efficiency to scale");
  HardwareSpec fitted = base;
  // The step overhead is found from the errors without one (bestStepOverheadUs).
  if (options.step) fitted.step_overhead_us = 0;

  // The level: the BF16 curve at each plateau of the grid, the FP8 curve moved along (so no
  // level may lift it above 1). With the overhead: the grid at no overhead, then each overhead
  // with the levels from kOverheadLevelMargin below that fit's up, one table, the least mean of
  // all pairs winning (ties to the level nearest the base's, then to the smaller overhead).
  // The overhead alone: each overhead at the base's curves, ties to the base's overhead.
  FitStage level;
  std::size_t without_overhead = 0; ///< with the overhead fitted: its candidates at none
  ErrorTable without_step;          ///< with the step overhead fitted: the level's errors at none
  std::vector<double> level_measured_s; ///< the level's rows' measured steps
  level_measured_s.reserve(level_rows.size());
  for (const int r : level_rows)
    level_measured_s.push_back(cases[static_cast<std::size_t>(r)]->measured_step_s);
  level.members = level_rows;
  level.before = options.level ? fit.level_before : fit.overhead_before_us;
  fit.level_after = fit.level_before;
  if (options.level || options.overhead || options.step) {
    const double top =
        std::min(1.0, fit.level_before / std::max(fit.level_before, fit.fp8_level_before));
    const auto addCandidates = [&](double overhead_us, const std::vector<double> &levels) {
      HardwareSpec at = fitted;
      at.layer_overhead_us = overhead_us;
      if (!options.level) {
        level.grid.push_back(overhead_us);
        level.candidates.push_back(std::move(at));
        return;
      }
      for (const double value : levels) {
        level.grid.push_back(value);
        level.candidates.push_back(withLevel(at, fit.level_before, value));
      }
    };
    const std::vector<double> full = options.level ? levelGrid(top) : std::vector<double>{};
    if (options.overhead) {
      addCandidates(0, full);
      without_overhead = level.candidates.size();
      if (auto status = runStage(level, cases); !status) return status.error();
      // The window starts below the best level at no overhead; with the step overhead beside
      // them that level says less (each level takes its own step overhead), so the full grid.
      const double from =
          options.level && !options.step
              ? level.grid[static_cast<std::size_t>(level.best)] - kOverheadLevelMargin
              : 0;
      const std::vector<double> window = options.level ? levelGrid(top, from) : full;
      for (int step = 1; step * kOverheadFitStepUs <= kOverheadFitMaxUs + 1e-6; ++step)
        addCandidates(step * kOverheadFitStepUs, window);
    } else {
      addCandidates(fit.overhead_before_us, full);
    }
    if (auto status = runStage(level, cases); !status) return status.error();
    if (options.step) {
      // Each candidate (a level, with the layer overhead a pair) with its own best step
      // overhead: its errors moved by it, exactly.
      without_step = level.table;
      std::vector<double> overheads_us;
      level.table = withBestStepOverheads(without_step, level_measured_s, -1, overheads_us);
      for (std::size_t i = 0; i < level.candidates.size(); ++i)
        level.candidates[i].step_overhead_us = overheads_us[i];
      level.best = bestCandidate(level.table, -1, level.grid, level.before);
    }
    fitted = level.candidates[static_cast<std::size_t>(level.best)];
    if (options.level) fit.level_after = level.grid[static_cast<std::size_t>(level.best)];
    fit.overhead_after_us = fitted.layer_overhead_us;
    fit.step_after_us = fitted.step_overhead_us;
    fit.level_rows = static_cast<int>(level.members.size());
  }
  fit.fp8_level_after = has_fp8 ? curvePlateau(effectiveFp8Curve(fitted), fitted.efficiency) : 0;

  // The FP8 level over its rows, at the level just fitted, never above it.
  FitStage fp8;
  fp8.members = fp8_members;
  fp8.before = fit.fp8_level_after;
  if (options.fp8) {
    fp8.grid = levelGrid(std::min(1.0, fit.level_after));
    fp8.candidates.reserve(fp8.grid.size());
    for (const double value : fp8.grid)
      fp8.candidates.push_back(withFp8Level(fitted, value));
    if (auto status = runStage(fp8, cases); !status) return status.error();
    fit.fp8_level_after = fp8.grid[static_cast<std::size_t>(fp8.best)];
    fitted = fp8.candidates[static_cast<std::size_t>(fp8.best)];
    fit.fp8_rows = static_cast<int>(fp8.members.size());
    // Held at the BF16 level: would the grid have gone on falling past its top?
    if (fp8.best + 1 == static_cast<int>(fp8.grid.size()) && fit.level_after < 1) {
      const HardwareSpec above =
          withFp8Level(fitted, std::min(1.0, fit.level_after + kHardwareFitStep));
      auto table = errorTable(cases, fp8.members, {above});
      if (!table) return table.error();
      double sum_at = 0, sum_above = 0;
      for (std::size_t k = 0; k < fp8.members.size(); ++k) {
        sum_at += std::abs(fp8.table[k][static_cast<std::size_t>(fp8.best)]);
        sum_above += std::abs((*table)[k][0]);
      }
      fit.fp8_held_at_level = sum_above < sum_at;
    }
  }

  // The MoE layers' host time over the MoE rows, at the levels just fitted.
  FitStage host;
  host.members = moe_rows;
  host.before = fit.moe_host_before_us;
  fit.moe_host_after_us = fit.moe_host_before_us;
  if (options.moe_host) {
    for (double us = 0; us <= kMoeHostFitMaxUs + 1e-6; us += kMoeHostFitStepUs)
      host.grid.push_back(us);
    host.candidates.reserve(host.grid.size());
    for (const double value : host.grid) {
      HardwareSpec candidate = fitted;
      candidate.moe_layer_host_us = value;
      host.candidates.push_back(std::move(candidate));
    }
    if (auto status = runStage(host, cases); !status) return status.error();
    fit.moe_host_after_us = host.grid[static_cast<std::size_t>(host.best)];
    fitted = host.candidates[static_cast<std::size_t>(host.best)];
    fit.moe_host_rows = static_cast<int>(host.members.size());
  }

  // Before and after, and each row held out: the figure its row fits refitted on the other rows
  // of that figure (the stage's table holds every candidate's errors, so this is a search over
  // it, not a new fit; the stages' rows are disjoint, so nothing else moves).
  const std::vector<int> every_row = [&] {
    std::vector<int> every(rows.size());
    for (std::size_t r = 0; r < rows.size(); ++r)
      every[r] = static_cast<int>(r);
    return every;
  }();
  auto before = errorTable(cases, every_row, {base});
  if (!before) return before.error();
  auto after = errorTable(cases, every_row, {fitted});
  if (!after) return after.error();
  const auto heldOut = [](const FitStage &stage, int row) -> std::optional<double> {
    const auto at = std::find(stage.members.begin(), stage.members.end(), row);
    if (stage.best < 0 || at == stage.members.end()) return std::nullopt;
    const int k = static_cast<int>(at - stage.members.begin());
    const int i = bestCandidate(stage.table, k, stage.grid, stage.before);
    if (i < 0) return std::nullopt;
    return stage.table[static_cast<std::size_t>(k)][static_cast<std::size_t>(i)];
  };
  // With the step overhead: each candidate's overhead found again without the row held out,
  // the candidate of the least mean |error| over the others winning (bestCandidate's ties).
  const auto stepHeldOut = [&](int k) -> std::optional<double> {
    if (level.members.size() < 2) return std::nullopt;
    std::vector<double> overheads_us;
    const ErrorTable shifted =
        withBestStepOverheads(without_step, level_measured_s, k, overheads_us);
    const int i = bestCandidate(shifted, k, level.grid, level.before);
    if (i < 0) return std::nullopt;
    return shifted[static_cast<std::size_t>(k)][static_cast<std::size_t>(i)];
  };
  for (std::size_t r = 0; r < rows.size(); ++r) {
    FittedRow row;
    row.validation_case = cases[r];
    row.set = rows[r].set;
    row.fp8 = cases[r]->setup.training.gemm_precision == GemmPrecision::Fp8;
    row.before = (*before)[r][0];
    row.after = (*after)[r][0];
    const int self = static_cast<int>(r);
    const FitStage *owner = nullptr;
    for (const FitStage *stage : {&level, &fp8, &host})
      if (stage->best >= 0 &&
          std::find(stage->members.begin(), stage->members.end(), self) != stage->members.end())
        owner = stage;
    if (owner == &level && options.step)
      row.held_out = stepHeldOut(static_cast<int>(
          std::find(level.members.begin(), level.members.end(), self) - level.members.begin()));
    else if (owner)
      row.held_out = heldOut(*owner, self);
    else
      row.held_out = row.after; // no fit saw this row
    fit.before.add(row.before);
    fit.after.add(row.after);
    if (row.held_out) fit.held_out.add(*row.held_out);
    fit.rows.push_back(std::move(row));
  }

  // With the overhead and the level: the level's rows held out with the pair, and with the
  // level alone (the table's candidates at no overhead), which the pair must beat to be worth
  // its second figure.
  if ((options.overhead || options.step) && options.level)
    for (std::size_t k = 0; k < level.members.size(); ++k) {
      const FittedRow &row = fit.rows[static_cast<std::size_t>(level.members[k])];
      if (row.held_out) fit.overhead_held_out.add(*row.held_out);
      // The level alone: the candidates at no layer overhead, errors at no step overhead.
      const ErrorTable &alone = options.step ? without_step : level.table;
      const int i = bestCandidate(alone, static_cast<int>(k), level.grid, level.before,
                                  options.overhead ? without_overhead : level.grid.size());
      if (i >= 0) fit.level_alone_held_out.add(alone[k][static_cast<std::size_t>(i)]);
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
  const std::string overhead_text = [&] {
    char text[48];
    std::snprintf(text, sizeof text, "%.0f us", fit.overhead_after_us);
    return std::string(text);
  }();
  const std::string step_text = [&] {
    char text[48];
    std::snprintf(text, sizeof text, "%.1f ms", fit.step_after_us / 1000);
    return std::string(text);
  }();
  if (options.level)
    fitted.gemm_efficiency_source =
        "Level " + levelText(fit.level_after) +
        " of peak at the plateau, fitted by pipescope calibrate in steps of 0.01" +
        (options.overhead ? " beside a layer overhead of " + overhead_text : std::string()) +
        (options.step ? " beside a step overhead of " + step_text : std::string()) + " on " +
        std::to_string(level.members.size()) + " measured steps (" + rowList(rows, level.members) +
        "; " + summary(level.members) + "). The shape, and the level " +
        levelText(fit.level_before) + " before the fit, are " + base.name +
        "'s: " + base.gemm_efficiency_source;
  if (options.fp8)
    fitted.gemm_efficiency_fp8_source =
        "Level " + levelText(fit.fp8_level_after) +
        " of the FP8 peak at the plateau, fitted by pipescope calibrate in steps of 0.01, at most "
        "the BF16 level, on " +
        std::to_string(fp8.members.size()) + " measured FP8 steps (" + rowList(rows, fp8.members) +
        "; " + summary(fp8.members) + "). The shape is " + base.name + "'s: " +
        (base.gemm_efficiency_fp8_source.empty() ? base.gemm_efficiency_source
                                                 : base.gemm_efficiency_fp8_source);
  else if (options.level && !fitted.gemm_efficiency_fp8.empty())
    fitted.gemm_efficiency_fp8_source =
        "Moved with the BF16 level, from " + levelText(fit.level_before) + " to " +
        levelText(fit.level_after) + ", by pipescope calibrate. " + base.gemm_efficiency_fp8_source;
  if (options.overhead)
    fitted.notes = "layer_overhead_us: " + overhead_text +
                   " per transformer layer and microbatch, fitted by pipescope calibrate in steps "
                   "of 125 us" +
                   (options.level ? std::string(" together with the level") : std::string()) +
                   " on " + std::to_string(level.members.size()) + " measured steps (" +
                   rowList(rows, level.members) + "; " + summary(level.members) + ")." +
                   (fitted.notes.empty() ? "" : " " + fitted.notes);
  if (options.step)
    fitted.notes =
        "step_overhead_us: " + step_text + " per step, fitted by pipescope calibrate to 0.1 ms" +
        (options.level ? std::string(" together with the level") : std::string()) + " on " +
        std::to_string(level.members.size()) + " measured steps (" + rowList(rows, level.members) +
        "; " + summary(level.members) + ")." + (fitted.notes.empty() ? "" : " " + fitted.notes);
  if (options.moe_host) {
    char host_time[32];
    std::snprintf(host_time, sizeof host_time, "%.1f ms", fit.moe_host_after_us / 1000);
    fitted.notes = std::string("moe_layer_host_us: ") + host_time +
                   " per MoE layer and microbatch, fitted by pipescope calibrate in steps of "
                   "0.5 ms on " +
                   std::to_string(host.members.size()) + " measured MoE steps (" +
                   rowList(rows, host.members) + "; " + summary(host.members) + ")." +
                   (fitted.notes.empty() ? "" : " " + fitted.notes);
  }
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

std::vector<std::string> removeRowsBelowSpeedOfLight(std::vector<FitRow> &rows,
                                                     const HardwareSpec &base) {
  std::vector<std::string> below;
  std::vector<FitRow> kept;
  for (const auto &row : rows) {
    const ValidationCase &c = *row.validation_case;
    if (c.measured_step_s > 0) {
      ValidationCase on_base = c;
      on_base.setup.hardware = base;
      // A row the base cannot run (FP8 GEMMs on an A100) is kept: the fit refuses it, saying
      // why, as it would without this check.
      auto fastest = speedOfLightStepS(validationCasePlan(on_base));
      if (fastest && c.measured_step_s < *fastest) {
        char steps[96];
        std::snprintf(steps, sizeof steps, " (%.3f s measured, %.3f s at speed of light)",
                      c.measured_step_s, *fastest);
        below.push_back(row.set + "/" + c.id + steps);
        continue;
      }
    }
    kept.push_back(row);
  }
  rows = std::move(kept);
  return below;
}

} // namespace pipescope
