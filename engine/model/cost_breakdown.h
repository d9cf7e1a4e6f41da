#pragma once
// What each op's time is made of (DESIGN.md §5, `simulate --json`'s "cost_breakdown"): per
// virtual stage and pass, GEMMs, attention, memory-bound kernels, TP collectives and
// recomputation; per layer, every op of layer_costs.h.
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/op.h"

namespace pipescope {

/// What an op's time is bound by.
/// Overhead: a layer's fixed time beyond its kernels' work (HardwareSpec::layer_overhead_us).
enum class OpCategory { Gemm, Attention, MemoryBound, Overhead };
/// "gemm", "attention", "memory-bound", "overhead"
std::string_view opCategoryName(OpCategory category);

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
  /// MoE layers' host time the GPU waits out (moeLayerHostUs), recomputation's included
  double host_us = 0;
  /// Every transformer layer's fixed time beyond its kernels' work (HardwareSpec::
  /// layer_overhead_us): the gaps between its kernels, however many tokens it runs
  double overhead_us = 0;
  double total() const {
    return gemm_us + attention_us + memory_bound_us + tp_us + ep_us + cp_us + recompute_us + dp_us +
           host_us + overhead_us;
  }
  PassBreakdown &operator+=(const PassBreakdown &other);
};

struct StageBreakdown {
  int layers = 0;
  PassBreakdown forward, input_grad, weight_grad;
  /// TP time an input-grad op adds where W runs as its own op (Costs::input_grad_split_extra_us).
  double split_input_grad_tp_us = 0;
};

/// One named part of an op's time.
struct CostPart {
  std::string_view name; ///< "GEMM", "attention", "memory-bound", "TP comm", "EP all-to-all",
                         ///< "CP ring", "recompute", "DP comm", "MoE host",
                         ///< "layer overhead"
  double us = 0;
};
/// The parts of a pass that take time, in that fixed order.
std::vector<CostPart> costParts(const PassBreakdown &pass);

/// What one op of the schedule is made of, from its stage's breakdown: F the forward pass, I the
/// input-grad pass, W the weight-grad pass, B the two; an overlapped F&B pair its forward's and
/// its full backward's parts together. Nothing when a stage has no breakdown.
std::optional<PassBreakdown> opBreakdown(const std::vector<StageBreakdown> &stages, const Op &op);

/// An op's time as its parts, for the explorer's hover: "F 1.92 ms = GEMM 1.41 + memory-bound
/// 0.22 + attention 0.18 + TP comm 0.11" (µs below a millisecond). `op_us` is the op's simulated
/// time; an overlapped pair shorter than its parts ends with "− overlap X", what one chunk's
/// compute hides of the other's all-to-all. `pair_compute_stretch` (dispatcherSmShare, > 1 when
/// DeepEP's or HybridEP's kernels hold SMs beside the pair) adds "+ dispatcher SMs X" to a pair:
/// its parts other than the all-to-all and the MoE host time, stretched. Nothing when the parts do
/// not add up to the op's time (costs typed in or calibrated instead of derived), so the hover
/// never shows a wrong sum.
std::optional<std::string> describeOpCost(const std::vector<StageBreakdown> &stages, const Op &op,
                                          double op_us, double pair_compute_stretch = 1);

nlohmann::json toJson(const PassBreakdown &pass);
/// {"stages": [{"stage", "layers", "forward", "input_grad", "weight_grad"}...],
///  "layer_ops": [{"name", "category", "forward", "input_grad", "weight_grad"}...] of a dense
///  layer, and for an MoE model "moe_layer_ops" likewise of an MoE layer} in µs.
nlohmann::json costBreakdownJson(const std::vector<StageBreakdown> &stages,
                                 const std::vector<LayerOp> &layer_ops,
                                 const std::vector<LayerOp> &moe_layer_ops = {});

} // namespace pipescope
