// The planner (issue #14): the compiled re-timing equals the event simulation, the search finds
// the brute-force optimum and never returns a plan over its memory limit, bad requests are
// refused with what would work; uneven stages (Megatron layouts, torchtitan's split, explicit
// lists) parse, refuse bad input at its column, and drive costs and memory.
#include <QtTest>

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <limits>
#include <random>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "engine/lowering.h"
#include "engine/model/layer_layout.h"
#include "engine/model/model_setup.h"
#include "engine/plan_file.h"
#include "engine/planner/compiled_schedule.h"
#include "engine/planner/search.h"
#include "engine/simulator.h"

using namespace pipescope;

namespace {

constexpr double kGiB = 1073741824.0;

ModelSetup presetSetup(const std::string &model, const std::string &hardware) {
  ModelSetup setup;
  if (auto m = loadModelSpec(model)) setup.model = *m;
  if (auto hw = loadHardwareSpec(hardware)) setup.hardware = *hw;
  return setup;
}

/// The small space both the search and the brute force below walk.
SearchRequest smallRequest() {
  SearchRequest request;
  const ModelSetup setup = presetSetup("llama3-8b", "h100-sxm");
  request.model = setup.model;
  request.model.sequence_length = 4096;
  request.hardware = setup.hardware;
  request.gpus = 8;
  request.global_batch = 16;
  request.schedules = {"1f1b", "interleaved-1f1b", "zb-h1", "zb-v", "gpipe"};
  request.microbatch_sizes = {1, 2};
  request.virtual_stages = {2};
  request.context_parallel = {1}; // the brute force below walks no CP (a dense model has no EP)
  request.top = 5;
  request.threads = 2;
  return request;
}

/// Mixtral on `gpus` H100s with one schedule, microbatch size 1, full recomputation and ZeRO-1.
SearchRequest mixtralRequest(int gpus, const std::string &schedule) {
  SearchRequest request;
  const ModelSetup setup = presetSetup("mixtral-8x7b", "h100-sxm");
  request.model = setup.model;
  request.hardware = setup.hardware;
  request.gpus = gpus;
  request.global_batch = 64;
  request.schedules = {schedule};
  request.microbatch_sizes = {1};
  request.recompute = {Recompute::Full};
  request.zero_stages = {1};
  return request;
}

struct BruteForceBest {
  double tokens_per_s = 0;
  double peak_memory = 0;
  std::size_t configurations = 0, fitting = 0;
  /// Step time (ns) and peak memory of every fitting configuration, for the alike groups.
  std::vector<std::pair<long long, double>> fitting_steps;
};

/// Every configuration of smallRequest() through the ordinary path (generate, derive, lower,
/// event-simulate, report), independent of the planner's enumeration and re-timing.
BruteForceBest bruteForce(const SearchRequest &request, double limit_bytes) {
  BruteForceBest best;
  for (int tp = 1; tp <= 8; ++tp)
    for (int pp = 1; pp <= 8; ++pp) {
      if (request.gpus % (tp * pp) != 0) continue;
      const int dp = request.gpus / (tp * pp);
      for (int b : request.microbatch_sizes) {
        if (request.global_batch % (dp * b) != 0) continue;
        const int microbatches = request.global_batch / (dp * b);
        for (const auto &name : request.schedules) {
          const auto *family = findScheduleFamily(name);
          const int v = family->placement == PlacementKind::Loop
                            ? (family->uses_chunks ? request.virtual_stages.front() : 1)
                            : 2;
          const ScheduleRequest schedule{name, pp, microbatches, v, 0};
          if (!checkScheduleRequest(schedule)) continue;
          // An order that numbers every rank as an earlier one does is the same configuration.
          std::vector<std::vector<RankCoords>> numberings;
          for (const RankOrder &order : Mesh::allOrders(1)) {
            const Mesh mesh{dp, tp, pp, request.hardware.gpus_per_node, order};
            std::vector<RankCoords> numbering;
            for (int rank = 0; rank < request.gpus; ++rank)
              numbering.push_back(mesh.coordsOf(rank));
            if (std::find(numberings.begin(), numberings.end(), numbering) != numberings.end())
              continue;
            numberings.push_back(numbering);
            for (Recompute recompute : request.recompute)
              for (bool sp : {false, true})
                for (bool balanced : request.balance_layers) {
                  if (sp && tp == 1) continue;
                  if (balanced && pp == 1) continue; // one pipeline rank: nothing to balance
                  for (int zero_stage : request.zero_stages) {
                    // One data-parallel rank has nothing to shard: stage 0 only.
                    if (zero_stage > 0 && dp == 1) continue;
                    Plan plan;
                    plan.request = schedule;
                    plan.mesh = {dp, tp, pp, request.hardware.gpus_per_node, order};
                    ModelSetup setup{request.model, request.hardware, {}};
                    setup.model.microbatch_size = b;
                    setup.training.recompute = recompute;
                    setup.training.sequence_parallel = sp;
                    setup.training.balance_layers = balanced;
                    setup.training.zero_stage = zero_stage;
                    setup.training.overlap_gradient_sync = request.overlap_gradient_sync;
                    plan.model = setup;
                    ModelDerivation derivation;
                    auto evaluation = evaluatePlan(plan, {}, &derivation);
                    if (!evaluation) continue;
                    ++best.configurations;
                    const ModelReport report = reportModel(setup, plan.mesh, evaluation->schedule,
                                                           derivation, evaluation->simulation);
                    double peak = 0;
                    for (const auto &memory : report.memory)
                      peak = std::max(peak, memory.total);
                    if (peak > limit_bytes) continue;
                    ++best.fitting;
                    best.fitting_steps.emplace_back(std::llround(report.step_time_s * 1e9), peak);
                    if (report.tokens_per_s > best.tokens_per_s ||
                        (report.tokens_per_s == best.tokens_per_s && peak < best.peak_memory)) {
                      best.tokens_per_s = report.tokens_per_s;
                      best.peak_memory = peak;
                    }
                  }
                }
          }
        }
      }
    }
  return best;
}

/// The ranked plans and the configurations listed as alike to them.
std::vector<SearchPlan> rankedAndAlike(const SearchResult &result) {
  std::vector<SearchPlan> every;
  for (const auto &plan : result.plans) {
    every.push_back(plan);
    every.insert(every.end(), plan.alike.begin(), plan.alike.end());
  }
  return every;
}

} // namespace

class TestPlanner : public QObject {
  Q_OBJECT

private slots:
  // The compiled re-timing performs the simulator's operations in a dependency order: every
  // figure is bitwise equal, for every family, under uneven per-stage costs and transfers.
  void compiledTimingEqualsTheEventSimulation() {
    std::mt19937 random(14);
    std::uniform_real_distribution<double> time(0.5, 3.0);
    int compared = 0;
    for (const auto &family : scheduleFamilies())
      for (int pp : {2, 4, 6})
        for (int m : {4, 8, 12})
          for (int v : {1, 2, 3}) {
            const ScheduleRequest request{family.name, pp, m, v, 0};
            if (!checkScheduleRequest(request)) continue;
            auto schedule = generateSchedule(request);
            QVERIFY(schedule.ok());
            const LoweredProgram program = lowerSchedule(*schedule);
            auto compiled = compileSchedule(*schedule, program);
            QVERIFY2(compiled.ok(), request.name.c_str());
            const int stages = schedule->placement.stageCount();
            Costs costs;
            for (int s = 0; s < stages; ++s) {
              const double w = time(random);
              costs.stage_overrides.push_back({time(random), w + time(random), w});
              costs.boundary_transfer_us.push_back(time(random) / 4);
            }
            costs.gradient_sync_us = time(random);
            auto times = resolveStageTimes(costs, schedule->placement);
            QVERIFY(times.ok());
            SimulationOptions options;
            for (int s = 0; s < stages; ++s) {
              options.stage_activation_bytes.push_back(time(random) * 1e9);
              // One layer's share, for the overlapped pairs of DualPipe and combined 1F1B.
              options.stage_activation_granule_bytes.push_back(
                  options.stage_activation_bytes.back() / (1 + s % 3));
            }
            auto simulated = simulate(*schedule, program, *times, options);
            QVERIFY(simulated.ok());
            std::vector<double> scratch, peaks;
            const CompiledTiming timing = timeCompiledSchedule(*compiled, *times, scratch);
            QCOMPARE(timing.makespan_us, simulated->makespan_us);
            QCOMPARE(timing.bubble_fraction, simulated->bubble_fraction);
            QCOMPARE(timing.bubble_ratio, simulated->bubble_ratio);
            double busiest = 0;
            for (const auto &rank : simulated->ranks)
              busiest = std::max(busiest, rank.busy_us);
            QCOMPARE(timing.busiest_rank_us, busiest);
            peakActivationBytes(*compiled, options.stage_activation_bytes,
                                options.stage_activation_granule_bytes, peaks);
            for (std::size_t r = 0; r < peaks.size(); ++r)
              QCOMPARE(peaks[r], simulated->ranks[r].peak_activation_bytes);
            ++compared;
          }
    QVERIFY(compared > 60);
  }

  // The search's best equals the best of every configuration enumerated by brute force through
  // the ordinary simulate path, at a limit that prunes part of the space; no plan it returns
  // (ranked or on the Pareto front) exceeds the limit.
  void findsTheBruteForceOptimumWithinTheMemoryLimit() {
    SearchRequest request = smallRequest();
    request.memory_limit_gib = 40;
    const double limit = request.memory_limit_gib * kGiB;
    const BruteForceBest expected = bruteForce(request, limit);
    QVERIFY(expected.fitting > 0);
    QVERIFY(expected.fitting < expected.configurations); // the limit prunes some
    auto result = runSearch(request);
    QVERIFY2(result.ok(), result.ok() ? "" : result.error().message.c_str());
    QCOMPARE(result->space, expected.configurations);
    QCOMPARE(result->evaluated, expected.fitting);
    QVERIFY(!result->plans.empty());
    QCOMPARE(result->plans.front().tokens_per_s, expected.tokens_per_s);
    QCOMPARE(result->plans.front().peak_memory, expected.peak_memory);
    for (std::size_t k = 1; k < result->plans.size(); ++k)
      QVERIFY(result->plans[k].tokens_per_s <= result->plans[k - 1].tokens_per_s);
    for (const auto *list : {&result->plans, &result->pareto})
      for (const auto &plan : *list) {
        QVERIFY(plan.peak_memory <= limit);
        for (double bytes : plan.memory_per_rank)
          QVERIFY(bytes <= limit);
      }
    // The Pareto front: sorted by memory, each step faster than the one before.
    for (std::size_t k = 1; k < result->pareto.size(); ++k) {
      QVERIFY(result->pareto[k].peak_memory >= result->pareto[k - 1].peak_memory);
      QVERIFY(result->pareto[k].step_time_s < result->pareto[k - 1].step_time_s);
    }
    QCOMPARE(result->pareto.back().tokens_per_s, expected.tokens_per_s);
    // Each ranked plan stands for every configuration as fast as it (to the nanosecond), and is
    // the one of them with the least memory: the ranked step times are distinct.
    for (std::size_t k = 0; k < result->plans.size(); ++k) {
      const SearchPlan &plan = result->plans[k];
      const long long step = std::llround(plan.step_time_s * 1e9);
      if (k > 0) QVERIFY(step > std::llround(result->plans[k - 1].step_time_s * 1e9));
      std::size_t as_fast = 0;
      double least_memory = std::numeric_limits<double>::infinity();
      for (const auto &[other_step, memory] : expected.fitting_steps)
        if (other_step == step) {
          ++as_fast;
          least_memory = std::min(least_memory, memory);
        }
      QCOMPARE(plan.alike_count + 1, as_fast);
      QCOMPARE(plan.peak_memory, least_memory);
      QCOMPARE(plan.alike.size(), std::min(plan.alike_count, kAlikeListed));
      for (const auto &other : plan.alike) {
        QCOMPARE(std::llround(other.step_time_s * 1e9), step);
        QVERIFY(other.peak_memory >= plan.peak_memory);
        QVERIFY(other.alike.empty());
      }
    }
    QVERIFY(std::any_of(result->plans.begin(), result->plans.end(),
                        [](const SearchPlan &plan) { return plan.alike_count > 0; }));
  }

  // The saved best plan, simulated the ordinary way, gives the figures the search reported.
  void bestPlanReproducesThroughThePlanFile() {
    const SearchRequest request = smallRequest();
    auto result = runSearch(request);
    QVERIFY(result.ok());
    const SearchPlan &best = result->plans.front();
    auto plan = planFromJson(planToJson(searchPlanToPlan(request, best)));
    QVERIFY(plan.ok());
    ModelDerivation derivation;
    auto evaluation = evaluatePlan(*plan, {}, &derivation);
    QVERIFY(evaluation.ok());
    const ModelReport report = reportModel(*plan->model, plan->mesh, evaluation->schedule,
                                           derivation, evaluation->simulation);
    QCOMPARE(report.step_time_s, best.step_time_s);
    QCOMPARE(report.tokens_per_s, best.tokens_per_s);
    for (std::size_t r = 0; r < report.memory.size(); ++r)
      QCOMPARE(report.memory[r].total, best.memory_per_rank[r]);
  }

  void aGpuCountWithoutAMeshNamesOnesThatWork() {
    SearchRequest request = smallRequest();
    request.gpus = 97; // prime, beyond a node and beyond 32 layers: only dp = 97, which 128
                       // sequences do not divide; 100 = dp 1 × tp 4 × pp 25 works
    request.global_batch = 128;
    auto result = runSearch(request);
    QVERIFY(!result.ok());
    const std::string &message = result.error().message;
    QVERIFY2(message.find("97 GPUs admit no mesh") != std::string::npos, message.c_str());
    QVERIFY2(message.find("96 or 100 GPUs would work") != std::string::npos, message.c_str());
  }

  void aMemoryLimitNothingFitsNamesTheSmallestFootprint() {
    SearchRequest request = smallRequest();
    request.memory_limit_gib = 1;
    auto result = runSearch(request);
    QVERIFY(!result.ok());
    const std::string &message = result.error().message;
    QVERIFY2(message.find("nothing fits in 1.0 GiB") != std::string::npos, message.c_str());
    QVERIFY2(message.find("raise --memory-limit to at least") != std::string::npos,
             message.c_str());
  }

  void cancellingKeepsWhatWasFound() {
    SearchRequest request = smallRequest();
    request.threads = 1;
    std::atomic<int> polls{0};
    SearchCallbacks callbacks;
    callbacks.cancelled = [&] { return ++polls > 200; };
    auto result = runSearch(request, callbacks);
    QVERIFY(result.ok());
    QVERIFY(result->cancelled);
    QVERIFY(result->evaluated < runSearch(smallRequest())->evaluated);
  }

  // Every ranked plan, of every ZeRO stage (ring collectives and a sharded Adam step from stage
  // 1, FSDP's gathers at 3; stage 2 shares stage 1's derived costs), has the step time and
  // memory `simulate` gives it, bitwise.
  void rankedPlansRetimeAsSimulate() {
    SearchRequest request = smallRequest();
    request.top = 1000;
    auto result = runSearch(request);
    QVERIFY(result.ok());
    std::array<int, 4> plans_of_stage{};
    for (const auto &found : rankedAndAlike(*result)) {
      Plan plan;
      plan.request = found.schedule;
      plan.mesh = found.mesh;
      ModelSetup setup{request.model, request.hardware, found.training};
      setup.model.microbatch_size = found.microbatch_size;
      plan.model = setup;
      ModelDerivation derivation;
      auto evaluation = evaluatePlan(plan, {}, &derivation);
      QVERIFY(evaluation.ok());
      QCOMPARE(found.step_time_s, evaluation->simulation.makespan_us * 1e-6);
      QCOMPARE(found.gradient_sync_s, derivation.costs.gradient_sync_us * 1e-6);
      const ModelReport report =
          reportModel(setup, plan.mesh, evaluation->schedule, derivation, evaluation->simulation);
      for (std::size_t r = 0; r < report.memory.size(); ++r)
        QCOMPARE(report.memory[r].total, found.memory_per_rank[r]);
      ++plans_of_stage.at(static_cast<std::size_t>(found.training.zero_stage));
    }
    for (int count : plans_of_stage)
      QVERIFY(count > 0);
  }

  // A mixture-of-experts model searches EP inside dp (dividing the experts) and CP inside dp
  // (splitting the sequence into 2·cp chunks); every plan found re-times and reloads as
  // `simulate` gives it, with its EP and CP in the plan file.
  void searchesExpertAndContextParallelism() {
    SearchRequest request = mixtralRequest(32, "1f1b");
    request.sequence_parallel = {true};
    request.rank_orders = {*Mesh::parseOrder("tp-pp-dp")}; // cp right after tp where cp > 1
    request.top = 400;
    request.threads = 2;
    auto result = runSearch(request);
    QVERIFY2(result.ok(), result.ok() ? "" : result.error().message.c_str());
    QVERIFY(!result->plans.empty());
    int with_ep = 0, with_cp = 0, with_etp = 0;
    for (const auto &found : result->plans) {
      const int ep = found.mesh.ep, cp = found.mesh.cp;
      // CP is a mesh dimension: dp × cp × tp × pp uses every GPU; EP folds into dp × cp, and
      // into the TP ranks too when the experts are whole (etp 1, tried only with SP).
      QCOMPARE(found.mesh.worldSize(), request.gpus);
      QVERIFY(found.mesh.dataCpSize() * (found.mesh.tp / found.mesh.expertTpSize()) % ep == 0);
      if (found.mesh.expertsFoldTp()) {
        QCOMPARE(found.mesh.etp, 1);
        QVERIFY(found.training.sequence_parallel);
        ++with_etp;
      }
      QVERIFY(request.model.experts % ep == 0);
      QVERIFY(request.model.sequence_length % (2 * cp) == 0);
      // dp replicas see distinct sequences (cp splits each): M · b · dp is the global batch.
      QCOMPARE(found.schedule.microbatches * found.microbatch_size * found.mesh.dp,
               request.global_batch);
      QCOMPARE(found.mesh.orderName(), std::string(cp > 1 ? "tp-cp-pp-dp" : "tp-pp-dp"));
      with_ep += ep > 1 ? 1 : 0;
      with_cp += cp > 1 ? 1 : 0;
      auto plan = planFromJson(planToJson(searchPlanToPlan(request, found)));
      QVERIFY(plan.ok());
      QCOMPARE(plan->mesh.ep, ep);
      QCOMPARE(plan->mesh.expertTpSize(), found.mesh.expertTpSize());
      QCOMPARE(plan->mesh.cp, cp);
      QCOMPARE(plan->mesh.order, found.mesh.order);
      ModelDerivation derivation;
      auto evaluation = evaluatePlan(*plan, {}, &derivation);
      QVERIFY(evaluation.ok());
      QCOMPARE(found.step_time_s, evaluation->simulation.makespan_us * 1e-6);
    }
    QVERIFY(with_ep > 0);
    QVERIFY(with_cp > 0);
    QVERIFY(with_etp > 0);
    // A dense model is never given an EP.
    auto dense = runSearch(smallRequest());
    QVERIFY(dense.ok());
    for (const auto &found : dense->plans)
      QCOMPARE(found.mesh.ep, 1);
  }

  // Megatron's combined 1F1B needs expert parallelism: the planner offers it only with EP > 1,
  // and the dispatcher given applies to every candidate.
  void combinedOneFOneBOnlyWithExpertParallelism() {
    SearchRequest request = mixtralRequest(16, "combined-1f1b");
    request.moe_dispatcher = "deepep";
    request.top = 200;
    request.threads = 2;
    auto result = runSearch(request);
    QVERIFY2(result.ok(), result.ok() ? "" : result.error().message.c_str());
    QVERIFY(!result->plans.empty());
    for (const auto &found : result->plans) {
      QCOMPARE(found.schedule.name, std::string("combined-1f1b"));
      QVERIFY(found.mesh.ep > 1);
      QCOMPARE(found.training.moe_dispatcher, std::string("deepep"));
    }
  }

  // The planner derives stage 2's costs as stage 1's (zeroStageTimedAs): the derivation gives
  // them field by field equal, on dense and MoE meshes with and without PP, while stage 0's
  // differ (and stage 3's without PP).
  void zeroStageTwoDerivesStageOnesCosts() {
    struct Case {
      const char *model;
      int dp, tp, pp, ep;
      ScheduleRequest schedule;
    };
    const Case cases[] = {
        {"llama3-8b", 4, 2, 1, 1, {"1f1b", 1, 8, 1, 0}},
        {"llama3-8b", 2, 2, 2, 1, {"interleaved-1f1b", 2, 8, 2, 0}},
        {"mixtral-8x7b", 8, 2, 2, 4, {"zb-h1", 2, 8, 1, 0}},
    };
    for (const auto &c : cases) {
      ModelSetup setup = presetSetup(c.model, "h100-sxm");
      setup.training.overlap_gradient_sync = true; // as the planner runs
      Mesh mesh;
      mesh.dp = c.dp;
      mesh.tp = c.tp;
      mesh.pp = c.pp;
      mesh.ep = c.ep;
      auto schedule = generateSchedule(c.schedule);
      QVERIFY(schedule.ok());
      std::array<Costs, 4> costs;
      for (int stage = 0; stage <= 3; ++stage) {
        setup.training.zero_stage = stage;
        QCOMPARE(zeroStageTimedAs(stage), stage == 2 ? 1 : stage);
        auto derivation = deriveModelCosts(setup, mesh, schedule->placement);
        QVERIFY2(derivation.ok(), derivation.ok() ? "" : derivation.error().message.c_str());
        costs.at(static_cast<std::size_t>(stage)) = derivation->costs;
      }
      QVERIFY(costs[2] == costs[1]);
      QVERIFY(!(costs[0] == costs[1]));
      // Without PP, FSDP gathers every layer in each microbatch's forward and backward.
      if (mesh.pp == 1) QVERIFY(!(costs[3] == costs[1]));
    }
  }

  // Large state on few GPUs with FSDP alone (tp 1, pp 1: torchtitan's 1-D runs): under a tight
  // limit only ZeRO-3 fits, and the planner returns stage-3 plans that re-time and keep their
  // memory as `simulate` gives them; without stage 3 nothing fits.
  void onlyZeroThreeFitsATightLimit() {
    SearchRequest request = smallRequest();
    request.tensor_parallel = {1};
    request.pipeline_parallel = {1};
    request.recompute = {Recompute::Full};
    request.memory_limit_gib = 30; // ZeRO-2's smallest footprint here is 32.1 GiB, ZeRO-3's 23.8
    request.top = 50;
    auto result = runSearch(request);
    QVERIFY2(result.ok(), result.ok() ? "" : result.error().message.c_str());
    QVERIFY(!result->plans.empty());
    for (const auto &found : result->plans) {
      QCOMPARE(found.training.zero_stage, 3);
      QCOMPARE(found.mesh.dp, request.gpus);
      QVERIFY(found.peak_memory <= request.memory_limit_gib * 1073741824.0);
      auto plan = planFromJson(planToJson(searchPlanToPlan(request, found)));
      QVERIFY(plan.ok());
      QCOMPARE(plan->model->training.zero_stage, 3);
      ModelDerivation derivation;
      auto evaluation = evaluatePlan(*plan, {}, &derivation);
      QVERIFY(evaluation.ok());
      QCOMPARE(found.step_time_s, evaluation->simulation.makespan_us * 1e-6);
      const ModelReport report = reportModel(*plan->model, plan->mesh, evaluation->schedule,
                                             derivation, evaluation->simulation);
      for (std::size_t r = 0; r < report.memory.size(); ++r)
        QCOMPARE(report.memory[r].total, found.memory_per_rank[r]);
    }
    request.zero_stages = {0, 1, 2};
    auto without_fsdp = runSearch(request);
    QVERIFY(!without_fsdp.ok());
    QVERIFY2(without_fsdp.error().message.find("nothing fits") != std::string::npos,
             without_fsdp.error().message.c_str());
  }

  // GEMM precision and the all-reduce algorithm apply to every candidate: an FP8 search's plans
  // carry FP8 and re-time as `simulate --fp8` gives them (faster than bf16's best); a GPU without
  // FP8 is refused up front; bad ZeRO stage lists are refused with the stages named.
  void passThroughOptionsAndTheirRefusals() {
    SearchRequest request = smallRequest();
    request.zero_stages = {1};
    auto bf16 = runSearch(request);
    QVERIFY(bf16.ok());
    request.gemm_precision = GemmPrecision::Fp8;
    request.collective_algorithm = CollectiveAlgorithm::Ring;
    auto fp8 = runSearch(request);
    QVERIFY2(fp8.ok(), fp8.ok() ? "" : fp8.error().message.c_str());
    QVERIFY(fp8->plans.front().tokens_per_s > bf16->plans.front().tokens_per_s);
    for (const auto &found : fp8->plans) {
      QCOMPARE(found.training.gemm_precision, GemmPrecision::Fp8);
      QCOMPARE(found.training.collective_algorithm, CollectiveAlgorithm::Ring);
      QCOMPARE(found.training.zero_stage, 1);
      auto plan = planFromJson(planToJson(searchPlanToPlan(request, found)));
      QVERIFY(plan.ok());
      auto evaluation = evaluatePlan(*plan);
      QVERIFY(evaluation.ok());
      QCOMPARE(found.step_time_s, evaluation->simulation.makespan_us * 1e-6);
    }
    SearchRequest a100 = request;
    a100.hardware = presetSetup("llama3-8b", "a100-80gb").hardware;
    auto refused = runSearch(a100);
    QVERIFY(!refused.ok());
    QVERIFY2(refused.error().message.find("has no FP8 tensor cores") != std::string::npos,
             refused.error().message.c_str());
    request = smallRequest();
    request.zero_stages = {1, 4};
    QVERIFY(!checkSearchRequest(request));
    QVERIFY(checkSearchRequest(request).error().message.find("got 4") != std::string::npos);
    request.zero_stages = {3, 3};
    QVERIFY(checkSearchRequest(request).error().message.find("listed twice") != std::string::npos);
    request.zero_stages = {};
    QVERIFY(!checkSearchRequest(request));
    request.zero_stages = {1};
    QVERIFY(checkSearchRequest(request));
    // A dispatcher holding every SM of the GPU leaves the candidates nothing to compute on.
    request.moe_dispatcher = "deepep";
    request.moe_dispatcher_sms = request.hardware.sm_count;
    QVERIFY(request.hardware.sm_count > 0);
    QVERIFY(!checkSearchRequest(request));
    QVERIFY2(checkSearchRequest(request).error().message.find("--moe-dispatcher-sms") !=
                 std::string::npos,
             checkSearchRequest(request).error().message.c_str());
  }

  // A dense model with long sequences: the planner puts CP in the mesh (world = dp × cp × tp ×
  // pp), tries all 24 rank orders on CP meshes, and every plan it ranks re-times as simulate
  // gives it.
  void searchesContextParallelForLlama3() {
    SearchRequest request;
    const ModelSetup setup = presetSetup("llama3-8b", "h100-sxm");
    request.model = setup.model;
    request.model.sequence_length = 32768;
    request.hardware = setup.hardware;
    request.gpus = 16;
    request.global_batch = 8;
    request.schedules = {"1f1b"};
    request.microbatch_sizes = {1};
    request.recompute = {Recompute::Selective};
    request.zero_stages = {1};
    request.sequence_parallel = {true};
    request.context_parallel = {1, 2, 4};
    request.top = 1000;
    request.threads = 2;
    auto result = runSearch(request);
    QVERIFY2(result.ok(), result.ok() ? "" : result.error().message.c_str());
    std::set<std::string> cp_orders;
    int with_cp = 0;
    for (const auto &found : rankedAndAlike(*result)) {
      QCOMPARE(found.mesh.worldSize(), request.gpus);
      QCOMPARE(found.mesh.ep, 1);
      QCOMPARE(found.schedule.microbatches * found.mesh.dp, request.global_batch);
      if (found.mesh.cp > 1) {
        ++with_cp;
        cp_orders.insert(found.mesh.orderName());
        auto plan = planFromJson(planToJson(searchPlanToPlan(request, found)));
        QVERIFY2(plan.ok(), plan.ok() ? "" : plan.error().message.c_str());
        QCOMPARE(plan->mesh.cp, found.mesh.cp);
        ModelDerivation derivation;
        auto evaluation = evaluatePlan(*plan, {}, &derivation);
        QVERIFY(evaluation.ok());
        QCOMPARE(found.step_time_s, evaluation->simulation.makespan_us * 1e-6);
      }
    }
    QVERIFY(with_cp > 0);
    QVERIFY2(cp_orders.size() > 6, std::to_string(cp_orders.size()).c_str());
    // With 32k tokens per sequence, the best plan splits the sequence (activations otherwise
    // crowd the memory).
    QVERIFY(result->plans.front().mesh.cp > 1 || result->plans.front().mesh.tp > 1);
  }

  // The links classified once per mesh give the derivation every mesh gives on its own, across
  // nodes, for every rank order and placement.
  void precomputedMeshLinksDeriveTheSameCosts() {
    const ModelSetup setup = presetSetup("mixtral-8x7b", "h100-sxm");
    int compared = 0;
    for (const RankOrder &order : Mesh::allOrders(2)) {
      for (const auto &[dp, cp, tp, pp, ep] :
           {std::tuple{4, 1, 2, 8, 4}, std::tuple{2, 2, 4, 4, 2}, std::tuple{4, 2, 8, 2, 8}})
        for (PlacementKind kind :
             {PlacementKind::Loop, PlacementKind::VShape, PlacementKind::Bidirectional}) {
          Mesh mesh{dp, tp, pp, 8, order};
          mesh.cp = cp;
          mesh.ep = ep;
          const Placement placement = Placement::make(kind, pp, 2, 8);
          const MeshLinks links = meshLinks(mesh);
          auto alone = deriveModelCosts(setup, mesh, placement);
          auto shared = deriveModelCosts(setup, mesh, placement, &links);
          QVERIFY2(alone.ok() && shared.ok(), alone.ok() ? "" : alone.error().message.c_str());
          QCOMPARE(shared->costs.boundary_transfer_us, alone->costs.boundary_transfer_us);
          QCOMPARE(shared->costs.gradient_sync_us, alone->costs.gradient_sync_us);
          for (std::size_t s = 0; s < alone->costs.stage_overrides.size(); ++s)
            QCOMPARE(shared->costs.stage_overrides[s].forward_us,
                     alone->costs.stage_overrides[s].forward_us);
          ++compared;
        }
    }
    QCOMPARE(compared, 216);
  }

  // The layer split is searched: on a pipeline whose last stage also runs a 128k-vocabulary head,
  // the balanced split (fewer layers beside the head) beats the even one, and the planner finds
  // it; with pp = 1 no plan is "balanced" (one rank has nothing to balance).
  void balancedLayerSplitIsSearched() {
    SearchRequest request = smallRequest();
    request.global_batch = 32;
    request.schedules = {"1f1b"};
    request.microbatch_sizes = {1};
    request.pipeline_parallel = {1, 8};
    request.top = 50;
    request.balance_layers = {false};
    auto even = runSearch(request);
    QVERIFY2(even.ok(), even.ok() ? "" : even.error().message.c_str());
    request.balance_layers = {false, true};
    auto both = runSearch(request);
    QVERIFY2(both.ok(), both.ok() ? "" : both.error().message.c_str());
    QVERIFY(both->space > even->space);
    double best_even_pp8 = 0, best_balanced_pp8 = 0;
    for (const auto *result : {&*even, &*both})
      for (const auto &plan : rankedAndAlike(*result)) {
        if (plan.mesh.pp == 1) QVERIFY(!plan.training.balance_layers);
        if (plan.mesh.pp != 8) continue;
        double &best = plan.training.balance_layers ? best_balanced_pp8 : best_even_pp8;
        best = std::max(best, plan.tokens_per_s);
      }
    QVERIFY(best_even_pp8 > 0);
    QVERIFY2(best_balanced_pp8 > 1.05 * best_even_pp8,
             (std::to_string(best_balanced_pp8) + " vs " + std::to_string(best_even_pp8)).c_str());
    // Each balanced plan returned names its split as a Megatron layout string, which run as an
    // explicit layout gives the plan's own step time; even plans name none.
    int named = 0;
    for (const auto &plan : rankedAndAlike(*both)) {
      if (!plan.training.balance_layers) {
        QVERIFY(plan.megatron_layout.empty());
        continue;
      }
      auto layout = parseMegatronLayout(plan.megatron_layout);
      QVERIFY2(layout.ok(), plan.megatron_layout.c_str());
      Plan explicit_plan = searchPlanToPlan(request, plan);
      explicit_plan.model->training.balance_layers = false;
      explicit_plan.model->training.layout = *layout;
      auto evaluation = evaluatePlan(explicit_plan);
      QVERIFY2(evaluation.ok(), evaluation.ok() ? "" : evaluation.error().message.c_str());
      QCOMPARE(evaluation->simulation.makespan_us * 1e-6, plan.step_time_s);
      ++named;
    }
    QVERIFY(named > 0);
  }

  // The planner re-labels a rank order's results for a later order with equal MeshLinks rather
  // than deriving them again: on every placement of the registry, two orders with equal links
  // derive equal costs and rank memory (tied embeddings too, whose gradient pair is the first
  // and last rank), and some orders across nodes do differ.
  void rankOrdersWithEqualLinksDeriveEqualCosts() {
    int equal_pairs = 0, differing_pairs = 0;
    for (const char *model : {"mixtral-8x7b", "gpt3-175b"}) {
      const ModelSetup setup = presetSetup(model, "h100-sxm");
      for (const auto &[dp, cp, tp, pp, ep] :
           {std::tuple{4, 1, 2, 4, 4}, std::tuple{2, 2, 2, 4, 2}, std::tuple{2, 1, 4, 8, 2}})
        for (PlacementKind kind :
             {PlacementKind::Loop, PlacementKind::VShape, PlacementKind::Bidirectional}) {
          const Placement placement = Placement::make(kind, pp, 2, 8);
          std::vector<std::pair<MeshLinks, ModelDerivation>> derived;
          for (const RankOrder &order : Mesh::allOrders(2)) {
            Mesh mesh{dp, tp, pp, 4, order};
            mesh.cp = cp;
            mesh.ep = setup.model.experts > 0 ? ep : 1;
            const MeshLinks links = meshLinks(mesh);
            auto derivation = deriveModelCosts(setup, mesh, placement, &links);
            QVERIFY2(derivation.ok(), derivation.ok() ? "" : derivation.error().message.c_str());
            for (const auto &[other_links, other] : derived) {
              if (!(other_links == links)) {
                ++differing_pairs;
                continue;
              }
              ++equal_pairs;
              QVERIFY(other.costs == derivation->costs);
              QCOMPARE(other.rank_parameters, derivation->rank_parameters);
              QCOMPARE(other.stage_activation_bytes, derivation->stage_activation_bytes);
            }
            derived.emplace_back(links, std::move(*derivation));
          }
        }
    }
    QVERIFY(equal_pairs > 100);
    QVERIFY(differing_pairs > 100);
  }

  // ------------------------------------------------------------------------------------------
  // Uneven stages

  // Megatron's own example (pipeline_parallel_layer_layout.py, parse_str_to_list) and its
  // repeat forms.
  void megatronLayoutsParse() {
    auto layout = parseMegatronLayout("Ettt|(tt|)*29,m|L");
    QVERIFY(layout.ok());
    QCOMPARE(layout->size(), std::size_t{32});
    QCOMPARE((*layout)[0], (StageLayers{3, 0, true, false}));
    QCOMPARE((*layout)[1], (StageLayers{2, 0, false, false}));
    QCOMPARE((*layout)[29], (StageLayers{2, 0, false, false}));
    QCOMPARE((*layout)[30], (StageLayers{0, 1, false, false}));
    QCOMPARE((*layout)[31], (StageLayers{0, 0, false, true}));
    auto repeated = parseMegatronLayout("Et*3(|t*2)*2,tL");
    QVERIFY(repeated.ok()); // Megatron's "(|ab)*2,cd -> |ab|abcd"
    QCOMPARE(layoutLayerCounts(*repeated), (std::vector<int>{3, 2, 3}));
    auto empty_stage = parseMegatronLayout("E||t*4|tL");
    QVERIFY(empty_stage.ok());
    QCOMPARE(layoutLayerCounts(*empty_stage), (std::vector<int>{0, 0, 4, 1}));
    QVERIFY(checkLayerLayout(*empty_stage, 5, 0, 4).ok());
    // The formatted form parses back to the same layout.
    for (const char *text : {"Ettt|(tt|)*29,m|L", "E||t*4|tL", "Et*7|(t*9|)*2t*7L", "EtL"}) {
      auto parsed = parseMegatronLayout(text);
      QVERIFY(parsed.ok());
      auto again = parseMegatronLayout(formatMegatronLayout(*parsed));
      QVERIFY2(again.ok() && *again == *parsed, formatMegatronLayout(*parsed).c_str());
    }
  }

  void megatronLayoutErrorsNameTheColumn_data() {
    QTest::addColumn<QString>("layout");
    QTest::addColumn<QString>("expected");
    QTest::newRow("unknown character") << "Ettx|tL"
                                       << "unexpected 'x' at column 4";
    QTest::newRow("missing count") << "E(tt|)*|tL"
                                   << "'*' at column 7 needs a repeat count";
    QTest::newRow("group without count") << "E(tt|)tL"
                                         << "closed at column 6 needs a repeat";
    QTest::newRow("unclosed group") << "E(tt|*2"
                                    << "opened at column 2 is not closed";
    QTest::newRow("nested group") << "E((t|)*2)*2L"
                                  << "'(' at column 3 opens a group inside";
    QTest::newRow("stray star") << "*3EtL"
                                << "'*' at column 1 follows nothing";
    QTest::newRow("second embedding") << "E*2tL"
                                      << "a second embedding E at column 1";
    QTest::newRow("layer after loss") << "EtL|t"
                                      << "'t' at column 5 comes after the loss";
    QTest::newRow("no embedding") << "tt|tL"
                                  << "before the embedding";
    QTest::newRow("no loss") << "Ett|tt"
                             << "no loss L";
    QTest::newRow("huge repeat") << "E(t|)*99999999999L"
                                 << "too large";
  }
  void megatronLayoutErrorsNameTheColumn() {
    QFETCH(QString, layout);
    QFETCH(QString, expected);
    auto parsed = parseMegatronLayout(layout.toStdString());
    QVERIFY(!parsed.ok());
    QVERIFY2(parsed.error().message.find(expected.toStdString()) != std::string::npos,
             parsed.error().message.c_str());
  }

  void layoutCountsAreCheckedAgainstTheModel() {
    auto layout = parseMegatronLayout("Et*7|t*8|t*8|t*8L");
    QVERIFY(layout.ok());
    auto status = checkLayerLayout(*layout, 32, 0, 4);
    QVERIFY(!status.ok());
    QVERIFY2(status.error().message.find("31 transformer layers but the model has 32") !=
                 std::string::npos,
             status.error().message.c_str());
    status = checkLayerLayout(*layout, 31, 0, 8);
    QVERIFY(!status.ok());
    QVERIFY(status.error().message.find("P × V = 4") != std::string::npos);
    status = checkLayerLayout(*layout, 31, 1, 4);
    QVERIFY(!status.ok());
    QVERIFY(status.error().message.find("MTP") != std::string::npos);
  }

  // Another stage count spreads a layout's units as Megatron-LM spreads a model whose embedding
  // and loss count as a layer each: the ModelZoo's Qwen3-235B-A22B layouts at PP 32 × VPP 3 and
  // PP 8 × VPP 4 are the same 96 units over 96 and 32 stages.
  void aLayoutSpreadsOverAnotherStageCount() {
    auto one_per_stage = parseMegatronLayout("E|(t|)*94L");
    QVERIFY(one_per_stage.ok());
    auto over_32 = resplitLayout(*one_per_stage, 32);
    QVERIFY(over_32.ok());
    QCOMPARE(formatMegatronLayout(*over_32), std::string("Ett|(ttt|)*30ttL"));
    QVERIFY(checkLayerLayout(*over_32, 94, 0, 32).ok());
    // And back: the same units one a stage.
    auto back = resplitLayout(*over_32, 96);
    QVERIFY(back.ok());
    QVERIFY(*back == *one_per_stage);
    // 96 units over 64 stages: runs of 2 then 1, the longer first; the loss alone at the end.
    auto over_64 = resplitLayout(*one_per_stage, 64);
    QVERIFY(over_64.ok());
    QCOMPARE(over_64->size(), std::size_t{64});
    QVERIFY(over_64->front().embedding && over_64->front().layers == 1);
    QCOMPARE((*over_64)[31].layers, 2);
    QCOMPARE((*over_64)[32].layers, 1);
    QVERIFY(over_64->back().loss && over_64->back().layers == 0);
    QVERIFY(checkLayerLayout(*over_64, 94, 0, 64).ok());
    // MTP layers keep their place after every transformer layer.
    auto with_mtp = parseMegatronLayout("Et*3|(tt|)*29,m|L");
    QVERIFY(with_mtp.ok());
    auto mtp_over_16 = resplitLayout(*with_mtp, 16);
    QVERIFY(mtp_over_16.ok());
    QVERIFY(checkLayerLayout(*mtp_over_16, 61, 1, 16).ok());
    // The same stage count, or no layout, comes back as it is.
    QVERIFY(*resplitLayout(*with_mtp, 32) == *with_mtp);
    QVERIFY(resplitLayout({}, 8)->empty());
    // Fewer units than stages: an error naming the most stages they fill, and no layout (the
    // even split) for the explorer.
    auto small = parseMegatronLayout("Et|tL");
    QVERIFY(small.ok());
    auto refused = resplitLayout(*small, 5);
    QVERIFY(!refused.ok());
    QVERIFY2(refused.error().message.find("use at most 4 stages") != std::string::npos,
             refused.error().message.c_str());
    QVERIFY(layoutForStages(*small, 5).empty());
    QCOMPARE(formatMegatronLayout(layoutForStages(*small, 3)), std::string("Et|t|L"));
  }

  // The stage count a request splits the model into, known before its schedule is generated
  // (the explorer spreads a layout over it): every family's, against its generated placement.
  void modelStagesOfARequestMatchItsPlacement() {
    std::size_t checked = 0;
    for (const ScheduleFamily &family : scheduleFamilies()) {
      ScheduleRequest request{family.name, 4, 16, family.uses_chunks ? 3 : 1, 0};
      if (family.placement != PlacementKind::Loop) request.chunks = 2;
      if (!checkScheduleRequest(request)) continue;
      auto schedule = generateSchedule(request);
      QVERIFY2(schedule.ok(), family.name.c_str());
      QCOMPARE(modelStageCount(request), schedule->placement.modelStageCount());
      ++checked;
    }
    // Every family but those that refuse P = 4, M = 16 (none today) was compared.
    QCOMPARE(checked, scheduleFamilies().size());
    QCOMPARE(modelStageCount({"dualpipe", 4, 16, 2, 0}), 4);
    QCOMPARE(modelStageCount({"zb-v", 4, 16, 2, 0}), 8);
  }

  // torchtitan's _generate_llm_fqn_per_model_part: its docstring example (2 stages, 3 layers,
  // weights 2 and 2) and the defaults (1 and 1) on Llama 3 8B's 32 layers over 4 stages.
  void torchtitanSplitsAsTorchtitanDoes() {
    auto docstring = torchtitanLayout(3, 2, 2, 2);
    QVERIFY(docstring.ok());
    QCOMPARE(layoutLayerCounts(*docstring), (std::vector<int>{2, 1}));
    auto defaults = torchtitanLayout(32, 4, 1, 1);
    QVERIFY(defaults.ok());
    QCOMPARE(layoutLayerCounts(*defaults), (std::vector<int>{8, 9, 8, 7}));
    QVERIFY(defaults->front().embedding && defaults->back().loss);
    auto refused = torchtitanLayout(3, 2, 5, 1);
    QVERIFY(!refused.ok());
    QVERIFY(refused.error().message.find("exceed the layers per stage") != std::string::npos);
  }

  // Op times and memory follow each stage's layers, embedding and head.
  void costsAndMemoryFollowTheLayout() {
    ModelSetup setup = presetSetup("llama3-8b", "h100-sxm");
    const Mesh mesh{1, 1, 4, 8};
    const Placement placement = Placement::make(PlacementKind::Loop, 4, 1, 8);
    auto even = deriveModelCosts(setup, mesh, placement);
    QVERIFY(even.ok());
    setup.training.layout = layoutFromLayerCounts({4, 12, 12, 4});
    auto uneven = deriveModelCosts(setup, mesh, placement);
    QVERIFY(uneven.ok());
    QCOMPARE(uneven->stage_layers, (std::vector<int>{4, 12, 12, 4}));
    // A middle stage's forward is only layers: 12 layers take 1.5 × the even split's 8.
    const auto forward = [](const ModelDerivation &d, int s) {
      return d.costs.stage_overrides[static_cast<std::size_t>(s)].forward_us;
    };
    QVERIFY(std::abs(forward(*uneven, 1) / forward(*even, 1) - 1.5) < 1e-9);
    QVERIFY(forward(*uneven, 0) < forward(*even, 0));
    QVERIFY(uneven->rank_parameters[1] > even->rank_parameters[1]);
    QVERIFY(uneven->stage_activation_bytes[0] < even->stage_activation_bytes[0]);
    // Moving the loss onto an otherwise empty last stage moves the head's parameters there.
    auto with_head_alone = parseMegatronLayout("Et*11|t*11|t*10|L");
    QVERIFY(with_head_alone.ok());
    setup.training.layout = *with_head_alone;
    auto head_alone = deriveModelCosts(setup, mesh, placement);
    QVERIFY(head_alone.ok());
    const double head = 4096.0 * 128256 + 4096; // the output matrix and the final RMSNorm
    QCOMPARE(head_alone->rank_parameters[3], head);
    QCOMPARE(head_alone->stage_layers[3], 0);
    // A layout for another number of stages is refused with what would work.
    const Placement eight = Placement::make(PlacementKind::Loop, 8, 1, 8);
    Mesh mesh8 = mesh;
    mesh8.pp = 8;
    auto refused = deriveModelCosts(setup, mesh8, eight);
    QVERIFY(!refused.ok());
    QVERIFY(refused.error().message.find("P × V = 4") != std::string::npos);
  }

  // Plan files: a layout is written as version 2 and read back; a version 1 file loads as before.
  void planFilesCarryTheLayout() {
    Plan plan;
    plan.request = {"1f1b", 4, 8, 1, 0};
    plan.mesh.pp = 4;
    ModelSetup setup = presetSetup("llama3-8b", "h100-sxm");
    plan.model = setup;
    {
      const auto without = planToJson(plan);
      QCOMPARE(without["version"].get<int>(), 1);
      QVERIFY(!without["training"].contains("layout"));
      plan.model->training.layout = layoutFromLayerCounts({7, 9, 9, 7});
      const auto with = planToJson(plan);
      QCOMPARE(with["version"].get<int>(), 2);
      QCOMPARE(with["training"]["layout"].get<std::string>(), std::string("Et*7|(t*9|)*2t*7L"));
      auto read = planFromJson(with);
      QVERIFY(read.ok());
      QCOMPARE(read->model->training.layout, plan.model->training.layout);
      auto old = planFromJson(without);
      QVERIFY(old.ok());
      QVERIFY(old->model->training.layout.empty());
      auto bad = with;
      bad["training"]["layout"] = "Et*7|(t*9|)*2t*7Lx";
      auto refused = planFromJson(bad);
      QVERIFY(!refused.ok());
      QVERIFY2(refused.error().message.find("/training/layout: layout: unexpected 'x' at "
                                            "column 18") != std::string::npos,
               refused.error().message.c_str());
    }
  }
};

QTEST_APPLESS_MAIN(TestPlanner)
#include "test_planner.moc"
