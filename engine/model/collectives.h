#pragma once
// What an NCCL collective costs (DESIGN.md §5, docs/cost-model.md "Collectives"): the ring and
// the tree all-reduce as NCCL's own tuner models them, and the choice between them. Times in
// microseconds, bandwidths in GB/s (1e3 bytes per microsecond), bytes per rank.
#include "engine/model/model_setup.h"

namespace pipescope {

/// Ring all-reduce of `bytes` over n ranks: 2(n-1)/n · bytes / bus bandwidth + 2(n-1) · latency
/// (Thakur et al. 2005; Patarasuk & Yuan 2009; nccl-tests' busbw is defined by the same factor).
double ringAllReduceUs(double bytes, int ranks, double bus_gbps, double latency_us);

/// NCCL's tree all-reduce over n ranks on `nodes` nodes: a chain inside each node and a double
/// binary tree across nodes, reducing up and broadcasting down. As NCCL's tuner prices it
/// (src/graph/tuning.cc, ncclTopoTuneModel): latency 2·((n/nodes − 1)·intra + ⌊log2 nodes⌋·inter)
/// and algorithm bandwidth 0.5 × 0.92 × the bus bandwidth, so
///   2·(⌈n/nodes⌉ − 1)·intra_latency + 2·⌊log2 nodes⌋·inter_latency + bytes / (0.46 · bus_gbps).
/// `bus_gbps` is the slowest link's bus bandwidth (the inter-node link's when nodes > 1).
double treeAllReduceUs(double bytes, int ranks, int nodes, double bus_gbps, double intra_latency_us,
                       double inter_latency_us);

/// One all-reduce of `bytes` over a group of `ranks` ranks spanning `nodes` nodes on `link`
/// (the group's links, LinkKind::Mixed priced at the inter-node figures), with the bus
/// efficiencies of the hardware: ring, tree, or for Auto the cheaper of the two, as NCCL's tuner
/// picks per message size (ncclTopoGetAlgoTime). Inside one node the tree (a chain) is never the
/// cheaper; across many nodes small messages go by tree and large ones by ring.
double allReduceUs(const HardwareSpec &hardware, CollectiveAlgorithm algorithm, double bytes,
                   int ranks, int nodes, LinkKind link);

/// Which algorithm allReduceUs prices for these arguments (Ring or Tree, never Auto).
CollectiveAlgorithm allReduceAlgorithm(const HardwareSpec &hardware, CollectiveAlgorithm algorithm,
                                       double bytes, int ranks, int nodes, LinkKind link);

/// What a rank's step pays of `comm_us` of DP collectives issued as `compute_us` of its compute
/// runs (gradients reduced bucket by bucket as a backward produces them, or parameters gathered
/// ahead of a forward): all but what the compute hides, and never less than one of the rank's
/// `units` layer-sized buckets, which can only start when its compute is done.
/// - One chunk a rank: max(comm − compute, comm / units).
/// - `chunks` V > 1 in loop order (interleaved schedules): each chunk syncs on its own, once its
///   last microbatch is through it (Megatron-Core's interleaved schedule calls grad_sync_func
///   and param_sync_func per model chunk: megatron/core/pipeline_parallel/schedules.py at
///   f2e5db402c; PyTorch's pipelining reduces each stage's gradients at its last backward). The
///   last group of P microbatches runs chunk V−1 down to chunk 0, so the chunks finish P chunk
///   passes apart: the first chunk's collectives hide behind (V−1)·P chunk passes and its own,
///   the others queue behind them, and the last chunk's share hides only behind its own pass.
///   With b = compute / V: max(comm − b·(1 + (V−1)·P), comm / V − b, comm / units).
double overlappedSyncExposedUs(double comm_us, double compute_us, int chunks, int pp, int units);

/// What `overlapped_us` of a collective hidden behind compute adds to the step: NCCL runs a
/// collective as one kernel whose CTAs (one per channel) stay resident on their SMs until it is
/// done, and a Hopper GEMM CTA needs a whole SM, so the GEMMs beside it lose more than those SMs'
/// share: cuBLAS's persistent kernels wait for their last CTAs to find a free SM. The compute
/// under the collective is stretched by `gemm_slowdown` (HardwareSpec::collective_gemm_slowdown)
/// on its GEMM share; memory-bound kernels, launched as many short CTAs, do not slow
/// (docs/measurements/h100-sm-contention.md: on one H100 the rows' GEMMs ran a median 22 %
/// slower with 2-8 CTAs of another kernel resident, a residual add 0.5 %).
///   gemm_slowdown · gemm_share · overlapped_us
double collectiveContentionUs(double gemm_slowdown, double overlapped_us, double gemm_share);

} // namespace pipescope
