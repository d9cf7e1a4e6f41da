// Per-op work of a layer, the embedding and the head (layer_costs.h).
//
// Sources:
// - GEMM shapes as Megatron-LM shards them (Shoeybi et al. 2019, §3): QKV and the MLP's first
//   matrices column-parallel (n divided by t), the attention output and the MLP's last matrix
//   row-parallel (k divided by t), the output head vocab-parallel. Input-grad GEMMs are
//   dX = dY·Wᵀ (m = tokens, k and n swapped), weight-grad GEMMs dW = Xᵀ·dY (k = tokens).
// - Materialized attention (Megatron-LM 2021-22): batched Q·Kᵀ (s×d by d×s) and A·V per head,
//   the fused scale-mask-softmax and the attention dropout over b·a/t·s² scores; the backward
//   runs two batched GEMMs per forward one. Causal masking saves nothing here: the s×s scores
//   are computed whole, then masked.
// - FlashAttention (Dao 2022; Dao 2023, "FlashAttention-2", §3): forward 4·b·s²·h/t FLOPs,
//   halved by causal masking; the backward runs 5 of the forward's 2 matmuls per tile (it
//   recomputes the scores), 2.5× the forward's FLOPs. No s×s tensor touches HBM.
// - Memory-bound kernels move each tensor they read or write once through HBM (16-bit
//   activations, 1-byte dropout masks), as Megatron's fused kernels do: norms read x and write
//   y (backward: x, dy in, dx out); bias-dropout-add reads x and the residual, writes the sum and
//   the mask; GeLU reads 1 and writes 1 f-wide tensor, SwiGLU reads 2 and writes 1.
#include "engine/model/layer_costs.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iterator>
#include <string_view>

namespace pipescope {

AttentionShape attentionShapeOf(const ModelSpec &m) {
  AttentionShape a;
  const double h = m.hidden, heads = m.heads;
  if (m.kv_lora_rank > 0) {
    // DeepSeek-V3 report §2.1.1, eqs. 1-11: c_KV = W_DKV·h and k_R = RoPE(W_KR·h) (one
    // h → d_c + d_R projection), k_C = W_UK·c_KV and v_C = W_UV·c_KV (one d_c → heads × (d_h +
    // d_v) projection), c_Q = W_DQ·h, q = W_UQ·c_Q (with its RoPE part), u = W_O·o.
    a.latent = true;
    a.score_dim = m.qk_nope_head_dim + m.qk_rope_head_dim;
    a.value_dim = m.v_head_dim;
    a.query = a.key = heads * a.score_dim;
    a.value = a.output = heads * a.value_dim;
    a.q_latent = m.q_lora_rank;
    a.kv_latent = m.kv_lora_rank;
    a.rope_key = m.qk_rope_head_dim;
    if (m.q_lora_rank > 0) {
      a.replicated_params += h * a.q_latent;
      a.sharded_params += a.q_latent * a.query;
    } else {
      a.sharded_params += h * a.query;
    }
    a.replicated_params += h * (a.kv_latent + a.rope_key);
    a.sharded_params += a.kv_latent * heads * (m.qk_nope_head_dim + a.value_dim);
    a.sharded_params += a.output * h;
    a.latent_norm_params = a.q_latent + a.kv_latent;
    return a;
  }
  const double d = m.head_dim > 0 ? m.head_dim : h / heads;
  a.score_dim = a.value_dim = d;
  a.query = a.output = heads * d;
  a.key = a.value = m.kv_heads * d;
  a.sharded_params = h * (a.query + a.key + a.value) + a.output * h;
  return a;
}

void PartWork::add(LayerOp op) {
  forward_us += op.forward_us;
  input_grad_us += op.input_grad_us;
  weight_grad_us += op.weight_grad_us;
  if (op.selective_recompute) selective_recompute_us += op.forward_us;
  const double total = op.forward_us + op.input_grad_us + op.weight_grad_us;
  switch (op.category) {
  case OpCategory::Gemm: gemm_us += total; break;
  case OpCategory::Attention: attention_us += total; break;
  case OpCategory::MemoryBound: memory_bound_us += total; break;
  case OpCategory::Overhead: overhead_us += total; break;
  }
  ops.push_back(std::move(op));
}

void PartWork::addTo(PassBreakdown &into, Pass pass, double count) const {
  for (const auto &op : ops) {
    const double us = count * (pass == Pass::Forward     ? op.forward_us
                               : pass == Pass::InputGrad ? op.input_grad_us
                                                         : op.weight_grad_us);
    switch (op.category) {
    case OpCategory::Gemm: into.gemm_us += us; break;
    case OpCategory::Attention: into.attention_us += us; break;
    case OpCategory::MemoryBound: into.memory_bound_us += us; break;
    case OpCategory::Overhead: into.overhead_us += us; break;
    }
  }
}

std::string_view opCategoryName(OpCategory category) {
  switch (category) {
  case OpCategory::Gemm: return "gemm";
  case OpCategory::Attention: return "attention";
  case OpCategory::MemoryBound: return "memory-bound";
  case OpCategory::Overhead: return "overhead";
  }
  return "gemm";
}

PassBreakdown &PassBreakdown::operator+=(const PassBreakdown &other) {
  gemm_us += other.gemm_us;
  attention_us += other.attention_us;
  memory_bound_us += other.memory_bound_us;
  tp_us += other.tp_us;
  ep_us += other.ep_us;
  cp_us += other.cp_us;
  recompute_us += other.recompute_us;
  dp_us += other.dp_us;
  host_us += other.host_us;
  overhead_us += other.overhead_us;
  return *this;
}

std::vector<CostPart> costParts(const PassBreakdown &pass) {
  std::vector<CostPart> parts;
  for (const CostPart &part :
       {CostPart{"GEMM", pass.gemm_us}, CostPart{"attention", pass.attention_us},
        CostPart{"memory-bound", pass.memory_bound_us}, CostPart{"TP comm", pass.tp_us},
        CostPart{"EP all-to-all", pass.ep_us}, CostPart{"CP ring", pass.cp_us},
        CostPart{"recompute", pass.recompute_us}, CostPart{"DP comm", pass.dp_us},
        CostPart{"MoE host", pass.host_us}, CostPart{"layer overhead", pass.overhead_us}})
    if (part.us > 0) parts.push_back(part);
  return parts;
}

std::optional<PassBreakdown> opBreakdown(const std::vector<StageBreakdown> &stages, const Op &op) {
  const auto stageAt = [&](int stage) -> const StageBreakdown * {
    return stage >= 0 && static_cast<std::size_t>(stage) < stages.size()
               ? &stages[static_cast<std::size_t>(stage)]
               : nullptr;
  };
  const StageBreakdown *stage = stageAt(op.stage);
  if (!stage) return std::nullopt;
  PassBreakdown parts;
  switch (op.kind) {
  case OpKind::Forward: return stage->forward;
  case OpKind::InputGrad:
    parts = stage->input_grad;
    parts.tp_us += stage->split_input_grad_tp_us;
    return parts;
  case OpKind::WeightGrad: return stage->weight_grad;
  case OpKind::FullBackward:
    parts = stage->input_grad;
    parts += stage->weight_grad;
    return parts;
  case OpKind::OverlappedPair: {
    const StageBreakdown *backward = stageAt(op.backward_stage);
    if (!backward) return std::nullopt;
    parts = stage->forward;
    parts += backward->input_grad;
    parts += backward->weight_grad;
    return parts;
  }
  }
  return std::nullopt;
}

std::optional<std::string> describeOpCost(const std::vector<StageBreakdown> &stages, const Op &op,
                                          double op_us, double pair_compute_stretch) {
  const auto parts = opBreakdown(stages, op);
  if (!parts || !std::isfinite(op_us) || op_us <= 0) return std::nullopt;
  // Rounding of the derivation's sums stays far below a millionth of the op.
  const double tolerance = 1e-6 * op_us;
  // An overlapped pair's GPU compute (all but its all-to-all and the host time the GPU waits
  // out) runs on the SMs a dispatcher leaves.
  const double stretch =
      op.kind == OpKind::OverlappedPair && pair_compute_stretch > 1 && parts->ep_us > 0
          ? (pair_compute_stretch - 1) * (parts->total() - parts->ep_us - parts->host_us)
          : 0.0;
  const double overlap = parts->total() + stretch - op_us;
  if (overlap < -tolerance || (op.kind != OpKind::OverlappedPair && overlap > tolerance))
    return std::nullopt;
  const bool ms = op_us >= 1000;
  const auto number = [&](double us) {
    const double value = ms ? us / 1000 : us;
    char buffer[32];
    std::snprintf(buffer, sizeof buffer, value >= 1000 ? "%.0f" : "%.3g", value);
    return std::string(buffer);
  };
  std::string text =
      std::string(opKindLetter(op.kind)) + " " + number(op_us) + (ms ? " ms" : " \u00b5s") + " =";
  const auto parts_list = costParts(*parts);
  for (std::size_t i = 0; i < parts_list.size(); ++i)
    text += std::string(i == 0 ? " " : " + ") + std::string(parts_list[i].name) + " " +
            number(parts_list[i].us);
  if (stretch > tolerance) text += " + dispatcher SMs " + number(stretch);
  if (overlap > tolerance) text += " \u2212 overlap " + number(overlap);
  return text;
}

nlohmann::json toJson(const PassBreakdown &pass) {
  return {{"gemm", pass.gemm_us},
          {"attention", pass.attention_us},
          {"memory_bound", pass.memory_bound_us},
          {"tp", pass.tp_us},
          {"ep", pass.ep_us},
          {"cp", pass.cp_us},
          {"dp", pass.dp_us},
          {"recompute", pass.recompute_us},
          {"host", pass.host_us},
          {"overhead", pass.overhead_us},
          {"total", pass.total()}};
}

nlohmann::json costBreakdownJson(const std::vector<StageBreakdown> &stages,
                                 const std::vector<LayerOp> &layer_ops,
                                 const std::vector<LayerOp> &moe_layer_ops) {
  nlohmann::json out = {{"unit", "us per microbatch on one TP rank"}};
  nlohmann::json stage_list = nlohmann::json::array();
  for (std::size_t v = 0; v < stages.size(); ++v) {
    nlohmann::json stage = {{"stage", v},
                            {"layers", stages[v].layers},
                            {"forward", toJson(stages[v].forward)},
                            {"input_grad", toJson(stages[v].input_grad)},
                            {"weight_grad", toJson(stages[v].weight_grad)}};
    // The TP time a lone input-grad op adds (W as its own op, under async TP backward).
    if (stages[v].split_input_grad_tp_us > 0)
      stage["input_grad_split_extra_tp"] = stages[v].split_input_grad_tp_us;
    stage_list.push_back(std::move(stage));
  }
  out["stages"] = std::move(stage_list);
  const auto opsJson = [](const std::vector<LayerOp> &list) {
    nlohmann::json ops = nlohmann::json::array();
    for (const auto &op : list)
      ops.push_back({{"name", op.name},
                     {"category", opCategoryName(op.category)},
                     {"forward", op.forward_us},
                     {"input_grad", op.input_grad_us},
                     {"weight_grad", op.weight_grad_us}});
    return ops;
  };
  out["layer_ops"] = opsJson(layer_ops);
  // An MoE layer's ops (its attention, then router, experts, permutations; the all-to-alls are
  // the stages' "ep" part).
  if (!moe_layer_ops.empty()) out["moe_layer_ops"] = opsJson(moe_layer_ops);
  return out;
}

std::vector<GemmEfficiencyPoint> fp8CurveFromBf16(const HardwareSpec &hardware) {
  if (!(hardware.peak_tflops > 0) || !(hardware.peak_fp8_tflops > 0))
    return hardware.gemm_efficiency;
  return curveAtFasterRate(hardware.gemm_efficiency,
                           hardware.peak_fp8_tflops / hardware.peak_tflops);
}

GemmHardware gemmHardwareOf(const HardwareSpec &hardware, bool fp8) {
  GemmHardware g;
  g.peak_tflops = fp8 ? hardware.peak_fp8_tflops : hardware.peak_tflops;
  g.curve = !fp8                                    ? hardware.gemm_efficiency
            : !hardware.gemm_efficiency_fp8.empty() ? hardware.gemm_efficiency_fp8
                                                    : fp8CurveFromBf16(hardware);
  g.flat_efficiency = hardware.efficiency;
  g.hbm_gbps = hardware.hbm_gbps;
  g.memory_efficiency = hardware.memory_efficiency;
  if (fp8) g.operand_bytes = 1;
  return g;
}

double memoryBoundUs(double bytes, const HardwareSpec &hardware) {
  if (hardware.hbm_gbps <= 0) return 0;
  return bytes / (hardware.hbm_gbps * hardware.memory_efficiency * 1e3);
}

double optimizerStepUs(double parameters, double optimizer_bytes_per_param, double weight_bytes,
                       const HardwareSpec &hardware) {
  return memoryBoundUs(parameters * (2 * optimizer_bytes_per_param + 4 + weight_bytes), hardware);
}

namespace {

/// A linear layer's three GEMMs: forward X[T×k]·W[k×n], input grad dY·Wᵀ, weight grad Xᵀ·dY;
/// the forward and input grad each as `chunks` GEMMs of T/chunks rows when overlapped with a
/// TP ring exchange (LayerShape::tp_overlap_chunks).
LayerOp linearOp(std::string name, double tokens, double k, double n, const GemmHardware &gemm,
                 double dt, double forward_chunks = 1, double input_grad_chunks = 1) {
  LayerOp op;
  op.name = std::move(name);
  op.category = OpCategory::Gemm;
  op.forward_us = forward_chunks * gemmTimeUs(gemm, {tokens / forward_chunks, n, k, 1}, dt);
  op.input_grad_us =
      input_grad_chunks * gemmTimeUs(gemm, {tokens / input_grad_chunks, k, n, 1}, dt);
  op.weight_grad_us = gemmTimeUs(gemm, {k, n, tokens, 1}, dt);
  return op;
}

LayerOp memoryOp(std::string name, double forward_bytes, double backward_bytes,
                 const HardwareSpec &hardware, bool selective = false) {
  LayerOp op;
  op.name = std::move(name);
  op.category = OpCategory::MemoryBound;
  op.forward_us = memoryBoundUs(forward_bytes, hardware);
  op.input_grad_us = memoryBoundUs(backward_bytes, hardware);
  op.selective_recompute = selective;
  return op;
}

} // namespace

LayerOp fp8QuantizeOp(std::string name, double elements_forward, double elements_backward,
                      const HardwareSpec &hardware) {
  return memoryOp(std::move(name), kFp8QuantizeBytesPerElement * elements_forward,
                  kFp8QuantizeBytesPerElement * elements_backward, hardware);
}

PartWork transformerLayerWork(const ModelSpec &m, const HardwareSpec &hardware,
                              const LayerShape &shape) {
  const GemmHardware gemm = gemmHardwareOf(hardware);
  // Linear layers (Transformer Engine modules) run at the FP8 rate under FP8; attention stays
  // 16-bit (TE's FP8 recipes leave dot-product attention in BF16 unless asked).
  const GemmHardware linear_gemm = gemmHardwareOf(hardware, shape.fp8_gemms);
  const double t = shape.tp, dt = dtypeBytes(m.dtype);
  const double b = m.microbatch_size, s = m.sequence_length, h = m.hidden, f = m.ffn_hidden;
  const double heads = m.heads / t;
  const AttentionShape attention = attentionShapeOf(m);
  const double tokens = b * s;
  const double keys = s * shape.context_parallel; // the whole sequence's keys under CP
  // Elements of the hidden state on this rank outside the TP regions: split by t only under
  // sequence parallelism (Korthikanti et al. 2022, §4.2.2).
  const double hidden_elements = tokens * h / (shape.sequence_parallel ? t : 1);
  const double ffn_elements = tokens * f / t;
  const double mask = m.dropout ? 1.0 : 0.0; // bytes per element of a dropout mask

  PartWork work;
  // Elements of the linear layers' inputs (forward) and output gradients (input-grad) that FP8
  // quantizes, summed into one op at the end of the layer.
  double quantized_forward = 0, quantized_backward = 0;
  // Under TP overlap, which GEMMs run in ring-exchange chunks (Megatron-Bridge's H100
  // userbuffers configs, src/megatron/bridge/training/comm_overlap.py: RingExchangeOverlapCfg for
  // qkv_fprop, fc1_fprop, proj_dgrad and fc2_dgrad, and in FP8 for proj_fprop and fc2_fprop).
  const double chunks = std::max(1, shape.tp_overlap_chunks);
  const auto chunked = [&](std::string_view name, bool input_grad) {
    const bool scatter = namedIn(kAttentionScatterGemms, name) || namedIn(kMlpScatterGemms, name);
    return input_grad
               ? scatter
               : scatter || namedIn(kAttentionGatherGemms, name) || namedIn(kMlpGatherGemms, name);
  };
  const auto linear = [&](const char *name, double rows, double k, double n) {
    work.add(linearOp(name, rows, k, n, linear_gemm, dt, chunked(name, false) ? chunks : 1,
                      chunked(name, true) ? chunks : 1));
    quantized_forward += rows * k;
    quantized_backward += rows * n;
  };
  const char *norm = m.norm == "layernorm" ? "layernorm" : "rmsnorm";
  work.add(memoryOp(std::string("input_") + norm, 2 * dt * hidden_elements,
                    3 * dt * hidden_elements, hardware));
  if (attention.latent) {
    // MLA (DeepSeek-V3 §2.1.1): the down-projections to the latents are held whole on every TP
    // rank, the up-projections split by heads; each latent is RMS-normalized before its
    // up-projection.
    const auto latentNorm = [&](const char *name, double width) {
      work.add(memoryOp(name, 2 * dt * tokens * width, 3 * dt * tokens * width, hardware));
    };
    if (attention.q_latent > 0) {
      linear("q_down", tokens, h, attention.q_latent);
      latentNorm("q_latent_rmsnorm", attention.q_latent);
      linear("q_up", tokens, attention.q_latent, attention.query / t);
    } else {
      linear("q_proj", tokens, h, attention.query / t);
    }
    linear("kv_down", tokens, h, attention.kv_latent + attention.rope_key);
    latentNorm("kv_latent_rmsnorm", attention.kv_latent);
    linear("kv_up", tokens, attention.kv_latent,
           heads * (m.qk_nope_head_dim + attention.value_dim));
    // RoPE on the queries' rope part and on the one shared rope key.
    const double qk = tokens * (heads + 1) * attention.rope_key;
    work.add(memoryOp("rotary", 2 * dt * qk, 2 * dt * qk, hardware));
  } else {
    linear("qkv", tokens, h, (attention.query + attention.key + attention.value) / t);
    if (m.position_embeddings == 0) {
      const double qk = tokens * (attention.query + attention.key) / t;
      work.add(memoryOp("rotary", 2 * dt * qk, 2 * dt * qk, hardware));
    }
  }
  const double d = attention.score_dim, dv = attention.value_dim;
  if (m.attention == "flash") {
    const double causal = 0.5;
    // Q·Kᵀ over d and P·V over dv per head: 2·b·s·keys·(d + dv) per head, 4·b·s²·h/t for a
    // standard layer.
    const double forward_flops = 2 * b * s * keys * heads * (d + dv) * causal;
    const double efficiency = hardware.attention_efficiency > 0
                                  ? hardware.attention_efficiency
                                  : gemmEfficiency(gemm, 2 * s * s * d);
    LayerOp op;
    op.name = "flash_attention";
    op.category = OpCategory::Attention;
    op.forward_us = forward_flops / (hardware.peak_tflops * 1e6 * efficiency);
    op.input_grad_us = 2.5 * op.forward_us;
    work.add(std::move(op));
  } else {
    const double batch = b * heads;
    LayerOp scores;
    scores.name = "attention_scores";
    scores.category = OpCategory::Attention;
    scores.selective_recompute = true;
    // Q·Kᵀ and A·V forward; dQ, dK and dA, dV backward (the same shapes, twice).
    scores.forward_us =
        gemmTimeUs(gemm, {s, keys, d, batch}, dt) + gemmTimeUs(gemm, {s, dv, keys, batch}, dt);
    scores.input_grad_us = 2 * scores.forward_us;
    work.add(std::move(scores));
    const double score_elements = b * heads * s * keys;
    work.add(memoryOp("softmax", 2 * dt * score_elements, 3 * dt * score_elements, hardware, true));
    // Unfused (--no-masked-softmax-fusion), the causal mask is a masked_fill of its own over the
    // scores, read and written, and its backward another: two 16-bit passes beside the softmax
    // kernels, as one H100's profile of Megatron-LM's local layers shows (two elementwise
    // kernels per layer and microbatch over the scores; docs/measurements/
    // megatron-h100-local.md).
    if (shape.unfused_softmax)
      work.add(memoryOp("attention_mask", 2 * dt * score_elements, 2 * dt * score_elements,
                        hardware, true));
    if (m.dropout)
      work.add(memoryOp("attention_dropout", (2 * dt + mask) * score_elements,
                        (2 * dt + mask) * score_elements, hardware, true));
  }
  linear("attention_out", tokens, attention.output / t, h);
  const char *residual = m.dropout ? "bias_dropout_add" : "residual_add";
  work.add(memoryOp(std::string("attention_") + residual, (3 * dt + mask) * hidden_elements,
                    (2 * dt + mask) * hidden_elements, hardware));
  work.add(memoryOp(std::string("post_attention_") + norm, 2 * dt * hidden_elements,
                    3 * dt * hidden_elements, hardware));
  if (!shape.dense_mlp) {
    // The MoE MLP (moe.h) is added by the caller; its residual add stays here.
  } else if (m.gated_mlp) {
    linear("mlp_gate_up", tokens, h, 2 * f / t);
    work.add(memoryOp("swiglu", 3 * dt * ffn_elements, 5 * dt * ffn_elements, hardware));
  } else {
    linear("mlp_up", tokens, h, f / t);
    work.add(memoryOp("gelu", 2 * dt * ffn_elements, 3 * dt * ffn_elements, hardware));
  }
  if (shape.dense_mlp) linear("mlp_down", tokens, f / t, h);
  work.add(memoryOp(std::string("mlp_") + residual, (3 * dt + mask) * hidden_elements,
                    (2 * dt + mask) * hidden_elements, hardware));
  if (shape.fp8_gemms)
    work.add(fp8QuantizeOp("fp8_quantize", quantized_forward, quantized_backward, hardware));
  if (shape.gradient_add_bytes > 0 && shape.params > 0)
    work.add(gradientAccumulationOp(shape.params, shape.gradient_add_bytes, hardware));
  if (hardware.layer_overhead_us > 0) work.add(layerOverheadOp(hardware));
  return work;
}

LayerOp gradientAccumulationOp(double params, double bytes_per_param,
                               const HardwareSpec &hardware) {
  LayerOp op = memoryOp("gradient_accumulation", 0, 0, hardware);
  op.weight_grad_us = memoryBoundUs(params * bytes_per_param, hardware);
  return op;
}

LayerOp layerOverheadOp(const HardwareSpec &hardware) {
  LayerOp op;
  op.name = "layer_overhead";
  op.category = OpCategory::Overhead;
  op.forward_us = op.input_grad_us = op.weight_grad_us = hardware.layer_overhead_us / 3;
  return op;
}

PartWork embeddingWork(const ModelSpec &m, const HardwareSpec &hardware, const LayerShape &shape,
                       double gradient_bytes) {
  const double dt = dtypeBytes(m.dtype);
  const double tokens = static_cast<double>(m.microbatch_size) * m.sequence_length;
  // The vocab-parallel lookup writes the whole b·s·h on every TP rank (then all-reduced); its
  // gradient is accumulated into the rank's rows of the table.
  const double elements = tokens * m.hidden;
  const double split = elements / (shape.sequence_parallel ? shape.tp : 1);
  std::vector<LayerOp> ops;
  ops.push_back(memoryOp("embedding", 2 * dt * elements, 3 * dt * elements, hardware));
  if (m.position_embeddings > 0)
    ops.push_back(memoryOp("position_add", 3 * dt * split, 2 * dt * split, hardware));
  if (m.dropout)
    ops.push_back(
        memoryOp("embedding_dropout", (2 * dt + 1) * split, (2 * dt + 1) * split, hardware));
  // The table's gradient is dense (PyTorch's embedding_dense_backward, which nn.Embedding and
  // Megatron's VocabParallelEmbedding run): a zero-filled V/t × h tensor in the weights' dtype
  // that the looked-up rows are added into, whatever few rows the microbatch touched. The
  // gradient buffer then accumulates it, read whole (Megatron-LM's DDP hook
  // main_grad.add_(grad) in megatron/core/distributed/distributed_data_parallel.py, the
  // embedding not being a fused-accumulation linear layer; autograd's .grad accumulation
  // elsewhere): the zero fill writes dt, the add reads dt and reads and writes the buffer's
  // gradient_bytes, per element of the rank's table.
  const double table = m.vocab / static_cast<double>(shape.tp) * m.hidden;
  ops.push_back(
      memoryOp("embedding_table_grad", 0, (2 * dt + 2 * gradient_bytes) * table, hardware));
  // Nothing precedes the embedding, so its whole backward is weight gradient (W): the table's
  // rows and the position table accumulate it.
  PartWork work;
  for (auto &op : ops) {
    op.weight_grad_us = op.input_grad_us;
    op.input_grad_us = 0;
    work.add(std::move(op));
  }
  return work;
}

PartWork mtpProjectionWork(const ModelSpec &m, const HardwareSpec &hardware,
                           const LayerShape &shape) {
  const GemmHardware gemm = gemmHardwareOf(hardware);
  const double dt = dtypeBytes(m.dtype);
  const double tokens = static_cast<double>(m.microbatch_size) * m.sequence_length;
  const double hidden = tokens * m.hidden / (shape.sequence_parallel ? shape.tp : 1);
  PartWork work;
  // DeepSeek-V3 §2.2: RMSNorm of the previous depth's hidden state and of the next token's
  // embedding, then M_k·[h; e] (2h → h, column-parallel).
  work.add(memoryOp(m.norm == "layernorm" ? "mtp_layernorms" : "mtp_rmsnorms", 2 * 2 * dt * hidden,
                    2 * 3 * dt * hidden, hardware));
  const double projection_out = m.hidden / static_cast<double>(shape.tp);
  work.add(linearOp("mtp_projection", tokens, 2.0 * m.hidden, projection_out,
                    gemmHardwareOf(hardware, shape.fp8_gemms), dt));
  if (shape.fp8_gemms)
    work.add(fp8QuantizeOp("mtp_fp8_quantize", tokens * 2.0 * m.hidden, tokens * projection_out,
                           hardware));
  return work;
}

PartWork headWork(const ModelSpec &m, const HardwareSpec &hardware, const LayerShape &shape,
                  std::string_view cross_entropy) {
  const GemmHardware gemm = gemmHardwareOf(hardware);
  const double dt = dtypeBytes(m.dtype);
  const double tokens = static_cast<double>(m.microbatch_size) * m.sequence_length;
  const double hidden = tokens * m.hidden / (shape.sequence_parallel ? shape.tp : 1);
  const double logits = tokens * m.vocab / shape.tp;
  PartWork work;
  work.add(memoryOp(m.norm == "layernorm" ? "final_layernorm" : "final_rmsnorm", 2 * dt * hidden,
                    3 * dt * hidden, hardware));
  work.add(
      linearOp("output_head", tokens, m.hidden, m.vocab / static_cast<double>(shape.tp), gemm, dt));
  if (cross_entropy == "vocab-parallel-unfused") {
    // Megatron-LM's vocab_parallel_cross_entropy without --cross-entropy-loss-fusion (the only
    // one before 2024 and the default since; megatron/core/tensor_parallel/cross_entropy.py),
    // one kernel per PyTorch op over the logits. Forward: logits.float() (read dt, write 4),
    // max (read 4), the in-place subtraction of the max, exp and division by the sum (read and
    // write 4 each), the sum (read 4): dt + 36 bytes per logit. Backward: grad_input.mul_ (read
    // and write 4), then autograd's cast back to the logits' dtype (read 4, write dt): 12 + dt.
    work.add(memoryOp("cross_entropy", (dt + 36) * logits, (12 + dt) * logits, hardware));
  } else if (cross_entropy == "te") {
    // Transformer Engine's Triton cross-entropy (transformer_engine/pytorch/triton/
    // cross_entropy.py): the forward's online softmax reads the 16-bit logits once (the loss
    // kernel reads per-row statistics only); the backward reads them and writes the gradient in
    // their place.
    work.add(memoryOp("cross_entropy", dt * logits, 2 * dt * logits, hardware));
  } else {
    // Vocab-parallel cross-entropy fused (Megatron-LM): the logits read to fp32 for the max and
    // the exponentials, the fp32 softmax written and read back for the sum; the backward reads
    // the softmax and writes the 16-bit gradient.
    work.add(memoryOp("cross_entropy", (2 * dt + 8) * logits, (4 + dt) * logits, hardware));
  }
  return work;
}

} // namespace pipescope
