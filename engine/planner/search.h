#pragma once
// The planner (DESIGN.md §8 "Search", §9): enumerates meshes (DP, CP, TP, PP, and EP folded
// into DP × CP) × rank orders × schedules × V × microbatch size and M × recomputation × ZeRO stage
// × sequence parallelism for a model on N GPUs, prunes by memory before simulating, simulates every
// survivor exactly and ranks by tokens/s. Callers (CLI, GUI worker) get progress and can cancel;
// memory stays bounded (the top K and the Pareto front are kept, not every result).
#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "engine/mesh.h"
#include "engine/model/model_setup.h"
#include "engine/plan_file.h"
#include "engine/result.h"
#include "engine/schedule.h"

namespace pipescope {

struct SearchRequest {
  ModelSpec model;       ///< its sequence_length is the training sequence
  HardwareSpec hardware; ///< its gpus_per_node lays out the meshes
  int gpus = 8;
  int global_batch = 0;               ///< sequences per step; 0 = one per GPU
  double memory_limit_gib = 0;        ///< 0 = the hardware's memory
  std::vector<std::string> schedules; ///< empty = every family of the registry
  std::vector<int> microbatch_sizes{1, 2, 4, 8};
  std::vector<int> virtual_stages{2, 3, 4}; ///< V tried for families with a free V
  /// Empty = every order (the 6 of dp, tp, pp on meshes without CP, all 24 with CP).
  std::vector<RankOrder> rank_orders;
  std::vector<Recompute> recompute{Recompute::None, Recompute::Selective, Recompute::Full};
  /// ZeRO stages (0 none, 1 optimizer state, 2 + gradients, 3 + parameters: FSDP as torchtitan
  /// runs it), each at most once; stages above 0 only on meshes with dp × cp > 1 (one
  /// data-parallel rank has nothing to shard).
  std::vector<int> zero_stages{0, 1, 2, 3};
  std::vector<bool> sequence_parallel{false, true}; ///< only with tp > 1
  /// The layer split over the pipeline: even (false) or balanced (true: TrainingSetup::
  /// balance_layers, the split that minimizes the slowest stage with the embedding and the head
  /// counted, which Megatron takes as --pipeline-model-parallel-layout: SearchPlan::
  /// megatron_layout); balanced only with pp > 1.
  std::vector<bool> balance_layers{false, true};
  /// Expert-parallel sizes for a mixture-of-experts model (folded into dp × cp, as Megatron-Core
  /// does); empty = every size dividing dp × cp and the expert count. Dense models use 1 only.
  std::vector<int> expert_parallel;
  /// Expert tensor-parallel sizes (Mesh::etp) for an MoE model on meshes with tp > 1: 0 = tp
  /// (experts split like the dense MLP, EP inside dp × cp) and divisors of tp below it (EP then
  /// over tp × dp × cp / etp, only with sequence parallelism); empty = tp and 1, Megatron-Core's
  /// two common choices.
  std::vector<int> expert_tensor_parallel;
  /// Tensor- and pipeline-parallel sizes to try; empty = every size the model and node admit
  /// (e.g. {1} and {1} for FSDP alone, as torchtitan's 1-D runs).
  std::vector<int> tensor_parallel;
  std::vector<int> pipeline_parallel;
  /// Context-parallel sizes (a mesh dimension: dp = GPUs / (cp·tp·pp)); empty = 1, 2, 4, 8 and 16
  /// where they divide the GPUs left by tp × pp and the sequence splits into 2·cp chunks.
  std::vector<int> context_parallel;
  bool overlap_gradient_sync = true; ///< DP all-reduce overlapped with the backward (Megatron)
  /// Applied to every candidate, not searched: the linear layers' GEMM precision (FP8 needs the
  /// hardware's peak_fp8_tflops) and the all-reduce algorithm.
  GemmPrecision gemm_precision = GemmPrecision::Bf16;
  CollectiveAlgorithm collective_algorithm = CollectiveAlgorithm::Auto;
  std::string moe_dispatcher = "alltoall"; ///< TrainingSetup::moe_dispatcher for every candidate
  int moe_dispatcher_sms = 0;    ///< TrainingSetup::moe_dispatcher_sms for every candidate
  double moe_layer_host_us = -1; ///< TrainingSetup::moe_layer_host_us for every candidate
  /// TrainingSetup::tp_comm_overlap for every candidate with sequence parallelism.
  bool tp_comm_overlap = false;
  /// TrainingSetup::tp_backward_overlap for every candidate.
  bool tp_backward_overlap = false;
  bool fp32_gradients = false; ///< TrainingSetup::fp32_gradients for every candidate
  bool fp8_params = false;     ///< TrainingSetup::fp8_params for every candidate (FP8 GEMMs)
  /// TrainingSetup::recompute_modules for every candidate that recomputes none or selectively.
  std::vector<std::string> recompute_modules;
  int top = 10;
  int threads = 0; ///< 0 = every core
};

/// One configuration and what its simulation gave.
struct SearchPlan {
  Mesh mesh;
  ScheduleRequest schedule;
  int microbatch_size = 1;
  TrainingSetup training;
  double step_time_s = 0;
  double tokens_per_s = 0;
  double mfu = 0;
  double bubble_fraction = 0;
  double busiest_rank_s = 0;  ///< compute of the busiest pipeline rank (TP collectives in it)
  double gradient_sync_s = 0; ///< exposed DP gradient sync
  std::vector<double> memory_per_rank; ///< bytes per pipeline rank (total)
  double peak_memory = 0;              ///< the largest of them
  double capacity = 0;                 ///< bytes the device has
  std::uint64_t order = 0;             ///< enumeration order: the tie-break, for determinism
  /// A balanced plan's layer split as a Megatron layout string ("Et*5|t*5|...|t*2L", for
  /// --pipeline-model-parallel-layout), set on the plans a search returns; empty otherwise.
  std::string megatron_layout;
  /// Other configurations predicted as fast (the same step time to the nanosecond): a ranked
  /// plan stands for all of them, having the least peak memory (then the earliest in the
  /// enumeration), so the top K are K distinct step times. Schedules that run the same ops at
  /// pp = 1, rank orders that give the same links, dp × cp × b splits that give each rank the
  /// same tokens, or recomputation that saves memory off the critical path often tie.
  std::size_t alike_count = 0;
  /// kAlikeListed of them, by least peak memory then enumeration order (their own alike lists
  /// empty).
  std::vector<SearchPlan> alike;
};

/// How many of a ranked plan's alike configurations SearchPlan::alike lists.
inline constexpr std::size_t kAlikeListed = 8;

struct SearchProgress {
  std::size_t structures_done = 0, structures_total = 0;
  std::size_t space = 0;     ///< configurations enumerated so far
  std::size_t evaluated = 0; ///< simulated (after memory pruning)
  double best_tokens_per_s = 0;
};

struct SearchResult {
  std::size_t space = 0;            ///< configurations enumerated
  std::size_t evaluated = 0;        ///< configurations simulated (fit the memory limit)
  std::size_t pruned_by_memory = 0; ///< refused before simulating
  std::size_t timing_passes = 0;    ///< distinct timings run (equal costs share one)
  double seconds = 0;
  bool cancelled = false;
  std::vector<SearchPlan> plans;  ///< ranked, best first, at most `top`
  std::vector<SearchPlan> pareto; ///< step time vs peak memory, by peak memory
  /// The configuration with the smallest peak memory seen (fitting or not), for the message
  /// when nothing fits.
  std::optional<SearchPlan> smallest_footprint;
};

struct SearchCallbacks {
  std::function<void(const SearchProgress &)> progress; ///< from the calling thread, ~10/s
  /// Polled by the workers between configurations and by the calling thread: thread-safe.
  std::function<bool()> cancelled;
};

/// The meshes (dp, cp, tp, pp) of `gpus` GPUs the model admits: tp within a node dividing the
/// heads, KV heads and FFN, pp at most the layers, cp splitting the sequence into 2·cp chunks, dp ×
/// microbatch size dividing the global batch.
std::vector<Mesh> searchMeshes(const SearchRequest &request);

/// Checks the request; with no valid mesh the error names GPU counts that have one.
Status checkSearchRequest(const SearchRequest &request);

/// Runs the search on `threads` workers. Errors: a bad request, or nothing fits the memory
/// limit (the message names the smallest footprint found and what would make it fit).
Result<SearchResult> runSearch(const SearchRequest &request, const SearchCallbacks &callbacks = {});

/// The plan file of a searched configuration (loadable by `pipescope simulate --plan`).
Plan searchPlanToPlan(const SearchRequest &request, const SearchPlan &plan);

/// Why `plan` is slower than `best`, in a few words ("bubble 12.0 % vs 4.1 %; ..."). Ranked
/// runners-up are always slower: a plan as fast as a ranked one is counted under it (alike).
std::string whySlower(const SearchPlan &plan, const SearchPlan &best);

/// What a ranked plan's alike configurations change, in a few words ("3 more: schedules 1f1b |
/// zb-v V=2; rank orders tp-pp-cp-dp; meshes dp 8 × cp 8 × tp 1 × pp 1, b=2 M=8; peak memory up
/// to 73.5 GiB"): each setting that any of the listed ones sets otherwise, with "(the 8 with the
/// least memory shown)" where not all are listed. Empty where the plan has none.
std::string alikeSummary(const SearchPlan &plan);

} // namespace pipescope
