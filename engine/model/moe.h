#pragma once
// Mixture-of-experts layers (DESIGN.md §5): the routed experts' grouped GEMMs at the busiest
// expert rank's load, the shared experts, the router, the token permutations, and the expert-
// parallel all-to-all (dispatch and combine) on the link the EP group spans.
#include "engine/model/layer_costs.h"

namespace pipescope {

/// Whether the model has experts, and how many of its layers are MoE layers among
/// [first_layer, first_layer + count).
bool isMoe(const ModelSpec &model);
int moeLayersIn(const ModelSpec &model, int first_layer, int count);

/// Routed-expert assignments the busiest EP rank computes per token of its own: top-k × the
/// load imbalance, capped by the capacity factor (tokens beyond an expert's capacity drop).
double expertLoadFactor(const ModelSpec &model, double load_imbalance);

/// The MoE MLP of one layer on one TP rank (replaces the dense MLP's ops): router, routed
/// experts (E/EP of them on this rank, a grouped GEMM), shared experts, permutations.
/// `expert_tp`: the ranks each expert is split over (0: shape.tp). Below shape.tp (under
/// sequence parallelism) a rank computes whole-r experts for the tokens of its expert-TP group,
/// expert_tp/tp of the sequence, instead of a 1/tp slice for every token: the same FLOPs in
/// fewer, larger GEMMs. Shared experts stay split over TP like the dense MLP (Megatron-Core).
PartWork moeMlpWork(const ModelSpec &model, const HardwareSpec &hardware, const LayerShape &shape,
                    int expert_parallel, double load_imbalance, int expert_tp = 0);

/// One all-to-all (dispatch or combine) of a layer: each rank sends the (EP-1)/EP of its tokens'
/// k copies (b·s·k·h elements, ÷t under SP) that go to other ranks at `gbps`, with EP-1 latency
/// steps. `element_bytes`: bytes per element sent (1 for an FP8 dispatch); 0 = the model's dtype.
double moeAllToAllUs(const ModelSpec &model, const LayerShape &shape, int expert_parallel,
                     double gbps, double latency_us, double element_bytes = 0);

/// The same all-to-all on an EP group spread evenly over `nodes` nodes: NCCL sends to each peer
/// on its own transport (P2P over NVLink inside the node, the network across: nccl-tests'
/// alltoall is one grouped ncclSend/ncclRecv per peer), so the copies for the ep/nodes − 1 peers
/// in the node go at `intra` speed while those for the ep − ep/nodes peers elsewhere go at
/// `inter` speed, concurrently: the slower of the two sets the time. nodes <= 1: all at `intra`.
struct LinkSpeed {
  double gbps = 0, latency_us = 0;
};
double moeAllToAllOverNodesUs(const ModelSpec &model, const LayerShape &shape, int expert_parallel,
                              int nodes, LinkSpeed intra, LinkSpeed inter,
                              double element_bytes = 0);

/// Where one token's k routed copies go, in expectation over balanced random routing (each token
/// picks k distinct experts uniformly among those its group limit allows), on an EP group of `ep`
/// ranks spread evenly over `nodes` nodes with the experts in contiguous blocks (expert e on EP
/// rank e·ep/E, as Megatron-Core places them): the other nodes and the other GPUs holding at least
/// one of them. Node-limited routing (router_groups = the nodes the group spans, as DeepSeek-V3
/// aligns its 8 groups with 8 nodes) first picks router_group_topk of the nodes.
struct RoutedDestinations {
  double remote_nodes = 0; ///< other nodes receiving the token
  double other_gpus = 0;   ///< other GPUs of the group receiving it (in any node)
};
RoutedDestinations expectedDestinations(const ModelSpec &model, int expert_parallel, int nodes);

/// One dispatch (or combine) by DeepEP's normal kernels or HybridEP (Megatron's flex
/// dispatcher): each token crosses the network once per remote node it needs (RDMA to the GPU of
/// the same index there, which forwards it on NVLink) and NVLink once per other GPU it needs,
/// in one kernel, so the slower of the two sets the time. The NVLink count includes the forwarded
/// copies (an upper bound: a copy for the same-index GPU needs no NVLink hop). DeepEP measured its
/// normal kernels at 43-58 GB/s per 50 GB/s NIC of RDMA "bottleneck bandwidth" on H800 with this
/// per-node deduplication (deepseek-ai/DeepEP, docs/legacy.md, EP 16-64), i.e. at the NIC's rate.
double moeHierarchicalAllToAllUs(const ModelSpec &model, const LayerShape &shape,
                                 int expert_parallel, int nodes, LinkSpeed intra, LinkSpeed inter,
                                 double element_bytes = 0);

/// Parameters of one MoE layer's routed experts (whole model, all experts) and of its router
/// and shared experts (held like the dense MLP).
double routedExpertParams(const ModelSpec &model);
double sharedAndRouterParams(const ModelSpec &model);

} // namespace pipescope
