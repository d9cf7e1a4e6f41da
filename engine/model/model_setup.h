#pragma once
// A model, the hardware it runs on and the training options: what a person planning a run
// knows, from which the engine derives every op time, transfer and memory figure (DESIGN.md §5).
#include <cstdint>
#include <iterator>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/costs.h"
#include "engine/mesh.h"
#include "engine/model/cost_breakdown.h"
#include "engine/model/gemm_efficiency.h"
#include "engine/model/layer_layout.h"
#include "engine/result.h"
#include "engine/schedule.h"
#include "engine/simulator.h"

namespace pipescope {

/// A decoder-only transformer.
struct ModelSpec {
  std::string name;
  std::string source; ///< where the numbers come from
  int layers = 32;
  int hidden = 4096; ///< h
  int ffn_hidden = 14336;
  int heads = 32;   ///< a
  int kv_heads = 8; ///< grouped-query attention; = heads for multi-head attention
  /// Dimension of one attention head; 0 = hidden / heads. Qwen3-235B-A22B has 64 heads of 128 on
  /// a hidden size of 4096, so its attention is 8192 wide, not h (Q and output projections
  /// h × 8192).
  int head_dim = 0;
  /// Multi-head latent attention (DeepSeek-V2/V3; DeepSeek-V3 report, arXiv:2412.19437, §2.1.1):
  /// kv_lora_rank > 0 turns it on. Keys and values come from a shared latent c_KV of
  /// kv_lora_rank (down-projection h → kv_lora_rank + qk_rope_head_dim, the second part the
  /// decoupled RoPE key shared by all heads; up-projection kv_lora_rank → heads ×
  /// (qk_nope_head_dim + v_head_dim)); queries from a latent of q_lora_rank (0: projected
  /// straight from h). Scores have qk_nope_head_dim + qk_rope_head_dim per head, values
  /// v_head_dim; RMSNorm on both latents. kv_heads and head_dim do not apply.
  int q_lora_rank = 0;
  int kv_lora_rank = 0;
  int qk_nope_head_dim = 0;
  int qk_rope_head_dim = 0;
  int v_head_dim = 0;
  int vocab = 128256;
  int sequence_length = 8192; ///< s
  int microbatch_size = 1;    ///< b
  std::string dtype = "bf16"; ///< "bf16", "fp16" (2 bytes) or "fp32" (4 bytes)
  bool tied_embeddings = false;
  bool gated_mlp = true; ///< SwiGLU (three FFN matrices) rather than two
  int position_embeddings =
      0; ///< rows of a learned absolute position table (GPT-3: 2048); 0 = rotary
  bool linear_biases = false;   ///< biases on the linear layers (GPT-3) or none (Llama)
  std::string norm = "rmsnorm"; ///< "rmsnorm" (weight only) or "layernorm" (weight and bias)
  /// Multi-token-prediction layers after the last transformer layer (DeepSeek-V3 §2.2): each a
  /// transformer layer, a 2h→h projection and a pass through the shared output head.
  int mtp_layers = 0;
  /// "materialized": the s×s scores are computed, stored and read back (Korthikanti's 5·a·s/h
  /// activation term; what Megatron-LM measured in 2021-22; the default, so files that do not
  /// say keep their meaning). "flash": FlashAttention, no s×s tensor, its backward recomputes.
  std::string attention = "materialized";
  /// Dropout after attention, on the scores and after the MLP (GPT-2/3, Megatron's GPT), with its
  /// 1-byte masks; Llama-style models train without it.
  bool dropout = true;
  /// Mixture-of-experts (0 experts: dense). Every layer after the first `first_dense_layers` has
  /// `experts` routed experts of FFN size `expert_ffn_hidden`, of which each token uses
  /// `experts_per_token` (top-k), plus `shared_experts` that every token uses.
  int experts = 0;
  int experts_per_token = 0;
  int shared_experts = 0;
  int expert_ffn_hidden = 0;
  int first_dense_layers = 0;
  /// Tokens an expert takes at most, as a multiple of the balanced share (Switch Transformer's
  /// capacity factor); 0 = dropless (no cap).
  double capacity_factor = 0;
  /// Group-limited (node-limited) routing, Megatron's --moe-router-num-groups and
  /// --moe-router-group-topk (DeepSeek-V3 §2.1.2: each token's experts lie in at most
  /// `router_group_topk` of `router_groups` expert groups, DeepSeek-V3 8 and 4). 0: unlimited.
  int router_groups = 0;
  int router_group_topk = 0;
  std::string notes; ///< free text shown with the preset
};

/// One GPU type and the links of the cluster it sits in.
/// What `pipescope calibrate` fitted a hardware file's GEMM levels on (docs/cost-model.md,
/// "Calibrating the GEMM level to your runs"): the measured runs, and their step error with each
/// one held out (predicted on the levels the other runs give). A plan on the file quotes this as
/// the error to expect, in place of the published runs of its GPU type.
struct HardwareCalibration {
  int runs = 0;                    ///< runs held out (each predicted without it)
  double mean_abs_step_error = 0;  ///< their mean |(predicted − measured) / measured|
  double worst_abs_step_error = 0; ///< and worst
  double mean_step_error = 0;      ///< signed mean: + = predicted slow
  std::string sets;                ///< the validation files or sets they came from
};

struct HardwareSpec {
  std::string name;
  std::string source;
  double peak_tflops = 989; ///< dense bf16 per GPU
  double efficiency = 0.5;  ///< every GEMM's fraction of peak when there is no curve
  /// GEMM efficiency over size (gemm_efficiency.h); empty: `efficiency` for every GEMM.
  std::vector<GemmEfficiencyPoint> gemm_efficiency;
  std::string gemm_efficiency_source; ///< where the curve's points come from
  /// HBM bandwidth (GB/s) and the fraction of it memory-bound kernels achieve; 0 = memory-bound
  /// work (norms, activations, softmax, optimizer step) is not priced, as before it was modeled.
  double hbm_gbps = 0;
  double memory_efficiency = 0.8;
  /// FlashAttention's achieved fraction of peak; 0 = the GEMM curve at one head's score GEMM.
  double attention_efficiency = 0;
  /// How much slower GEMMs run while a collective's kernel is resident beside them (an
  /// overlapped DP sync: collectiveContentionUs); 0 = not priced (not measured on this GPU).
  double collective_gemm_slowdown = 0;
  /// Dense FP8 (E4M3/E5M2) tensor-core peak per GPU; 0 = no FP8 tensor cores (A100), so a plan
  /// asking for FP8 GEMMs is refused.
  double peak_fp8_tflops = 0;
  /// FP8 GEMM efficiency over size, as a fraction of peak_fp8_tflops (gemm_efficiency.h); empty:
  /// the bf16 curve's (or `efficiency`) at the FP8 peak, an optimistic bound.
  std::vector<GemmEfficiencyPoint> gemm_efficiency_fp8;
  std::string gemm_efficiency_fp8_source;
  double memory_gib = 80;
  double intra_node_gbps = 450; ///< per direction, NVLink class, GB/s
  double intra_node_latency_us = 3;
  double inter_node_gbps = 50; ///< per GPU, InfiniBand class, GB/s
  double inter_node_latency_us = 10;
  /// Bus bandwidth a collective achieves over the link's per-direction bandwidth (nccl-tests'
  /// busbw / link bandwidth); 1 = the link's full figure.
  double intra_node_bus_efficiency = 1;
  double inter_node_bus_efficiency = 1;
  /// Where the bus efficiencies (and link figures) come from: the measurement each is read off.
  std::string bus_efficiency_source;
  int gpus_per_node = 8; ///< the default for the mesh; the mesh's own value lays out ranks
  /// Streaming multiprocessors per GPU; 0 = unknown, so the SMs a MoE dispatcher's kernels hold
  /// beside an overlapped F&B pair's compute (dispatcherSmShare) are not priced.
  int sm_count = 0;
  std::string notes;
  /// The MoE layers' host time on this machine (TrainingSetup::moe_layer_host_us where a plan
  /// leaves it at its default): what `pipescope calibrate --fit moe-host` fits to your MoE runs.
  /// Negative (the presets): kDefaultMoeLayerHostUs.
  double moe_layer_host_us = -1;
  /// Every transformer layer's fixed time for one microbatch, forward and backward together,
  /// beyond what its kernels' work takes: the gaps between its kernels (launches, the waits of
  /// its collectives), the same at any token count (docs/cost-model.md, "A layer's fixed
  /// overhead"). 0 (a file without it, as the presets): not priced. `pipescope calibrate --fit
  /// level,overhead` fits it to your runs.
  double layer_overhead_us = 0;
  /// A fixed time every training step pays once, after each rank's last op, beyond the work
  /// pipescope prices: the framework's own per-step host work (the next batch, logging and the
  /// loss's reduction, the optimizer's launches, a per-step synchronization), the same at any
  /// microbatch count (docs/cost-model.md, "A step's fixed overhead"). It joins the step's tail
  /// beside the gradient sync and the optimizer step. 0 (a file without it, as the presets):
  /// not priced. `pipescope calibrate --fit level,step` fits it to your runs.
  double step_overhead_us = 0;
  /// Set by `pipescope calibrate` (absent from the presets).
  std::optional<HardwareCalibration> calibration;
};

/// Activation recomputation. Selective: Megatron's (Korthikanti et al. 2022, §5: the attention
/// core recomputed, every other activation kept). SelectiveOp: torchtitan's per-op selective
/// checkpointing of a dense layer (selective_ac_option "op"): each layer keeps its input, the
/// attention output and every second matmul's output (Q, V, the MLP's first projection and, for a
/// gated MLP, its down projection), and recomputes the rest in its backward.
enum class Recompute { None, Selective, Full, SelectiveOp };

/// How NCCL runs an all-reduce (NCCL_ALGO): "auto" lets its tuner take the cheaper of ring and
/// tree for each message (engine/model/collectives.h), "ring" and "tree" force one. All-gather and
/// reduce-scatter are rings whatever this says: NCCL has no tree for them.
enum class CollectiveAlgorithm { Auto, Ring, Tree };

/// The precision of the linear layers' GEMMs. Fp8: as Transformer Engine runs them (fp8_autocast):
/// the GEMMs of every TE linear layer (QKV or MLA projections, attention output, MLP and expert
/// GEMMs, the MTP projection) in forward, input-grad and weight-grad at the FP8 peak, with their
/// inputs and output gradients quantized by memory-bound amax-and-cast kernels; attention, the
/// router and the output head stay in 16 bits. Each linear layer's input, kept for its weight
/// gradient, is kept as its FP8 cast (one byte an element); other stored activations stay 16-bit.
enum class GemmPrecision { Bf16, Fp8 };

/// Training options that change costs and memory.
struct TrainingSetup {
  Recompute recompute = Recompute::None;
  /// Megatron-Core's --recompute-modules beyond core attention, with recompute none or selective
  /// (its selective granularity; core_attn is Recompute::Selective): each module's outputs are
  /// dropped after the forward and rebuilt in the backward (megatron/core/transformer/
  /// transformer_layer.py, multi_latent_attention.py, moe/experts.py at adc69dba2d).
  /// "layernorm": the outputs of the norms that stand alone (before MLA's down-projections and
  /// before an MoE layer's router; a norm fused into Transformer Engine's LayerNormLinear has
  /// none to drop); "mla_up_proj": MLA's normalized latents and the queries, keys and values of
  /// its up-projections; "mlp": a dense layer's whole MLP with its norm; "moe_act": the routed
  /// experts' activation output (the down projection's input). Kept in this order, no repeats.
  std::vector<std::string> recompute_modules;
  /// Data-parallel sharding (ZeRO, Rajbhandari et al. 2020, §5.1; Megatron's distributed
  /// optimizer is stage 1, PyTorch FSDP / FSDP2 full sharding stage 3) over the dp ranks (CP
  /// ranks included, as they reduce gradients together): 0 = none (plain all-reduce), 1 =
  /// optimizer state, 2 = + gradients, 3 = + parameters, all-gathered one transformer layer at a
  /// time. Plan files' "zero1": true means 1.
  int zero_stage = 0;
  bool sequence_parallel = false;
  /// 12 = fp32 master weights + Adam m + Adam v, 4 bytes each (mixed-precision Adam as counted by
  /// the ZeRO paper, Rajbhandari et al. 2020, K = 12). Some texts count only m and v (8).
  double optimizer_bytes_per_param = 12;
  bool balance_layers = false; ///< split layers to minimize the slowest stage
  /// Uneven stages: what each model stage holds (empty: the even or balanced split). Set from a
  /// Megatron layout string, torchtitan's options or a layers-per-stage list (layer_layout.h).
  LayerLayout layout;
  /// DP gradient sync overlapped with the backward tail (stage 3: also the parameter all-gathers
  /// with the forward and backward compute, one layer ahead).
  bool overlap_gradient_sync = false;
  /// TP all-gathers and reduce-scatters overlapped with the GEMMs they feed or follow
  /// (Megatron's --tp-comm-overlap, Transformer Engine's userbuffers); needs sequence
  /// parallelism. false: every TP collective exposed.
  bool tp_comm_overlap = false;
  /// The backward's TP collectives at each column-parallel linear layer (QKV or the MLA
  /// projections, MLP up, the output head) run beside that layer's own GEMMs, as Megatron-LM has
  /// run them by default since September 2021 (commit 3f65246911; today
  /// LinearWithGradAccumulationAndAsyncCommunication) and Transformer Engine's Linear does: without
  /// sequence parallelism the input gradient's all-reduce beside the weight-gradient GEMM; with
  /// it the input's all-gather again beside the input-gradient GEMM and the input gradient's
  /// reduce-scatter beside the weight-gradient GEMM. The row-parallel layers' all-gather (SP)
  /// stays exposed. false: every backward TP collective exposed (Megatron-LM before it, as in
  /// the SC'21 runs). tp_comm_overlap, where set, prices the backward instead.
  bool tp_backward_overlap = false;
  /// Gradients accumulated and reduced in fp32 (4 bytes) instead of the model's dtype: Megatron-LM
  /// under bf16 (its --accumulate-allreduce-grads-in-fp32, which validate_args turns on for
  /// bf16), Megatron-Bridge's grad_reduce_in_fp32. Widens the gradient buffers and the gradient
  /// reduction; the gathered parameters stay in the dtype.
  bool fp32_gradients = false;
  /// How a gated MLP's SwiGLU keeps its activations for the backward. true: one fused function
  /// that saves only its input, the gate and up projections (2 × ffn 16-bit values a token), and
  /// recomputes silu in the backward, as Megatron-Core does by default (--bias-swiglu-fusion,
  /// megatron/core/fusions/fused_bias_swiglu.py, SwiGLUFunction saves `input` alone; the same in
  /// its grouped experts); the down projection keeps its input (ffn): 6 bytes × ffn a token.
  /// false: eager PyTorch, `w2(F.silu(w1(x)) * w3(x))` as torchtitan writes it, autograd keeping
  /// w1's output, silu's output and w3's output for the product: 8 bytes × ffn a token. No effect
  /// on an MLP that is not gated.
  bool swiglu_fusion = true;
  /// Megatron's gradient-accumulation fusion (default on; --no-gradient-accumulation-fusion
  /// turns it off, as runs without Apex's or Transformer Engine's fused weight-gradient kernels
  /// must): each weight-gradient GEMM accumulates straight into the gradient buffer. Off, the
  /// GEMM writes a 16-bit gradient that a separate kernel adds into the buffer every microbatch
  /// (Megatron-Core's DDP hook, param.main_grad.add_(param.grad)): per parameter it reads the
  /// gradient and reads and writes the buffer (layer_costs.h, "gradient_accumulation").
  bool gradient_accumulation_fusion = true;
  /// Megatron's fused scale-mask-softmax (default on; --no-masked-softmax-fusion turns it off):
  /// only for attention with materialized scores. Off, the causal mask is applied by its own
  /// PyTorch pass over the scores in the forward and again in the backward
  /// (FusedScaleMaskSoftmax.forward_torch_softmax; layer_costs.h, "attention_mask").
  bool masked_softmax_fusion = true;
  /// Tokens of the busiest expert rank over the balanced share (>= 1): MoE layers run at its pace.
  /// (Expert and context parallelism are mesh dimensions: Mesh::ep and Mesh::cp.)
  double expert_load_imbalance = 1;
  /// The all-reduce algorithm NCCL is left to pick or told to use (NCCL_ALGO of the run).
  CollectiveAlgorithm collective_algorithm = CollectiveAlgorithm::Auto;
  GemmPrecision gemm_precision = GemmPrecision::Bf16;
  /// Under FP8, MoE dispatch all-to-alls carry FP8 activations (1 byte per element) and combine
  /// all-to-alls bf16, as DeepSeek-V3 does (report §3.3: dispatch quantized to FP8 before the
  /// all-to-all, combine kept in BF16; the backward's gradient dispatch likewise). false: both
  /// in the model's 16 bits. Ignored under bf16 GEMMs.
  bool fp8_dispatch = true;
  /// Under FP8, the layers' weights are held as FP8 parameters (Megatron's --fp8-param-gather,
  /// NeMo's fp8_params, Megatron-Bridge's fp8_param_gather, Transformer Engine's fp8_model_init):
  /// one byte a weight and the transpose Hopper's FP8 GEMMs read (two bytes, as a 16-bit weight),
  /// the fp32 master copy in the optimizer, and the updated weights all-gathered at one byte.
  /// false (Transformer Engine's default): 16-bit weights, and each FP8 linear layer casts its
  /// weight once a step and keeps the FP8 copy and its transpose for the step's other
  /// microbatches (`is_first_microbatch`): two more bytes a weight. Ignored under bf16 GEMMs.
  bool fp8_params = false;
  /// How the loss runs: its memory beyond the stored fp32 logits and its passes over them.
  /// "vocab-parallel": Megatron's fused vocab-parallel cross-entropy (--cross-entropy-loss-fusion,
  /// the default, so files that do not say keep their meaning): beside the saved fp32 softmax,
  /// the 16-bit logits the model still holds and one more fp32 copy (its scripted steps return
  /// new tensors) while it runs. "vocab-parallel-unfused": without the fusion, one kernel per
  /// PyTorch op (headWork prices its eight passes), in place on the fp32 copy: only the 16-bit
  /// logits beside it. "te": Transformer Engine's fused cross-entropy (Megatron's
  /// --cross-entropy-fusion-impl te, what Megatron-Bridge's recipes run): Triton kernels over the
  /// 16-bit logits with an online softmax, the logits kept for the backward and overwritten
  /// there by their gradient; no fp32 copy.
  /// "torch-fp32": F.cross_entropy(logits.float()) as torchtitan runs it: the backward holds
  /// the fp32 log-probabilities, the incoming gradient and the input gradient at once, two more
  /// fp32 logit-sized tensors on the loss rank (its time priced as the fused one).
  std::string cross_entropy = "vocab-parallel";
  /// How MoE tokens reach their experts (Megatron's --moe-token-dispatcher-type and
  /// --moe-flex-dispatcher-backend). "alltoall": NCCL all-to-all of every routed copy (the
  /// default). "deepep" (DeepEP's normal kernels) and "hybridep" (NVIDIA's HybridEP, DeepEP's
  /// hybrid-ep branch): one fused kernel that sends a token once to each other node holding one
  /// of its experts (RDMA) and once to each GPU holding one (NVLink), not once per expert (moe.h).
  std::string moe_dispatcher = "alltoall";
  /// SMs the deepep or hybridep dispatch and combine kernels run on (Megatron-Core's
  /// --moe-flex-dispatcher-num-sms, formerly --moe-deepep-num-sms); 0 = the default,
  /// kDefaultDispatcherSms. Ignored for alltoall.
  int moe_dispatcher_sms = 0;
  /// Host time of one MoE layer for one microbatch, forward and backward together, that the GPU
  /// waits out (moeLayerHostUs): the framework launching the layer's many small kernels (router,
  /// permutations, one grouped GEMM per direction and local expert) and the dispatcher's host
  /// synchronization on the token counts. Negative: the default, the hardware file's
  /// moe_layer_host_us, else kDefaultMoeLayerHostUs; 0: not priced (e.g. a run that captures its
  /// MoE layers in CUDA graphs and syncs nowhere).
  double moe_layer_host_us = -1;
};

/// The loss implementations TrainingSetup::cross_entropy names, the default first.
inline constexpr std::string_view kCrossEntropyModes[] = {
    "vocab-parallel", "vocab-parallel-unfused", "te", "torch-fp32"};
inline bool isCrossEntropyMode(std::string_view name) {
  for (const std::string_view mode : kCrossEntropyModes)
    if (name == mode) return true;
  return false;
}
/// kCrossEntropyModes as a message lists them: "a, b or c".
inline std::string crossEntropyModesText() {
  std::string text;
  const std::size_t n = std::size(kCrossEntropyModes);
  for (std::size_t i = 0; i < n; ++i)
    text.append(i == 0 ? "" : i + 1 == n ? " or " : ", ").append(kCrossEntropyModes[i]);
  return text;
}

/// "alltoall", "deepep" or "hybridep" (TrainingSetup::moe_dispatcher).
inline bool isMoeDispatcher(const std::string &name) {
  return name == "alltoall" || name == "deepep" || name == "hybridep";
}

/// SMs DeepEP's normal dispatch and combine kernels take: DeepSeek-V3 report (arXiv:2412.19437)
/// §3.2.2, "only 20 SMs are sufficient to fully utilize the bandwidths of IB and NVLink"; the
/// grid of every dpsk::ep::internode kernel in DeepSeek's published training profile
/// (deepseek-ai/profile-data train.json) is 20 of the H800's 132 SMs; Megatron-Core's
/// moe_deepep_num_sms defaulted to 20, and HybridEP takes DeepEP's default
/// (megatron/core/transformer/transformer_config.py at d98e8a64dd, moe_hybridep_num_sms).
inline constexpr int kDefaultDispatcherSms = 20;

/// The factor on an overlapped F&B pair's compute while a deepep or hybridep dispatcher's kernels
/// hold their SMs beside it: sm_count / (sm_count - dispatcher SMs). 1 for alltoall (NCCL's
/// kernels are not priced), an unknown SM count, or no overlapped all-to-all.
double dispatcherSmShare(const HardwareSpec &hardware, const TrainingSetup &training);

/// Host time per MoE layer and microbatch that eager Megatron-Core leaves exposed
/// (docs/cost-model.md, "MoE layers' host time"): fitted here, like the H100 FP8 factor, on a
/// declared subset of docs/validation.md, the five Megatron-MoE-ModelZoo BF16 rows of
/// Qwen3-235B-A22B on 256 H100s, whose step times exceed the GPU work pipescope prices by 2-6 ms
/// per MoE layer and microbatch whatever the tokens per rank (1024-8192); it minimized their mean
/// |error| in steps of 0.5 ms (docs/measurements/fit_moe_host.py) over the earlier H100 BF16
/// level, and over the refit one the fit is flat from 2.0 to 4.0 ms, so it stays. The held-out
/// MoE rows (Megatron-Bridge FP8, DeepSeek-V3) check it.
inline constexpr double kDefaultMoeLayerHostUs = 3500;

/// The MoE host time a plan on `hardware` takes when its training leaves it at the default: the
/// hardware file's (a calibrated machine's), else kDefaultMoeLayerHostUs.
inline double defaultMoeLayerHostUs(const HardwareSpec &hardware) {
  return hardware.moe_layer_host_us < 0 ? kDefaultMoeLayerHostUs : hardware.moe_layer_host_us;
}

/// The host time one MoE layer adds per microbatch (TrainingSetup::moe_layer_host_us, the
/// hardware's default when negative), split evenly over the forward, input-grad and weight-grad
/// passes (a third each: the backward launches about twice the forward's kernels, half of them
/// the weight gradients'); recomputation's forward pays its third again.
inline double moeLayerHostUs(const TrainingSetup &training, const HardwareSpec &hardware) {
  return training.moe_layer_host_us < 0 ? defaultMoeLayerHostUs(hardware)
                                        : training.moe_layer_host_us;
}

struct ModelSetup {
  ModelSpec model;
  HardwareSpec hardware;
  TrainingSetup training;
};

/// Bytes per gradient element: 4 with fp32_gradients, else the model's dtype.
double gradientBytes(const ModelSetup &setup);

/// What the model, hardware and mesh imply for one schedule's placement.
struct ModelDerivation {
  Costs costs;                                ///< per-stage overrides, transfers, gradient sync
  std::vector<int> stage_layers;              ///< transformer layers per virtual stage
  std::vector<double> stage_activation_bytes; ///< per microbatch held on each virtual stage
  /// The most one layer of each virtual stage holds (SimulationOptions::
  /// stage_activation_granule_bytes: an overlapped F&B pair runs layer by layer).
  std::vector<double> stage_activation_granule_bytes;
  std::vector<StageBreakdown> stage_breakdown; ///< what each stage's F, I and W are made of
  std::vector<LayerOp> layer_ops;              ///< one dense transformer layer's ops on one TP rank
  std::vector<LayerOp> moe_layer_ops;          ///< one MoE layer's (empty for a dense model)
  LayerLayout model_layout;                    ///< what each model stage holds, as split
  /// Per pipeline rank: parameters held by one of its TP ranks, and its transformer layers.
  std::vector<double> rank_parameters;
  /// Of rank_parameters, the routed experts' (their optimizer state shards over dp·cp / ep).
  std::vector<double> rank_expert_parameters;
  /// Under ZeRO-3, per pipeline rank: its largest transformer layer's parameters (the unit
  /// all-gathered at a time) and those outside the layers (embedding, head: gathered as one).
  std::vector<double> rank_largest_layer_parameters;
  std::vector<double> rank_outside_layer_parameters;
  std::vector<int> rank_layers;
  /// Full recomputation rebuilds one layer's activations during its backward: this transient
  /// sits on top of the stored activations of every rank that has layers.
  double recompute_transient_bytes = 0;
  /// The loss's backward transient on the pipeline rank holding it (TrainingSetup::cross_entropy).
  double loss_transient_bytes = 0;
  int loss_rank = -1;
  /// Model FLOPs of one microbatch's forward (as ModelReport::mfu counts them).
  double forward_flops_per_microbatch = 0;
};

/// Which link a group of ranks uses: none (a group of one), all inside a node, all across nodes,
/// or some of each (priced at the inter-node link).
enum class LinkKind : std::uint8_t { None, Intra, Inter, Mixed };

/// The links of a mesh's groups, per pipeline rank p, each merged over every group of its kind
/// that has ranks on p (mesh.h MeshGroup): TP groups; CP rings (K/V exchange); EP groups (the
/// all-to-all); dp × cp groups (the dense gradients' reduction); expert-data groups (the expert
/// gradients' reduction); and the PP pairs between p and (p + 1) mod P. They depend on the mesh
/// alone, so a caller deriving many setups on one mesh (the planner) classifies them once
/// instead of per derivation.
struct MeshLinks {
  std::vector<LinkKind> tp, cp, ep, dp_cp, expert_dp, next;
  /// The most nodes one TP, EP, DP × CP or expert-data group of p spans (NCCL's tree all-reduce
  /// climbs a binary tree over them; an all-to-all reaches the peers in its node on NVLink).
  std::vector<int> tp_nodes, ep_nodes, dp_cp_nodes, expert_dp_nodes;
  bool operator==(const MeshLinks &) const = default;
};
MeshLinks meshLinks(const Mesh &mesh);

/// Per rank memory in bytes.
struct RankMemory {
  double params = 0, grads = 0, optimizer = 0, activations_peak = 0, total = 0, capacity = 0;
  bool fits = true;
};

struct CommunicationKind {
  double bytes = 0;  ///< per step, summed over the kind's transfers of one pipeline replica
  double time_s = 0; ///< time spent per step on it by the busiest rank (DP: the whole all-reduce)
  /// DP: what the step pays for it: the part of time_s not hidden behind compute, plus the
  /// GEMMs the hidden part slows (collectiveContentionUs); TP: all of it (it sits on the
  /// critical path of F and B); PP: 0 here (the simulation accounts for it).
  double exposed_time_s = 0;
  std::string link; ///< "intra-node", "inter-node", "mixed" or "none" (no traffic of this kind)
};

/// {"bytes", "time_s", "exposed_time_s", "link"}, as `simulate --json` writes each kind.
nlohmann::json toJson(const CommunicationKind &kind);

struct ModelReport {
  std::vector<RankMemory> memory; ///< per pipeline rank
  double step_time_s = 0;
  double tokens_per_s = 0; ///< whole mesh
  /// Model FLOPs utilization: model_flops_per_step / (step time × world size × peak), the peak
  /// being the dense 16-bit one (HardwareSpec::peak_tflops) whatever the GEMMs run in. Model FLOPs
  /// are 3 × the forward's matmul FLOPs (transformer layers with the full s×s attention matrix,
  /// and the output head), without recomputation: 6·N·tokens plus attention, as in Narayanan et
  /// al. 2021 and Chowdhery et al. 2022 (PaLM, appendix B), N = non-embedding parameters + head.
  double mfu = 0;
  /// The same model FLOPs over the mesh's FP8 peak (HardwareSpec::peak_fp8_tflops) where the
  /// GEMMs run in FP8, since an FP8 run's MFU against the 16-bit peak can pass 50 %; 0 otherwise.
  double mfu_fp8 = 0;
  double parameters = 0;           ///< the model's parameter count
  double model_flops_per_step = 0; ///< whole mesh
  CommunicationKind tp, pp, dp;
};

/// The model's parameter count (embeddings, transformer layers, final norm, untied head).
double parameterCount(const ModelSpec &model);
/// Whether the GPU has FP8 tensor cores: a finite, positive `peak_fp8_tflops` (FP8 GEMMs are
/// refused without it).
bool hasFp8TensorCores(const HardwareSpec &hardware);
/// Bytes of one element of the dtype (2 for bf16/fp16, 4 for fp32), 0 if unknown.
int dtypeBytes(std::string_view dtype);

/// Derives costs for the placement. Refuses impossible meshes (fewer layers than stages, tp
/// beyond a node, heads not divisible by tp, mesh.pp != placement.pp) with a clear message.
/// `links`, when given, must be meshLinks(mesh).
Result<ModelDerivation> deriveModelCosts(const ModelSetup &setup, const Mesh &mesh,
                                         const Placement &placement,
                                         const MeshLinks *links = nullptr);

/// The ZeRO stage whose derived op and collective times are `zero_stage`'s: stage 2 shards the
/// gradients in memory only (the same ring reduce-scatter and all-gather, the same sharded Adam
/// step as stage 1), so it times as stage 1; every other stage times as itself. Lets a caller
/// that varies only the stage (the planner) derive costs once per distinct timing.
int zeroStageTimedAs(int zero_stage);

/// Memory of pipeline rank `rank` (16-bit params and grads, optimizer state, each sharded over DP
/// from its ZeRO stage on, with ZeRO-3's gathered units in flight) with the given peak of stored
/// activations, against the hardware's capacity.
RankMemory rankMemory(const ModelSetup &setup, const Mesh &mesh, const ModelDerivation &derivation,
                      int rank, double peak_activation_bytes);

/// Memory, throughput and communication for a simulated step.
ModelReport reportModel(const ModelSetup &setup, const Mesh &mesh, const Schedule &schedule,
                        const ModelDerivation &derivation, const SimulationResult &simulation);

/// Whether every figure of the report is finite and non-negative (memory, step time, tokens/s,
/// MFU, communication) and the step time positive; the error names the figure. Callers check
/// before they print or save a report.
Status checkModelReport(const ModelReport &report);

/// Presets shipped under resources/presets (names such as "llama3-8b", "h100-sxm").
std::vector<std::string> modelPresetNames();
std::vector<std::string> hardwarePresetNames();
/// A preset by name, or a JSON file by path.
Result<ModelSpec> loadModelSpec(const std::string &name_or_path);
Result<HardwareSpec> loadHardwareSpec(const std::string &name_or_path);

/// JSON forms (the plan file's "model", "hardware" and "training" objects). The readers name
/// the offending field as a JSON pointer under `pointer`.
nlohmann::json toJson(const ModelSpec &model);
nlohmann::json toJson(const HardwareSpec &hardware);
nlohmann::json toJson(const TrainingSetup &training);
Result<ModelSpec> modelSpecFromJson(const nlohmann::json &json, const std::string &pointer);
Result<HardwareSpec> hardwareSpecFromJson(const nlohmann::json &json, const std::string &pointer);
Result<TrainingSetup> trainingSetupFromJson(const nlohmann::json &json, const std::string &pointer);

/// "none", "selective", "full", "selective-op"
std::string_view recomputeName(Recompute recompute);
/// The modules TrainingSetup::recompute_modules may name, in their canonical order.
const std::vector<std::string> &recomputeModuleNames();
/// A comma-separated list of recompute modules ("layernorm,moe_act"), in canonical order; the
/// error names the unknown one and the known ones.
Result<std::vector<std::string>> parseRecomputeModules(std::string_view list);
/// Whether `training` recomputes Megatron module `name`.
bool recomputesModule(const TrainingSetup &training, std::string_view name);
Result<Recompute> parseRecompute(std::string_view text);
/// "auto", "ring", "tree"
std::string_view collectiveAlgorithmName(CollectiveAlgorithm algorithm);
Result<CollectiveAlgorithm> parseCollectiveAlgorithm(std::string_view text);
std::string_view gemmPrecisionName(GemmPrecision precision); ///< "bf16", "fp8"
Result<GemmPrecision> parseGemmPrecision(std::string_view text);

} // namespace pipescope
