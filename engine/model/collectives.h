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

} // namespace pipescope
