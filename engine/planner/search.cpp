#include "engine/planner/search.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <thread>
#include <tuple>
#include <utility>

#include "engine/lowering.h"
#include "engine/model/layer_layout.h"
#include "engine/planner/compiled_schedule.h"

namespace pipescope {

namespace {

constexpr double kGiB = 1073741824.0;

std::string gib(double bytes) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.1f GiB", bytes / kGiB);
  return buffer;
}

/// The rank orders tried on a mesh: every order (6 without CP, 24 with), or the requested ones,
/// each numbering the ranks differently: orders that differ only in where a dimension of size 1
/// sits (pp on a mesh without pipeline, tp = 1, dp = 1, cp = 1) number every rank alike and count
/// once (the first in the enumeration stays), so the ranked list never repeats one configuration
/// under several names.
std::vector<RankOrder> rankOrdersFor(const SearchRequest &request, const Mesh &mesh) {
  const std::vector<RankOrder> candidates =
      request.rank_orders.empty() ? Mesh::allOrders(mesh.cp) : request.rank_orders;
  std::vector<RankOrder> orders;
  std::vector<std::vector<MeshDim>> numberings;
  for (const auto &order : candidates) {
    std::vector<MeshDim> numbering;
    for (MeshDim dim : order)
      if (mesh.sizeOf(dim) > 1) numbering.push_back(dim);
    if (std::find(numberings.begin(), numberings.end(), numbering) != numberings.end()) continue;
    numberings.push_back(std::move(numbering));
    orders.push_back(order);
  }
  return orders;
}

/// Whether `size` is tried: any size when the request lists none, else the listed ones.
bool tried(const std::vector<int> &requested, int size) {
  return requested.empty() ||
         std::find(requested.begin(), requested.end(), size) != requested.end();
}

/// tp sizes the model and node admit (and the request tries).
std::vector<int> tensorParallelSizes(const SearchRequest &request, int gpus) {
  std::vector<int> sizes;
  const ModelSpec &m = request.model;
  for (int tp = 1; tp <= request.hardware.gpus_per_node && tp <= gpus; ++tp)
    if (gpus % tp == 0 && m.heads % tp == 0 && m.kv_heads % tp == 0 && m.ffn_hidden % tp == 0 &&
        tried(request.tensor_parallel, tp))
      sizes.push_back(tp);
  return sizes;
}

int globalBatch(const SearchRequest &request) {
  return request.global_batch > 0 ? request.global_batch : request.gpus;
}

/// Context-parallel sizes for the `gpus` left to dp × cp: CP multiplies the world (world =
/// dp × cp × tp × pp, Megatron's --context-parallel-size), and each CP rank takes two balanced
/// chunks of the causal sequence (Megatron's load balancing).
std::vector<int> contextParallelSizes(const SearchRequest &request, int gpus) {
  std::vector<int> sizes;
  const std::vector<int> tried = request.context_parallel.empty() ? std::vector<int>{1, 2, 4, 8, 16}
                                                                  : request.context_parallel;
  for (int cp : tried)
    if (cp >= 1 && gpus % cp == 0 && (cp == 1 || request.model.sequence_length % (2 * cp) == 0))
      sizes.push_back(cp);
  return sizes;
}

/// Expert tensor-parallel sizes for a mesh: 0 (= tp) always; below tp those requested (1 by
/// default) that divide tp and the experts' FFN, for an MoE model on tp > 1 when sequence
/// parallelism is among the options (etp below tp needs it).
std::vector<int> expertTensorParallelSizes(const SearchRequest &request, const Mesh &mesh) {
  std::vector<int> sizes{0};
  const bool sequence_parallel =
      std::find(request.sequence_parallel.begin(), request.sequence_parallel.end(), true) !=
      request.sequence_parallel.end();
  if (request.model.experts <= 1 || mesh.tp <= 1 || !sequence_parallel) return sizes;
  const std::vector<int> wanted =
      request.expert_tensor_parallel.empty() ? std::vector<int>{1} : request.expert_tensor_parallel;
  for (int etp : wanted)
    if (etp >= 1 && etp < mesh.tp && mesh.tp % etp == 0 &&
        request.model.expert_ffn_hidden % etp == 0 &&
        std::find(sizes.begin(), sizes.end(), etp) == sizes.end())
      sizes.push_back(etp);
  return sizes;
}

/// Expert-parallel sizes folded into the dp × cp ranks (Megatron-Core's MoE parallel folding;
/// × tp / etp of them with expert tensor parallelism below tp): divisors of those that divide
/// the expert count; only an MoE model has experts.
std::vector<int> expertParallelSizes(const SearchRequest &request, int dp_cp) {
  if (request.model.experts <= 1) return {1};
  std::vector<int> sizes;
  if (request.expert_parallel.empty()) {
    for (int ep = 1; ep <= dp_cp; ++ep)
      if (dp_cp % ep == 0 && request.model.experts % ep == 0) sizes.push_back(ep);
  } else {
    for (int ep : request.expert_parallel)
      if (ep >= 1 && dp_cp % ep == 0 && request.model.experts % ep == 0) sizes.push_back(ep);
  }
  return sizes;
}

/// `base` with each expert layout tried: every ETP, and under it every EP its folded ranks admit.
std::vector<Mesh> expertLayoutsOf(const SearchRequest &request, const Mesh &base) {
  std::vector<Mesh> meshes;
  for (int etp : expertTensorParallelSizes(request, base)) {
    const int folded = base.dataCpSize() * (etp > 0 ? base.tp / etp : 1);
    for (int ep : expertParallelSizes(request, folded)) {
      Mesh mesh = base;
      mesh.etp = etp;
      mesh.ep = ep;
      meshes.push_back(mesh);
    }
  }
  return meshes;
}

/// The meshes (dp, cp, tp, pp; ep left at 1) of `gpus` GPUs.
std::vector<Mesh> meshesFor(const SearchRequest &request, int gpus) {
  std::vector<Mesh> meshes;
  const int batch = globalBatch(request);
  for (int tp : tensorParallelSizes(request, gpus))
    for (int pp = 1; pp <= gpus / tp; ++pp) {
      if ((gpus / tp) % pp != 0 || pp > request.model.layers ||
          !tried(request.pipeline_parallel, pp))
        continue;
      for (int cp : contextParallelSizes(request, gpus / tp / pp)) {
        const int dp = gpus / tp / pp / cp;
        bool batch_fits = false;
        for (int b : request.microbatch_sizes) {
          const long long replicas = static_cast<long long>(dp) * b;
          batch_fits = batch_fits || (b > 0 && replicas <= batch && batch % replicas == 0);
        }
        if (!batch_fits) continue;
        Mesh mesh;
        mesh.dp = dp;
        mesh.cp = cp;
        mesh.tp = tp;
        mesh.pp = pp;
        mesh.gpus_per_node = request.hardware.gpus_per_node;
        meshes.push_back(mesh);
      }
    }
  return meshes;
}

std::vector<const ScheduleFamily *> searchFamilies(const SearchRequest &request) {
  std::vector<const ScheduleFamily *> families;
  if (request.schedules.empty())
    for (const auto &family : scheduleFamilies())
      families.push_back(&family);
  for (const auto &name : request.schedules)
    if (const auto *family = findScheduleFamily(name)) families.push_back(family);
  return families;
}

/// Whether a is at least as good as b on step time and peak memory (ties by enumeration order).
bool dominates(const SearchPlan &a, const SearchPlan &b) {
  if (a.step_time_s > b.step_time_s || a.peak_memory > b.peak_memory) return false;
  if (a.step_time_s < b.step_time_s || a.peak_memory < b.peak_memory) return true;
  return a.order < b.order;
}

/// The bounded part of the results: the top K and the Pareto front.
struct Collector {
  std::size_t top = 10;
  std::vector<SearchPlan> best;
  std::vector<SearchPlan> pareto;
  std::optional<SearchPlan> smallest;

  void offer(const SearchPlan &plan) {
    offerTop(plan);
    offerPareto(plan);
  }
  /// Keeps the top K distinct step times: a plan as fast as a kept one joins it as alike (the one
  /// with less memory stands for both: the other can only be worse), so which plan stands for a
  /// group, its count and its list do not depend on how the workers split the space.
  void offerTop(const SearchPlan &plan) {
    const auto key_better = [](const SearchPlan &a, const SearchPlan &b) {
      return predictionKey(a) < predictionKey(b);
    };
    const auto at = std::lower_bound(best.begin(), best.end(), plan, key_better);
    if (at != best.end() && predictionKey(*at) == predictionKey(plan)) {
      joinAlike(*at, plan);
      return;
    }
    if (best.size() >= top && at == best.end()) return;
    best.insert(at, plan);
    if (best.size() > top) best.pop_back();
  }
  /// Better first: the shorter step (more tokens/s: every plan of a search runs the same
  /// tokens), to the nanosecond, so schedules that run the same ops in another order at pp = 1
  /// (their sums differ in the last bits) are alike.
  static long long predictionKey(const SearchPlan &plan) {
    return std::llround(plan.step_time_s * 1e9);
  }
  /// Which of two alike plans stands for both: the one with less peak memory (to the byte), then
  /// the earlier in the enumeration.
  static bool standsFor(const SearchPlan &a, const SearchPlan &b) {
    return std::pair(std::llround(a.peak_memory), a.order) <
           std::pair(std::llround(b.peak_memory), b.order);
  }
  static void joinAlike(SearchPlan &kept, const SearchPlan &plan) {
    std::vector<SearchPlan> members = std::move(kept.alike);
    members.insert(members.end(), plan.alike.begin(), plan.alike.end());
    const std::size_t count = kept.alike_count + plan.alike_count + 1;
    SearchPlan other;
    if (standsFor(plan, kept)) {
      other = std::move(kept);
      kept = plan;
    } else {
      other = plan;
    }
    other.alike.clear();
    other.alike_count = 0;
    members.push_back(std::move(other));
    std::sort(members.begin(), members.end(), standsFor);
    if (members.size() > kAlikeListed) members.resize(kAlikeListed);
    kept.alike = std::move(members);
    kept.alike_count = count;
  }
  void offerPareto(const SearchPlan &plan) {
    for (const auto &kept : pareto)
      if (dominates(kept, plan)) return;
    std::erase_if(pareto, [&](const SearchPlan &kept) { return dominates(plan, kept); });
    pareto.push_back(plan);
  }
  void offerFootprint(const SearchPlan &plan) {
    if (!smallest || plan.peak_memory < smallest->peak_memory ||
        (plan.peak_memory == smallest->peak_memory && plan.order < smallest->order))
      smallest = plan;
  }
  void merge(const Collector &other) {
    for (const auto &plan : other.best)
      offerTop(plan);
    for (const auto &plan : other.pareto)
      offerPareto(plan);
    if (other.smallest) offerFootprint(*other.smallest);
  }
};

/// One schedule structure (family, P, V, M) and the meshes and microbatch sizes that share it.
struct Structure {
  ScheduleRequest request;
  struct Variant {
    Mesh mesh; ///< its cp and ep set; the rank order tried per configuration
    int microbatch_size = 1;
  };
  std::vector<Variant> variants;
  std::uint64_t first_order = 0; ///< enumeration index of its first configuration
  std::size_t configurations = 0;
};

/// The ZeRO stages tried on a mesh: the requested ones, or only stage 0 where dp × cp = 1 (with
/// one data-parallel rank every stage shards over one rank: the same memory and time as stage 0).
std::vector<int> zeroStagesFor(const SearchRequest &request, const Mesh &mesh) {
  if (mesh.dataCpSize() > 1) return request.zero_stages;
  std::vector<int> stages;
  for (int stage : request.zero_stages)
    if (stage == 0) stages.push_back(stage);
  return stages;
}

std::size_t configurationsOf(const SearchRequest &request, const Structure::Variant &variant) {
  const std::size_t orders = rankOrdersFor(request, variant.mesh).size();
  // With tp = 1 only "without SP"; with experts folded over TP only "with SP".
  const std::size_t sp =
      variant.mesh.tp == 1
          ? static_cast<std::size_t>(std::count(request.sequence_parallel.begin(),
                                                request.sequence_parallel.end(), false))
      : variant.mesh.expertsFoldTp()
          ? static_cast<std::size_t>(std::count(request.sequence_parallel.begin(),
                                                request.sequence_parallel.end(), true))
          : request.sequence_parallel.size();
  // With pp = 1 only the even split (one pipeline rank has nothing to balance).
  const std::size_t splits =
      variant.mesh.pp == 1
          ? static_cast<std::size_t>(
                std::count(request.balance_layers.begin(), request.balance_layers.end(), false))
          : request.balance_layers.size();
  return orders * request.recompute.size() * sp * splits *
         zeroStagesFor(request, variant.mesh).size();
}

std::vector<Structure> enumerateStructures(const SearchRequest &request) {
  std::map<std::tuple<std::string, int, int, int>, Structure> structures;
  const int batch = globalBatch(request);
  for (const Mesh &base : meshesFor(request, request.gpus))
    for (const Mesh &mesh : expertLayoutsOf(request, base)) {
      for (int b : request.microbatch_sizes) {
        // dp replicas see distinct sequences (cp splits each; EP ranks are dp × cp ranks).
        const long long per_replica = static_cast<long long>(mesh.dp) * b;
        if (b < 1 || per_replica > batch || batch % per_replica != 0) continue;
        const int microbatches = static_cast<int>(batch / per_replica);
        for (const ScheduleFamily *family : searchFamilies(request)) {
          if (family->needs_expert_parallel && mesh.ep <= 1) continue;
          std::vector<int> chunk_options{family->placement == PlacementKind::Loop ? 1 : 2};
          if (family->uses_chunks) chunk_options = request.virtual_stages;
          for (int v : chunk_options) {
            ScheduleRequest schedule{family->name, mesh.pp, microbatches, v, 0};
            if (!checkScheduleRequest(schedule)) continue;
            const int model_stages =
                Placement::make(family->placement, mesh.pp, v, 1).modelStageCount();
            if (model_stages > request.model.layers) continue;
            auto &structure = structures[{family->name, mesh.pp, v, microbatches}];
            structure.request = schedule;
            structure.variants.push_back({mesh, b});
          }
        }
      }
    }
  std::vector<Structure> list;
  list.reserve(structures.size());
  std::uint64_t order = 0;
  for (auto &[key, structure] : structures) {
    structure.first_order = order;
    for (const auto &variant : structure.variants)
      structure.configurations += configurationsOf(request, variant);
    order += structure.configurations;
    list.push_back(std::move(structure));
  }
  return list;
}

struct Counters {
  std::atomic<std::size_t> structures_done{0}, evaluated{0}, pruned{0}, timings{0};
};

/// What became of one configuration, kept to replay it for a rank order that derives the same
/// costs: never derived (its derivation failed), only sized (offered as a footprint, then not
/// timed), pruned by memory, or evaluated.
struct Outcome {
  enum class Kind { NotDerived, SizedOnly, Pruned, Evaluated } kind = Kind::NotDerived;
  SearchPlan plan; ///< its figures (kinds after NotDerived)
};

/// The rank orders already searched for one mesh and microbatch size: their links and what each
/// configuration gave.
struct OrderOutcomes {
  const MeshLinks *links; ///< in the search's MeshLinksCache
  std::vector<Outcome> outcomes;
};

/// Whether every pair of pipeline ranks the derivation reads a link for is in MeshLinks: the
/// stage boundaries between neighbours, the wrap-around pair 0, P − 1, and the embedding and head
/// ranks (0 and 0 or P − 1 on every placement of the registry). Then two rank orders with equal
/// MeshLinks derive the same costs, bitwise, and the second is the first's results re-labelled.
bool linksCoverPlacement(const Placement &placement) {
  const int P = placement.pp;
  const auto covered = [P](int a, int b) {
    const int gap = std::abs(a - b);
    return gap <= 1 || gap == P - 1;
  };
  for (int v = 0; v < placement.stageCount(); ++v) {
    const int next = placement.nextStage(v);
    if (next >= 0 && !covered(placement.rankOf(v), placement.rankOf(next))) return false;
  }
  return covered(placement.rankOf(0), placement.rankOf(placement.stageCount() - 1));
}

/// Sets a balanced plan's Megatron layout string from its derivation: derived again here, for
/// the few plans a search returns, rather than formatted for every configuration simulated.
void nameBalancedLayout(const SearchRequest &request, SearchPlan &plan) {
  if (!plan.training.balance_layers) return;
  auto schedule = generateSchedule(plan.schedule);
  if (!schedule) return;
  ModelSetup setup{request.model, request.hardware, plan.training};
  setup.model.microbatch_size = plan.microbatch_size;
  auto derivation = deriveModelCosts(setup, plan.mesh, schedule->placement);
  if (derivation) plan.megatron_layout = formatMegatronLayout(derivation->model_layout);
}

/// meshLinks of every mesh and rank order the search meets, each classified once. A mesh runs in
/// every schedule structure that fits it (each family, V and M), and classifying its groups walks
/// every rank: at 16,384 GPUs, recomputed per structure, that took 85 % of a search.
class MeshLinksCache {
public:
  /// The links of `mesh` (its order included); the reference stays valid while the cache lives.
  const MeshLinks &linksOf(const Mesh &mesh) {
    const Key key{mesh.dp,   mesh.cp, mesh.tp, mesh.pp, mesh.ep, mesh.etp, mesh.gpus_per_node,
                  mesh.order};
    {
      const std::shared_lock lock(mutex_);
      if (const auto found = links_.find(key); found != links_.end()) return *found->second;
    }
    // Computed outside the lock: two workers meeting a new mesh at once both compute it, and
    // the first to insert wins (the same links either way).
    auto links = std::make_unique<MeshLinks>(meshLinks(mesh));
    const std::unique_lock lock(mutex_);
    return *links_.try_emplace(key, std::move(links)).first->second;
  }

private:
  using Key = std::tuple<int, int, int, int, int, int, int, RankOrder>;
  std::shared_mutex mutex_;
  std::map<Key, std::unique_ptr<MeshLinks>> links_; ///< node-based: references stay valid
};

/// Offers a configuration's outcome again, for another rank order with the same links.
void replay(const Outcome &outcome, const RankOrder &rank_order, std::uint64_t order,
            Counters &counters, Collector &collector) {
  if (outcome.kind == Outcome::Kind::NotDerived) return;
  SearchPlan plan = outcome.plan;
  plan.mesh.order = rank_order;
  plan.order = order;
  collector.offerFootprint(plan);
  if (outcome.kind == Outcome::Kind::Pruned) ++counters.pruned;
  if (outcome.kind != Outcome::Kind::Evaluated) return;
  ++counters.evaluated;
  collector.offer(plan);
}

/// Evaluates every configuration of one structure.
void searchStructure(const SearchRequest &request, const Structure &structure, double limit_bytes,
                     const SearchCallbacks &callbacks, Counters &counters, Collector &collector,
                     MeshLinksCache &mesh_links, std::vector<double> &scratch) {
  auto schedule = generateSchedule(structure.request);
  if (!schedule || !checkOpCoverage(*schedule)) return;
  const LoweredProgram program = lowerSchedule(*schedule);
  auto compiled = compileSchedule(*schedule, program);
  if (!compiled) return;
  const Placement &placement = schedule->placement;
  const bool reuse_orders = linksCoverPlacement(placement);
  const int batch = globalBatch(request);
  std::uint64_t order = structure.first_order;
  std::vector<double> peak_activations;
  StageTimes last_times;
  CompiledOpTiming last_ops;
  bool have_last = false;
  for (const auto &variant : structure.variants) {
    ModelSetup setup{request.model, request.hardware, {}};
    setup.model.microbatch_size = variant.microbatch_size;
    setup.training.overlap_gradient_sync = request.overlap_gradient_sync;
    setup.training.gemm_precision = request.gemm_precision;
    setup.training.collective_algorithm = request.collective_algorithm;
    setup.training.moe_dispatcher = request.moe_dispatcher;
    setup.training.moe_dispatcher_sms = request.moe_dispatcher_sms;
    setup.training.moe_layer_host_us = request.moe_layer_host_us;
    setup.training.fp32_gradients = request.fp32_gradients;
    setup.training.fp8_params = request.fp8_params;
    setup.training.tp_backward_overlap = request.tp_backward_overlap;
    setup.training.recompute_modules = request.recompute_modules;
    const std::vector<int> zero_stages = zeroStagesFor(request, variant.mesh);
    if (zero_stages.empty()) continue; // counted as no configuration (configurationsOf)
    std::vector<OrderOutcomes> searched_orders;
    for (const auto &rank_order : rankOrdersFor(request, variant.mesh)) {
      Mesh mesh = variant.mesh;
      mesh.order = rank_order;
      // Which groups cross nodes depends on the mesh alone: classified once for its options.
      const MeshLinks &links = mesh_links.linksOf(mesh);
      // An order whose links an earlier one had derives its costs: its configurations are that
      // order's, re-labelled (most orders on one node, many across nodes).
      const auto same = std::find_if(searched_orders.begin(), searched_orders.end(),
                                     [&](const OrderOutcomes &o) { return *o.links == links; });
      if (reuse_orders && same != searched_orders.end()) {
        if (callbacks.cancelled && callbacks.cancelled()) return;
        for (const Outcome &outcome : same->outcomes)
          replay(outcome, rank_order, order++, counters, collector);
        continue;
      }
      std::vector<Outcome> outcomes;
      const auto record = [&](Outcome::Kind kind, const SearchPlan *plan) {
        if (!reuse_orders) return;
        outcomes.push_back({kind, plan ? *plan : SearchPlan{}});
      };
      for (Recompute recompute : request.recompute)
        for (bool sequence_parallel : request.sequence_parallel)
          for (bool balanced : request.balance_layers) {
            if (sequence_parallel && mesh.tp == 1) continue;
            if (!sequence_parallel && mesh.expertsFoldTp()) continue; // needs SP (configurationsOf)
            if (balanced && mesh.pp == 1) continue; // one pipeline rank: nothing to balance
            if (callbacks.cancelled && callbacks.cancelled()) return;
            setup.training.recompute = recompute;
            setup.training.sequence_parallel = sequence_parallel;
            setup.training.balance_layers = balanced;
            setup.training.tp_comm_overlap = request.tp_comm_overlap && sequence_parallel;
            // Parameters, layers and activations do not depend on the ZeRO stage: one derivation
            // (at the first stage tried) gives every stage's memory.
            setup.training.zero_stage = zero_stages.front();
            auto derivation = deriveModelCosts(setup, mesh, placement, &links);
            if (!derivation) {
              order += zero_stages.size();
              for (std::size_t z = 0; z < zero_stages.size(); ++z)
                record(Outcome::Kind::NotDerived, nullptr);
              continue;
            }
            peakActivationBytes(*compiled, derivation->stage_activation_bytes,
                                derivation->stage_activation_granule_bytes, peak_activations);
            // The stages' costs differ (ring collectives and the sharded Adam step from stage 1 on,
            // FSDP's gathers at stage 3), so each stage that fits is derived again for its own
            // costs, keeping the timing the one `simulate` gives; once per distinct timing
            // (zeroStageTimedAs: stage 2 times as stage 1), and timed once.
            std::array<std::optional<ModelDerivation>, 4> timed_derivations;
            std::array<std::optional<CompiledTiming>, 4> stage_timings;
            for (int zero_stage : zero_stages) {
              setup.training.zero_stage = zero_stage;
              SearchPlan plan;
              plan.mesh = mesh;
              plan.schedule = structure.request;
              plan.microbatch_size = variant.microbatch_size;
              plan.training = setup.training;
              plan.order = order++;
              plan.capacity = request.hardware.memory_gib * kGiB;
              plan.memory_per_rank.resize(peak_activations.size());
              for (std::size_t r = 0; r < peak_activations.size(); ++r) {
                const RankMemory memory =
                    rankMemory(setup, mesh, *derivation, static_cast<int>(r), peak_activations[r]);
                plan.memory_per_rank[r] = memory.total;
                plan.peak_memory = std::max(plan.peak_memory, memory.total);
              }
              collector.offerFootprint(plan);
              if (plan.peak_memory > limit_bytes) {
                ++counters.pruned;
                record(Outcome::Kind::Pruned, &plan);
                continue;
              }
              // Until timed, a configuration that fails below was only sized.
              record(Outcome::Kind::SizedOnly, &plan);
              const auto timed_as = static_cast<std::size_t>(zeroStageTimedAs(zero_stage));
              const ModelDerivation *timed = &*derivation;
              if (timed_as != static_cast<std::size_t>(zeroStageTimedAs(zero_stages.front()))) {
                auto &rederived = timed_derivations[timed_as];
                if (!rederived) {
                  auto costs_of_stage = deriveModelCosts(setup, mesh, placement, &links);
                  if (!costs_of_stage) continue;
                  rederived = std::move(*costs_of_stage);
                }
                timed = &*rederived;
              }
              const Costs &costs = timed->costs;
              auto &stage_timing = stage_timings[timed_as];
              if (!stage_timing) {
                auto times = resolveStageTimes(costs, placement);
                if (!times) continue;
                // Neighbouring configurations often price every op alike (rank orders that put
                // the same groups on the same links, ZeRO stages that change only the gradient
                // sync and the optimizer step after the last op): the ops' pass is then the same,
                // and only the sync that follows it differs.
                const double gradient_sync = times->gradient_sync;
                if (!(have_last && times->forward == last_times.forward &&
                      times->input_grad == last_times.input_grad &&
                      times->full_backward == last_times.full_backward &&
                      times->weight_grad == last_times.weight_grad &&
                      times->send_forward == last_times.send_forward &&
                      times->send_backward == last_times.send_backward &&
                      times->overlap_factor == last_times.overlap_factor)) {
                  last_ops = timeCompiledOps(*compiled, *times, scratch);
                  ++counters.timings;
                  last_times = std::move(*times);
                  have_last = true;
                }
                stage_timing = withGradientSync(last_ops, gradient_sync);
              }
              const CompiledTiming &timing = *stage_timing;
              plan.step_time_s = timing.makespan_us * 1e-6;
              if (!(plan.step_time_s > 0)) continue;
              plan.tokens_per_s =
                  static_cast<double>(batch) * request.model.sequence_length / plan.step_time_s;
              plan.mfu = static_cast<double>(batch) / variant.microbatch_size * 3 *
                         derivation->forward_flops_per_microbatch /
                         (plan.step_time_s * request.gpus * request.hardware.peak_tflops * 1e12);
              plan.bubble_fraction = timing.bubble_fraction;
              plan.busiest_rank_s = timing.busiest_rank_us * 1e-6;
              plan.gradient_sync_s = costs.gradient_sync_us * 1e-6;
              ++counters.evaluated;
              collector.offer(plan);
              if (reuse_orders) outcomes.back() = {Outcome::Kind::Evaluated, plan};
            }
          }
      if (reuse_orders) searched_orders.push_back({&links, std::move(outcomes)});
    }
  }
}

std::string meshText(const Mesh &mesh) {
  std::string text = "dp " + std::to_string(mesh.dp);
  if (mesh.cp > 1) text += " × cp " + std::to_string(mesh.cp);
  text += " × tp " + std::to_string(mesh.tp) + " × pp " + std::to_string(mesh.pp);
  if (mesh.ep > 1) text += " (ep " + std::to_string(mesh.ep) + " in dp × cp)";
  return text;
}

} // namespace

std::vector<Mesh> searchMeshes(const SearchRequest &request) {
  return meshesFor(request, request.gpus);
}

Status checkSearchRequest(const SearchRequest &request) {
  if (request.gpus < 1 || request.gpus > kMaxWorldSize)
    return makeError("--gpus must be between 1 and " + std::to_string(kMaxWorldSize) + ", got " +
                     std::to_string(request.gpus));
  if (request.global_batch < 0)
    return makeError("--global-batch must be a positive number of sequences");
  if (request.top < 1) return makeError("--top must be at least 1");
  if (request.hardware.sm_count > 0 && request.moe_dispatcher_sms >= request.hardware.sm_count)
    return makeError("--moe-dispatcher-sms " + std::to_string(request.moe_dispatcher_sms) +
                     " leaves no SM to compute on: " + request.hardware.name + " has " +
                     std::to_string(request.hardware.sm_count) + "; give the dispatcher fewer");
  if (request.memory_limit_gib < 0 || request.memory_limit_gib > request.hardware.memory_gib)
    return makeError("--memory-limit must be between 0 and the " + request.hardware.name + "'s " +
                     gib(request.hardware.memory_gib * kGiB) + " per GPU");
  for (const auto &name : request.schedules)
    if (!findScheduleFamily(name))
      return makeError("unknown schedule '" + name + "' in --schedules; see 'pipescope schedules'");
  for (int b : request.microbatch_sizes)
    if (b < 1) return makeError("microbatch sizes must be at least 1");
  for (const auto *sizes : {&request.tensor_parallel, &request.pipeline_parallel})
    for (int size : *sizes)
      if (size < 1) return makeError("tensor- and pipeline-parallel sizes must be at least 1");
  for (int v : request.virtual_stages)
    if (v < 1 || v > kMaxChunks)
      return makeError("virtual stages must be between 1 and " + std::to_string(kMaxChunks));
  for (int stage : request.zero_stages) {
    if (stage < 0 || stage > 3)
      return makeError("--zero-stage: ZeRO stages are 0 (none), 1 (optimizer state), 2 (+ "
                       "gradients) and 3 (+ parameters, FSDP), got " +
                       std::to_string(stage));
    if (std::count(request.zero_stages.begin(), request.zero_stages.end(), stage) > 1)
      return makeError("--zero-stage: stage " + std::to_string(stage) +
                       " is listed twice; give each stage once");
  }
  if (request.gemm_precision == GemmPrecision::Fp8 && !hasFp8TensorCores(request.hardware))
    return makeError("--fp8: the " + request.hardware.name +
                     " has no FP8 tensor cores (its peak_fp8_tflops is 0); search in bf16, on an "
                     "FP8 GPU (Hopper: h100-sxm, h200, h800), or give the hardware file's "
                     "peak_fp8_tflops");
  if (request.recompute.empty() || request.zero_stages.empty() ||
      request.sequence_parallel.empty() || request.balance_layers.empty() ||
      request.microbatch_sizes.empty() || request.virtual_stages.empty())
    return makeError("the search space is empty: every option needs at least one value");
  if (!meshesFor(request, request.gpus).empty()) return Ok{};
  // Name the nearest GPU counts that have a mesh.
  std::string nearest;
  for (int n = request.gpus - 1; n >= 1; --n)
    if (!meshesFor(request, n).empty()) {
      nearest = std::to_string(n);
      break;
    }
  for (int n = request.gpus + 1; n <= 2 * request.gpus && n <= kMaxWorldSize; ++n)
    if (!meshesFor(request, n).empty()) {
      nearest += (nearest.empty() ? "" : " or ") + std::to_string(n);
      break;
    }
  std::string sizes;
  for (int b : request.microbatch_sizes)
    sizes += (sizes.empty() ? "" : ",") + std::to_string(b);
  const auto listed = [](const char *flag, const std::vector<int> &values) {
    std::string text;
    for (int value : values)
      text += (text.empty() ? "" : ",") + std::to_string(value);
    return values.empty() ? std::string() : std::string(", ") + flag + " " + text;
  };
  const std::string narrowed =
      listed("--tp", request.tensor_parallel) + listed("--pp", request.pipeline_parallel);
  return makeError(
      std::to_string(request.gpus) + " GPUs admit no mesh for " + request.model.name +
      ": dp × cp × tp × pp must use every GPU with tp ≤ " +
      std::to_string(request.hardware.gpus_per_node) + " dividing the heads, pp ≤ " +
      std::to_string(request.model.layers) + " layers and dp × microbatch size (" + sizes +
      ") dividing the global batch of " + std::to_string(globalBatch(request)) + " sequences" +
      (narrowed.empty() ? std::string() : " (searched: " + narrowed.substr(2) + ")") +
      (nearest.empty() ? std::string("; change --global-batch")
                       : "; " + nearest + " GPUs would work, or change --global-batch"));
}

Result<SearchResult> runSearch(const SearchRequest &request, const SearchCallbacks &callbacks) {
  if (auto status = checkSearchRequest(request); !status) return status.error();
  const auto started = std::chrono::steady_clock::now();
  std::vector<Structure> structures = enumerateStructures(request);
  std::size_t space = 0;
  for (const auto &structure : structures)
    space += structure.configurations;
  // Largest first, so no worker is left with a big one at the end.
  std::vector<std::size_t> queue(structures.size());
  for (std::size_t i = 0; i < queue.size(); ++i)
    queue[i] = i;
  std::stable_sort(queue.begin(), queue.end(), [&](std::size_t a, std::size_t b) {
    const auto size = [&](const Structure &s) {
      return static_cast<double>(s.request.pp) * s.request.chunks * s.request.microbatches *
             static_cast<double>(s.configurations);
    };
    return size(structures[a]) > size(structures[b]);
  });
  const double limit_bytes =
      (request.memory_limit_gib > 0 ? request.memory_limit_gib : request.hardware.memory_gib) *
      kGiB;
  const unsigned threads = request.threads > 0 ? static_cast<unsigned>(request.threads)
                                               : std::max(1U, std::thread::hardware_concurrency());
  Counters counters;
  std::atomic<std::size_t> next{0};
  std::atomic<bool> stop{false};
  std::vector<Collector> collectors(threads);
  for (auto &collector : collectors)
    collector.top = static_cast<std::size_t>(request.top);
  SearchCallbacks worker_callbacks;
  // Workers stop between configurations: at once on `stop`, or when the caller cancels.
  worker_callbacks.cancelled = [&] {
    if (stop.load(std::memory_order_relaxed)) return true;
    if (callbacks.cancelled && callbacks.cancelled()) {
      stop = true;
      return true;
    }
    return false;
  };
  std::mutex finished_mutex;
  std::condition_variable finished;
  unsigned running = threads;
  MeshLinksCache mesh_links;
  std::vector<std::thread> workers;
  for (unsigned t = 0; t < threads; ++t)
    workers.emplace_back([&, t] {
      std::vector<double> scratch;
      while (!stop.load(std::memory_order_relaxed)) {
        const std::size_t i = next.fetch_add(1);
        if (i >= queue.size()) break;
        searchStructure(request, structures[queue[i]], limit_bytes, worker_callbacks, counters,
                        collectors[t], mesh_links, scratch);
        ++counters.structures_done;
      }
      const std::lock_guard lock(finished_mutex);
      --running;
      finished.notify_all();
    });
  while (true) {
    {
      std::unique_lock lock(finished_mutex);
      if (finished.wait_for(lock, std::chrono::milliseconds(50), [&] { return running == 0; }))
        break;
    }
    if (callbacks.cancelled && callbacks.cancelled()) stop = true;
    if (callbacks.progress) {
      SearchProgress progress;
      progress.structures_done = counters.structures_done.load();
      progress.structures_total = structures.size();
      progress.space = space;
      progress.evaluated = counters.evaluated.load();
      callbacks.progress(progress);
    }
  }
  for (auto &worker : workers)
    worker.join();
  Collector all;
  all.top = static_cast<std::size_t>(request.top);
  for (const auto &collector : collectors)
    all.merge(collector);
  SearchResult result;
  result.space = space;
  result.evaluated = counters.evaluated.load();
  result.pruned_by_memory = counters.pruned.load();
  result.timing_passes = counters.timings.load();
  result.cancelled = stop.load();
  result.plans = std::move(all.best);
  result.pareto = std::move(all.pareto);
  for (auto &plan : result.plans) {
    nameBalancedLayout(request, plan);
    for (auto &alike : plan.alike)
      nameBalancedLayout(request, alike);
  }
  for (auto &plan : result.pareto)
    nameBalancedLayout(request, plan);
  std::sort(result.pareto.begin(), result.pareto.end(),
            [](const SearchPlan &a, const SearchPlan &b) { return a.peak_memory < b.peak_memory; });
  result.smallest_footprint = all.smallest;
  result.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  if (result.plans.empty() && !result.cancelled) {
    if (!result.smallest_footprint)
      return makeError("no configuration of " + request.model.name + " on " +
                       std::to_string(request.gpus) +
                       " GPUs could be evaluated; widen --schedules or the microbatch sizes");
    const SearchPlan &small = *result.smallest_footprint;
    return makeError(
        "nothing fits in " + gib(limit_bytes) + " per GPU: the smallest footprint of " +
        std::to_string(result.space) + " configurations is " + gib(small.peak_memory) + " (" +
        meshText(small.mesh) + ", " + small.schedule.name + ", microbatch size " +
        std::to_string(small.microbatch_size) + ", recompute " +
        std::string(recomputeName(small.training.recompute)) +
        (small.training.zero_stage > 0 ? ", ZeRO-" + std::to_string(small.training.zero_stage)
                                       : std::string()) +
        "); raise --memory-limit to at least " + gib(small.peak_memory) + " (the device has " +
        gib(request.hardware.memory_gib * kGiB) + ") or use more GPUs");
  }
  return result;
}

Plan searchPlanToPlan(const SearchRequest &request, const SearchPlan &plan) {
  Plan out;
  out.request = plan.schedule;
  out.mesh = plan.mesh;
  ModelSetup setup{request.model, request.hardware, plan.training};
  setup.model.microbatch_size = plan.microbatch_size;
  out.model = setup;
  return out;
}

std::string whySlower(const SearchPlan &plan, const SearchPlan &best) {
  char buffer[160];
  std::string reasons;
  const auto add = [&](const char *text) {
    reasons += (reasons.empty() ? "" : "; ") + std::string(text);
  };
  if (plan.bubble_fraction > best.bubble_fraction + 0.005) {
    std::snprintf(buffer, sizeof buffer, "bubble %.1f %% vs %.1f %%", plan.bubble_fraction * 100,
                  best.bubble_fraction * 100);
    add(buffer);
  }
  if (plan.busiest_rank_s > best.busiest_rank_s * 1.005) {
    const char *cause = plan.training.recompute != best.training.recompute &&
                                plan.training.recompute != Recompute::None
                            ? " (recomputation)"
                        : plan.mesh.tp > best.mesh.tp ? " (more TP collectives)"
                        : plan.mesh.pp < best.mesh.pp ? " (more layers per rank)"
                                                      : "";
    std::snprintf(buffer, sizeof buffer, "busiest rank computes %.1f ms vs %.1f ms%s",
                  plan.busiest_rank_s * 1e3, best.busiest_rank_s * 1e3, cause);
    add(buffer);
  }
  if (plan.gradient_sync_s > best.gradient_sync_s * 1.005 + 1e-6) {
    std::snprintf(buffer, sizeof buffer, "exposed DP sync %.1f ms vs %.1f ms",
                  plan.gradient_sync_s * 1e3, best.gradient_sync_s * 1e3);
    add(buffer);
  }
  if (reasons.empty()) reasons = "transfers on the critical path";
  std::snprintf(buffer, sizeof buffer,
                "+%.2f %% step time: ", (plan.step_time_s / best.step_time_s - 1) * 100);
  return buffer + reasons;
}

std::string alikeSummary(const SearchPlan &plan) {
  if (plan.alike_count == 0) return {};
  const auto schedule = [](const SearchPlan &p) {
    return p.schedule.name +
           (p.schedule.chunks > 1 ? " V=" + std::to_string(p.schedule.chunks) : std::string());
  };
  const auto split = [](const SearchPlan &p) {
    return meshText(p.mesh) + ", b=" + std::to_string(p.microbatch_size) +
           " M=" + std::to_string(p.schedule.microbatches);
  };
  const auto training = [](const SearchPlan &p) {
    std::string text = "recompute " + std::string(recomputeName(p.training.recompute));
    if (p.training.zero_stage > 0) text += ", ZeRO-" + std::to_string(p.training.zero_stage);
    if (p.training.sequence_parallel) text += ", SP";
    if (p.training.balance_layers) text += ", balanced layers";
    return text;
  };
  struct Field {
    const char *name;
    std::function<std::string(const SearchPlan &)> text;
    std::vector<std::string> values{};
  };
  std::vector<Field> fields{{"schedules", schedule},
                            {"rank orders", [](const SearchPlan &p) { return p.mesh.orderName(); }},
                            {"meshes", split},
                            {"settings", training}};
  for (const auto &other : plan.alike)
    for (auto &field : fields) {
      const std::string value = field.text(other);
      if (value != field.text(plan) &&
          std::find(field.values.begin(), field.values.end(), value) == field.values.end())
        field.values.push_back(value);
    }
  double most_memory = plan.peak_memory;
  for (const auto &other : plan.alike)
    most_memory = std::max(most_memory, other.peak_memory);
  if (std::llround(most_memory) > std::llround(plan.peak_memory)) {
    char memory[64];
    std::snprintf(memory, sizeof memory, "peak memory up to %.1f GiB", most_memory / kGiB);
    fields.push_back({"", [](const SearchPlan &) { return std::string(); }, {memory}});
  }
  std::string text = std::to_string(plan.alike_count) + " more";
  if (plan.alike_count > plan.alike.size())
    text += " (the " + std::to_string(plan.alike.size()) + " with the least memory shown)";
  std::string parts;
  for (const auto &field : fields) {
    if (field.values.empty()) continue;
    parts += (parts.empty() ? "" : "; ") + std::string(field.name) + (*field.name ? " " : "");
    for (std::size_t i = 0; i < field.values.size(); ++i)
      parts += (i > 0 ? " | " : "") + field.values[i];
  }
  return text + ": " + parts;
}

} // namespace pipescope
