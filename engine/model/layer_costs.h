#pragma once
// Per-op work of one transformer layer, the embedding and the output head on one TP rank for
// one microbatch (DESIGN.md §5 "Cost model"): every GEMM from its shape through the hardware's
// efficiency curve (gemm_efficiency.h), the memory-bound kernels at the achieved HBM bandwidth,
// attention as materialized scores or FlashAttention. The model derivation adds the TP
// collectives and recomputation and sums these into each stage's F, I (input-grad) and W.
#include <algorithm>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "engine/model/cost_breakdown.h"
#include "engine/model/gemm_efficiency.h"
#include "engine/model/model_setup.h"

namespace pipescope {

/// A part of the model (one layer, the embedding, the head): its ops and their sums.
struct PartWork {
  std::vector<LayerOp> ops;
  double forward_us = 0, input_grad_us = 0, weight_grad_us = 0;
  double selective_recompute_us = 0; ///< forward time of the selectively recomputed ops
  /// Sums by category of forward + input-grad + weight-grad.
  double gemm_us = 0, attention_us = 0, memory_bound_us = 0, overhead_us = 0;
  void add(LayerOp op);
  /// Adds `count` times this part's share of one pass to `into`, by category.
  enum class Pass { Forward, InputGrad, WeightGrad };
  void addTo(PassBreakdown &into, Pass pass, double count) const;
};

/// The attention block's widths per token (whole layer, before TP), from heads, kv_heads and
/// head_dim, or from the multi-head latent attention fields (model_setup.h).
struct AttentionShape {
  bool latent = false;  ///< multi-head latent attention (MLA)
  double score_dim = 0; ///< per head: Q·Kᵀ contracts over it (MLA: qk_nope + qk_rope)
  double value_dim = 0; ///< per head: V's width and the attention output's
  double query = 0;     ///< heads × score_dim
  double key = 0;       ///< K held for attention: kv_heads × score_dim (MLA: heads × score_dim)
  double value = 0;     ///< V held for attention: kv_heads × value_dim (MLA: heads × value_dim)
  double output = 0;    ///< heads × value_dim, the output projection's input
  double q_latent = 0;  ///< MLA: q_lora_rank (0: queries straight from h)
  double kv_latent = 0; ///< MLA: kv_lora_rank
  double rope_key = 0;  ///< MLA: qk_rope_head_dim, the decoupled key shared by the heads
  /// Weight-matrix parameters: split over TP (projections to and from the heads) and held whole
  /// on every TP rank (MLA's down-projections, as Megatron-Core duplicates them).
  double sharded_params = 0, replicated_params = 0;
  /// Norm weights of the latents (MLA: q_lora_rank + kv_lora_rank), held whole.
  double latent_norm_params = 0;
};
AttentionShape attentionShapeOf(const ModelSpec &model);

/// The hardware's GEMM pricing (curve or flat factor, HBM roofline); with `fp8`, its FP8 peak and
/// FP8 curve (fp8CurveFromBf16 when it has none).
GemmHardware gemmHardwareOf(const HardwareSpec &hardware, bool fp8 = false);

/// The FP8 curve a hardware without its own implies: the BF16 curve's efficiencies at
/// peak_fp8_tflops / peak_tflops times their FLOPs (curveAtFasterRate), the same time on the
/// tensor cores; the BF16 curve as it is when either peak is missing.
std::vector<GemmEfficiencyPoint> fp8CurveFromBf16(const HardwareSpec &hardware);

/// Inputs shared by every part: tensor parallelism and sequence parallelism shape the shards.
struct LayerShape {
  int tp = 1;
  bool sequence_parallel = false;
  bool dense_mlp = true; ///< false: an MoE layer, whose MLP moe.h prices
  /// CP ranks splitting the sequence: the model's sequence_length is then this rank's share and
  /// attention sees context_parallel times as many keys.
  int context_parallel = 1;
  /// The linear layers' GEMMs in FP8 (TrainingSetup::gemm_precision), with their quantization.
  bool fp8_gemms = false;
  /// Under TP communication overlap (TrainingSetup::tp_comm_overlap), the GEMMs next to a TP
  /// all-gather or reduce-scatter run as this many row chunks, one per ring-exchange step
  /// (Transformer Engine's userbuffers): the forward of QKV (MLA: the projections of the
  /// hidden state), attention output, MLP up and down, and the input-grad of attention output
  /// and MLP down. 1: whole GEMMs.
  int tp_overlap_chunks = 1;
  /// Bytes per parameter of the separate gradient add each microbatch when the gradient-
  /// accumulation fusion is off (TrainingSetup::gradient_accumulation_fusion): the 16-bit
  /// gradient read, the buffer read and written. 0: fused, nothing beyond the GEMM. With it
  /// the layer's parameters on this rank (`params`), whose W pass the add joins.
  double gradient_add_bytes = 0;
  double params = 0;
  /// Materialized attention's mask as its own pass (TrainingSetup::masked_softmax_fusion off).
  bool unfused_softmax = false;
};

/// The GEMMs beside a layer's four SP collectives, which TP overlap hides the collectives
/// behind (TrainingSetup::tp_comm_overlap): the all-gathers feed the attention's projections of
/// the hidden state (QKV; MLA's q and kv down-projections, or q_proj) and the MLP's first GEMM,
/// the reduce-scatters follow the attention output and the MLP's last GEMM. Names of LayerOps.
/// kHeadGemms: the output head, column-parallel like QKV (TrainingSetup::tp_backward_overlap).
inline constexpr std::string_view kAttentionGatherGemms[] = {"qkv", "q_proj", "q_down", "kv_down"};
inline constexpr std::string_view kAttentionScatterGemms[] = {"attention_out"};
inline constexpr std::string_view kMlpGatherGemms[] = {"mlp_gate_up", "mlp_up"};
inline constexpr std::string_view kMlpScatterGemms[] = {"mlp_down"};
inline constexpr std::string_view kHeadGemms[] = {"output_head"};
/// Whether `name` is one of `names`.
inline bool namedIn(std::span<const std::string_view> names, std::string_view name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

/// Bytes Transformer Engine's FP8 current scaling moves to quantize one linear layer's GEMM
/// operands, per element of the 16-bit tensor: an amax pass (read 2 bytes), then a cast that reads
/// it again and writes the FP8 copy and its transpose (1 + 1 bytes), since Hopper's FP8 GEMMs
/// take both operands K-major. 6 bytes per element, for the forward's input and the input-grad's
/// output gradient.
inline constexpr double kFp8QuantizeBytesPerElement = 6;

/// The memory-bound FP8 quantization of `elements_forward` input elements in the forward and
/// `elements_backward` output-gradient elements in the input-grad pass (one op per part).
LayerOp fp8QuantizeOp(std::string name, double elements_forward, double elements_backward,
                      const HardwareSpec &hardware);

/// The separate gradient add of `params` parameters in the W pass (LayerShape::
/// gradient_add_bytes per parameter), when the gradient-accumulation fusion is off.
LayerOp gradientAccumulationOp(double params, double bytes_per_param, const HardwareSpec &hardware);

/// A transformer layer's fixed time for one microbatch beyond its kernels' work
/// (HardwareSpec::layer_overhead_us), a third each in the forward, input-grad and weight-grad
/// passes, as the MoE layers' host time is split (moeLayerHostUs). Full recomputation redoes the
/// forward's third with the forward.
LayerOp layerOverheadOp(const HardwareSpec &hardware);

PartWork transformerLayerWork(const ModelSpec &model, const HardwareSpec &hardware,
                              const LayerShape &shape);
/// The first stage's embedding lookup (vocab-parallel), position add and dropout, and in W the
/// dense gradient of the rank's table accumulated into a buffer of `gradient_bytes` an element.
PartWork embeddingWork(const ModelSpec &model, const HardwareSpec &hardware,
                       const LayerShape &shape, double gradient_bytes);
/// A multi-token-prediction module beyond its transformer layer and head pass (DeepSeek-V3
/// §2.2): the norms of its two inputs and the 2h→h projection.
PartWork mtpProjectionWork(const ModelSpec &model, const HardwareSpec &hardware,
                           const LayerShape &shape);
/// The last stage's final norm, output head GEMMs and the cross-entropy over the vocabulary,
/// the loss priced as `cross_entropy` (TrainingSetup::cross_entropy) runs it.
PartWork headWork(const ModelSpec &model, const HardwareSpec &hardware, const LayerShape &shape,
                  std::string_view cross_entropy = "vocab-parallel");

/// Adam's step after the last backward: it reads and writes every optimizer state once, reads
/// the gradient (fp32 main gradient, 4 bytes) and writes the 16-bit weights, for `parameters`
/// parameters held by the rank. Microseconds; 0 when the hardware gives no HBM bandwidth.
double optimizerStepUs(double parameters, double optimizer_bytes_per_param, double weight_bytes,
                       const HardwareSpec &hardware);

/// Bytes one memory-bound pass moves at the achieved HBM bandwidth, in microseconds (0 when the
/// hardware gives no HBM bandwidth).
double memoryBoundUs(double bytes, const HardwareSpec &hardware);

} // namespace pipescope
