#include "engine/model/speed_of_light.h"

#include "engine/evaluation.h"

namespace pipescope {

ModelSetup speedOfLightSetup(const ModelSetup &setup) {
  ModelSetup fastest = setup;
  HardwareSpec &h = fastest.hardware;
  // No curve: every GEMM at `efficiency`, FP8 ones at the FP8 peak (HardwareSpec).
  h.gemm_efficiency.clear();
  h.gemm_efficiency_fp8.clear();
  h.efficiency = 1;
  h.attention_efficiency = 1;
  h.memory_efficiency = 1;
  h.intra_node_bus_efficiency = 1;
  h.inter_node_bus_efficiency = 1;
  h.intra_node_latency_us = 0;
  h.inter_node_latency_us = 0;
  h.collective_gemm_slowdown = 0;
  h.sm_count = 0; // the SMs a dispatcher's kernels hold are not priced without it
  h.layer_overhead_us = 0;
  h.step_overhead_us = 0;
  h.moe_layer_host_us = 0;
  fastest.training.moe_layer_host_us = 0;
  return fastest;
}

Result<double> speedOfLightStepS(const Plan &plan) {
  if (!plan.model)
    return makeError("the speed of light needs a model: a plan with given costs has no peaks to "
                     "run them at");
  Plan fastest = plan;
  fastest.model = speedOfLightSetup(*plan.model);
  ModelDerivation derivation;
  auto evaluation = evaluatePlan(fastest, {}, &derivation);
  if (!evaluation) return makeError("at its speed of light: " + evaluation.error().message);
  return reportModel(*fastest.model, fastest.mesh, evaluation->schedule, derivation,
                     evaluation->simulation)
      .step_time_s;
}

} // namespace pipescope
