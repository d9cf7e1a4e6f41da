// Op times, transfers and memory from a model, hardware and a DP × CP × TP × PP mesh with EP
// folded into DP × CP (DESIGN.md §5).
//
// Sources of the formulas:
// - Matmul FLOPs from the actual shapes, 2·m·n·k per GEMM. For a standard GPT layer this is the
//   forward 24·b·s·h² + 4·b·s²·h of Narayanan et al. 2021 ("Efficient Large-Scale Language Model
//   Training on GPU Clusters Using Megatron-LM", eq. 3); grouped-query attention shrinks the K and
//   V projections and a SwiGLU MLP has three h×f matrices instead of two.
// - The backward splits into an input-grad pass (every GEMM once more, plus twice the attention
//   score/context matmuls) and a weight-grad pass (every weight GEMM once more), as the zero-bubble
//   paper (Qi et al., ICLR 2024) splits B and W: B = 2 × F.
// - TP (Megatron, Shoeybi et al. 2019): two all-reduces of b·s·h elements in each layer's forward
//   and two in its input-grad; with sequence parallelism each becomes an all-gather plus a
//   reduce-scatter, the same volume (Korthikanti et al. 2022, §4.2.2). Ring all-reduce over n
//   ranks: 2(n-1)/n · bytes / bandwidth + 2(n-1) · latency (Thakur et al. 2005; Patarasuk & Yuan).
// - Activation memory per layer (Korthikanti et al. 2022, "Reducing Activation Recomputation in
//   Large Transformer Models", §4 and Table 2): s·b·h·(34 + 5·a·s/h) bytes for 16-bit activations
//   with dropout and materialized attention (without dropout 32 + 2·a·s/h; FlashAttention drops
//   the a·s/h term for its per-row log-sum-exp)
//   = 10·sbh not split by TP without sequence parallelism (two layer-norm inputs, the QKV and MLP
//   inputs, two dropout masks) + 24·sbh split by TP + 5·a·s²·b attention scores split by TP. The
//   24 is computed from the shapes (Q, K, V, the projection input and the MLP intermediates), so
//   GQA and SwiGLU change it; for a standard layer it is exactly 24.
// - Memory of parameters, gradients and optimizer state: mixed-precision Adam as in the ZeRO paper
//   (Rajbhandari et al. 2020): 16-bit weights and gradients, K bytes per parameter of optimizer
//   state (default 12). ZeRO stages shard them over the dp ranks (§5, Figure 1): stage 1 the
//   optimizer state ((2 + 2 + K/N)·Ψ), stage 2 also the gradients ((2 + (2 + K)/N)·Ψ), stage 3
//   also the parameters ((2 + 2 + K)·Ψ/N), plus what stage 3 holds gathered (rankMemory).
// - ZeRO-3 / FSDP communication (Rajbhandari et al. 2020, §7.2.2): a parameter all-gather in the
//   forward and again in the backward and a gradient reduce-scatter, each (n-1)/n of the
//   parameter bytes: 1.5× an all-reduce's volume. Under pipeline parallelism torchtitan keeps the
//   gathered parameters and unsharded gradients across microbatches (reshard_after_forward off;
//   torch.distributed.pipelining syncs gradients on the last backward only): one all-gather and
//   one reduce-scatter per step, an all-reduce's volume.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <map>
#include <queue>
#include <string>
#include <utility>

#include "engine/model/collectives.h"
#include "engine/model/layer_costs.h"
#include "engine/model/model_setup.h"
#include "engine/model/moe.h"

namespace pipescope {

namespace {

constexpr double kGiB = 1073741824.0;
constexpr int kMaxLayers = 100000;

using Link = LinkKind;

Link merge(Link a, Link b) {
  if (a == Link::None) return b;
  if (b == Link::None) return a;
  return a == b ? a : Link::Mixed;
}

std::string linkName(Link link) {
  switch (link) {
  case Link::None: return "none";
  case Link::Intra: return "intra-node";
  case Link::Inter: return "inter-node";
  case Link::Mixed: return "mixed";
  }
  return "none";
}

std::string number(double value) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%g", value);
  return buffer;
}

/// Parameters of one part of the model: the part sharded over TP and the part every TP rank
/// holds whole (norms, row-parallel biases, position embeddings).
struct Params {
  double sharded = 0;
  double replicated = 0;
  double perTpRank(int tp) const { return sharded / tp + replicated; }
  double whole() const { return sharded + replicated; }
};

double normParams(const ModelSpec &m) {
  return m.norm == "layernorm" ? 2.0 * m.hidden : static_cast<double>(m.hidden);
}

/// Weight-matrix parameters of one layer: the attention projections (Q, K, V and output, or
/// MLA's down- and up-projections) and the MLP.
double layerMatrixParams(const ModelSpec &m) {
  const AttentionShape attention = attentionShapeOf(m);
  return attention.sharded_params + attention.replicated_params +
         (m.gated_mlp ? 3.0 : 2.0) * static_cast<double>(m.hidden) * m.ffn_hidden;
}

Params layerParams(const ModelSpec &m) {
  const AttentionShape attention = attentionShapeOf(m);
  Params p;
  p.sharded = attention.sharded_params +
              (m.gated_mlp ? 3.0 : 2.0) * static_cast<double>(m.hidden) * m.ffn_hidden;
  // MLA's down-projections and latent norms sit whole on every TP rank.
  p.replicated = attention.replicated_params + attention.latent_norm_params;
  if (m.linear_biases) {
    // Column-parallel biases (QKV, the first MLP matrices) are split; row-parallel ones are not.
    p.sharded += attention.query + attention.key + attention.value +
                 (m.gated_mlp ? 2.0 : 1.0) * m.ffn_hidden;
    p.replicated += 2.0 * m.hidden;
  }
  p.replicated += 2 * normParams(m);
  return p;
}

Params embeddingParams(const ModelSpec &m) {
  Params p;
  p.sharded = static_cast<double>(m.vocab) * m.hidden; // vocab-parallel
  p.replicated = static_cast<double>(m.position_embeddings) * m.hidden;
  return p;
}

/// The last stage: final norm and the output head. A tied head is the embedding itself on a
/// single stage; on several stages the last one holds a copy (as Megatron-LM does).
Params headParams(const ModelSpec &m, bool single_stage) {
  Params p;
  p.replicated = normParams(m);
  if (!m.tied_embeddings || !single_stage) p.sharded = static_cast<double>(m.vocab) * m.hidden;
  return p;
}

Status checkSetup(const ModelSetup &setup, const Mesh &mesh, const Placement &placement) {
  const ModelSpec &m = setup.model;
  const HardwareSpec &hw = setup.hardware;
  const std::string model = "model '" + m.name + "': ";
  const struct {
    long long value;
    const char *field;
  } positives[] = {{m.layers, "layers"},
                   {m.hidden, "hidden"},
                   {m.ffn_hidden, "ffn_hidden"},
                   {m.heads, "heads"},
                   {m.kv_heads, "kv_heads"},
                   {m.vocab, "vocab"},
                   {m.sequence_length, "sequence_length"},
                   {m.microbatch_size, "microbatch_size"}};
  for (const auto &p : positives)
    if (p.value < 1)
      return makeError(model + p.field + " must be at least 1, got " + std::to_string(p.value));
  if (m.layers > kMaxLayers)
    return makeError(model + "layers must be at most " + std::to_string(kMaxLayers));
  if (m.position_embeddings < 0)
    return makeError(model + "position_embeddings must be 0 (rotary) or a row count");
  const bool latent = m.kv_lora_rank > 0;
  if (m.head_dim < 0 || m.q_lora_rank < 0 || m.kv_lora_rank < 0 || m.qk_nope_head_dim < 0 ||
      m.qk_rope_head_dim < 0 || m.v_head_dim < 0)
    return makeError(model + "head_dim and the latent attention sizes must be 0 or more");
  if (latent && (m.qk_nope_head_dim < 1 || m.qk_rope_head_dim < 1 || m.v_head_dim < 1))
    return makeError(model + "multi-head latent attention (kv_lora_rank " +
                     std::to_string(m.kv_lora_rank) +
                     ") needs qk_nope_head_dim, qk_rope_head_dim and v_head_dim of at least 1");
  if (!latent && m.head_dim == 0 && m.hidden % m.heads != 0)
    return makeError(model + "hidden (" + std::to_string(m.hidden) +
                     ") must be divisible by heads (" + std::to_string(m.heads) +
                     ") unless head_dim is given");
  if (!latent && (m.kv_heads > m.heads || m.heads % m.kv_heads != 0))
    return makeError(model + "kv_heads (" + std::to_string(m.kv_heads) + ") must divide heads (" +
                     std::to_string(m.heads) + ")");
  if (dtypeBytes(m.dtype) == 0)
    return makeError(model + "dtype '" + m.dtype + "' is not known; use bf16, fp16 or fp32");
  if (m.norm != "rmsnorm" && m.norm != "layernorm")
    return makeError(model + "norm '" + m.norm + "' is not known; use rmsnorm or layernorm");

  const std::string hardware = "hardware '" + hw.name + "': ";
  const struct {
    double value;
    const char *field;
    bool allow_zero;
  } numbers[] = {{hw.peak_tflops, "peak_tflops", false},
                 {hw.efficiency, "efficiency", false},
                 {hw.memory_gib, "memory_gib", false},
                 {hw.intra_node_gbps, "intra_node_gbps", false},
                 {hw.intra_node_latency_us, "intra_node_latency_us", true},
                 {hw.inter_node_gbps, "inter_node_gbps", false},
                 {hw.inter_node_latency_us, "inter_node_latency_us", true},
                 {setup.training.optimizer_bytes_per_param, "optimizer_bytes_per_param", true}};
  for (const auto &n : numbers)
    if (!std::isfinite(n.value) || n.value < 0 || (!n.allow_zero && n.value == 0))
      return makeError(
          (std::string(n.field) == "optimizer_bytes_per_param" ? std::string("training: ")
                                                               : hardware) +
          n.field + " must be a finite " + (n.allow_zero ? "non-negative" : "positive") +
          " number, got " + number(n.value));
  if (hw.efficiency > 1)
    return makeError(hardware + "efficiency is a fraction of peak, at most 1, got " +
                     number(hw.efficiency));
  if (setup.training.gemm_precision == GemmPrecision::Fp8 && !hasFp8TensorCores(hw))
    return makeError("training: gemm_precision \"fp8\" but " + hardware +
                     "has no FP8 tensor cores (peak_fp8_tflops is 0); use gemm_precision \"bf16\" "
                     "or an FP8 GPU (Hopper: h100-sxm, h200, h800), or give the hardware's "
                     "peak_fp8_tflops");

  if (auto status = mesh.check(); !status) return status;
  if (mesh.pp != placement.pp)
    return makeError("the mesh has pp = " + std::to_string(mesh.pp) + " but the schedule has P = " +
                     std::to_string(placement.pp) + " pipeline ranks; set them equal");
  if (mesh.tp > mesh.gpus_per_node)
    return makeError("tp = " + std::to_string(mesh.tp) + " spans more than one node (" +
                     std::to_string(mesh.gpus_per_node) +
                     " GPUs per node); tensor parallelism needs the intra-node link, use tp <= " +
                     std::to_string(mesh.gpus_per_node));
  if (m.heads % mesh.tp != 0)
    return makeError(model + "heads (" + std::to_string(m.heads) + ") are not divisible by tp = " +
                     std::to_string(mesh.tp) + "; use a tp that divides the head count");
  if (!latent && m.kv_heads % mesh.tp != 0)
    return makeError(model + "kv_heads (" + std::to_string(m.kv_heads) +
                     ") are not divisible by tp = " + std::to_string(mesh.tp) +
                     "; use a tp that divides the KV head count");
  if (m.ffn_hidden % mesh.tp != 0)
    return makeError(model + "ffn_hidden (" + std::to_string(m.ffn_hidden) +
                     ") is not divisible by tp = " + std::to_string(mesh.tp));
  // mesh.check() above refused an ep not dividing dp × cp.
  const int ep = mesh.ep;
  if (ep > 1 && !isMoe(m))
    return makeError("mesh: ep = " + std::to_string(ep) + " but model '" + m.name +
                     "' has no experts; expert parallelism needs a mixture-of-experts model, use "
                     "ep = 1");
  if (isMoe(m) && m.experts % ep != 0)
    return makeError(model + "experts (" + std::to_string(m.experts) +
                     ") are not divisible by the mesh's ep = " + std::to_string(ep) +
                     "; use an ep that divides the expert count");
  if (isMoe(m) && m.expert_ffn_hidden % mesh.expertTpSize() != 0)
    return makeError(model + "expert_ffn_hidden (" + std::to_string(m.expert_ffn_hidden) +
                     ") is not divisible by " + (mesh.expertsFoldTp() ? "etp = " : "tp = ") +
                     std::to_string(mesh.expertTpSize()));
  if (mesh.expertsFoldTp() && !isMoe(m))
    return makeError("mesh: etp = " + std::to_string(mesh.etp) + " but model '" + m.name +
                     "' has no experts; leave etp unset (or equal to tp)");
  // Below tp, each TP rank dispatches its own slice of the sequence, which it holds only under
  // sequence parallelism (Megatron-Core requires it for MoE with TP).
  if (setup.training.tp_comm_overlap && mesh.tp > 1 && !setup.training.sequence_parallel)
    return makeError("training: tp_comm_overlap needs sequence parallelism (Transformer Engine "
                     "overlaps the all-gathers and reduce-scatters SP makes of the TP "
                     "all-reduces); set training.sequence_parallel (--seq-parallel)");
  if (mesh.expertsFoldTp() && !setup.training.sequence_parallel)
    return makeError("mesh: etp = " + std::to_string(mesh.etp) +
                     " below tp = " + std::to_string(mesh.tp) +
                     " needs sequence parallelism (each TP rank dispatches its own s/tp tokens); "
                     "set training.sequence_parallel (--seq-parallel)");
  if (setup.hardware.sm_count > 0 && setup.training.moe_dispatcher_sms >= setup.hardware.sm_count)
    return makeError("training: moe_dispatcher_sms (" +
                     std::to_string(setup.training.moe_dispatcher_sms) +
                     ") leaves no SM to compute on: hardware '" + setup.hardware.name + "' has " +
                     std::to_string(setup.hardware.sm_count) +
                     "; give the dispatcher fewer (DeepEP's default is " +
                     std::to_string(kDefaultDispatcherSms) + ")");
  const int cp = mesh.cp;
  if (cp > 1 && m.sequence_length % (2 * cp) != 0)
    return makeError(model + "sequence_length (" + std::to_string(m.sequence_length) +
                     ") is not divisible by 2 × cp = " + std::to_string(2 * cp) +
                     " (mesh cp = " + std::to_string(cp) + ")" +
                     "; CP gives each rank two balanced chunks of the causal sequence, so use a cp "
                     "whose 2·cp divides the sequence length");
  if (setup.training.recompute == Recompute::SelectiveOp &&
      (isMoe(m) || m.kv_lora_rank > 0 || m.attention != "flash"))
    return makeError("training: recompute selective-op is torchtitan's per-op policy for dense "
                     "layers with FlashAttention (separate Q, K, V projections); model '" +
                     m.name + "' has " +
                     (isMoe(m)             ? "experts"
                      : m.kv_lora_rank > 0 ? "latent attention"
                                           : "materialized attention") +
                     "; use selective or full");
  const int model_stages = placement.modelStageCount();
  if (m.mtp_layers < 0)
    return makeError(model + "mtp_layers must be 0 or more, got " + std::to_string(m.mtp_layers));
  if (!setup.training.layout.empty()) {
    if (auto status = checkLayerLayout(setup.training.layout, m.layers, m.mtp_layers, model_stages);
        !status)
      return status.error();
  } else if (m.layers < model_stages)
    return makeError(
        model + std::to_string(m.layers) + " layers cannot fill " + std::to_string(model_stages) +
        " model stages (pp × chunks); every stage needs at least one layer — lower pp or V");
  if (placement.stageCount() < 1 ||
      static_cast<int>(placement.model_stage.size()) != placement.stageCount() ||
      static_cast<int>(placement.stage_rank.size()) != placement.stageCount())
    return makeError("the placement is empty or inconsistent");
  return Ok{};
}

/// Everything derived for one placement; shared by deriveModelCosts and reportModel.
struct Analysis {
  int model_stages = 0;
  LayerLayout model_layout; ///< per model stage
  // Per virtual stage.
  std::vector<StageCost> stage_costs;
  std::vector<StageBreakdown> stage_breakdown;
  std::vector<int> stage_moe_layers; ///< MoE layers of each virtual stage
  std::vector<Link> rank_ep_link;    ///< per pipeline rank
  std::vector<Link> rank_cp_link;    ///< per pipeline rank (empty without CP)
  /// Exposed CP ring time per layer in F and in I, per pipeline rank.
  std::vector<double> rank_cp_forward_us, rank_cp_backward_us;
  std::vector<double> rank_all_to_all_us; ///< one dispatch or combine, per pipeline rank
  std::vector<double> rank_expert_params; ///< routed-expert parameters per rank (÷ TP, EP)
  /// ZeRO-3 units per rank: the largest layer, and the parameters outside the layers.
  std::vector<double> rank_largest_layer_params, rank_outside_layer_params;
  /// A middle rank's share (L/P layers) of all-to-all time in F and in I, for DualPipe's pair.
  double moe_all_to_all_forward_us = 0, moe_all_to_all_backward_us = 0;
  /// A middle rank's share of MoE host time in F and in B (I + W), kept out of the pair's overlap.
  double moe_host_forward_us = 0, moe_host_backward_us = 0;
  std::vector<LayerOp> layer_ops;               ///< one dense layer's ops on one TP rank
  std::vector<LayerOp> moe_layer_ops;           ///< one MoE layer's (all-to-alls apart)
  std::vector<double> stage_activation;         ///< bytes per microbatch
  std::vector<double> stage_activation_granule; ///< the most one layer of the stage holds
  std::vector<double> stage_tp_collectives;     ///< all-reduce equivalents per microbatch
  std::vector<int> stage_microbatches;          ///< microbatches passing the stage per step
  std::vector<double> boundary_us;              ///< stage -> next stage
  std::vector<Link> boundary_link;
  // Per pipeline rank.
  std::vector<double> rank_params; ///< per TP rank
  std::vector<int> rank_layers;
  std::vector<double> rank_tp_allreduce_us;
  std::vector<Link> rank_tp_link;
  std::vector<Link> rank_dp_link;        ///< the dense gradients' dp × cp groups
  std::vector<Link> rank_expert_dp_link; ///< the expert gradients' dp·cp / ep groups
  std::vector<double> rank_sync_us, rank_sync_exposed_us;
  /// ZeRO-3 without PP: the exposed gathers and reduce-scatters inside the rank's F and I ops
  /// over the step (the tail does not pay them; the report's exposed DP time does).
  std::vector<double> rank_sync_in_ops_us;
  std::vector<double> rank_optimizer_us; ///< Adam's step after the last backward
  double tied_embedding_sync_us = 0;     ///< first and last stage's embedding gradient sum
  /// What follows each rank's last op: exposed DP sync, tied-embedding sum, optimizer step.
  double tailUs(std::size_t rank) const {
    return rank_sync_exposed_us[rank] + tied_embedding_sync_us + rank_optimizer_us[rank];
  }
  // Per layer.
  double layer_forward_us = 0, layer_backward_us = 0, layer_weight_us = 0;
  double layer_split_extra_us = 0;  ///< Costs::input_grad_split_extra_us per layer
  double layer_activation_full = 0; ///< one layer's activations without recomputation
  /// What a layer's backward rebuilds on top of the stored activations: under full recomputation
  /// all its activations, under torchtitan's per-op policy those it did not keep.
  double recompute_transient = 0;
  double loss_transient = 0; ///< beyond the stored fp32 logits, on loss_rank
  int loss_rank = -1;
  double pp_bytes_per_rank = 0; ///< per boundary per microbatch per direction, one TP rank
  double tp_message_bytes = 0;  ///< b·s·h elements
  double forward_flops_per_microbatch = 0; ///< whole model, no recomputation
  double slowest_link_latency_us = 0, slowest_link_gbps = 0;
};

/// Every `group` (mesh.h) that has ranks on pipeline rank p, merged: its link (intra-node when
/// each sits in one node, inter-node when each spans nodes, mixed when some do) and the most
/// nodes one of them spans (what NCCL's tree all-reduce climbs).
struct GroupSpan {
  Link link = Link::None;
  int nodes = 1;
};
/// Buffers groupSpanOf reuses across calls (meshLinks walks every group of every pipeline rank).
struct GroupSpanScratch {
  std::vector<char> seen;
  std::vector<int> members;
  /// Per node, the last group that counted it (a stamp instead of sorting each group's nodes).
  std::vector<long long> node_group;
  long long groups_counted = 0;
};
GroupSpan groupSpanOf(const Mesh &mesh, MeshGroup group, int p, GroupSpanScratch &scratch) {
  GroupSpan span;
  if (mesh.groupSize(group) <= 1) return span;
  std::vector<char> &seen = scratch.seen;
  seen.assign(static_cast<std::size_t>(mesh.worldSize()), 0);
  if (scratch.node_group.size() < static_cast<std::size_t>(mesh.nodeCount()))
    scratch.node_group.assign(static_cast<std::size_t>(mesh.nodeCount()), -1);
  for (int d = 0; d < mesh.dp; ++d)
    for (int c = 0; c < mesh.cp; ++c)
      for (int t = 0; t < mesh.tp; ++t) {
        const int rank = mesh.rankOf({d, p, t, c});
        if (seen[static_cast<std::size_t>(rank)]) continue;
        const long long stamp = scratch.groups_counted++;
        int spanned = 0;
        mesh.groupOf(group, rank, scratch.members);
        for (int member : scratch.members) {
          seen[static_cast<std::size_t>(member)] = 1;
          long long &last = scratch.node_group[static_cast<std::size_t>(mesh.nodeOf(member))];
          if (last != stamp) {
            last = stamp;
            ++spanned;
          }
        }
        span.nodes = std::max(span.nodes, spanned);
        span.link = merge(span.link, spanned == 1 ? Link::Intra : Link::Inter);
      }
  return span;
}

/// The link between pipeline ranks a and b, over every (d, c, t).
Link pairLinkOf(const Mesh &mesh, int a, int b) {
  Link link = Link::None;
  for (int d = 0; d < mesh.dp && link != Link::Mixed; ++d)
    for (int c = 0; c < mesh.cp && link != Link::Mixed; ++c)
      for (int t = 0; t < mesh.tp && link != Link::Mixed; ++t)
        link = merge(link, mesh.sameNode(mesh.rankOf({d, a, t, c}), mesh.rankOf({d, b, t, c}))
                               ? Link::Intra
                               : Link::Inter);
  return link;
}

/// Bandwidth (GB/s) and latency (µs) of a link; mixed groups run at the slower link's pace.
std::pair<double, double> linkSpeed(const HardwareSpec &hw, Link link) {
  if (link == Link::Intra) return {hw.intra_node_gbps, hw.intra_node_latency_us};
  return {hw.inter_node_gbps, hw.inter_node_latency_us};
}

/// A rank's share of state sharded over data parallelism: the dense parameters' over the dp × cp
/// ranks that hold them, the routed experts' over the dp·cp / ep ranks that hold the same experts
/// (Megatron's distributed optimizer and FSDP shard over the gradient-reduction groups).
double dataParallelShare(double params, double expert_params, const Mesh &mesh) {
  // ep divides dp × cp (Mesh::check), so the expert-data size is whole.
  return (params - expert_params) / mesh.dataCpSize() + expert_params / mesh.expertDataSize();
}

/// Parameters whose optimizer state a rank holds: all of them, or from ZeRO stage 1 on its
/// data-parallel share.
double optimizerShare(double params, double expert_params, const TrainingSetup &training,
                      const Mesh &mesh) {
  return training.zero_stage >= 1 ? dataParallelShare(params, expert_params, mesh) : params;
}

/// torchtitan's per-op selective checkpointing (torchtitan/parallelisms/parallelize_llama.py,
/// _save_list and _custom_policy at 9dec370): matmul outputs are saved except every second one
/// in the order wq, wk, wv, wo, w1, w3, w2, and the attention's, so a layer's backward redoes
/// K and the output projection, the gated MLP's w3 (the non-gated one's down projection), and
/// every memory-bound op (norms, rotary, activation). Q, K, V share pipescope's fused "qkv" GEMM
/// and gate and up its "mlp_gate_up": their shares by width.
double selectiveOpRecomputeUs(const PartWork &layer, const AttentionShape &attention,
                              bool gated_mlp) {
  double us = 0;
  for (const auto &op : layer.ops) {
    if (op.category == OpCategory::MemoryBound) us += op.forward_us;
    if (op.name == "qkv")
      us += op.forward_us * attention.key / (attention.query + attention.key + attention.value);
    if (op.name == "attention_out") us += op.forward_us;
    if (op.name == "mlp_gate_up") us += op.forward_us / 2;
    if (op.name == "mlp_down" && !gated_mlp) us += op.forward_us;
  }
  return us;
}

/// Whether ZeRO-3 keeps parameters gathered and gradients unsharded for the whole step: with
/// pipeline parallelism, as torchtitan runs FSDP (reshard_after_forward=False "to avoid
/// per-microbatch all-gathers", torchtitan parallelize_llama.py apply_fsdp), and
/// torch.distributed.pipelining's stage backward_maybe_with_nosync (no reshard after backward,
/// gradient sync on the last microbatch only).
bool zero3HoldsGathered(const TrainingSetup &training, int pp) {
  return training.zero_stage >= 3 && pp > 1;
}

/// Whether the layers' weights are FP8 parameters (TrainingSetup::fp8_params, under FP8 GEMMs):
/// gathered at one byte, with no 16-bit copy beside them.
bool holdsFp8Parameters(const TrainingSetup &training) {
  return training.gemm_precision == GemmPrecision::Fp8 && training.fp8_params;
}

/// The rank's dense layer weights that the DP sync gathers at one byte as FP8 parameters: its
/// parameters less the embedding and head (16-bit, outside FP8) and the routed experts (gathered
/// over their own group); 0 without FP8 parameters.
double fp8GatheredDenseParams(const Analysis &an, std::size_t rank, const TrainingSetup &training) {
  return holdsFp8Parameters(training) ? an.rank_params[rank] - an.rank_outside_layer_params[rank] -
                                            an.rank_expert_params[rank]
                                      : 0;
}

/// Bandwidth (GB/s) and latency (µs) a collective achieves on a link: the link's figure times
/// the hardware's bus-bandwidth efficiency for its class (nccl-tests' busbw over the link).
std::pair<double, double> collectiveSpeed(const HardwareSpec &hw, Link link) {
  auto [gbps, latency] = linkSpeed(hw, link);
  gbps *= link == Link::Intra ? hw.intra_node_bus_efficiency : hw.inter_node_bus_efficiency;
  return {gbps, latency};
}

} // namespace

double overlappedSyncExposedUs(double comm_us, double compute_us, int chunks, int pp, int units) {
  const double floor = comm_us / std::max(1, units);
  if (chunks <= 1) return std::max(comm_us - compute_us, floor);
  const double chunk = compute_us / chunks;
  return std::max({comm_us - chunk * (1 + (chunks - 1) * pp), comm_us / chunks - chunk, floor});
}

double collectiveContentionUs(double gemm_slowdown, double overlapped_us, double gemm_share) {
  return gemm_slowdown * std::clamp(gemm_share, 0.0, 1.0) * std::max(0.0, overlapped_us);
}

double ringAllReduceUs(double bytes, int ranks, double bus_gbps, double latency_us) {
  if (ranks <= 1) return 0;
  return 2.0 * (ranks - 1) / ranks * bytes / (bus_gbps * 1e3) + 2.0 * (ranks - 1) * latency_us;
}

double treeAllReduceUs(double bytes, int ranks, int nodes, double bus_gbps, double intra_latency_us,
                       double inter_latency_us) {
  if (ranks <= 1) return 0;
  nodes = std::clamp(nodes, 1, ranks);
  // NCCL (src/graph/tuning.cc): tree busBw × 0.92 for all-reduce, algorithm bandwidth = busBw ×
  // 0.5 (every byte goes up the tree and comes back down), latency per level of the chain in a
  // node and of the binary tree across nodes (log2i: ⌊log2⌋), once up and once down.
  constexpr double kTreeBusFactor = 0.92, kTreeAlgorithmRatio = 0.5;
  const int ranks_per_node = (ranks + nodes - 1) / nodes;
  const int depth = static_cast<int>(std::floor(std::log2(nodes)));
  return 2.0 * ((ranks_per_node - 1) * intra_latency_us + depth * inter_latency_us) +
         bytes / (kTreeAlgorithmRatio * kTreeBusFactor * bus_gbps * 1e3);
}

namespace {

/// The ring's and the tree's time for one all-reduce on a group (allReduceUs's arguments).
std::pair<double, double> ringAndTreeUs(const HardwareSpec &hw, double bytes, int ranks, int nodes,
                                        Link link) {
  auto [gbps, latency] = collectiveSpeed(hw, link);
  const bool one_node = link == Link::None || link == Link::Intra;
  // A group with k ranks in each node runs k rings (NCCL channels) side by side, each entering
  // and leaving the node through its own rank's NIC: the node boundary carries k NICs' worth, up
  // to what the ranks' NVLink ring can feed (nccl issue #812: 192 GB/s all-reduce busbw over a
  // DGX-A100's eight 200 Gb/s NICs; nccl issue #569: the same ring all-reduce across nodes gets
  // faster with more GPUs, hence NICs, per node).
  if (!one_node && nodes > 0) {
    const int per_node = std::max(1, (ranks + nodes - 1) / nodes);
    gbps = std::min(per_node * gbps, collectiveSpeed(hw, Link::Intra).first);
  }
  return {ringAllReduceUs(bytes, ranks, gbps, latency),
          treeAllReduceUs(bytes, ranks, one_node ? 1 : std::max(nodes, 2), gbps,
                          hw.intra_node_latency_us, one_node ? hw.intra_node_latency_us : latency)};
}

} // namespace

CollectiveAlgorithm allReduceAlgorithm(const HardwareSpec &hardware, CollectiveAlgorithm algorithm,
                                       double bytes, int ranks, int nodes, LinkKind link) {
  if (algorithm != CollectiveAlgorithm::Auto) return algorithm;
  const auto [ring, tree] = ringAndTreeUs(hardware, bytes, ranks, nodes, link);
  return tree < ring ? CollectiveAlgorithm::Tree : CollectiveAlgorithm::Ring;
}

double allReduceUs(const HardwareSpec &hardware, CollectiveAlgorithm algorithm, double bytes,
                   int ranks, int nodes, LinkKind link) {
  if (ranks <= 1) return 0;
  const auto [ring, tree] = ringAndTreeUs(hardware, bytes, ranks, nodes, link);
  switch (algorithm) {
  case CollectiveAlgorithm::Ring: return ring;
  case CollectiveAlgorithm::Tree: return tree;
  case CollectiveAlgorithm::Auto: break;
  }
  return std::min(ring, tree);
}

namespace {

/// Transformer layers per model stage: even (remainder on the first stages, so the head's stage
/// never gets an extra layer), or balanced to minimize the slowest stage given the embedding and
/// head costs.
std::vector<int> splitLayers(int layers, int stages, bool balance,
                             const std::vector<double> &extra_us,
                             const std::vector<double> &layer_us) {
  std::vector<int> split(static_cast<std::size_t>(stages), layers / stages);
  if (!balance) {
    for (int k = 0; k < layers % stages; ++k)
      ++split[static_cast<std::size_t>(k)];
    return split;
  }
  // Greedy earliest finish: each further layer goes to the stage that would be done soonest with
  // it. For identical layers this is optimal for the slowest stage (every stage keeps >= 1 layer).
  using Entry = std::pair<double, int>; // time after adding one more layer, stage
  std::priority_queue<Entry, std::vector<Entry>, std::greater<>> queue;
  for (int k = 0; k < stages; ++k) {
    const auto i = static_cast<std::size_t>(k);
    split[i] = 1;
    queue.push({extra_us[i] + 2 * layer_us[i], k});
  }
  for (int assigned = stages; assigned < layers; ++assigned) {
    const auto [time, k] = queue.top();
    queue.pop();
    const auto i = static_cast<std::size_t>(k);
    ++split[i];
    queue.push({extra_us[i] + (split[i] + 1) * layer_us[i], k});
  }
  return split;
}

Result<Analysis> analyze(const ModelSetup &setup, const Mesh &mesh, const Placement &placement,
                         const LayerLayout *given_layout, const MeshLinks *links = nullptr) {
  if (auto status = checkSetup(setup, mesh, placement); !status) return status.error();
  const ModelSpec &m = setup.model;
  const HardwareSpec &hw = setup.hardware;
  const TrainingSetup &training = setup.training;
  const int t = mesh.tp;
  const int P = placement.pp;
  const bool sp = training.sequence_parallel && t > 1;
  const double dt = dtypeBytes(m.dtype);
  const double gradient_bytes = gradientBytes(setup);
  const double h = m.hidden, s = m.sequence_length, b = m.microbatch_size, V = m.vocab;
  const double a = m.heads;
  // Context parallelism: each rank holds s/cp of every sequence (Megatron's CP, two balanced
  // chunks per rank for causal masking), so every per-rank tensor is of s_local tokens.
  const int cp = mesh.cp;
  const double s_local = s / cp;
  ModelSpec local = m;
  local.sequence_length = m.sequence_length / cp;
  const double sbh = s_local * b * h;

  Analysis an;
  an.model_stages = placement.modelStageCount();
  const int S = placement.stageCount();
  const auto Sn = static_cast<std::size_t>(S);

  // FLOPs per layer and microbatch.
  const double linear_flops = 2 * s * b * layerMatrixParams(m);
  // Scores Q·Kᵀ over the score dimension and context A·V over the value dimension, per head:
  // 4·b·s²·h for a standard layer.
  const AttentionShape attention = attentionShapeOf(m);
  const double attention_flops = 2 * b * s * s * a * (attention.score_dim + attention.value_dim);
  const double head_flops = 2 * s * b * h * V;
  // An MTP module (DeepSeek-V3 §2.2) projects [h; h] to h before its transformer layer and runs
  // the shared output head on its result.
  const double mtp_projection_flops = 2 * s * b * 2 * h * h;
  const double mtp_flops = linear_flops + attention_flops + mtp_projection_flops + head_flops;
  an.forward_flops_per_microbatch =
      m.layers * (linear_flops + attention_flops) + head_flops + m.mtp_layers * mtp_flops;
  // MoE layers, the MTP modules' included (their transformer block is the model's, DeepSeek-V3
  // §2.2): the active MLP (top-k routed + shared experts) and the router instead of the dense
  // MLP, as model FLOPs count active parameters.
  const int model_moe_layers = moeLayersIn(m, 0, m.layers) + moeLayersIn(m, m.layers, m.mtp_layers);
  if (isMoe(m)) {
    const double active_mlp = (m.experts_per_token + m.shared_experts) * (m.gated_mlp ? 3.0 : 2.0) *
                                  h * m.expert_ffn_hidden +
                              h * m.experts;
    const double dense_mlp = (m.gated_mlp ? 3.0 : 2.0) * h * m.ffn_hidden;
    an.forward_flops_per_microbatch += model_moe_layers * 2 * s * b * (active_mlp - dense_mlp);
  }

  // Per pipeline rank links and TP all-reduce time.
  an.tp_message_bytes = sbh * dt;
  // Every group's link comes from the mesh under its rank order (given, or classified here).
  const MeshLinks own_links = links ? MeshLinks{} : meshLinks(mesh);
  const MeshLinks &mesh_links = links ? *links : own_links;
  an.rank_tp_link = mesh_links.tp;
  an.rank_dp_link = mesh_links.dp_cp;
  an.rank_expert_dp_link = mesh_links.expert_dp;
  an.rank_tp_allreduce_us.resize(static_cast<std::size_t>(P));
  for (int p = 0; p < P; ++p) {
    const auto i = static_cast<std::size_t>(p);
    // Under sequence parallelism an all-gather and a reduce-scatter (rings in NCCL, the same
    // time as a ring all-reduce); otherwise an all-reduce by the run's algorithm.
    an.rank_tp_allreduce_us[i] =
        allReduceUs(hw, sp ? CollectiveAlgorithm::Ring : training.collective_algorithm,
                    an.tp_message_bytes, t, mesh_links.tp_nodes[i], an.rank_tp_link[i]);
  }

  // Work per layer, embedding and head on one TP rank (layer_costs.h: GEMMs from their shapes
  // through the hardware's curve, memory-bound kernels at HBM bandwidth, attention).
  const bool fp8 = training.gemm_precision == GemmPrecision::Fp8;
  // TP overlap (tp_comm_overlap below) splits the GEMMs beside TP collectives into t chunks.
  const int overlap_chunks = training.tp_comm_overlap && t > 1 ? t : 1;
  // Parameters of one layer on a TP rank. An MoE layer holds no dense MLP; its shared experts
  // and router are sharded like one, its routed experts over ETP (TP unless the mesh says
  // otherwise) and EP.
  const double dense_layer_params_per_rank = layerParams(m).perTpRank(t);
  const double dense_mlp_params = (m.gated_mlp ? 3.0 : 2.0) * h * m.ffn_hidden;
  const double moe_layer_params_per_rank =
      dense_layer_params_per_rank +
      (isMoe(m) ? (sharedAndRouterParams(m) - dense_mlp_params) / t : 0.0);
  const double routed_params_per_rank =
      isMoe(m) ? routedExpertParams(m) / (mesh.expertTpSize() * static_cast<double>(mesh.ep)) : 0.0;
  LayerShape shape{t, sp, true, cp, fp8, overlap_chunks};
  // Without the gradient-accumulation fusion each weight's 16-bit gradient is added into the
  // buffer by a kernel of its own every microbatch (TrainingSetup::gradient_accumulation_fusion):
  // the gradient read, the buffer read and written. With the gradients sharded (ZeRO-2/3, as
  // Megatron-FSDP shards them) it is copied into the unsharded bucket the reduce-scatter reads
  // (read, written), and only the rank's 1/N of it is added into the sharded buffer
  // (megatron_fsdp.py _grad_acc: param.main_grad.copy_(param.grad) where the gradient buffer is
  // data-distributed, main_grad.add_ where it is not). N: the dense parameters' dp × cp group
  // (routed experts shard over their smaller group; the difference is under 2/N bytes).
  const double gradient_add_bytes =
      training.gradient_accumulation_fusion ? 0.0
      : training.zero_stage >= 2
          ? dt + gradient_bytes + 2 * gradient_bytes / std::max(1, mesh.dataCpSize())
          : dt + 2 * gradient_bytes;
  shape.gradient_add_bytes = gradient_add_bytes;
  shape.params = dense_layer_params_per_rank;
  shape.unfused_softmax = !training.masked_softmax_fusion;
  const PartWork layer_work = transformerLayerWork(local, hw, shape);
  // MoE layers: attention as above, the MLP replaced by the experts (moe.h), and per layer two
  // all-to-alls in F (dispatch, combine) and two in I on the EP group's link.
  const int ep = mesh.ep;
  PartWork moe_work; // dense models have no MoE layer to price
  if (isMoe(m)) {
    LayerShape moe_shape = shape;
    moe_shape.dense_mlp = false;
    moe_shape.params = moe_layer_params_per_rank + routed_params_per_rank;
    moe_work = transformerLayerWork(local, hw, moe_shape);
    for (auto &op :
         moeMlpWork(local, hw, shape, ep, training.expert_load_imbalance, mesh.expertTpSize()).ops)
      moe_work.add(std::move(op));
  }
  an.rank_all_to_all_us.assign(static_cast<std::size_t>(P), 0.0);
  for (int p = 0; p < P; ++p) {
    const auto i = static_cast<std::size_t>(p);
    an.rank_ep_link.push_back(mesh_links.ep[i]);
    // Inside a node the whole group runs on NVLink; a group across nodes sends to its peers in
    // the node on NVLink and to the others on the network at once (moe.h).
    const auto intra = collectiveSpeed(hw, Link::Intra), inter = collectiveSpeed(hw, Link::Inter);
    const int nodes = mesh_links.ep[i] == Link::Intra ? 1 : std::max(2, mesh_links.ep_nodes[i]);
    const bool hierarchical = training.moe_dispatcher != "alltoall";
    const auto all_to_all = [&](double element_bytes) {
      return hierarchical
                 ? moeHierarchicalAllToAllUs(local, shape, ep, nodes, {intra.first, intra.second},
                                             {inter.first, inter.second}, element_bytes)
                 : moeAllToAllOverNodesUs(local, shape, ep, nodes, {intra.first, intra.second},
                                          {inter.first, inter.second}, element_bytes);
    };
    // An FP8 dispatch (1 byte per element) and a 16-bit combine per pass (DeepSeek-V3 §3.3):
    // their mean stands for "one dispatch or combine" wherever two are counted.
    an.rank_all_to_all_us[i] =
        fp8 && training.fp8_dispatch ? 0.5 * (all_to_all(1) + all_to_all(0)) : all_to_all(0);
  }
  // CP: K and V (this rank's s/cp tokens, the TP rank's KV heads) go around the CP ring in
  // cp - 1 steps per layer, overlapped with the attention computed on the chunk in hand; the
  // backward sends K, V and their gradients. Only what attention does not hide costs time
  // (Liu et al. 2023, Ring Attention; Megatron-Core context parallelism).
  double attention_f = 0, attention_i = 0;
  for (const auto &op : layer_work.ops)
    if (op.category == OpCategory::Attention) {
      attention_f += op.forward_us;
      attention_i += op.input_grad_us;
    }
  an.rank_cp_forward_us.assign(static_cast<std::size_t>(P), 0.0);
  an.rank_cp_backward_us.assign(static_cast<std::size_t>(P), 0.0);
  for (int p = 0; p < P && cp > 1; ++p) {
    const Link link = mesh_links.cp[static_cast<std::size_t>(p)];
    an.rank_cp_link.push_back(link);
    const auto [gbps, latency] = collectiveSpeed(hw, link);
    const double kv_bytes = b * s_local * (attention.key + attention.value) / t * dt;
    const double ring_f = (cp - 1) * (latency + kv_bytes / (gbps * 1e3));
    const double ring_b = (cp - 1) * (latency + 2 * kv_bytes / (gbps * 1e3));
    an.rank_cp_forward_us[static_cast<std::size_t>(p)] = std::max(0.0, ring_f - attention_f);
    an.rank_cp_backward_us[static_cast<std::size_t>(p)] = std::max(0.0, ring_b - attention_i);
  }
  // The host time an MoE layer leaves the GPU waiting (moeLayerHostUs), a third in each pass;
  // full recomputation launches the forward's kernels again in the backward.
  const double moe_host_pass = isMoe(m) ? moeLayerHostUs(training, hw) / 3 : 0.0;
  const double moe_host_recompute = training.recompute == Recompute::Full ? moe_host_pass : 0.0;
  // Megatron's --recompute-modules (TrainingSetup::recompute_modules), with its selective
  // granularity only (full recomputation already rebuilds everything): the forward time of the
  // ops each module rebuilds in the layer's backward.
  const auto recomputes = [&](std::string_view module) {
    return (training.recompute == Recompute::None || training.recompute == Recompute::Selective) &&
           recomputesModule(training, module);
  };
  const auto modulesRecomputeUs = [&](const PartWork &work, bool moe_layer) {
    double us = 0;
    if (training.recompute_modules.empty()) return us; // the planner's usual case: no scan
    for (const auto &op : work.ops) {
      const std::string &n = op.name;
      const bool input_norm = n == "input_rmsnorm" || n == "input_layernorm";
      const bool mlp_norm = n == "post_attention_rmsnorm" || n == "post_attention_layernorm";
      bool redo = false;
      // A norm stands alone before MLA's down-projections and before the router; elsewhere
      // Transformer Engine fuses it into the next linear layer, which keeps its output.
      if (recomputes("layernorm"))
        redo = redo || (input_norm && attention.latent) || (mlp_norm && moe_layer);
      if (recomputes("mla_up_proj") && attention.latent)
        redo = redo || n == "q_latent_rmsnorm" || n == "q_up" || n == "kv_latent_rmsnorm" ||
               n == "kv_up" || n == "rotary";
      if (recomputes("mlp") && !moe_layer)
        redo = redo || mlp_norm || n == "mlp_gate_up" || n == "mlp_up" || n == "swiglu" ||
               n == "gelu" || n == "mlp_down";
      if (recomputes("moe_act") && moe_layer)
        redo = redo || n == "experts_swiglu" || n == "experts_gelu";
      if (redo) us += op.forward_us;
    }
    return us;
  };
  const double moe_recompute =
      (training.recompute == Recompute::Full        ? moe_work.forward_us
       : training.recompute == Recompute::Selective ? moe_work.selective_recompute_us
                                                    : 0.0) +
      modulesRecomputeUs(moe_work, true);
  const PartWork embedding_work = embeddingWork(local, hw, shape, gradient_bytes);
  const PartWork head_work = [&] {
    PartWork work = headWork(local, hw, shape, training.cross_entropy);
    // An untied head's weight has its own gradient add; a tied one's is the embedding table's,
    // priced with it (embedding_table_grad).
    if (gradient_add_bytes > 0 && !m.tied_embeddings)
      work.add(gradientAccumulationOp(V * h / t, gradient_add_bytes, hw));
    return work;
  }();
  // An MTP module beyond its transformer layer: its norms and 2h→h projection, and a head pass.
  PartWork mtp_work = mtpProjectionWork(local, hw, shape);
  for (auto op : head_work.ops)
    mtp_work.add(std::move(op));
  const double layer_f_compute = layer_work.forward_us;
  const double layer_w = layer_work.weight_grad_us;
  const double layer_i_compute = layer_work.input_grad_us;
  const double recompute_compute =
      (training.recompute == Recompute::Full        ? layer_f_compute
       : training.recompute == Recompute::Selective ? layer_work.selective_recompute_us
       : training.recompute == Recompute::SelectiveOp
           ? selectiveOpRecomputeUs(layer_work, attention, m.gated_mlp)
           : 0.0) +
      modulesRecomputeUs(layer_work, false);
  const double recompute_collectives = training.recompute == Recompute::Full ? 2.0 : 0.0;
  // One transformer layer's TP collectives in a pass, given the rank's all-reduce time `ar`:
  // 2 all-reduces (under SP an all-gather and a reduce-scatter, half an all-reduce each, around
  // attention and around the MLP). With Megatron's --tp-comm-overlap (Transformer Engine's
  // userbuffers, sequence parallel only) each all-gather runs chunk by chunk under the
  // column-parallel GEMM it feeds (QKV or the MLA projections, MLP up) and each reduce-scatter
  // under the row-parallel GEMM it follows (attention output, MLP down), in the forward and on
  // the same GEMMs' input-grad pass: only what the GEMM cannot hide is exposed (TE's
  // comm-GEMM overlap; Wang et al., "Overlap Communication with Dependent Computation via
  // Decomposition", ASPLOS 2023). An MoE layer's MLP collectives are its dispatcher's, not
  // overlapped.
  const bool tp_overlap = training.tp_comm_overlap && t > 1;
  // Megatron-LM's asynchronous backward collectives (TrainingSetup::tp_backward_overlap): each
  // column-parallel layer's backward collectives beside its own GEMMs.
  const bool tp_backward_overlap = training.tp_backward_overlap && !tp_overlap && t > 1;
  const auto gemmPassUs = [](const PartWork &work, std::span<const std::string_view> names,
                             double LayerOp::*pass) {
    double us = 0;
    for (const auto &op : work.ops)
      if (namedIn(names, op.name)) us += op.*pass;
    return us;
  };
  // Exposed time of a column-parallel layer's backward collectives: the all-reduce (a
  // reduce-scatter under SP) of its input gradient under its weight-gradient GEMM, and under SP
  // the all-gather of its input again under its input-gradient GEMM.
  const auto columnBackwardTpUs = [&](double ar, double input_grad_us, double weight_grad_us) {
    if (!sp) return std::max(0.0, ar - weight_grad_us);
    return std::max(0.0, ar / 2 - input_grad_us) + std::max(0.0, ar / 2 - weight_grad_us);
  };
  // What of that the weight-gradient GEMMs hide: exposed again where a schedule runs W as its
  // own op (zero-bubble schedules), since the input-grad op then ends with the collective.
  const auto columnHiddenByWeightGradUs = [&](double ar, double weight_grad_us) {
    return tp_backward_overlap ? std::min(sp ? ar / 2 : ar, weight_grad_us) : 0.0;
  };
  const auto layerSplitExtraUs = [&](double ar, bool moe) {
    const PartWork &work = moe ? moe_work : layer_work;
    const auto hidden = [&](std::span<const std::string_view> names) {
      return columnHiddenByWeightGradUs(ar, gemmPassUs(work, names, &LayerOp::weight_grad_us));
    };
    return hidden(kAttentionGatherGemms) + (moe ? 0.0 : hidden(kMlpGatherGemms));
  };
  const auto layerTpUs = [&](double ar, bool moe, bool backward) {
    const PartWork &work = moe ? moe_work : layer_work;
    if (backward && tp_backward_overlap) {
      // The row-parallel layers' backward: their output gradient all-gathered (SP) or nothing.
      const double row = sp ? ar / 2 : 0.0;
      const auto column = [&](std::span<const std::string_view> names) {
        return columnBackwardTpUs(ar, gemmPassUs(work, names, &LayerOp::input_grad_us),
                                  gemmPassUs(work, names, &LayerOp::weight_grad_us));
      };
      return column(kAttentionGatherGemms) + row + (moe ? ar : column(kMlpGatherGemms) + row);
    }
    if (!tp_overlap) return 2 * ar;
    // Half an all-reduce less the pass's time of the GEMMs beside it (layer_costs.h).
    const auto exposed = [&](std::span<const std::string_view> names) {
      return std::max(
          0.0, ar / 2 - gemmPassUs(work, names,
                                   backward ? &LayerOp::input_grad_us : &LayerOp::forward_us));
    };
    const double attention = exposed(kAttentionGatherGemms) + exposed(kAttentionScatterGemms);
    return attention + (moe ? ar : exposed(kMlpGatherGemms) + exposed(kMlpScatterGemms));
  };
  // TP collectives (all-reduce equivalents). Layer: 2 in F, 2 in I. Vocab-parallel embedding:
  // an all-reduce in F (with SP a reduce-scatter in F and an all-gather in I). Output head:
  // its input gradient is all-reduced in I (with SP an all-gather in F and a reduce-scatter in I).
  const double embed_f = sp ? 0.5 : 1.0, embed_i = sp ? 0.5 : 0.0;
  const double head_f = sp ? 0.5 : 0.0, head_i = sp ? 0.5 : 1.0;

  // Activations per layer and microbatch on one TP rank (Korthikanti et al. 2022).
  const double scale = dt / 2; // the paper's counts are for 16-bit activations
  // Bytes an element of a linear layer's input takes where the layer keeps it for its weight
  // gradient, in the paper's 16-bit units (× scale below). Under FP8 GEMMs Transformer Engine
  // keeps the FP8 cast it fed the GEMM, one byte an element, not the 16-bit tensor (its
  // Linear, LayerNormLinear, LayerNormMLP and GroupedLinear save the quantized input for the
  // wgrad GEMM): the QKV or MLA projections' input, the normalized latents, the attention output
  // projection's input, the MLP's and the experts' two inputs. What else a layer keeps (norm
  // inputs, Q, K, V, the activation function's input, the router's) stays 16-bit. Megatron-LM's
  // CI measured the difference on one MoE test: 2.4 GiB less at the peak in FP8 than in BF16
  // (docs/validation.md, "The FP8 row").
  const double linear_input = fp8 ? 1 / scale : 2.0;
  // MLA's latents, before and after their norms (the up-projections' inputs), and the shared
  // rope key: held whole on each TP rank like the layer's input, split only by SP.
  const double latent_unsplit =
      s_local * b *
      ((2 + linear_input) * (attention.q_latent + attention.kv_latent) + 2 * attention.rope_key);
  // Korthikanti's 10·sbh: the two norms' inputs (4·sbh), the two 1-byte dropout masks of sbh
  // (none without dropout), the QKV projection's input and the MLP's (2·sbh each). An MoE
  // layer's MLP input also feeds the router, a 16-bit GEMM, so it stays 16-bit there.
  const double unsplit_without_linear_inputs = (m.dropout ? 6 : 4) * sbh + latent_unsplit;
  const double unsplit = unsplit_without_linear_inputs + 2 * linear_input * sbh;
  const double moe_unsplit = unsplit_without_linear_inputs + (linear_input + 2) * sbh;
  // Korthikanti's split 24·sbh: Q, K, V and the output projection's input (2 bytes each; with
  // GQA, MLA or head_dim ≠ h/a their own widths) and the MLP's intermediates: the up
  // projection's output and the activation's (4 bytes × ffn); gated, the gate and up outputs
  // and the down projection's input (6 bytes × ffn, fused SwiGLU), or also silu's output when
  // eager autograd keeps it (8; TrainingSetup::swiglu_fusion). The inputs of the output and
  // down projections are linear inputs.
  const double attention_split =
      s_local * b *
      (2 * (attention.query + attention.key + attention.value) + linear_input * attention.output);
  const double mlp_bytes_per_ffn = (!m.gated_mlp             ? 2.0
                                    : training.swiglu_fusion ? 4.0
                                                             : 6.0) +
                                   linear_input;
  const double split = attention_split + s_local * b * m.ffn_hidden * mlp_bytes_per_ffn;
  // Materialized scores: the softmax output (2·a·s²·b), and with dropout its mask and output
  // (1 + 2). FlashAttention keeps no s×s tensor, only the fp32 log-sum-exp per row (4·a·s·b
  // bytes, Dao 2022, Algorithm 2); its output is the projection input already counted.
  const double scores = m.attention == "flash"
                            ? 4 * a * s_local * b / scale
                            : (m.dropout ? 5 : 2) * a * s_local * s * b; // local queries, all keys
  // torchtitan's per-op policy keeps, of a dense layer (2 bytes each): its input, Q and V, the
  // attention output with its fp32 log-sum-exp, and the MLP's first projection (gated: the gate
  // w1, and the down projection's output w2, a whole b·s·h on each TP rank before its reduction).
  const double selective_op_activation =
      scale * (2 * sbh / (sp ? t : 1) +
               2 * s_local * b * (attention.query + attention.value + attention.output) / t +
               2 * s_local * b * m.ffn_hidden / t + (m.gated_mlp ? 2 * sbh : 0.0)) +
      4 * a * s_local * b / t;
  const auto layerActivation = [&](Recompute recompute, double split, double kept_unsplit = -1) {
    const double whole = kept_unsplit >= 0 ? kept_unsplit : unsplit;
    switch (recompute) {
    case Recompute::Full: return scale * 2 * sbh / (sp ? t : 1); // the layer input only
    case Recompute::SelectiveOp: return selective_op_activation;
    case Recompute::Selective: return scale * (sp ? (whole + split) / t : whole + split / t);
    case Recompute::None: break;
    }
    return scale * (sp ? (whole + split + scores) / t : whole + (split + scores) / t);
  };
  // An MoE layer keeps, instead of the dense MLP's intermediates, those of every routed copy the
  // rank computes (k × load per token) and of the shared experts, plus the dispatched inputs.
  const double moe_copies = isMoe(m) ? expertLoadFactor(m, training.expert_load_imbalance) : 0;
  // The dispatched inputs are the experts' linear inputs; the shared experts' input is the
  // router's 16-bit one, of which their FP8 layers keep a cast of their own.
  const double shared_expert_input = fp8 && m.shared_experts > 0 ? linear_input * sbh : 0.0;
  const double moe_split =
      attention_split + linear_input * moe_copies * sbh + shared_expert_input +
      s_local * b * (moe_copies + m.shared_experts) * m.expert_ffn_hidden * mlp_bytes_per_ffn;
  // Megatron's --recompute-modules (TrainingSetup::recompute_modules): what each drops from a
  // dense or an MoE layer's stored activations, in the units of `unsplit` and `split`.
  struct Dropped {
    double unsplit = 0, split = 0;
  };
  const auto droppedByModules = [&](bool moe_layer) {
    Dropped out;
    if (recomputes("layernorm")) {
      if (attention.latent) out.unsplit += linear_input * sbh; // before MLA's down-projections
      if (moe_layer) out.unsplit += 2 * sbh;                   // the norm before the router
    }
    if (recomputes("mla_up_proj") && attention.latent) {
      out.unsplit += linear_input * s_local * b * (attention.q_latent + attention.kv_latent);
      out.split += 2 * s_local * b * (attention.query + attention.key + attention.value);
    }
    if (recomputes("mlp") && !moe_layer) {
      // the norm fused into the up projection, inside the checkpoint
      out.unsplit += linear_input * sbh;
      out.split += s_local * b * m.ffn_hidden * mlp_bytes_per_ffn;
    }
    // The experts' activation keeps its input (the up projection's output, 4 bytes × ffn gated,
    // 2 not) and drops what follows it.
    if (recomputes("moe_act") && moe_layer)
      out.split += s_local * b * moe_copies * m.expert_ffn_hidden *
                   (mlp_bytes_per_ffn - (m.gated_mlp ? 4.0 : 2.0));
    return out;
  };
  const Dropped dense_dropped = droppedByModules(false), moe_dropped = droppedByModules(true);
  const double layer_activation = layerActivation(training.recompute, split - dense_dropped.split,
                                                  unsplit - dense_dropped.unsplit);
  an.layer_activation_full = layerActivation(Recompute::None, split);
  const double moe_layer_activation = layerActivation(
      training.recompute, moe_split - moe_dropped.split, moe_unsplit - moe_dropped.unsplit);
  if (isMoe(m))
    an.layer_activation_full = std::max(an.layer_activation_full,
                                        layerActivation(Recompute::None, moe_split, moe_unsplit));
  // What a layer's backward rebuilds beside the stored activations: under the modules, what they
  // dropped of that layer.
  double modules_transient = layerActivation(training.recompute, split) - layer_activation;
  if (isMoe(m))
    modules_transient =
        std::max(modules_transient, layerActivation(training.recompute, moe_split, moe_unsplit) -
                                        moe_layer_activation);
  an.recompute_transient = training.recompute == Recompute::Full ? an.layer_activation_full
                           : training.recompute == Recompute::SelectiveOp
                               ? std::max(0.0, an.layer_activation_full - selective_op_activation)
                               : modules_transient;
  // Embedding dropout mask on the first stage; final norm and head input (4·sbh) and the fp32
  // logits for the loss (4·s·b·V/t) on the last (Korthikanti et al. 2022, §4.3).
  const double embed_activation = m.dropout ? sbh / (sp ? t : 1) : 0;
  // Transformer Engine's fused loss keeps the 16-bit logits, the others their fp32 copy.
  const double kept_logit_bytes = training.cross_entropy == "te" ? dt : 4.0;
  const double head_activation =
      scale * 4 * sbh / (sp ? t : 1) + kept_logit_bytes * s_local * b * V / t;
  // MTP, beyond its transformer layer: the concatenated projection input (2·sbh, a linear
  // input) and its own head and logits.
  const double mtp_extra_activation = scale * linear_input * 2 * sbh / (sp ? t : 1) +
                                      (training.recompute == Recompute::Full ? 0 : head_activation);

  // Layer split over the model stages.
  std::vector<int> model_rank(static_cast<std::size_t>(an.model_stages), 0);
  for (int v = S - 1; v >= 0; --v)
    model_rank[static_cast<std::size_t>(placement.model_stage[static_cast<std::size_t>(v)])] =
        placement.rankOf(v);
  if (given_layout && static_cast<int>(given_layout->size()) == an.model_stages) {
    an.model_layout = *given_layout;
  } else if (!training.layout.empty()) {
    an.model_layout = training.layout;
  } else {
    std::vector<double> extra(static_cast<std::size_t>(an.model_stages), 0.0);
    std::vector<double> per_layer(static_cast<std::size_t>(an.model_stages), 0.0);
    for (int k = 0; k < an.model_stages; ++k) {
      const auto i = static_cast<std::size_t>(k);
      const double ar = an.rank_tp_allreduce_us[static_cast<std::size_t>(model_rank[i])];
      per_layer[i] = layer_f_compute + layer_i_compute + layer_w + recompute_compute +
                     layerTpUs(ar, false, false) + layerTpUs(ar, false, true) +
                     recompute_collectives * ar;
      if (k == 0)
        extra[i] +=
            embedding_work.forward_us + embedding_work.weight_grad_us + (embed_f + embed_i) * ar;
      if (k == an.model_stages - 1)
        extra[i] += head_work.forward_us + head_work.input_grad_us + head_work.weight_grad_us +
                    (head_f + head_i) * ar;
    }
    an.model_layout = layoutFromLayerCounts(
        splitLayers(m.layers, an.model_stages, training.balance_layers, extra, per_layer));
    an.model_layout.back().mtp_layers = m.mtp_layers; // Megatron's default: MTP on the last stage
  }

  // Per virtual stage times, activations and collectives.
  an.stage_costs.resize(Sn);
  an.stage_breakdown.assign(Sn, StageBreakdown{});
  an.layer_ops = layer_work.ops;
  an.moe_layer_ops = moe_work.ops;
  an.stage_activation.resize(Sn);
  an.stage_activation_granule.resize(Sn);
  an.stage_tp_collectives.resize(Sn);
  // Microbatches through each stage per step: all of them, or for bidirectional placements the
  // first M/2 through direction 0 (stages 0..P-1) and the rest through direction 1.
  an.stage_microbatches.assign(Sn, placement.microbatches);
  if (placement.kind == PlacementKind::Bidirectional)
    for (int v = 0; v < S; ++v)
      an.stage_microbatches[static_cast<std::size_t>(v)] =
          v < P ? placement.microbatches / 2 : placement.microbatches - placement.microbatches / 2;
  std::vector<int> model_first_layer(static_cast<std::size_t>(an.model_stages), 0);
  for (int k = 1; k < an.model_stages; ++k)
    model_first_layer[static_cast<std::size_t>(k)] =
        model_first_layer[static_cast<std::size_t>(k - 1)] +
        an.model_layout[static_cast<std::size_t>(k - 1)].layers;
  an.stage_moe_layers.assign(Sn, 0);
  for (int v = 0; v < S; ++v) {
    const auto i = static_cast<std::size_t>(v);
    const int k = placement.model_stage[i];
    const StageLayers &held = an.model_layout[static_cast<std::size_t>(k)];
    // An MTP layer costs a transformer layer (dense or MoE as the model's are) plus its
    // projection and head pass.
    const int stage_layers = held.layers + held.mtp_layers;
    const int moe_layers =
        moeLayersIn(m, model_first_layer[static_cast<std::size_t>(k)], held.layers) +
        moeLayersIn(m, m.layers, held.mtp_layers);
    an.stage_moe_layers[i] = moe_layers;
    const double n = stage_layers - moe_layers; // dense layers; the MoE ones are added below
    const double n_moe = moe_layers;
    const double mtp = held.mtp_layers;
    const bool first = held.embedding, last = held.loss;
    const double ar = an.rank_tp_allreduce_us[static_cast<std::size_t>(placement.rankOf(v))];
    const double a2a = an.rank_all_to_all_us[static_cast<std::size_t>(placement.rankOf(v))];
    const double cp_f = an.rank_cp_forward_us[static_cast<std::size_t>(placement.rankOf(v))];
    const double cp_b = an.rank_cp_backward_us[static_cast<std::size_t>(placement.rankOf(v))];
    const double cp_recompute = training.recompute == Recompute::Full ? cp_f : 0.0;
    const double f_collectives =
        2 * (n + n_moe) + (first ? embed_f : 0) + (last ? head_f : 0) + mtp * head_f;
    const double i_collectives = (2 + recompute_collectives) * (n + n_moe) + (first ? embed_i : 0) +
                                 (last ? head_i : 0) + mtp * head_i;
    // TP time: the layers' (overlapped with their GEMMs under tp_comm_overlap) and the rest.
    const double f_tp_us = (f_collectives - 2 * (n + n_moe)) * ar +
                           n * layerTpUs(ar, false, false) + n_moe * layerTpUs(ar, true, false);
    // The output head is column-parallel: under tp_backward_overlap its input gradient's
    // collective runs beside its own GEMMs too.
    const double head_i_us =
        tp_backward_overlap
            ? columnBackwardTpUs(ar, gemmPassUs(head_work, kHeadGemms, &LayerOp::input_grad_us),
                                 gemmPassUs(head_work, kHeadGemms, &LayerOp::weight_grad_us))
            : head_i * ar;
    const double i_tp_us = (i_collectives - 2 * (n + n_moe) - (last ? head_i : 0)) * ar +
                           (last ? head_i_us : 0) + n * layerTpUs(ar, false, true) +
                           n_moe * layerTpUs(ar, true, true);
    const double split_extra_us =
        n * layerSplitExtraUs(ar, false) + n_moe * layerSplitExtraUs(ar, true) +
        (last ? columnHiddenByWeightGradUs(
                    ar, gemmPassUs(head_work, kHeadGemms, &LayerOp::weight_grad_us))
              : 0.0);
    const double recompute_all_to_all = training.recompute == Recompute::Full ? 2 : 0;
    StageCost cost;
    cost.forward_us = n * layer_f_compute +
                      n_moe * (moe_work.forward_us + 2 * a2a + moe_host_pass) +
                      (first ? embedding_work.forward_us : 0) + (last ? head_work.forward_us : 0) +
                      mtp * mtp_work.forward_us + f_tp_us + (n + n_moe) * cp_f;
    cost.weight_us = n * layer_w + n_moe * (moe_work.weight_grad_us + moe_host_pass) +
                     (first ? embedding_work.weight_grad_us : 0) +
                     (last ? head_work.weight_grad_us : 0) + mtp * mtp_work.weight_grad_us;
    const double input_grad =
        n * (layer_i_compute + recompute_compute) +
        n_moe * (moe_work.input_grad_us + moe_recompute + (2 + recompute_all_to_all) * a2a +
                 moe_host_pass + moe_host_recompute) +
        (last ? head_work.input_grad_us : 0) + mtp * mtp_work.input_grad_us + i_tp_us +
        (n + n_moe) * (cp_b + cp_recompute);
    cost.backward_us = input_grad + cost.weight_us;
    cost.input_grad_split_extra_us = split_extra_us;
    an.stage_costs[i] = cost;
    StageBreakdown &parts = an.stage_breakdown[i];
    using Pass = PartWork::Pass;
    parts.layers = stage_layers;
    layer_work.addTo(parts.forward, Pass::Forward, n);
    layer_work.addTo(parts.input_grad, Pass::InputGrad, n);
    layer_work.addTo(parts.weight_grad, Pass::WeightGrad, n);
    moe_work.addTo(parts.forward, Pass::Forward, n_moe);
    moe_work.addTo(parts.input_grad, Pass::InputGrad, n_moe);
    moe_work.addTo(parts.weight_grad, Pass::WeightGrad, n_moe);
    parts.forward.ep_us = 2 * n_moe * a2a;
    parts.input_grad.ep_us = 2 * n_moe * a2a;
    parts.forward.host_us = n_moe * moe_host_pass;
    parts.input_grad.host_us = n_moe * (moe_host_pass + moe_host_recompute);
    parts.weight_grad.host_us = n_moe * moe_host_pass;
    parts.forward.cp_us = (n + n_moe) * cp_f;
    parts.input_grad.cp_us = (n + n_moe) * cp_b;
    for (const auto *extra : {first ? &embedding_work : nullptr, last ? &head_work : nullptr}) {
      if (!extra) continue;
      extra->addTo(parts.forward, Pass::Forward, 1);
      extra->addTo(parts.input_grad, Pass::InputGrad, 1);
      extra->addTo(parts.weight_grad, Pass::WeightGrad, 1);
    }
    mtp_work.addTo(parts.forward, Pass::Forward, mtp);
    mtp_work.addTo(parts.input_grad, Pass::InputGrad, mtp);
    mtp_work.addTo(parts.weight_grad, Pass::WeightGrad, mtp);
    parts.forward.tp_us = f_tp_us;
    parts.input_grad.tp_us = i_tp_us - recompute_collectives * (n + n_moe) * ar;
    parts.split_input_grad_tp_us = split_extra_us;
    parts.input_grad.recompute_us = n * recompute_compute + n_moe * moe_recompute +
                                    recompute_collectives * (n + n_moe) * ar +
                                    n_moe * recompute_all_to_all * a2a + (n + n_moe) * cp_recompute;
    an.stage_tp_collectives[i] = t > 1 ? f_collectives + i_collectives : 0;
    an.stage_activation[i] = n * layer_activation + n_moe * moe_layer_activation +
                             mtp * mtp_extra_activation + (first ? embed_activation : 0) +
                             (last ? head_activation : 0);
    // The most one of its layers (or its MTP module, embedding or head) holds: what an
    // overlapped pair's forward runs ahead of its backward (overlappedPairPeakBytes).
    an.stage_activation_granule[i] = std::max(
        {n > 0 ? layer_activation : 0.0, n_moe > 0 ? moe_layer_activation : 0.0,
         mtp > 0 ? (isMoe(m) ? moe_layer_activation : layer_activation) + mtp_extra_activation
                 : 0.0,
         first ? embed_activation : 0.0, last ? head_activation : 0.0});
  }
  {
    const auto middle = static_cast<std::size_t>(P / 2);
    const double share_moe = static_cast<double>(model_moe_layers) / P;
    const double a2a = an.rank_all_to_all_us[middle];
    an.moe_all_to_all_forward_us = share_moe * 2 * a2a;
    an.moe_all_to_all_backward_us =
        share_moe * (training.recompute == Recompute::Full ? 4 : 2) * a2a;
    an.moe_host_forward_us = share_moe * moe_host_pass;
    an.moe_host_backward_us = share_moe * (2 * moe_host_pass + moe_host_recompute);
  }
  // Per layer times on a middle rank, for the rank-share figures Costs displays.
  const double middle_ar = an.rank_tp_allreduce_us[static_cast<std::size_t>(P / 2)];
  // The average layer: dense and MoE layers in the model's proportion.
  const double moe_share = static_cast<double>(model_moe_layers) / (m.layers + m.mtp_layers);
  const double middle_a2a = an.rank_all_to_all_us[static_cast<std::size_t>(P / 2)];
  const auto mix = [&](double dense, double moe) {
    return (1 - moe_share) * dense + moe_share * moe;
  };
  an.layer_forward_us =
      mix(layer_f_compute + layerTpUs(middle_ar, false, false),
          moe_work.forward_us + 2 * middle_a2a + layerTpUs(middle_ar, true, false) + moe_host_pass);
  an.layer_weight_us = mix(layer_w, moe_work.weight_grad_us + moe_host_pass);
  an.layer_split_extra_us =
      mix(layerSplitExtraUs(middle_ar, false), layerSplitExtraUs(middle_ar, true));
  an.layer_backward_us = mix(layer_i_compute + recompute_compute,
                             moe_work.input_grad_us + moe_recompute +
                                 (training.recompute == Recompute::Full ? 4 : 2) * middle_a2a +
                                 moe_host_pass + moe_host_recompute) +
                         mix(layerTpUs(middle_ar, false, true), layerTpUs(middle_ar, true, true)) +
                         recompute_collectives * middle_ar + an.layer_weight_us;
  {
    const auto middle = static_cast<std::size_t>(P / 2);
    an.layer_forward_us += an.rank_cp_forward_us[middle];
    an.layer_backward_us +=
        an.rank_cp_backward_us[middle] +
        (training.recompute == Recompute::Full ? an.rank_cp_forward_us[middle] : 0.0);
  }

  // PP: b·s·h elements per boundary per microbatch per direction, split across the TP ranks:
  // under sequence parallelism each holds its 1/t sequence shard and sends it; otherwise each
  // sends 1/t of the (replicated) tensor and the receiving TP group all-gathers it over its own
  // link (Megatron-LM's scatter/gather optimization, Narayanan et al. 2021, §4.1).
  an.pp_bytes_per_rank = sbh * dt / t;
  an.boundary_us.assign(Sn, 0.0);
  an.boundary_link.assign(Sn, Link::None);
  std::map<std::pair<int, int>, Link> pair_links;
  double slowest_boundary_us = -1;
  for (int v = 0; v < S; ++v) {
    const int next = placement.nextStage(v);
    if (next < 0 || placement.rankOf(next) == placement.rankOf(v)) continue;
    const int from = placement.rankOf(v), to = placement.rankOf(next);
    const std::pair<int, int> key{std::min(from, to), std::max(from, to)};
    auto it = pair_links.find(key);
    if (it == pair_links.end()) {
      // Neighbours p, p + 1 and the wrap-around pair 0, P - 1 are in the precomputed links.
      const bool neighbours = key.second == key.first + 1,
                 wraps = key.first == 0 && key.second == P - 1;
      const Link link = neighbours ? mesh_links.next[static_cast<std::size_t>(key.first)]
                        : wraps    ? mesh_links.next[static_cast<std::size_t>(P - 1)]
                                   : pairLinkOf(mesh, key.first, key.second);
      it = pair_links.emplace(key, link).first;
    }
    const auto [gbps, latency] = linkSpeed(hw, it->second);
    an.boundary_link[static_cast<std::size_t>(v)] = it->second;
    double gather_us = 0;
    if (t > 1 && !sp) {
      const auto [tp_gbps, tp_latency] =
          collectiveSpeed(hw, an.rank_tp_link[static_cast<std::size_t>(to)]);
      gather_us = ringAllReduceUs(sbh * dt, t, tp_gbps, tp_latency) / 2; // all-gather: half
    }
    const double time = latency + an.pp_bytes_per_rank / (gbps * 1e3) + gather_us;
    an.boundary_us[static_cast<std::size_t>(v)] = time;
    if (time > slowest_boundary_us) {
      slowest_boundary_us = time;
      an.slowest_link_gbps = gbps;
      an.slowest_link_latency_us = latency;
    }
  }

  // Per pipeline rank: parameters (unique model stages held), gradient sync.
  int embedding_stage = 0, loss_stage = an.model_stages - 1;
  for (int k = 0; k < an.model_stages; ++k) {
    if (an.model_layout[static_cast<std::size_t>(k)].embedding) embedding_stage = k;
    if (an.model_layout[static_cast<std::size_t>(k)].loss) loss_stage = k;
  }
  const Params layer = layerParams(m), embedding = embeddingParams(m),
               head = headParams(m, embedding_stage == loss_stage);
  // An MTP module beyond its transformer layer: the 2h→h projection (column-parallel) and two
  // norms; it needs the embedding and the head, and its stage holds a copy of each it lacks
  // (Megatron-Core's GPTModel builds a LanguageModelEmbedding wherever mtp_process is set, and
  // LanguageModule.shared_embedding_or_output_weight: "MTP need both embedding layer and output
  // layer"; with tied embeddings the two are one weight, the head's copy).
  const Params mtp_extra{2.0 * m.hidden * m.hidden, 2 * normParams(m)};
  an.rank_params.assign(static_cast<std::size_t>(P), 0.0);
  an.rank_layers.assign(static_cast<std::size_t>(P), 0);
  an.rank_sync_us.assign(static_cast<std::size_t>(P), 0.0);
  an.rank_sync_exposed_us.assign(static_cast<std::size_t>(P), 0.0);
  an.rank_sync_in_ops_us.assign(static_cast<std::size_t>(P), 0.0);
  an.rank_optimizer_us.assign(static_cast<std::size_t>(P), 0.0);
  an.rank_expert_params.assign(static_cast<std::size_t>(P), 0.0);
  std::vector<double> rank_last_backward(static_cast<std::size_t>(P), 0.0);
  std::vector<double> rank_first_forward(static_cast<std::size_t>(P), 0.0);
  // The rank's forward and backward compute by part: its GEMMs' share is what an overlapped
  // collective slows (collectiveContentionUs).
  std::vector<PassBreakdown> rank_forward(static_cast<std::size_t>(P));
  std::vector<PassBreakdown> rank_backward(static_cast<std::size_t>(P));
  an.rank_largest_layer_params.assign(static_cast<std::size_t>(P), 0.0);
  an.rank_outside_layer_params.assign(static_cast<std::size_t>(P), 0.0);

  {
    std::vector<std::vector<int>> held(static_cast<std::size_t>(P));
    for (int v = 0; v < S; ++v) {
      const auto p = static_cast<std::size_t>(placement.rankOf(v));
      held[p].push_back(placement.model_stage[static_cast<std::size_t>(v)]);
      rank_last_backward[p] += an.stage_costs[static_cast<std::size_t>(v)].backward_us;
      rank_first_forward[p] += an.stage_costs[static_cast<std::size_t>(v)].forward_us;
      const StageBreakdown &parts = an.stage_breakdown[static_cast<std::size_t>(v)];
      rank_forward[p] += parts.forward;
      rank_backward[p] += parts.input_grad;
      rank_backward[p] += parts.weight_grad;
    }
    for (int p = 0; p < P; ++p) {
      const auto i = static_cast<std::size_t>(p);
      auto &stages = held[i];
      std::sort(stages.begin(), stages.end());
      stages.erase(std::unique(stages.begin(), stages.end()), stages.end());
      for (int k : stages) {
        const StageLayers &held = an.model_layout[static_cast<std::size_t>(k)];
        const int n = held.layers + held.mtp_layers;
        const int n_moe =
            moeLayersIn(m, model_first_layer[static_cast<std::size_t>(k)], held.layers) +
            moeLayersIn(m, m.layers, held.mtp_layers);
        an.rank_layers[i] += n;
        // ZeRO-3's gathering unit: one layer (an MTP module's with its projection).
        double &largest = an.rank_largest_layer_params[i];
        if (n > n_moe) largest = std::max(largest, layer.perTpRank(t));
        if (n_moe > 0)
          largest = std::max(largest, moe_layer_params_per_rank + routed_params_per_rank);
        if (held.mtp_layers > 0)
          largest = std::max(largest, (held.mtp_layers > n_moe
                                           ? layer.perTpRank(t)
                                           : moe_layer_params_per_rank + routed_params_per_rank) +
                                          mtp_extra.perTpRank(t));
        const double outside_before = an.rank_params[i];
        an.rank_params[i] += (n - n_moe) * layer.perTpRank(t) +
                             n_moe * (moe_layer_params_per_rank + routed_params_per_rank) +
                             held.mtp_layers * mtp_extra.perTpRank(t);
        an.rank_expert_params[i] += n_moe * routed_params_per_rank;
        if (held.mtp_layers > 0 && !held.loss)
          an.rank_params[i] += Params{static_cast<double>(m.vocab) * m.hidden, 0}.perTpRank(t);
        if (held.mtp_layers > 0 && !held.embedding && !m.tied_embeddings)
          an.rank_params[i] += embedding.perTpRank(t);
        if (held.embedding) an.rank_params[i] += embedding.perTpRank(t);
        if (held.loss) an.rank_params[i] += head.perTpRank(t);
        an.rank_outside_layer_params[i] +=
            an.rank_params[i] - outside_before - (n - n_moe) * layer.perTpRank(t) -
            n_moe * (moe_layer_params_per_rank + routed_params_per_rank) -
            held.mtp_layers * mtp_extra.perTpRank(t);
      }
      // DP: one all-reduce of the rank's 16-bit gradients per step (with ZeRO-1 a reduce-scatter
      // plus an all-gather of the updated weights: the same volume). Dense gradients are reduced
      // over the dp × cp ranks (CP ranks hold the same weights: Megatron's dp_cp group), the
      // routed experts' over the dp·cp / ep ranks that hold the same experts, each on its
      // group's link. ZeRO-1's reduce-scatter and all-gather are rings; an all-reduce goes by
      // the run's algorithm. A dense model has no expert gradients and no second collective
      // (not even its latency).
      const CollectiveAlgorithm algorithm =
          training.zero_stage >= 1 ? CollectiveAlgorithm::Ring : training.collective_algorithm;
      const double expert = an.rank_expert_params[i];
      // (A rank without routed experts runs no expert collective, so pays no latency for one.)
      // All-reduce time of the rank's parameters at `bytes` each.
      const auto syncOf = [&](double dense_bytes, double expert_bytes) {
        return allReduceUs(hw, algorithm, dense_bytes, mesh.dataCpSize(), mesh_links.dp_cp_nodes[i],
                           an.rank_dp_link[i]) +
               (expert > 0 ? allReduceUs(hw, algorithm, expert_bytes, mesh.expertDataSize(),
                                         mesh_links.expert_dp_nodes[i], an.rank_expert_dp_link[i])
                           : 0.0);
      };
      const auto syncAt = [&](double bytes) {
        return syncOf((an.rank_params[i] - expert) * bytes, expert * bytes);
      };
      // Gradients are reduced at their own width (fp32 with fp32_gradients), updated parameters
      // gathered at the model's: ZeRO-1/2's reduce-scatter + all-gather is half an all-reduce of
      // each; without ZeRO one all-reduce of the gradients. FP8 parameters are gathered at one
      // byte, the embedding and head (16-bit outside FP8) at the model's.
      const bool fp8_gathered = holdsFp8Parameters(training);
      const double dense_fp8 = fp8GatheredDenseParams(an, i, training);
      const double gradient_sync = syncAt(gradient_bytes),
                   parameter_sync =
                       syncOf((an.rank_params[i] - expert - dense_fp8) * dt + dense_fp8,
                              expert * (fp8_gathered ? 1 : dt));
      const double sync =
          training.zero_stage == 0 ? gradient_sync : (gradient_sync + parameter_sync) / 2;
      // The collectives of one layer-sized unit: the sync's share, so the last one's cannot hide.
      const int units = std::max(1, an.rank_layers[i]);
      // Overlapped: `comm_us` of collectives issued unit by unit as `compute_us` of compute runs
      // (gradients bucketed as the backward produces them, FSDP's next unit gathered while this
      // one computes) hides behind it, except the last unit's (overlappedSyncExposedUs).
      const auto exposed = [&](double comm_us, double compute_us) {
        return training.overlap_gradient_sync
                   ? overlappedSyncExposedUs(comm_us, compute_us, 1, P, units)
                   : comm_us;
      };
      // The step's DP sync on an interleaved rank goes chunk by chunk (Megatron-Core's
      // grad_sync_func and param_sync_func per model chunk).
      const int chunks = placement.kind == PlacementKind::Loop ? placement.chunks : 1;
      const auto exposedByChunk = [&](double comm_us, double rank_compute_us) {
        return training.overlap_gradient_sync
                   ? overlappedSyncExposedUs(comm_us, rank_compute_us, chunks, P, units)
                   : comm_us;
      };
      // What the overlapped part of a sync adds: the GEMMs it runs beside are slowed
      // (collectiveContentionUs), in the backward (gradients) or the forward (parameters).
      const auto gemmShare = [](const PassBreakdown &pass) {
        return pass.total() > 0 ? pass.gemm_us / pass.total() : 0.0;
      };
      const double backward_share = gemmShare(rank_backward[i]),
                   forward_share = gemmShare(rank_forward[i]);
      const auto contention = [&](double comm_us, double exposed_us, double gemm_share) {
        return collectiveContentionUs(hw.collective_gemm_slowdown, comm_us - exposed_us,
                                      gemm_share);
      };
      if (training.zero_stage < 3 || mesh.dataCpSize() <= 1) {
        an.rank_sync_us[i] = sync;
        // ZeRO-1/2 overlapped (Megatron's --overlap-grad-reduce with --overlap-param-gather):
        // the gradients' reduce-scatter hides behind the last backward (of each chunk), the
        // updated parameters' all-gather behind the next step's first forward, bucket by bucket
        // (megatron/core/distributed/param_and_grad_buffer.py: the gather of a bucket is
        // waited on in the forward pre-hook of its first use).
        if (training.zero_stage >= 1 && mesh.dataCpSize() > 1 && training.overlap_gradient_sync) {
          const double reduce_scatter = exposedByChunk(gradient_sync / 2, rank_last_backward[i]);
          const double gather = exposedByChunk(parameter_sync / 2, rank_first_forward[i]);
          an.rank_sync_exposed_us[i] =
              reduce_scatter + gather +
              contention(gradient_sync / 2, reduce_scatter, backward_share) +
              contention(parameter_sync / 2, gather, forward_share);
        } else {
          const double exposed_sync = exposedByChunk(sync, rank_last_backward[i]);
          an.rank_sync_exposed_us[i] =
              exposed_sync + contention(sync, exposed_sync, backward_share);
        }
      } else if (zero3HoldsGathered(training, P)) {
        // One all-gather of every unit before its first forward (each half an all-reduce), hidden
        // by the first microbatch's forward; one reduce-scatter in the last backward. The
        // gather is paid at the start of the step: it joins the step's one tail, a per-step
        // constant either way.
        const double gather = parameter_sync / 2, reduce_scatter = gradient_sync / 2;
        an.rank_sync_us[i] = gather + reduce_scatter;
        const double gather_exposed = exposed(gather, rank_first_forward[i]);
        const double reduce_scatter_exposed = exposed(reduce_scatter, rank_last_backward[i]);
        an.rank_sync_exposed_us[i] =
            gather_exposed + reduce_scatter_exposed +
            contention(gather, gather_exposed, forward_share) +
            contention(reduce_scatter, reduce_scatter_exposed, backward_share);
      } else {
        // FSDP's default (reshard_after_forward): every microbatch gathers each unit in its
        // forward and again in its backward, and reduce-scatters its gradients (fully_shard
        // syncs every backward). Those a stage's compute does not hide lengthen its F and I ops.
        const double gather = parameter_sync / 2, reduce_scatter = gradient_sync / 2;
        double per_step = 0;
        for (int v = 0; v < S; ++v) {
          if (placement.rankOf(v) != p) continue;
          const auto sv = static_cast<std::size_t>(v);
          const int stage_layers = an.stage_breakdown[sv].layers;
          const double share =
              held[i].size() <= 1 ? 1.0 : static_cast<double>(stage_layers) / units;
          StageCost &cost = an.stage_costs[sv];
          const double forward_exposed = exposed(share * gather, cost.forward_us);
          const double backward_exposed =
              exposed(share * (gather + reduce_scatter), cost.backward_us);
          const double forward =
              forward_exposed + contention(share * gather, forward_exposed, forward_share);
          const double backward = backward_exposed + contention(share * (gather + reduce_scatter),
                                                                backward_exposed, backward_share);
          cost.forward_us += forward;
          cost.backward_us += backward;
          an.stage_breakdown[sv].forward.dp_us += forward;
          an.stage_breakdown[sv].input_grad.dp_us += backward;
          per_step += an.stage_microbatches[sv] * share * (2 * gather + reduce_scatter);
          an.rank_sync_in_ops_us[i] += an.stage_microbatches[sv] * (forward + backward);
        }
        an.rank_sync_us[i] = per_step;
        an.rank_sync_exposed_us[i] = 0; // inside the ops
      }
      // Adam's step once the gradients are reduced, over the rank's share of the optimizer
      // state (1/dp of it from ZeRO-1 on).
      an.rank_optimizer_us[i] = optimizerStepUs(
          optimizerShare(an.rank_params[i], an.rank_expert_params[i], training, mesh),
          training.optimizer_bytes_per_param, dt, hw);
      // FP8: Transformer Engine casts each weight to FP8 and its transpose once per step, on the
      // first microbatch, and reuses them for the others (TE Linear.forward's is_first_microbatch:
      // "during FP8 training, it allows caching of the FP8 versions of the weights"; Megatron-
      // Core's TELinear and TEGroupedLinear pass it): read 16 bits, write 1 + 1 bytes per
      // parameter the rank holds. Counted with the step's tail; the embedding and head, which
      // stay 16-bit, are counted too (a small overestimate).
      if (fp8) an.rank_optimizer_us[i] += memoryBoundUs((dt + 2) * an.rank_params[i], hw);
    }
  }
  // Tied embeddings on several stages: the first and the last stage sum their copies' gradients
  // (an all-reduce of the vocab-parallel table over the pair) before the optimizer step
  // (Megatron-LM, Shoeybi et al. 2019 / Narayanan et al. 2021). MTP's embedding copy on the last
  // stage is summed the same way (megatron/core/distributed/finalize_model_grads.py:
  // share_embeddings_and_output_weights or mtp_num_layers).
  const int embedding_rank = model_rank[static_cast<std::size_t>(embedding_stage)];
  const int head_rank = model_rank[static_cast<std::size_t>(loss_stage)];
  an.loss_rank = head_rank;
  // torch-fp32 cross-entropy: besides the stored fp32 log-probabilities, its backward holds the
  // incoming gradient and the input gradient, each fp32 of b·s·V/t (PyTorch's nll_loss and
  // log_softmax backward; torchtitan train.py loss_fn at 9dec370).
  // Megatron's vocab-parallel cross-entropy casts the head's 16-bit logits to fp32 while the
  // model still holds them (VocabParallelCrossEntropy.calculate_logits_max's .float();
  // GPTModel.forward keeps `logits` until the loss returns), and its backward casts the fp32
  // gradient back (fused: calculate_gradients' .to(bfloat16); unfused: autograd's cast): the
  // 16-bit logits beside the stored fp32 ones. Unfused, it then works on the fp32 copy in place
  // (megatron/core/tensor_parallel/cross_entropy.py); fused, its steps are scripted functions
  // (megatron/core/fusions/fused_cross_entropy.py, jit_fuser) whose results are new tensors, one
  // more fp32 copy. Megatron-LM's CI measures both: its tests' peaks lie 0.38 / TP GiB (2 bytes of
  // the 4 × 1024 × 50304 logits) above the stored activations unfused and 1.15 / TP GiB (6 bytes)
  // fused (tests/data/megatron_ci; docs/validation.md).
  // Transformer Engine's (transformer_engine/pytorch/triton/cross_entropy.py) keeps per-row
  // statistics only (three fp32 values a token) beside the logits it overwrites in place.
  if (training.cross_entropy == "torch-fp32")
    an.loss_transient = 2 * 4.0 * b * s_local * V / t;
  else if (training.cross_entropy == "te")
    an.loss_transient = 0;
  else
    an.loss_transient =
        (dt + (training.cross_entropy == "vocab-parallel" ? 4.0 : 0.0)) * b * s_local * V / t;
  if ((m.tied_embeddings || m.mtp_layers > 0) && head_rank != embedding_rank) {
    const Link link = pairLinkOf(mesh, embedding_rank, head_rank);
    an.tied_embedding_sync_us =
        allReduceUs(hw, training.collective_algorithm, embeddingParams(m).sharded / t * dt, 2,
                    link == Link::Intra ? 1 : 2, link);
  }
  return an;
}

} // namespace

bool hasFp8TensorCores(const HardwareSpec &hardware) {
  return std::isfinite(hardware.peak_fp8_tflops) && hardware.peak_fp8_tflops > 0;
}

int dtypeBytes(std::string_view dtype) {
  if (dtype == "bf16" || dtype == "fp16") return 2;
  if (dtype == "fp32") return 4;
  return 0;
}

double parameterCount(const ModelSpec &model) {
  // MTP modules: a layer, the 2h→h projection and two norms each (the head and embedding shared);
  // MoE layers, the MTP modules' included, hold experts instead of the dense MLP.
  const double mtp_module =
      layerParams(model).whole() + 2.0 * model.hidden * model.hidden + 2 * normParams(model);
  const int moe_layers =
      moeLayersIn(model, 0, model.layers) + moeLayersIn(model, model.layers, model.mtp_layers);
  const double moe_delta = isMoe(model)
                               ? routedExpertParams(model) + sharedAndRouterParams(model) -
                                     (model.gated_mlp ? 3.0 : 2.0) * model.hidden * model.ffn_hidden
                               : 0.0;
  return model.layers * layerParams(model).whole() + moe_layers * moe_delta +
         embeddingParams(model).whole() + headParams(model, true).whole() +
         model.mtp_layers * mtp_module;
}

MeshLinks meshLinks(const Mesh &mesh) {
  MeshLinks links;
  const auto P = static_cast<std::size_t>(mesh.pp);
  for (auto *kind : {&links.tp, &links.cp, &links.ep, &links.dp_cp, &links.expert_dp, &links.next})
    kind->resize(P);
  for (auto *nodes : {&links.tp_nodes, &links.ep_nodes, &links.dp_cp_nodes, &links.expert_dp_nodes})
    nodes->resize(P);
  GroupSpanScratch scratch;
  for (int p = 0; p < mesh.pp; ++p) {
    const auto i = static_cast<std::size_t>(p);
    const auto span = [&](MeshGroup group, std::vector<int> *nodes) {
      const GroupSpan found = groupSpanOf(mesh, group, p, scratch);
      if (nodes) (*nodes)[i] = found.nodes;
      return found.link;
    };
    links.tp[i] = span(MeshGroup::TP, &links.tp_nodes);
    links.cp[i] = span(MeshGroup::CP, nullptr);
    links.ep[i] = span(MeshGroup::EP, &links.ep_nodes);
    links.dp_cp[i] = span(MeshGroup::DataCP, &links.dp_cp_nodes);
    links.expert_dp[i] = span(MeshGroup::ExpertData, &links.expert_dp_nodes);
    links.next[i] = mesh.pp > 1 ? pairLinkOf(mesh, p, (p + 1) % mesh.pp) : Link::None;
  }
  return links;
}

Result<ModelDerivation> deriveModelCosts(const ModelSetup &setup, const Mesh &mesh,
                                         const Placement &placement, const MeshLinks *links) {
  if (links && (static_cast<int>(links->tp.size()) != mesh.pp ||
                static_cast<int>(links->cp.size()) != mesh.pp ||
                static_cast<int>(links->ep.size()) != mesh.pp ||
                static_cast<int>(links->dp_cp.size()) != mesh.pp ||
                static_cast<int>(links->expert_dp.size()) != mesh.pp ||
                static_cast<int>(links->next.size()) != mesh.pp ||
                static_cast<int>(links->tp_nodes.size()) != mesh.pp ||
                static_cast<int>(links->ep_nodes.size()) != mesh.pp ||
                static_cast<int>(links->dp_cp_nodes.size()) != mesh.pp ||
                static_cast<int>(links->expert_dp_nodes.size()) != mesh.pp))
    return makeError("the mesh links were computed for another mesh; pass meshLinks(mesh)");
  auto analysis = analyze(setup, mesh, placement, nullptr, links);
  if (!analysis) return analysis.error();
  const Analysis &an = *analysis;
  ModelDerivation derivation;
  Costs &costs = derivation.costs;
  const double share_layers = static_cast<double>(setup.model.layers) / placement.pp;
  costs.forward_us = share_layers * an.layer_forward_us;
  costs.backward_us = share_layers * an.layer_backward_us;
  costs.weight_us = share_layers * an.layer_weight_us;
  costs.input_grad_split_extra_us = share_layers * an.layer_split_extra_us;
  costs.overlapped_us = 0;
  // DualPipe's overlapped F&B pair (DeepSeek-V3 report, §3.2.1): one chunk's dispatch and
  // combine all-to-all run while the other chunk computes, so the pair takes F + B less the
  // all-to-all the other's compute can hide (never less than the longer of the two). The
  // compute runs on the SMs a deepep or hybridep dispatcher's kernels leave it: those kernels
  // stay resident through the pair (in DeepSeek's published training profile they run 89 % of
  // the pair's span), so all of the pair's compute is stretched by dispatcherSmShare.
  if (an.moe_all_to_all_forward_us > 0) {
    const double f = costs.forward_us, bwd = costs.backward_us;
    const double f_a2a = an.moe_all_to_all_forward_us, b_a2a = an.moe_all_to_all_backward_us;
    // The MoE layers' host time is neither GPU compute (no SMs to share, nothing to hide an
    // all-to-all behind: the GPU waits for the host) nor overlappable: one host thread launches
    // both chunks' kernels.
    const double f_host = an.moe_host_forward_us, b_host = an.moe_host_backward_us;
    const double share = dispatcherSmShare(setup.hardware, setup.training);
    const double f_compute = share * (f - f_a2a - f_host),
                 b_compute = share * (bwd - b_a2a - b_host);
    const double hidden = std::min(f_a2a, b_compute) + std::min(b_a2a, f_compute);
    costs.overlapped_us =
        std::clamp(f_compute + b_compute + f_a2a + b_a2a - hidden + f_host + b_host,
                   std::max(f, bwd), f + bwd);
  }
  costs.stage_overrides = an.stage_costs;
  costs.activation_bytes = an.pp_bytes_per_rank;
  costs.p2p_bandwidth_gbps = an.slowest_link_gbps;
  costs.p2p_latency_us = an.slowest_link_latency_us;
  costs.boundary_transfer_us = an.boundary_us;
  // The simulator adds one tail after every rank's last op: the slowest rank's exposed DP sync,
  // tied-embedding sum and optimizer step, and the step's fixed overhead (so the step grows by
  // exactly that much).
  costs.gradient_sync_us = 0;
  for (std::size_t p = 0; p < an.rank_sync_exposed_us.size(); ++p)
    costs.gradient_sync_us = std::max(costs.gradient_sync_us, an.tailUs(p));
  costs.gradient_sync_us += setup.hardware.step_overhead_us;
  derivation.stage_layers.resize(static_cast<std::size_t>(placement.stageCount()));
  for (int v = 0; v < placement.stageCount(); ++v)
    derivation.stage_layers[static_cast<std::size_t>(v)] =
        an.model_layout[static_cast<std::size_t>(
                            placement.model_stage[static_cast<std::size_t>(v)])]
            .layers;
  derivation.stage_activation_bytes = an.stage_activation;
  derivation.stage_activation_granule_bytes = an.stage_activation_granule;
  derivation.stage_breakdown = an.stage_breakdown;
  derivation.layer_ops = an.layer_ops;
  derivation.moe_layer_ops = an.moe_layer_ops;
  derivation.model_layout = an.model_layout;
  derivation.rank_parameters = an.rank_params;
  derivation.rank_expert_parameters = an.rank_expert_params;
  derivation.rank_largest_layer_parameters = an.rank_largest_layer_params;
  derivation.rank_outside_layer_parameters = an.rank_outside_layer_params;
  derivation.rank_layers = an.rank_layers;
  derivation.recompute_transient_bytes = an.recompute_transient;
  derivation.loss_transient_bytes = an.loss_transient;
  derivation.loss_rank = an.loss_rank;
  derivation.forward_flops_per_microbatch = an.forward_flops_per_microbatch;
  if (auto status = costs.check(placement.stageCount()); !status)
    return makeError("the derived costs are not valid (" + status.error().message +
                     "); check the model and hardware numbers");
  return derivation;
}

nlohmann::json toJson(const CommunicationKind &kind) {
  return {{"bytes", kind.bytes},
          {"time_s", kind.time_s},
          {"exposed_time_s", kind.exposed_time_s},
          {"link", kind.link}};
}

ModelReport reportModel(const ModelSetup &setup, const Mesh &mesh, const Schedule &schedule,
                        const ModelDerivation &derivation, const SimulationResult &simulation) {
  ModelReport report;
  const Placement &placement = schedule.placement;
  report.parameters = parameterCount(setup.model);
  // The layer split the derivation chose (per model stage), so the report matches it.
  const auto analysis = analyze(
      setup, mesh, placement, derivation.model_layout.empty() ? nullptr : &derivation.model_layout);
  if (!analysis) return report;
  const Analysis &an = *analysis;
  const ModelSpec &m = setup.model;
  const TrainingSetup &training = setup.training;
  const int P = placement.pp, t = mesh.tp, dp = mesh.dp;
  const double dt = dtypeBytes(m.dtype);
  const bool tracked =
      derivation.stage_activation_bytes.size() == static_cast<std::size_t>(placement.stageCount());

  // Memory per pipeline rank (the same on every TP rank and DP replica of it).
  ModelDerivation analyzed;
  analyzed.rank_parameters = an.rank_params;
  analyzed.rank_expert_parameters = an.rank_expert_params;
  analyzed.rank_largest_layer_parameters = an.rank_largest_layer_params;
  analyzed.rank_outside_layer_parameters = an.rank_outside_layer_params;
  analyzed.rank_layers = an.rank_layers;
  analyzed.recompute_transient_bytes = an.recompute_transient;
  analyzed.loss_transient_bytes = an.loss_transient;
  analyzed.loss_rank = an.loss_rank;
  report.memory.resize(static_cast<std::size_t>(P));
  for (int p = 0; p < P; ++p) {
    const auto i = static_cast<std::size_t>(p);
    double activations = 0;
    if (i < simulation.ranks.size()) {
      const RankStats &stats = simulation.ranks[i];
      activations = stats.peak_activation_bytes;
      if (activations == 0 && stats.peak_inflight > 0) {
        // The simulation did not track bytes: bound it by the rank's largest stage.
        double largest = 0;
        for (int v = 0; v < placement.stageCount(); ++v)
          if (placement.rankOf(v) == p)
            largest = std::max(
                largest, tracked ? derivation.stage_activation_bytes[static_cast<std::size_t>(v)]
                                 : an.stage_activation[static_cast<std::size_t>(v)]);
        activations = largest * stats.peak_inflight;
      }
    }
    report.memory[i] = rankMemory(setup, mesh, analyzed, p, activations);
  }

  // Step, throughput and MFU.
  report.step_time_s = simulation.makespan_us * 1e-6;
  const double microbatches = placement.microbatches;
  // CP ranks share each sequence (cp splits it, it adds no replica): dp replicas consume data.
  const double replicas = dp;
  const double tokens = replicas * microbatches * m.microbatch_size * m.sequence_length;
  report.model_flops_per_step = replicas * microbatches * 3 * an.forward_flops_per_microbatch;
  if (report.step_time_s > 0) {
    report.tokens_per_s = tokens / report.step_time_s;
    report.mfu = report.model_flops_per_step /
                 (report.step_time_s * mesh.worldSize() * setup.hardware.peak_tflops * 1e12);
    if (setup.training.gemm_precision == GemmPrecision::Fp8 && setup.hardware.peak_fp8_tflops > 0)
      report.mfu_fp8 = report.mfu * setup.hardware.peak_tflops / setup.hardware.peak_fp8_tflops;
  }

  // TP: every rank of a group sends 2(t-1)/t of each all-reduced message.
  Link tp_link = Link::None;
  double tp_worst_us = 0;
  std::vector<double> rank_tp_us(static_cast<std::size_t>(P), 0.0);
  for (int v = 0; v < placement.stageCount(); ++v) {
    const auto i = static_cast<std::size_t>(v);
    const auto p = static_cast<std::size_t>(placement.rankOf(v));
    const double collectives = an.stage_tp_collectives[i] * an.stage_microbatches[i];
    report.tp.bytes += collectives * 2.0 * (t - 1) * an.tp_message_bytes;
    rank_tp_us[p] += collectives * an.rank_tp_allreduce_us[p];
  }
  for (int p = 0; p < P; ++p) {
    tp_link = merge(tp_link, an.rank_tp_link[static_cast<std::size_t>(p)]);
    tp_worst_us = std::max(tp_worst_us, rank_tp_us[static_cast<std::size_t>(p)]);
  }
  report.tp.time_s = tp_worst_us * 1e-6;
  report.tp.exposed_time_s = report.tp.time_s;
  report.tp.link = linkName(t > 1 ? tp_link : Link::None);

  // PP: each crossing boundary carries a forward activation and a backward gradient per
  // microbatch from each of the t TP ranks.
  Link pp_link = Link::None;
  std::vector<double> rank_pp_us(static_cast<std::size_t>(P), 0.0);
  for (int v = 0; v < placement.stageCount(); ++v) {
    const auto i = static_cast<std::size_t>(v);
    if (an.boundary_link[i] == Link::None) continue;
    const int next = placement.nextStage(v);
    const double count = an.stage_microbatches[i];
    report.pp.bytes += count * 2 * t * an.pp_bytes_per_rank;
    rank_pp_us[static_cast<std::size_t>(placement.rankOf(v))] += count * an.boundary_us[i];
    rank_pp_us[static_cast<std::size_t>(placement.rankOf(next))] += count * an.boundary_us[i];
    pp_link = merge(pp_link, an.boundary_link[i]);
  }
  report.pp.time_s = *std::max_element(rank_pp_us.begin(), rank_pp_us.end()) * 1e-6;
  report.pp.exposed_time_s = 0;
  report.pp.link = linkName(pp_link);

  // DP: one all-reduce of each rank's gradients per step (the dense ones over dp × cp ranks, the
  // routed experts' over dp·cp / ep), or under ZeRO-3 two all-gathers and a reduce-scatter per
  // microbatch, each (n-1)/n of the parameters (one of each per step when the gathered
  // parameters are kept across microbatches).
  // Bytes per parameter moved per step, in all-reduce units: gradients at their width, gathered
  // parameters at the model's (2·dt when both are 16-bit, as before fp32_gradients).
  const double gb = gradientBytes(setup);
  const double dp_bytes_per_param = training.zero_stage == 0 ? 2 * gb
                                    : training.zero_stage < 3 || zero3HoldsGathered(training, P)
                                        ? dt + gb
                                        : (2 * dt + gb) * placement.microbatches;
  Link dp_link = Link::None;
  const auto ringShare = [](int n) { return n > 1 ? 2.0 * (n - 1) / n : 0.0; };
  // FP8 parameters are gathered at one byte, not dt, for the layers' weights (as analyze's DP
  // sync prices them): once a step under ZeRO-1/2 (or ZeRO-3 holding them), twice a
  // microbatch under ZeRO-3.
  const double gathers = training.zero_stage == 0 ? 0
                         : training.zero_stage < 3 || zero3HoldsGathered(training, P)
                             ? 1
                             : 2.0 * placement.microbatches;
  const bool fp8_gathered = holdsFp8Parameters(training);
  for (int p = 0; p < P; ++p) {
    const auto i = static_cast<std::size_t>(p);
    const double expert = an.rank_expert_params[i];
    const double dense = an.rank_params[i] - expert;
    const double dense_fp8 = fp8GatheredDenseParams(an, i, training);
    const double saved = fp8_gathered ? gathers * (dt - 1) / 2 : 0; // per FP8 weight
    report.dp.bytes +=
        t *
        (dp_bytes_per_param / 2 *
             (ringShare(mesh.dataCpSize()) * dense + ringShare(mesh.expertDataSize()) * expert) -
         saved * (ringShare(mesh.dataCpSize()) * dense_fp8 +
                  ringShare(mesh.expertDataSize()) * expert));
    dp_link = merge(dp_link, an.rank_dp_link[i]);
    if (expert > 0) dp_link = merge(dp_link, an.rank_expert_dp_link[i]);
  }
  report.dp.time_s = *std::max_element(an.rank_sync_us.begin(), an.rank_sync_us.end()) * 1e-6;
  double dp_exposed_us = 0;
  for (std::size_t p = 0; p < an.rank_sync_exposed_us.size(); ++p)
    dp_exposed_us = std::max(dp_exposed_us, an.rank_sync_exposed_us[p] + an.rank_sync_in_ops_us[p]);
  report.dp.exposed_time_s = dp_exposed_us * 1e-6;
  report.dp.link = linkName(dp_link);
  return report;
}

double dispatcherSmShare(const HardwareSpec &hardware, const TrainingSetup &training) {
  if (training.moe_dispatcher == "alltoall" || hardware.sm_count <= 0) return 1;
  const int taken =
      training.moe_dispatcher_sms > 0 ? training.moe_dispatcher_sms : kDefaultDispatcherSms;
  // A dispatcher holding every SM leaves the compute none: the check on the training setup
  // refuses that, so here it cannot happen; guard anyway with the last SM.
  return static_cast<double>(hardware.sm_count) / std::max(1, hardware.sm_count - taken);
}

double gradientBytes(const ModelSetup &setup) {
  return setup.training.fp32_gradients ? 4.0 : dtypeBytes(setup.model.dtype);
}

int zeroStageTimedAs(int zero_stage) {
  // deriveModelCosts reads the stage through `zero_stage >= 1` (ring collectives, the sharded
  // optimizer step) and `zero_stage >= 3` (FSDP's gathers) alone: 2 and 1 agree on both.
  return zero_stage == 2 ? 1 : zero_stage;
}

RankMemory rankMemory(const ModelSetup &setup, const Mesh &mesh, const ModelDerivation &derivation,
                      int rank, double peak_activation_bytes) {
  RankMemory mem;
  const auto i = static_cast<std::size_t>(rank);
  if (i >= derivation.rank_parameters.size()) return mem;
  const double params = derivation.rank_parameters[i];
  const double dt = dtypeBytes(setup.model.dtype);
  const double gb = gradientBytes(setup);
  const TrainingSetup &training = setup.training;
  const auto at = [i](const std::vector<double> &per_rank) {
    return i < per_rank.size() ? per_rank[i] : 0.0;
  };
  const double expert_params = at(derivation.rank_expert_parameters);
  // The ZeRO paper's per-stage memory (Rajbhandari et al. 2020, §5 and Figure 1): 16-bit
  // parameters and gradients, K bytes of optimizer state, each divided by the sharding group
  // from its stage on.
  const double shard = dataParallelShare(params, expert_params, mesh);
  mem.params = (training.zero_stage >= 3 ? shard : params) * dt;
  mem.grads = (training.zero_stage >= 2 ? shard : params) * gb;
  mem.optimizer =
      optimizerShare(params, expert_params, training, mesh) * training.optimizer_bytes_per_param;
  // Under FP8 GEMMs without FP8 parameters Transformer Engine keeps, beside each 16-bit layer
  // weight, its FP8 cast and that cast's transpose (Hopper's FP8 GEMMs read both layouts),
  // made in the step's first microbatch and reused by the others: two bytes a weight of the
  // layers held (under ZeRO-3 the gathered ones). The layers' parameters stand for their
  // linear weights: their norms and routers, not FP8, are under 0.1 % of them. FP8 parameters
  // are the one byte and its transpose themselves, two bytes as a 16-bit weight: no more.
  const double layer = at(derivation.rank_largest_layer_parameters);
  const double outside = at(derivation.rank_outside_layer_parameters);
  if (training.gemm_precision == GemmPrecision::Fp8 && !holdsFp8Parameters(training))
    mem.params += 2 * (training.zero_stage >= 3 && mesh.dataCpSize() > 1 &&
                               !zero3HoldsGathered(training, mesh.pp)
                           ? 2 * layer
                           : params - outside);
  // What is in flight besides the shards; one data-parallel rank has nothing to gather or
  // reduce-scatter (as the DP traffic above).
  const bool sharded_group = mesh.dataCpSize() > 1;
  if (sharded_group && zero3HoldsGathered(training, mesh.pp)) {
    // Kept gathered across microbatches (torchtitan with PP): the whole unsharded copy of the
    // parameters and of the gradients, beside the shards.
    mem.params += params * dt;
    mem.grads += params * gb;
  } else if (sharded_group && training.zero_stage >= 3) {
    // FSDP2 gathers one layer at a time with the next one's gather already issued: in the
    // backward it always prefetches (BACKWARD_PRE), and in the forward the CPU issues the next
    // layer's all-gather on its own stream while this layer computes ("preserves communication/
    // computation overlap", torchtitan docs/fsdp.md; an explicit forward_prefetch is not
    // implemented there). So two layers' 16-bit parameters are gathered at once, with the
    // layer's unsharded gradients until they are reduce-scattered.
    // The parameters outside the layers (embedding, final norm, head) form the root unit,
    // gathered for the whole forward and the whole backward; its gradients (the head's first)
    // wait for the root's reduce-scatter at the end of the backward.
    mem.params += (2 * layer + outside) * dt;
    mem.grads += (layer + outside) * gb;
  } else if (sharded_group && training.zero_stage == 2) {
    // ZeRO-2 reduce-scatters gradients bucket by bucket as the backward produces them; one
    // layer's unsharded gradients are in flight (§5.2).
    mem.grads += layer * gb;
  }
  mem.activations_peak = peak_activation_bytes;
  // Recomputation rebuilds one layer's activations during its backward, a transient on top of
  // the stored ones; the loss's backward transient comes before any layer's backward, when
  // every stored activation is still held: the larger of the two counts.
  double transient = 0;
  if (i < derivation.rank_layers.size() && derivation.rank_layers[i] > 0)
    transient = derivation.recompute_transient_bytes;
  if (rank == derivation.loss_rank)
    transient = std::max(transient, derivation.loss_transient_bytes);
  mem.activations_peak += transient;
  mem.total = mem.params + mem.grads + mem.optimizer + mem.activations_peak;
  mem.capacity = setup.hardware.memory_gib * kGiB;
  mem.fits = mem.total <= mem.capacity;
  return mem;
}

Status checkModelReport(const ModelReport &report) {
  const auto bad = [](double v) { return !std::isfinite(v) || v < 0; };
  const auto text = [](double v) {
    char buffer[32];
    std::snprintf(buffer, sizeof buffer, "%.6g", v);
    return std::string(buffer);
  };
  if (bad(report.step_time_s) || report.step_time_s == 0)
    return makeError("the step time is " + text(report.step_time_s) +
                     " s; a step takes a positive, finite time (check the model and hardware)");
  if (bad(report.tokens_per_s) || bad(report.mfu))
    return makeError("tokens/s (" + text(report.tokens_per_s) + ") and MFU (" + text(report.mfu) +
                     ") must be finite and non-negative");
  for (std::size_t r = 0; r < report.memory.size(); ++r) {
    const auto &m = report.memory[r];
    for (double v : {m.params, m.grads, m.optimizer, m.activations_peak, m.total, m.capacity})
      if (bad(v))
        return makeError("rank " + std::to_string(r) + ": a memory figure is " + text(v) +
                         " bytes; memory must be finite and non-negative");
  }
  for (const auto *kind : {&report.tp, &report.pp, &report.dp})
    if (bad(kind->bytes) || bad(kind->time_s) || bad(kind->exposed_time_s))
      return makeError("communication of " + text(kind->bytes) + " bytes taking " +
                       text(kind->time_s) + " s must be finite and non-negative");
  return Ok{};
}

} // namespace pipescope
