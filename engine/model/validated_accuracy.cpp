// The validation rows that check a plan, and their error (validated_accuracy.h).
#include "engine/model/validated_accuracy.h"

#include <algorithm>
#include <cstdio>
#include <map>

#include "engine/model/moe.h"

namespace pipescope {

namespace {

/// One shipped row's outcome, with what a plan is matched on.
struct RowOutcome {
  std::string set, hardware;
  GemmPrecision precision = GemmPrecision::Bf16;
  bool moe = false;
  std::optional<double> step_error, memory_error;
};

const std::vector<RowOutcome> &shippedOutcomes() {
  static const std::vector<RowOutcome> outcomes = [] {
    std::vector<RowOutcome> all;
    for (const std::string &name : validationSetNames()) {
      auto set = loadValidationSet(name);
      if (!set) continue; // the shipped sets load (test_validation); nothing to count if not
      for (const ValidationCase &row : set->cases) {
        auto result = predictValidationCase(row);
        if (!result) continue;
        // A row set aside quotes no time error (its memory still counts).
        all.push_back({set->name, row.hardware_name, row.setup.training.gemm_precision,
                       isMoe(row.setup.model),
                       countsInStepAccuracy(*result) ? result->step_error : std::nullopt,
                       result->memory_error});
      }
    }
    return all;
  }();
  return outcomes;
}

/// The shipped hardware presets as their files read back (toJson), once.
const std::map<std::string, nlohmann::json> &presetJson() {
  static const std::map<std::string, nlohmann::json> presets = [] {
    std::map<std::string, nlohmann::json> all;
    for (const std::string &name : hardwarePresetNames())
      if (auto preset = loadHardwareSpec(name)) all.emplace(name, toJson(*preset));
    return all;
  }();
  return presets;
}

/// Fields that say where figures come from, or set only what fits (the device-memory box sets
/// memory_gib): a file differing in them prices every step as its preset does.
bool pricesNothing(const std::string &field) {
  return field == "format" || field == "version" || field == "name" || field == "source" ||
         field == "notes" || field == "calibration" || field == "memory_gib" ||
         (field.size() > 7 && field.compare(field.size() - 7, 7, "_source") == 0);
}

} // namespace

std::vector<std::string> fieldsDifferingFromPreset(const HardwareSpec &hardware) {
  const auto &presets = presetJson();
  const auto preset = presets.find(hardware.name);
  if (preset == presets.end()) return {};
  const nlohmann::json own = toJson(hardware);
  std::vector<std::string> fields;
  for (const auto &[field, value] : own.items())
    if (!pricesNothing(field) &&
        (!preset->second.contains(field) || preset->second[field] != value))
      fields.push_back(field);
  for (const auto &[field, value] : preset->second.items())
    if (!pricesNothing(field) && !own.contains(field)) fields.push_back(field);
  std::sort(fields.begin(), fields.end());
  return fields;
}

ValidatedAccuracy validatedAccuracy(const std::string &hardware_name, GemmPrecision precision,
                                    bool moe) {
  const auto &outcomes = shippedOutcomes();
  ValidatedAccuracy accuracy;
  accuracy.hardware = hardware_name;
  const std::string precision_name(gemmPrecisionName(precision));
  const std::string kind = moe ? "MoE" : "dense";
  // Most specific first: the same GPU type, precision and kind of model; then the GPU type and
  // precision, the GPU type and kind, the GPU type alone.
  struct Scope {
    bool same_precision, same_kind;
    std::string text;
  };
  const Scope scopes[] = {
      {true, true, hardware_name + ", " + precision_name + ", " + kind},
      {true, false, hardware_name + ", " + precision_name + ", dense or MoE"},
      {false, true, hardware_name + ", any precision, " + kind},
      {false, false, hardware_name + ", any precision or model"},
  };
  for (const Scope &scope : scopes) {
    double signed_sum = 0;
    StepErrorSummary step;
    std::vector<std::string> sets;
    for (const RowOutcome &row : outcomes) {
      if (row.hardware != hardware_name || !row.step_error) continue;
      if (scope.same_precision && row.precision != precision) continue;
      if (scope.same_kind && row.moe != moe) continue;
      step.add(*row.step_error);
      signed_sum += *row.step_error;
      if (std::find(sets.begin(), sets.end(), row.set) == sets.end()) sets.push_back(row.set);
    }
    if (step.runs == 0) continue;
    accuracy.scope = scope.text;
    accuracy.step = step;
    accuracy.mean_signed_step_error = signed_sum / step.runs;
    accuracy.sets = std::move(sets);
    break;
  }
  if (accuracy.step.runs == 0) accuracy.scope = hardware_name;
  for (const RowOutcome &row : outcomes)
    if (row.hardware == hardware_name && row.memory_error) accuracy.memory.add(*row.memory_error);
  return accuracy;
}

ValidatedAccuracy validatedAccuracy(const HardwareSpec &hardware, GemmPrecision precision,
                                    bool moe) {
  ValidatedAccuracy accuracy = validatedAccuracy(hardware.name, precision, moe);
  if (const auto &calibration = hardware.calibration) {
    accuracy.calibrated = true;
    accuracy.scope = "calibrated on " + calibration->sets + " by pipescope calibrate";
    accuracy.step = {};
    accuracy.step.runs = calibration->runs;
    accuracy.step.sum = calibration->mean_abs_step_error * calibration->runs;
    accuracy.step.worst = calibration->worst_abs_step_error;
    accuracy.mean_signed_step_error = calibration->mean_step_error;
    accuracy.sets = {calibration->sets};
  } else {
    accuracy.differs_from_preset = fieldsDifferingFromPreset(hardware);
  }
  return accuracy;
}

ValidatedAccuracy validatedAccuracy(const ModelSetup &setup) {
  return validatedAccuracy(setup.hardware, setup.training.gemm_precision, isMoe(setup.model));
}

bool withinValidatedError(double step_s, double best_step_s, const ValidatedAccuracy &accuracy) {
  return accuracy.step.runs > 0 && best_step_s > 0 &&
         step_s <= best_step_s * (1 + accuracy.step.mean());
}

std::string validatedAccuracyText(const ValidatedAccuracy &accuracy) {
  char text[512];
  std::string line;
  if (accuracy.step.runs == 0) {
    line = "no published run on " + accuracy.hardware +
           " checks the step time: this prediction is unchecked";
  } else {
    std::string sets;
    for (const std::string &set : accuracy.sets)
      sets += (sets.empty() ? "" : ", ") + set;
    const char *direction = accuracy.mean_signed_step_error >= 0 ? "slow" : "fast";
    if (accuracy.calibrated)
      std::snprintf(text, sizeof text,
                    "on the %d measured run%s this hardware file was calibrated on (%s), each "
                    "predicted on the level the others give, the step time was off by %.1f %% "
                    "mean, %.1f %% worst, %.1f %% %s on average",
                    accuracy.step.runs, accuracy.step.runs == 1 ? "" : "s", sets.c_str(),
                    accuracy.step.mean() * 100, accuracy.step.worst * 100,
                    std::abs(accuracy.mean_signed_step_error) * 100, direction);
    else if (accuracy.step.runs == 1)
      std::snprintf(text, sizeof text,
                    "on 1 published run (%s: %s) the predicted step time was %.1f %% %s",
                    accuracy.scope.c_str(), sets.c_str(), accuracy.step.worst * 100, direction);
    else
      std::snprintf(text, sizeof text,
                    "on %d published runs (%s: %s) the predicted step time was off by %.1f %% "
                    "mean, %.1f %% worst, %.1f %% %s on average",
                    accuracy.step.runs, accuracy.scope.c_str(), sets.c_str(),
                    accuracy.step.mean() * 100, accuracy.step.worst * 100,
                    std::abs(accuracy.mean_signed_step_error) * 100, direction);
    line = text;
  }
  if (!accuracy.differs_from_preset.empty()) {
    std::string fields;
    for (const std::string &field : accuracy.differs_from_preset)
      fields += (fields.empty() ? "" : ", ") + field;
    line += " (runs on the preset " + accuracy.hardware +
            "; this hardware file differs from it in " + fields +
            ", which no published run checks)";
  }
  if (accuracy.memory.runs > 0) {
    std::snprintf(
        text, sizeof text, "; peak memory on %d published %s run%s: %.1f %% mean, %.1f %% worst",
        accuracy.memory.runs, accuracy.hardware.c_str(), accuracy.memory.runs == 1 ? "" : "s",
        accuracy.memory.mean() * 100, accuracy.memory.worst * 100);
    line += text;
  }
  return line;
}

nlohmann::json validatedAccuracyJson(const ValidatedAccuracy &accuracy) {
  return {{"scope", accuracy.scope},
          {"hardware", accuracy.hardware},
          {"calibrated", accuracy.calibrated},
          {"runs", accuracy.step.runs},
          {"mean_abs_step_error", accuracy.step.mean()},
          {"worst_abs_step_error", accuracy.step.worst},
          {"mean_step_error", accuracy.mean_signed_step_error},
          {"sets", accuracy.sets},
          {"differs_from_preset", accuracy.differs_from_preset},
          {"memory_runs", accuracy.memory.runs},
          {"mean_abs_memory_error", accuracy.memory.mean()},
          {"worst_abs_memory_error", accuracy.memory.worst}};
}

} // namespace pipescope
