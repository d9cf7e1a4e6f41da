// `pipescope search` (the planner) and `pipescope bench --search` (its speed).
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <iostream>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "engine/cli/arguments.h"
#include "engine/cli/commands.h"
#include "engine/model/moe.h"
#include "engine/model/speed_of_light.h"
#include "engine/model/validated_accuracy.h"
#include "engine/output_file.h"
#include "engine/plan_file.h"
#include "engine/plan_options.h"
#include "engine/planner/search.h"

namespace pipescope::cli {

using nlohmann::json;

namespace {

constexpr const char *kSearchHelp =
    R"(usage: pipescope search --model M --hardware H --gpus N [options]

The planner: enumerates every mesh dp × cp × tp × pp that uses the N GPUs (tp within a node and
dividing the heads, KV heads and FFN; pp at most the layers; cp splitting each sequence into
2·cp chunks; for a mixture-of-experts model the expert-parallel size ep folded into dp × cp, as
Megatron-Core folds it), × rank order × schedule × V × microbatch size and M × recomputation ×
ZeRO stage × sequence parallelism × layer split (even or balanced); prunes by memory before
simulating; simulates each survivor exactly (the event simulation, compiled once per schedule
structure and re-timed per cost set) and ranks by tokens/s. Prints how far the model was from
published runs of the same GPU type, precision and kind of model (docs/validation.md), the top K
distinct step times with bubble and memory per rank (each row the least memory of the
configurations as fast, which it counts and summarizes), the Megatron layout of each balanced
split, why the runners-up lose (and which are closer to #1 than that error), #1's speed of light
(its step with every kernel at the GPU's peak and every link at its line rate: the most faster
hardware could gain on it), and the Pareto front of step time against peak memory. Progress goes
to stderr on a terminal; Ctrl-C stops and keeps what was found.

  --model NAME|FILE        model preset or JSON file (see 'pipescope presets')
  --hardware NAME|FILE     hardware preset or JSON file
  --gpus N                 GPUs to use, all of them
  --global-batch B         sequences per step (default N, one per GPU); dp × M × b = B
  --sequence S             sequence length (default the model's)
  --memory-limit GIB       per GPU (default the hardware's memory)
  --schedules LIST         families to try (default every family in 'pipescope schedules')
  --microbatch-sizes LIST  b to try (default 1,2,4,8)
  --virtual-stages LIST    V to try where V is free (default 2,3,4)
  --tp LIST                tensor-parallel sizes (default every size within a node dividing the
                           heads, KV heads and FFN)
  --pp LIST                pipeline-parallel sizes (default every size up to the layers); e.g.
                           --tp 1 --pp 1 for FSDP alone
  --ep LIST                expert-parallel sizes, MoE models only (default every size dividing
                           dp × cp and the experts)
  --etp LIST               expert tensor-parallel sizes below tp to try beside tp itself, MoE
                           models on tp > 1 with sequence parallelism (default 1: whole experts,
                           EP over tp × dp × cp)
  --moe-dispatcher D       alltoall (default), deepep or hybridep for every candidate
  --moe-dispatcher-sms N   SMs the deepep or hybridep kernels hold beside an overlapped pair
                           (default 20)
  --moe-layer-host-us X    host time per MoE layer and microbatch the GPU waits out (default
                           3500; 0 for MoE layers captured in CUDA graphs)
  --tp-comm-overlap        TP collectives overlapped with their GEMMs on every candidate with
                           sequence parallelism (Megatron's --tp-comm-overlap)
  --tp-backward-overlap    each column-parallel layer's backward TP collectives beside its own
                           GEMMs on every candidate with TP (Megatron-LM since September 2021)
  --fp32-gradients         gradients accumulated and reduced in fp32 on every candidate
  --cp LIST                context-parallel sizes (default 1,2,4,8,16 where they divide the
                           GPUs left by tp × pp and the sequence splits into 2·cp chunks)
  --recompute LIST         none,selective,full (default all three)
  --recompute-modules LIST Megatron's recompute modules on every candidate that recomputes none
                           or selectively: layernorm,mla_up_proj,mlp,moe_act
  --zero-stage LIST        ZeRO stages 0 (none), 1 (optimizer state), 2 (+ gradients), 3 (+
                           parameters: FSDP as torchtitan runs it); default 0,1,2,3. Stages above
                           0 only on meshes with dp × cp > 1 (one rank has nothing to shard)
  --zero1                  same as --zero-stage 1
  --layer-split LIST       even,balanced (default both, balanced only with pp > 1): layers split
                           evenly over the pipeline, or the split that minimizes the slowest
                           stage with the embedding and the head counted (balance_layers)
  --rank-orders LIST       e.g. tp-cp-pp-dp,tp-cp-dp-pp (default all: the six of dp, tp and pp
                           without CP, all 24 with it; a three-name order puts cp after tp);
                           orders that differ only where a dimension of size 1 sits number
                           the ranks alike and are tried once
  --gpus-per-node G        (default the hardware's)
  --gemm-precision P       bf16 or fp8 for every candidate (not searched): linear-layer GEMMs as
                           Transformer Engine's FP8 runs them; fp8 needs an FP8 GPU
  --fp8                    same as --gemm-precision fp8
  --fp8-params             with --fp8, the layers' weights held as FP8 parameters on every
                           candidate (Megatron's --fp8-param-gather)
  --collective-algorithm A all-reduce algorithm for every candidate: auto (NCCL's cheaper per
                           message, default), ring or tree
  --top K                  plans to print (default 10)
  --threads T              workers (default every core)
  --json                   one JSON object: space, evaluated, seconds, plans, pareto
  --csv FILE               the ranked plans as CSV
  --save-plan FILE         the best plan as a plan file (pipescope simulate --plan FILE)

Searched: DP, CP, TP, PP, EP (inside DP × CP, or TP × DP × CP with ETP below TP), ETP, rank order, schedule, V, microbatch size and M,
recomputation (none/selective/full), ZeRO stage 0-3 (FSDP at 3, kept gathered across microbatches
under PP as torchtitan does), sequence parallelism and the layer split (even or balanced). The DP
gradient sync is overlapped with the backward. Not searched: GEMM precision and collective
algorithm (given for every candidate), torchtitan's selective-op recomputation, the interleaved
microbatch group, layouts other than the even and the balanced split, activation offloading, MoE
load imbalance (taken as balanced).
)";

std::atomic<bool> interrupted{false};

extern "C" void onInterrupt(int /*signal*/) {
  interrupted.store(true);
}

constexpr double kGiB = 1073741824.0;

json planJson(const SearchPlan &plan, const SearchPlan *best,
              const ValidatedAccuracy *accuracy = nullptr) {
  json out = {{"mesh",
               {{"dp", plan.mesh.dp},
                {"tp", plan.mesh.tp},
                {"pp", plan.mesh.pp},
                {"ep", plan.mesh.ep},
                {"etp", plan.mesh.expertTpSize()},
                {"cp", plan.mesh.cp},
                {"gpus_per_node", plan.mesh.gpus_per_node}}},
              {"rank_order", plan.mesh.orderName()},
              {"schedule", plan.schedule.name},
              {"virtual_stages", plan.schedule.chunks},
              {"microbatches", plan.schedule.microbatches},
              {"microbatch_size", plan.microbatch_size},
              {"recompute", recomputeName(plan.training.recompute)},
              {"recompute_modules", plan.training.recompute == Recompute::None ||
                                            plan.training.recompute == Recompute::Selective
                                        ? plan.training.recompute_modules
                                        : std::vector<std::string>{}},
              {"zero_stage", plan.training.zero_stage},
              {"gemm_precision", gemmPrecisionName(plan.training.gemm_precision)},
              {"collective_algorithm", collectiveAlgorithmName(plan.training.collective_algorithm)},
              {"sequence_parallel", plan.training.sequence_parallel},
              {"balance_layers", plan.training.balance_layers},
              {"megatron_layout", plan.megatron_layout},
              {"moe_dispatcher", plan.training.moe_dispatcher},
              {"tp_comm_overlap", plan.training.tp_comm_overlap},
              {"tp_backward_overlap", plan.training.tp_backward_overlap},
              {"step_time_s", plan.step_time_s},
              {"tokens_per_s", plan.tokens_per_s},
              {"mfu", plan.mfu},
              {"bubble_fraction", plan.bubble_fraction},
              {"memory_per_rank_bytes", plan.memory_per_rank},
              {"peak_memory_bytes", plan.peak_memory},
              {"capacity_bytes", plan.capacity}};
  if (!plan.alike.empty() || plan.alike_count > 0) {
    out["alike_count"] = plan.alike_count;
    json alike = json::array();
    for (const auto &other : plan.alike)
      alike.push_back(planJson(other, nullptr));
    out["alike"] = std::move(alike);
  }
  if (best) out["why_slower"] = whySlower(plan, *best);
  if (best && accuracy)
    out["within_validated_error"] =
        withinValidatedError(plan.step_time_s, best->step_time_s, *accuracy);
  return out;
}

/// The table's ZeRO column: "-" for none, "z1" to "z3".
std::string zeroText(int zero_stage) {
  return zero_stage > 0 ? "z" + std::to_string(zero_stage) : "-";
}

std::string planLine(const SearchPlan &plan) {
  std::string schedule = plan.schedule.name;
  if (plan.schedule.chunks > 1) schedule += " V=" + std::to_string(plan.schedule.chunks);
  char line[320];
  std::snprintf(
      line, sizeof line,
      "%12.0f %9.1f %5.1f %6.1f %6.1f/%-5.0f dp%-4d tp%-2d pp%-3d %-11s %-22s M=%-5d b=%-2d "
      "%-9s %-4s %s",
      plan.tokens_per_s, plan.step_time_s * 1e3, plan.mfu * 100, plan.bubble_fraction * 100,
      plan.peak_memory / kGiB, plan.capacity / kGiB, plan.mesh.dp, plan.mesh.tp, plan.mesh.pp,
      plan.mesh.orderName().c_str(), schedule.c_str(), plan.schedule.microbatches,
      plan.microbatch_size, std::string(recomputeName(plan.training.recompute)).c_str(),
      zeroText(plan.training.zero_stage).c_str(), plan.training.sequence_parallel ? "sp" : "-");
  std::string text = line;
  if (plan.mesh.ep > 1) text += " ep" + std::to_string(plan.mesh.ep);
  if (plan.mesh.expertsFoldTp()) text += " etp" + std::to_string(plan.mesh.etp);
  if (plan.mesh.cp > 1) text += " cp" + std::to_string(plan.mesh.cp);
  if (plan.training.balance_layers) text += " balanced";
  return text;
}

constexpr const char *kTableHeader =
    "    tokens/s   step ms  MFU% bubble%  peak/cap GiB  mesh              order       schedule  "
    "               M       b    recompute ZeRO SP\n";

Result<SearchRequest> requestFromArguments(const Arguments &a) {
  SearchRequest request;
  if (!a.has("model") || !a.has("hardware") || !a.has("gpus"))
    return makeError("search needs --model, --hardware and --gpus (see 'pipescope search --help')");
  auto model = loadModelSpec(*a.text("model"));
  if (!model) return model.error();
  auto hardware = loadHardwareSpec(*a.text("hardware"));
  if (!hardware) return hardware.error();
  request.model = std::move(*model);
  request.hardware = std::move(*hardware);
  struct IntOption {
    const char *name;
    int *target;
    int min, max;
  } ints[] = {{"gpus", &request.gpus, 1, kMaxWorldSize},
              {"global-batch", &request.global_batch, 1, 1 << 30},
              {"sequence", &request.model.sequence_length, 1, 1 << 24},
              {"gpus-per-node", &request.hardware.gpus_per_node, 1, 1 << 16},
              {"top", &request.top, 1, 100000},
              {"threads", &request.threads, 1, 1024}};
  for (const auto &o : ints) {
    auto v = a.integer(o.name, o.min, o.max);
    if (!v) return v.error();
    if (*v) *o.target = **v;
  }
  auto limit = a.number("memory-limit", 1e-6, 1e9);
  if (!limit) return limit.error();
  if (*limit) request.memory_limit_gib = **limit;
  if (auto list = a.text("schedules")) request.schedules = splitList(*list);
  auto sizes = a.integerList("microbatch-sizes", 1, 1 << 20);
  if (!sizes) return sizes.error();
  if (*sizes) request.microbatch_sizes = **sizes;
  auto chunks = a.integerList("virtual-stages", 1, kMaxChunks);
  if (!chunks) return chunks.error();
  if (*chunks) request.virtual_stages = **chunks;
  auto tensor_sizes = a.integerList("tp", 1, kMaxWorldSize);
  if (!tensor_sizes) return tensor_sizes.error();
  if (*tensor_sizes) request.tensor_parallel = **tensor_sizes;
  auto pipeline_sizes = a.integerList("pp", 1, kMaxWorldSize);
  if (!pipeline_sizes) return pipeline_sizes.error();
  if (*pipeline_sizes) request.pipeline_parallel = **pipeline_sizes;
  auto expert_sizes = a.integerList("ep", 1, kMaxWorldSize);
  if (!expert_sizes) return expert_sizes.error();
  if (*expert_sizes) request.expert_parallel = **expert_sizes;
  request.tp_comm_overlap = a.has("tp-comm-overlap");
  request.tp_backward_overlap = a.has("tp-backward-overlap");
  request.fp32_gradients = a.has("fp32-gradients");
  auto expert_tensor_sizes = a.integerList("etp", 1, kMaxWorldSize);
  if (!expert_tensor_sizes) return expert_tensor_sizes.error();
  if (*expert_tensor_sizes) request.expert_tensor_parallel = **expert_tensor_sizes;
  if (auto dispatcher = a.text("moe-dispatcher")) {
    if (!isMoeDispatcher(*dispatcher))
      return makeError("--moe-dispatcher '" + *dispatcher +
                       "' is not known; use alltoall, deepep or hybridep");
    request.moe_dispatcher = *dispatcher;
  }
  auto dispatcher_sms = a.integer("moe-dispatcher-sms", 1, 1 << 16);
  if (!dispatcher_sms) return dispatcher_sms.error();
  if (*dispatcher_sms) request.moe_dispatcher_sms = **dispatcher_sms;
  auto host_us = a.number("moe-layer-host-us", 0, 1e7);
  if (!host_us) return host_us.error();
  if (*host_us) request.moe_layer_host_us = **host_us;
  auto context_sizes = a.integerList("cp", 1, kMaxWorldSize);
  if (!context_sizes) return context_sizes.error();
  if (*context_sizes) request.context_parallel = **context_sizes;
  if (auto list = a.text("recompute")) {
    request.recompute.clear();
    for (const auto &name : splitList(*list)) {
      auto parsed = parseRecompute(name);
      if (!parsed) return makeError("--recompute: " + parsed.error().message);
      request.recompute.push_back(*parsed);
    }
  }
  if (auto list = a.text("recompute-modules")) {
    auto modules = parseRecomputeModules(*list);
    if (!modules) return makeError("--recompute-modules: " + modules.error().message);
    request.recompute_modules = std::move(*modules);
  }
  if (auto list = a.text("rank-orders"))
    for (const auto &name : splitList(*list)) {
      auto parsed = Mesh::parseOrder(name);
      if (!parsed) return makeError("--rank-orders: " + parsed.error().message);
      request.rank_orders.push_back(*parsed);
    }
  auto zero_stages = a.integerList("zero-stage", 0, 3);
  if (!zero_stages) return zero_stages.error();
  if (a.has("zero1") && *zero_stages && **zero_stages != std::vector<int>{1})
    return makeError("--zero1 is --zero-stage 1; give one of them");
  if (a.has("zero1")) request.zero_stages = {1};
  if (*zero_stages) request.zero_stages = **zero_stages;
  if (auto list = a.text("layer-split")) {
    request.balance_layers.clear();
    for (const auto &name : splitList(*list)) {
      if (name != "even" && name != "balanced")
        return makeError("--layer-split: '" + name +
                         "' is not a split; use even, balanced or both");
      const bool balanced = name == "balanced";
      if (std::find(request.balance_layers.begin(), request.balance_layers.end(), balanced) !=
          request.balance_layers.end())
        return makeError("--layer-split: " + name + " is listed twice; give each split once");
      request.balance_layers.push_back(balanced);
    }
  }
  TrainingSetup given;
  if (auto status = applyPrecisionAndCollectiveOptions(a, given); !status) return status.error();
  request.gemm_precision = given.gemm_precision;
  request.fp8_params = given.fp8_params;
  request.collective_algorithm = given.collective_algorithm;
  for (const char *flag : {"csv", "save-plan"})
    if (auto path = a.text(flag); path && isStandardOutput(*path))
      return makeError(std::string("the plans print on standard output; give --") + flag +
                       " a file name");
  return request;
}

/// Draws "searching: 40 % (1200/3000 structures), 51234 simulated" on stderr when it is a
/// terminal.
void drawProgress(const SearchProgress &progress) {
  static auto last = std::chrono::steady_clock::time_point{};
  const auto now = std::chrono::steady_clock::now();
  if (now - last < std::chrono::milliseconds(100)) return;
  last = now;
  const double share = progress.structures_total > 0
                           ? 100.0 * static_cast<double>(progress.structures_done) /
                                 static_cast<double>(progress.structures_total)
                           : 100.0;
  std::fprintf(stderr, "\rsearching: %5.1f %% (%zu/%zu schedule structures), %zu simulated   ",
               share, progress.structures_done, progress.structures_total, progress.evaluated);
  std::fflush(stderr);
}

} // namespace

int runSearch(const std::vector<std::string> &args) {
  if (std::find(args.begin(), args.end(), "--help") != args.end() ||
      std::find(args.begin(), args.end(), "-h") != args.end()) {
    std::cout << kSearchHelp;
    return 0;
  }
  auto parsed = Arguments::parse(args,
                                 {"model",
                                  "hardware",
                                  "gpus",
                                  "global-batch",
                                  "sequence",
                                  "memory-limit",
                                  "schedules",
                                  "microbatch-sizes",
                                  "virtual-stages",
                                  "tp",
                                  "pp",
                                  "ep",
                                  "etp",
                                  "moe-dispatcher",
                                  "moe-dispatcher-sms",
                                  "moe-layer-host-us",
                                  "cp",
                                  "recompute",
                                  "recompute-modules",
                                  "rank-orders",
                                  "zero-stage",
                                  "layer-split",
                                  "gemm-precision",
                                  "collective-algorithm",
                                  "gpus-per-node",
                                  "top",
                                  "threads",
                                  "csv",
                                  "save-plan"},
                                 {"json", "zero1", "fp8", "fp8-params", "tp-comm-overlap",
                                  "tp-backward-overlap", "fp32-gradients"},
                                 "search");
  if (!parsed) return fail(parsed.error().message);
  const Arguments &a = *parsed;
  if (!a.positional().empty())
    return fail("unexpected argument '" + a.positional().front() + "' for 'search'");
  auto request = requestFromArguments(a);
  if (!request) return fail(request.error().message);
  if (auto status = checkSearchRequest(*request); !status) return fail(status.error().message);

  // Outputs are opened first, so a bad path is reported before minutes of searching.
  OutputTransaction outputs;
  for (const char *flag : {"csv", "save-plan"})
    if (auto path = a.text(flag))
      if (auto added = outputs.add(*path); !added) return fail(added.error().message);

  interrupted.store(false);
  auto *previous = std::signal(SIGINT, onInterrupt);
  SearchCallbacks callbacks;
  callbacks.cancelled = [] { return interrupted.load(); };
  const bool terminal = isatty(STDERR_FILENO) != 0;
  if (terminal) callbacks.progress = drawProgress;
  currentActivity() = "searching plans";
  auto result = pipescope::runSearch(*request, callbacks);
  std::signal(SIGINT, previous);
  if (terminal) std::fprintf(stderr, "\r%80s\r", "");
  if (!result) return fail(result.error().message);
  if (result->cancelled)
    std::fprintf(stderr, "pipescope: interrupted; showing the best of what was simulated\n");
  if (result->plans.empty()) return fail("interrupted before any plan was simulated");
  const SearchPlan &best = result->plans.front();

  // Files: the ranked plans as CSV, the best as a plan file.
  for (std::size_t i : outputs.writeOrder()) {
    OutputFile &file = outputs.output(i);
    if (a.text("csv") && file.path() == *a.text("csv")) {
      std::string csv = "rank,tokens_per_s,step_time_s,mfu,bubble_fraction,peak_memory_bytes,"
                        "capacity_bytes,dp,tp,pp,rank_order,schedule,virtual_stages,microbatches,"
                        "microbatch_size,recompute,zero_stage,sequence_parallel,ep,cp,"
                        "gemm_precision,collective_algorithm,balance_layers,alike_count\n";
      for (std::size_t k = 0; k < result->plans.size(); ++k) {
        const auto &p = result->plans[k];
        csv += std::to_string(k + 1) + "," + json(p.tokens_per_s).dump() + "," +
               json(p.step_time_s).dump() + "," + json(p.mfu).dump() + "," +
               json(p.bubble_fraction).dump() + "," + json(p.peak_memory).dump() + "," +
               json(p.capacity).dump() + "," + std::to_string(p.mesh.dp) + "," +
               std::to_string(p.mesh.tp) + "," + std::to_string(p.mesh.pp) + "," +
               p.mesh.orderName() + "," + p.schedule.name + "," +
               std::to_string(p.schedule.chunks) + "," + std::to_string(p.schedule.microbatches) +
               "," + std::to_string(p.microbatch_size) + "," +
               std::string(recomputeName(p.training.recompute)) + "," +
               std::to_string(p.training.zero_stage) + "," +
               (p.training.sequence_parallel ? "true" : "false") + "," + std::to_string(p.mesh.ep) +
               "," + std::to_string(p.mesh.cp) + "," +
               std::string(gemmPrecisionName(p.training.gemm_precision)) + "," +
               std::string(collectiveAlgorithmName(p.training.collective_algorithm)) + "," +
               (p.training.balance_layers ? "true" : "false") + "," +
               std::to_string(p.alike_count) + "\n";
      }
      file.write(csv);
    } else {
      const Plan plan = searchPlanToPlan(*request, best);
      file.write(planToJson(plan).dump(2) + "\n");
    }
  }
  if (auto status = outputs.commit(); !status) return fail(status.error().message);

  // How far the model was from published runs like these: runners-up closer to #1 than that
  // are not known to be slower.
  const ValidatedAccuracy accuracy =
      validatedAccuracy(request->hardware, request->gemm_precision, isMoe(request->model));
  std::size_t within_error = 0;
  for (std::size_t k = 1; k < result->plans.size(); ++k)
    if (withinValidatedError(result->plans[k].step_time_s, best.step_time_s, accuracy))
      ++within_error;
  // #1 at its speed of light: the most faster kernels and links could gain on it.
  const auto best_speed_of_light = speedOfLightStepS(searchPlanToPlan(*request, best));

  if (a.has("json")) {
    json plans = json::array(), pareto = json::array();
    for (std::size_t k = 0; k < result->plans.size(); ++k)
      plans.push_back(planJson(result->plans[k], k == 0 ? nullptr : &best, &accuracy));
    for (const auto &p : result->pareto)
      pareto.push_back(planJson(p, nullptr));
    json out = {{"model", request->model.name},
                {"hardware", request->hardware.name},
                {"gpus", request->gpus},
                {"global_batch", request->global_batch > 0 ? request->global_batch : request->gpus},
                {"sequence_length", request->model.sequence_length},
                {"space", result->space},
                {"evaluated", result->evaluated},
                {"pruned_by_memory", result->pruned_by_memory},
                {"timing_passes", result->timing_passes},
                {"seconds", result->seconds},
                {"interrupted", result->cancelled},
                {"validated_accuracy", validatedAccuracyJson(accuracy)},
                {"plans", std::move(plans)},
                {"pareto", std::move(pareto)}};
    if (best_speed_of_light) out["best_speed_of_light_step_s"] = *best_speed_of_light;
    std::cout << out.dump(2) << '\n';
    return 0;
  }
  std::string given; // what every candidate was given rather than searched
  if (request->gemm_precision != GemmPrecision::Bf16)
    given += std::string(gemmPrecisionName(request->gemm_precision)) + " GEMMs";
  if (request->collective_algorithm != CollectiveAlgorithm::Auto)
    given += (given.empty() ? "" : ", ") +
             std::string(collectiveAlgorithmName(request->collective_algorithm)) + " all-reduces";
  // The prose around the tables wraps at the terminal's width (wrappedLine), each line continued
  // two columns in, or under its "#k: ".
  std::cout << wrappedLine("", "  ",
                           request->model.name + " on " + std::to_string(request->gpus) + " × " +
                               request->hardware.name + (given.empty() ? "" : " (" + given + ")") +
                               ": " + std::to_string(result->space) + " configurations, " +
                               std::to_string(result->pruned_by_memory) + " pruned by memory, " +
                               std::to_string(result->evaluated) + " simulated in " +
                               fixed(result->seconds, 2) + " s" +
                               (result->cancelled ? " (interrupted)" : ""))
            << wrappedLine("", "  ", "checked against: " + validatedAccuracyText(accuracy));
  // MFU counts model FLOPs against the dense 16-bit peak (ModelReport::mfu), so an FP8 search's
  // column reads high: say so, with the factor to the FP8 peak.
  if (request->gemm_precision == GemmPrecision::Fp8 && request->hardware.peak_fp8_tflops > 0)
    std::cout << wrappedLine(
        "", "  ",
        "MFU% is against the dense 16-bit peak (" + fixed(request->hardware.peak_tflops, 0) +
            " TFLOPS); against the FP8 peak (" + fixed(request->hardware.peak_fp8_tflops, 0) +
            ") it is " +
            fixed(request->hardware.peak_tflops / request->hardware.peak_fp8_tflops, 2) +
            " times as much");
  std::cout << '\n' << kTableHeader;
  for (const auto &plan : result->plans)
    std::cout << planLine(plan) << '\n';
  const auto ranked = [](std::size_t k) { return "  #" + std::to_string(k + 1) + ": "; };
  const std::string under_ranked(6, ' ');
  if (best_speed_of_light)
    std::cout << '\n'
              << wrappedLine("", "  ",
                             "#1 at its speed of light (every kernel at the GPU's peak, every "
                             "link at its line rate, nothing else): " +
                                 fixed(*best_speed_of_light * 1e3, 1) + " ms, so its " +
                                 fixed(best.step_time_s * 1e3, 1) + " ms step is " +
                                 fixed(best.step_time_s / *best_speed_of_light, 2) +
                                 "x it: the most faster kernels and links could gain on this "
                                 "layout");
  if (std::any_of(result->plans.begin(), result->plans.end(),
                  [](const SearchPlan &plan) { return plan.alike_count > 0; })) {
    std::cout << '\n'
              << wrappedLine("", "  ",
                             "as fast as a ranked plan (the same step time to the nanosecond; "
                             "the row is the one with the least memory, --json lists them):");
    for (std::size_t k = 0; k < result->plans.size(); ++k)
      if (result->plans[k].alike_count > 0)
        std::cout << wrappedLine(ranked(k), under_ranked, alikeSummary(result->plans[k]));
  }
  if (std::any_of(result->plans.begin(), result->plans.end(),
                  [](const SearchPlan &plan) { return !plan.megatron_layout.empty(); })) {
    std::cout << "\nbalanced layer splits (Megatron's --pipeline-model-parallel-layout):\n";
    for (std::size_t k = 0; k < result->plans.size(); ++k)
      if (!result->plans[k].megatron_layout.empty())
        std::cout << "  #" << k + 1 << ": " << result->plans[k].megatron_layout << '\n';
  }
  if (result->plans.size() > 1) {
    std::cout << "\nwhy the runners-up lose to #1:\n";
    for (std::size_t k = 1; k < result->plans.size(); ++k)
      std::cout << wrappedLine(ranked(k), under_ranked,
                               whySlower(result->plans[k], best) +
                                   (result->plans[k].step_time_s > best.step_time_s &&
                                            withinValidatedError(result->plans[k].step_time_s,
                                                                 best.step_time_s, accuracy)
                                        ? " (within the model's error)"
                                        : ""));
    if (within_error > 0)
      std::cout << wrappedLine(
          "  ", "    ",
          std::to_string(within_error) + " of the " + std::to_string(result->plans.size() - 1) +
              " runners-up are within " + fixed(accuracy.step.mean() * 100, 1) +
              " % of #1's step time, less than the model's mean error on "
              "the published runs above: their order is not established; "
              "measure the leaders before choosing");
  }
  std::cout << "\nPareto front (step time against peak memory):\n" << kTableHeader;
  for (const auto &plan : result->pareto)
    std::cout << planLine(plan) << '\n';
  return 0;
}

int runSearchBench(const std::vector<std::string> &args) {
  if (std::find(args.begin(), args.end(), "--help") != args.end()) {
    std::cout << "usage: pipescope bench --search [--threads T] [--json]\n\nTimes the planner on "
                 "llama3-70b over 1,024 h100-sxm GPUs (global batch 1,024 sequences of 8,192 "
                 "tokens, every schedule family) and prints the configurations simulated per "
                 "second, wall and CPU.\n";
    return 0;
  }
  std::vector<std::string> rest;
  for (const auto &arg : args)
    if (arg != "--search") rest.push_back(arg);
  auto parsed = Arguments::parse(rest, {"threads"}, {"json"}, "bench --search");
  if (!parsed) return fail(parsed.error().message);
  SearchRequest request;
  auto model = loadModelSpec("llama3-70b");
  auto hardware = loadHardwareSpec("h100-sxm");
  if (!model || !hardware) return fail("the llama3-70b and h100-sxm presets are missing");
  request.model = *model;
  request.hardware = *hardware;
  request.gpus = 1024;
  request.global_batch = 1024;
  auto threads = parsed->integer("threads", 1, 1024);
  if (!threads) return fail(threads.error().message);
  request.threads = threads->value_or(0);
  rusage before{}, after{};
  getrusage(RUSAGE_SELF, &before);
  auto result = pipescope::runSearch(request);
  getrusage(RUSAGE_SELF, &after);
  if (!result) return fail(result.error().message);
  const auto seconds = [](const timeval &t) { return t.tv_sec + t.tv_usec * 1e-6; };
  const double cpu = seconds(after.ru_utime) - seconds(before.ru_utime) + seconds(after.ru_stime) -
                     seconds(before.ru_stime);
  const double per_second = static_cast<double>(result->evaluated) / result->seconds;
  const double per_cpu_second = static_cast<double>(result->evaluated) / cpu;
  if (parsed->has("json")) {
    std::cout << json{{"space", result->space},
                      {"evaluated", result->evaluated},
                      {"pruned_by_memory", result->pruned_by_memory},
                      {"timing_passes", result->timing_passes},
                      {"seconds", result->seconds},
                      {"cpu_seconds", cpu},
                      {"simulated_per_second", per_second},
                      {"simulated_per_cpu_second", per_cpu_second},
                      {"threads", request.threads > 0
                                      ? request.threads
                                      : static_cast<int>(std::thread::hardware_concurrency())}}
                     .dump(2)
              << '\n';
    return 0;
  }
  std::printf("planner: llama3-70b on 1024 x h100-sxm, global batch 1024\n"
              "  space %zu configurations, %zu pruned by memory, %zu simulated (%zu distinct "
              "op passes)\n"
              "  %.2f s wall, %.2f s CPU: %.0f configurations simulated per second (%.0f per "
              "CPU second)\n",
              result->space, result->pruned_by_memory, result->evaluated, result->timing_passes,
              result->seconds, cpu, per_second, per_cpu_second);
  return 0;
}

} // namespace pipescope::cli
