// Mixture-of-experts layers (moe.h).
//
// Sources: GShard (Lepikhin et al. 2020) and Switch Transformer (Fedus et al. 2021, §2.2,
// capacity factor); Megatron-Core MoE (expert parallelism folded into data parallelism, dispatch
// and combine all-to-all around the grouped expert GEMMs, token permute/unpermute kernels);
// DeepSeek-V3 technical report (arXiv:2412.19437, §2.1.2 shared experts, §3.2.1 DualPipe).
#include "engine/model/moe.h"

#include <algorithm>
#include <cmath>

namespace pipescope {

bool isMoe(const ModelSpec &model) {
  return model.experts > 0;
}

int moeLayersIn(const ModelSpec &model, int first_layer, int count) {
  if (!isMoe(model)) return 0;
  const int start = std::max(first_layer, model.first_dense_layers);
  return std::max(0, first_layer + count - start);
}

double expertLoadFactor(const ModelSpec &model, double load_imbalance) {
  double load = std::max(1.0, load_imbalance);
  if (model.capacity_factor > 0) load = std::min(load, model.capacity_factor);
  return model.experts_per_token * load;
}

double routedExpertParams(const ModelSpec &model) {
  return static_cast<double>(model.experts) * (model.gated_mlp ? 3.0 : 2.0) * model.hidden *
         model.expert_ffn_hidden;
}

double sharedAndRouterParams(const ModelSpec &model) {
  return static_cast<double>(model.shared_experts) * (model.gated_mlp ? 3.0 : 2.0) * model.hidden *
             model.expert_ffn_hidden +
         static_cast<double>(model.hidden) * model.experts;
}

PartWork moeMlpWork(const ModelSpec &m, const HardwareSpec &hardware, const LayerShape &shape,
                    int expert_parallel, double load_imbalance, int expert_tp) {
  const GemmHardware gemm = gemmHardwareOf(hardware);
  // The experts are Transformer Engine (grouped) linear layers: FP8 under FP8; the router stays
  // 16-bit (DeepSeek-V3 §3.3.1 keeps the gating modules in their original precision).
  const GemmHardware expert_gemm = gemmHardwareOf(hardware, shape.fp8_gemms);
  const double t = shape.tp, dt = dtypeBytes(m.dtype), h = m.hidden, fe = m.expert_ffn_hidden;
  const double tokens = static_cast<double>(m.microbatch_size) * m.sequence_length;
  const double local_experts = static_cast<double>(m.experts) / expert_parallel;
  // Each of the EP ranks routes its tokens' k copies; the busiest rank computes its balanced
  // share (tokens·k) times the imbalance, spread over its E/EP experts. With experts split over
  // fewer ranks than TP, the share is that of its expert-TP group's tokens.
  const double et = expert_tp > 0 ? expert_tp : t;
  const double assignments = tokens * et / t * expertLoadFactor(m, load_imbalance);
  const double per_expert = assignments / local_experts;
  const double up = (m.gated_mlp ? 2.0 : 1.0) * fe / et;
  PartWork work;
  LayerOp router;
  router.name = "router";
  router.forward_us = gemmTimeUs(gemm, {tokens, static_cast<double>(m.experts), h, 1}, dt);
  router.input_grad_us = router.forward_us;
  router.weight_grad_us = router.forward_us;
  work.add(std::move(router));
  // Permute before dispatch and unpermute after combine: read and write every routed copy.
  const double permuted = assignments * h;
  LayerOp permute;
  permute.name = "token_permute";
  permute.category = OpCategory::MemoryBound;
  permute.forward_us = memoryBoundUs(2 * 2 * dt * permuted, hardware);
  permute.input_grad_us = permute.forward_us;
  work.add(std::move(permute));
  // Transformer Engine's GroupedLinear runs one cuBLAS GEMM per local expert, spread over its
  // compute streams (get_num_compute_streams() = 4, transformer_engine/common/util/
  // multi_stream.cpp): the GPU is filled by at most 4 experts' GEMMs at once, so the curve is read
  // at that many together, not at the whole call's work, and the call runs that many at a time.
  constexpr double kGroupedGemmStreams = 4;
  const double concurrent = std::min(local_experts, kGroupedGemmStreams);
  const double waves = local_experts / concurrent;
  const auto grouped = [&](const char *name, double k, double n) {
    LayerOp op;
    op.name = name;
    op.forward_us = waves * gemmTimeUs(expert_gemm, {per_expert, n, k, concurrent}, dt);
    op.input_grad_us = waves * gemmTimeUs(expert_gemm, {per_expert, k, n, concurrent}, dt);
    op.weight_grad_us = waves * gemmTimeUs(expert_gemm, {k, n, per_expert, concurrent}, dt);
    work.add(std::move(op));
  };
  grouped("experts_up", h, up);
  LayerOp activation;
  activation.name = m.gated_mlp ? "experts_swiglu" : "experts_gelu";
  activation.category = OpCategory::MemoryBound;
  const double elements = assignments * fe / et;
  activation.forward_us = memoryBoundUs((m.gated_mlp ? 3 : 2) * dt * elements, hardware);
  activation.input_grad_us = memoryBoundUs((m.gated_mlp ? 5 : 3) * dt * elements, hardware);
  work.add(std::move(activation));
  grouped("experts_down", fe / et, h);
  if (m.shared_experts > 0) {
    const double fs = static_cast<double>(m.shared_experts) * fe;
    LayerOp shared_up;
    shared_up.name = "shared_experts";
    const double shared_n = (m.gated_mlp ? 2.0 : 1.0) * fs / t;
    shared_up.forward_us = gemmTimeUs(expert_gemm, {tokens, shared_n, h, 1}, dt) +
                           gemmTimeUs(expert_gemm, {tokens, h, fs / t, 1}, dt);
    shared_up.input_grad_us = gemmTimeUs(expert_gemm, {tokens, h, shared_n, 1}, dt) +
                              gemmTimeUs(expert_gemm, {tokens, fs / t, h, 1}, dt);
    shared_up.weight_grad_us = gemmTimeUs(expert_gemm, {h, shared_n, tokens, 1}, dt) +
                               gemmTimeUs(expert_gemm, {fs / t, h, tokens, 1}, dt);
    work.add(std::move(shared_up));
  }
  if (shape.fp8_gemms) {
    // The up GEMMs' inputs (every routed copy, and the tokens for the shared experts) and the
    // down GEMMs' inputs in the forward; the output gradients of both in the input-grad pass.
    const double shared_tokens = m.shared_experts > 0 ? tokens : 0.0;
    const double shared_f = m.shared_experts * fe / t;
    const double forward = assignments * (h + fe / et) + shared_tokens * (h + shared_f);
    const double backward =
        assignments * (up + h) + shared_tokens * ((m.gated_mlp ? 2.0 : 1.0) * shared_f + h);
    work.add(fp8QuantizeOp("experts_fp8_quantize", forward, backward, hardware));
  }
  return work;
}

namespace {

/// Bytes one rank's dispatch (or combine) carries: its tokens' k copies of h elements (÷t under
/// SP), before any stay on the rank.
double allToAllBytes(const ModelSpec &m, const LayerShape &shape, double element_bytes) {
  const double tokens = static_cast<double>(m.microbatch_size) * m.sequence_length /
                        (shape.sequence_parallel ? shape.tp : 1);
  return tokens * m.experts_per_token * m.hidden *
         (element_bytes > 0 ? element_bytes : dtypeBytes(m.dtype));
}

} // namespace

namespace {

/// C(available, k) / C(total, k): the chance that k distinct experts drawn uniformly from `total`
/// all avoid a set of total − available of them.
double allMiss(double available, double total, int k) {
  double ratio = 1;
  for (int i = 0; i < k; ++i) {
    if (available - i <= 0) return 0;
    ratio *= (available - i) / (total - i);
  }
  return ratio;
}

} // namespace

RoutedDestinations expectedDestinations(const ModelSpec &m, int expert_parallel, int nodes) {
  RoutedDestinations out;
  if (expert_parallel <= 1) return out;
  const double experts = m.experts, ep = expert_parallel, n = std::max(1, nodes);
  const int k = m.experts_per_token;
  // Node-limited routing applies when its groups are the group's nodes.
  const double chosen_nodes =
      m.router_groups > 0 && m.router_groups == nodes ? m.router_group_topk : n;
  const double candidates = chosen_nodes * experts / n; // experts a token may pick from
  const double node_picked = chosen_nodes / n;          // a given node among the chosen
  out.remote_nodes = (n - 1) * node_picked * (1 - allMiss(candidates - experts / n, candidates, k));
  out.other_gpus = (ep - 1) * node_picked * (1 - allMiss(candidates - experts / ep, candidates, k));
  return out;
}

double moeHierarchicalAllToAllUs(const ModelSpec &m, const LayerShape &shape, int expert_parallel,
                                 int nodes, LinkSpeed intra, LinkSpeed inter,
                                 double element_bytes) {
  if (expert_parallel <= 1) return 0;
  const RoutedDestinations where = expectedDestinations(m, expert_parallel, nodes);
  // Bytes of one copy of each of the rank's tokens (÷t under SP).
  const double token_bytes = allToAllBytes(m, shape, element_bytes) / m.experts_per_token;
  const double nvlink_us = where.other_gpus * token_bytes / (intra.gbps * 1e3) + intra.latency_us;
  if (nodes <= 1) return nvlink_us;
  const double rdma_us = where.remote_nodes * token_bytes / (inter.gbps * 1e3) + inter.latency_us;
  return std::max(nvlink_us, rdma_us);
}

double moeAllToAllUs(const ModelSpec &m, const LayerShape &shape, int expert_parallel, double gbps,
                     double latency_us, double element_bytes) {
  if (expert_parallel <= 1) return 0;
  const double ep = expert_parallel;
  return (ep - 1) / ep * allToAllBytes(m, shape, element_bytes) / (gbps * 1e3) +
         (ep - 1) * latency_us;
}

double moeAllToAllOverNodesUs(const ModelSpec &m, const LayerShape &shape, int expert_parallel,
                              int nodes, LinkSpeed intra, LinkSpeed inter, double element_bytes) {
  if (expert_parallel <= 1) return 0;
  if (nodes <= 1)
    return moeAllToAllUs(m, shape, expert_parallel, intra.gbps, intra.latency_us, element_bytes);
  const double ep = expert_parallel;
  // Balanced routing sends 1/ep of the copies to each rank of the group, this one included.
  const double in_node = std::max(1.0, std::floor(ep / nodes));
  const double bytes = allToAllBytes(m, shape, element_bytes);
  const double near_us =
      (in_node - 1) / ep * bytes / (intra.gbps * 1e3) + (in_node - 1) * intra.latency_us;
  const double far_us =
      (ep - in_node) / ep * bytes / (inter.gbps * 1e3) + (ep - in_node) * inter.latency_us;
  return std::max(near_us, far_us);
}

} // namespace pipescope
