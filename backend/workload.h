#pragma once
// Sizing the synthetic work from the plan (DESIGN.md §7 "Compute"):
// - a plan with a model runs its layers with the model's shapes (per TP rank), every dimension
//   (head width, FFN width, sequence, vocabulary) multiplied by the size scale, so the FLOPs scale
//   about as its cube and the proportions between F, I and W and between stages stay the model's;
// - a plan without a model runs, per op, a count of square "unit" GEMMs proportional to the op's
//   planned time (F, I = B - W, W of its stage), scaled from planned to device microseconds.
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "backend/options.h"
#include "engine/evaluation.h"
#include "engine/plan_file.h"
#include "kernels/stage_work.h"

namespace pipescope::backend {

/// What rank 0 measured on its device, shared so every rank sizes its work the same way.
struct DeviceSpeed {
  int unit = 64;             ///< side of the unit GEMM
  double unit_gemm_us = 100; ///< time of one unit GEMM
  double flops_per_us = 1e4; ///< sustained GEMM rate on model-sized shapes
};

struct Workload {
  std::vector<kernels::StageWork> stages; ///< per virtual stage
  double size_scale = 1;                  ///< applied (after the automatic choice)
  bool from_model = false;
  /// Planned op time × this = expected device time (plans without a model: the size scale).
  double expected_time_factor = 1;
  std::string time_factor_source = "the size scale"; ///< how the factor was found
  nlohmann::json toJson() const;
};

/// Target duration of the largest op when the size scale is automatic.
double automaticTargetMicroseconds(DeviceKind device);

/// Sizes the stages. `requested_scale` 0 = automatic. The error says why no size works.
Result<Workload> planWorkload(const Plan &plan, const Evaluation &evaluation,
                              const ModelDerivation &derivation, DeviceKind device,
                              double requested_scale, const DeviceSpeed &speed);

} // namespace pipescope::backend
