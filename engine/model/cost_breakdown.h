#pragma once
// What each op's time is made of (DESIGN.md §5, `simulate --json`'s "cost_breakdown"): per
// virtual stage and pass, GEMMs, attention, memory-bound kernels, TP collectives and
// recomputation; per layer, every op of layer_costs.h.
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace pipescope {

/// What an op's time is bound by.
enum class OpCategory { Gemm, Attention, MemoryBound };
std::string_view opCategoryName(OpCategory category); ///< "gemm", "attention", "memory-bound"

/// One op of a layer on one TP rank, per microbatch, in microseconds.
struct LayerOp {
  std::string name; ///< e.g. "qkv", "mlp_down", "softmax", "input_layernorm"
  OpCategory category = OpCategory::Gemm;
  double forward_us = 0;
  double input_grad_us = 0;  ///< its part of the input-grad pass (I)
  double weight_grad_us = 0; ///< its part of the weight-grad pass (W)
  /// Work the layer redoes in its backward under selective recomputation (the attention core).
  bool selective_recompute = false;
};

/// One pass (F, I or W) of a stage for one microbatch, split by what its time is spent on.
struct PassBreakdown {
  double gemm_us = 0, attention_us = 0, memory_bound_us = 0;
  double tp_us = 0;        ///< TP collectives on the critical path
  double ep_us = 0;        ///< MoE dispatch and combine all-to-all
  double cp_us = 0;        ///< CP ring exchange of K/V not hidden by attention
  double recompute_us = 0; ///< the forward work recomputation redoes (input-grad pass only)
  /// ZeRO-3 parameter all-gathers (F, I) and gradient reduce-scatters (I) not hidden by compute
  double dp_us = 0;
  double total() const {
    return gemm_us + attention_us + memory_bound_us + tp_us + ep_us + cp_us + recompute_us + dp_us;
  }
};

struct StageBreakdown {
  int layers = 0;
  PassBreakdown forward, input_grad, weight_grad;
};

nlohmann::json toJson(const PassBreakdown &pass);
/// {"stages": [{"stage", "layers", "forward", "input_grad", "weight_grad"}...],
///  "layer_ops": [{"name", "category", "forward", "input_grad", "weight_grad"}...]} in µs.
nlohmann::json costBreakdownJson(const std::vector<StageBreakdown> &stages,
                                 const std::vector<LayerOp> &layer_ops);

} // namespace pipescope
