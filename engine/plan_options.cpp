#include "engine/plan_options.h"

#include <limits>

#include "engine/layout_options.h"
#include "engine/model/model_setup.h"
#include "engine/pytorch_csv.h"

namespace pipescope {

std::span<const PlanOption> planOptions() {
  static constexpr PlanOption kOptions[] = {
      {"schedule", "NAME", "Schedule family (see 'pipescope schedules')."},
      {"pp", "P", "Pipeline ranks."},
      {"microbatches", "M", "Microbatches per step."},
      {"virtual-stages", "V", "Chunks per rank (interleaved schedules)."},
      {"microbatch-group", "G",
       "For interleaved-1f1b: P = depth-first, M = Megatron's breadth-first interleaving (not "
       "looped-bfs)."},
      {"custom", "FILE", "A custom schedule: pipescope.schedule JSON or PyTorch CSV."},
      {"plan", "FILE", "Start from a plan file; other options override it."},
      {"forward", "F", "Forward time of one rank's share (us)."},
      {"backward", "B", "Full backward time, B = I + W (us)."},
      {"weight", "W", "Weight-gradient time (us)."},
      {"overlapped", "FB", "Time of an overlapped F&B pair (us)."},
      {"p2p-latency", "X", "Point-to-point latency (us)."},
      {"p2p-bandwidth", "Y", "Point-to-point bandwidth (GB/s)."},
      {"activation-bytes", "Z", "Bytes sent per stage boundary per microbatch."},
      {"model", "NAME|FILE", "Model preset or file (with --hardware)."},
      {"hardware", "NAME|FILE", "Hardware preset or file (with --model)."},
      {"dp", "D", "Data-parallel replicas."},
      {"tp", "T", "Tensor-parallel size."},
      {"gpus-per-node", "G", "GPUs per node."},
      {"cp", "C",
       "Context parallelism: each sequence split over C GPUs; the world is dp x cp x tp x pp."},
      {"ep", "E",
       "Expert parallelism: each MoE layer's experts split over E of the dp x cp GPUs (E divides "
       "dp x cp and the experts)."},
      {"etp", "T",
       "Expert tensor parallelism: each expert split over T GPUs, a divisor of tp; below tp, EP "
       "folds into the tp x dp x cp GPUs (Megatron-Core's --expert-tensor-parallel-size)."},
      {"rank-order", "ORDER",
       "Which dimension varies fastest, e.g. tp-cp-pp-dp (tp-pp-dp without --cp)."},
      {"recompute", "MODE", "None, selective or full (with --model)."},
      {"recompute-modules", "LIST",
       "Megatron's recompute modules beside recompute none or selective: layernorm, "
       "mla_up_proj, mlp, moe_act, comma-separated (with --model)."},
      {"gemm-precision", "P",
       "bf16 or fp8: linear-layer GEMMs as Transformer Engine's FP8 runs them (with --model)."},
      {"fp8", nullptr, "Same as --gemm-precision fp8 (with --model)."},
      {"fp8-params", nullptr,
       "With FP8 GEMMs, the layers' weights held as FP8 parameters (Megatron's "
       "--fp8-param-gather, NeMo's fp8_params): no 16-bit copy beside the FP8 one, weights "
       "all-gathered at one byte (with --model)."},
      {"zero1", nullptr, "ZeRO-1: optimizer state sharded over DP; --zero-stage 1 (with --model)."},
      {"zero-stage", "Z",
       "DP sharding: 0 none, 1 optimizer state, 2 + gradients, 3 + parameters (FSDP) (with "
       "--model)."},
      {"seq-parallel", nullptr, "Sequence parallelism (with --model)."},
      {"balance", nullptr, "Balance layers over stages by cost (with --model)."},
      {"overlap-dp", nullptr, "Overlap the DP gradient sync (with --model)."},
      {"fp32-gradients", nullptr,
       "Gradients accumulated and reduced in fp32 (Megatron-LM's default under bf16) (with "
       "--model)."},
      {"no-swiglu-fusion", nullptr,
       "A gated MLP's SwiGLU as eager PyTorch keeps it (silu's output too: 8 bytes x ffn a "
       "token, torchtitan) instead of Megatron's fused SwiGLU (6) (with --model)."},
      {"no-gradient-accumulation-fusion", nullptr,
       "Each weight gradient added into the gradient buffer by a separate kernel every "
       "microbatch, as Megatron-LM runs without Apex or Transformer Engine (with --model)."},
      {"no-masked-softmax-fusion", nullptr,
       "Materialized attention's causal mask as its own pass over the scores, forward and "
       "backward, as Megatron-LM's unfused softmax runs it (with --model)."},
      {"tp-comm-overlap", nullptr,
       "Overlap the TP all-gathers and reduce-scatters with their GEMMs (Megatron's "
       "--tp-comm-overlap; needs --seq-parallel) (with --model)."},
      {"tp-backward-overlap", nullptr,
       "Run each column-parallel layer's backward TP collectives beside its own GEMMs, as "
       "Megatron-LM has since September 2021 (with --model)."},
      {"expert-imbalance", "X",
       "Busiest expert rank's tokens over the balanced share, >= 1 (with --model)."},
      {"collective-algorithm", "ALGO",
       "All-reduce algorithm: auto (NCCL's pick per message), ring or tree (with --model)."},
      {"moe-dispatcher", "D",
       "MoE token dispatch: alltoall (NCCL, every routed copy; default), deepep or hybridep "
       "(once per node and GPU) (with --model)."},
      {"moe-dispatcher-sms", "N",
       "SMs the deepep or hybridep kernels hold beside an overlapped F&B pair's compute "
       "(Megatron's --moe-flex-dispatcher-num-sms; default 20) (with --model)."},
      {"moe-layer-host-us", "X",
       "Host time per MoE layer and microbatch the GPU waits out (kernel launches, the "
       "dispatcher's sync); default 3500, 0 for a run with its MoE layers in CUDA graphs (with "
       "--model)."},
      {"cross-entropy", "MODE",
       "The loss: vocab-parallel (Megatron's fused, default), vocab-parallel-unfused "
       "(Megatron without --cross-entropy-loss-fusion: more passes over the logits), te "
       "(Transformer Engine's fused, Megatron-Bridge's: 16-bit logits, no fp32 copy) or "
       "torch-fp32 (torchtitan: more memory) (with --model)."},
      {"layout", "STR",
       "Uneven stages as Megatron's --pipeline-model-parallel-layout (with --model)."},
      {"layers-per-stage", "LIST", "Transformer layers per model stage (with --model)."},
      {"first-stage-less-layers", "N",
       "torchtitan: the embedding counts as N layers (with --model)."},
      {"last-stage-less-layers", "N", "torchtitan: the head counts as N layers (with --model)."},
  };
  return kOptions;
}

Status applyPrecisionAndCollectiveOptions(const OptionValues &a, TrainingSetup &training) {
  if (auto precision = a.text("gemm-precision")) {
    auto parsed = parseGemmPrecision(*precision);
    if (!parsed) return makeError("--gemm-precision: " + parsed.error().message);
    training.gemm_precision = *parsed;
  }
  if (a.has("fp8")) {
    if (a.has("gemm-precision") && training.gemm_precision != GemmPrecision::Fp8)
      return makeError("--fp8 contradicts --gemm-precision bf16; give one of them");
    training.gemm_precision = GemmPrecision::Fp8;
  }
  if (a.has("fp8-params")) {
    if (training.gemm_precision != GemmPrecision::Fp8)
      return makeError("--fp8-params needs FP8 GEMMs; add --fp8");
    training.fp8_params = true;
  }
  if (auto algorithm = a.text("collective-algorithm")) {
    auto parsed = parseCollectiveAlgorithm(*algorithm);
    if (!parsed) return makeError("--collective-algorithm: " + parsed.error().message);
    training.collective_algorithm = *parsed;
  }
  return Ok{};
}

Result<Plan> planFromOptions(const OptionValues &a, const Plan *base) {
  Plan plan;
  if (base) {
    plan = *base;
  } else if (auto path = a.text("plan")) {
    auto loaded = loadPlan(*path);
    if (!loaded) return loaded.error();
    plan = std::move(*loaded);
  } else {
    plan.request.pp = 4;
    plan.request.microbatches = 8;
  }
  if (auto v = a.text("schedule")) plan.request.name = *v;
  struct IntOption {
    const char *name;
    int *target;
    int min, max;
  } ints[] = {{"pp", &plan.request.pp, 1, kMaxPipelineRanks},
              {"microbatches", &plan.request.microbatches, 1, kMaxMicrobatches},
              {"virtual-stages", &plan.request.chunks, 1, kMaxChunks},
              {"microbatch-group", &plan.request.microbatch_group, 0, kMaxMicrobatches},
              {"dp", &plan.mesh.dp, 1, kMaxWorldSize},
              {"tp", &plan.mesh.tp, 1, kMaxWorldSize},
              {"cp", &plan.mesh.cp, 1, kMaxWorldSize},
              {"ep", &plan.mesh.ep, 1, kMaxWorldSize},
              {"etp", &plan.mesh.etp, 1, kMaxWorldSize},
              {"gpus-per-node", &plan.mesh.gpus_per_node, 1, 1 << 16}};
  for (const auto &o : ints) {
    auto v = a.integer(o.name, o.min, o.max);
    if (!v) return v.error();
    if (*v) *o.target = **v;
  }
  plan.mesh.pp = plan.request.pp;
  // Option combinations that would be silently ignored are refused with what would apply.
  static constexpr const char *kCostOptions[] = {"forward",         "backward",    "weight",
                                                 "overlapped",      "p2p-latency", "p2p-bandwidth",
                                                 "activation-bytes"};
  if (a.has("custom"))
    for (const char *name :
         {"schedule", "pp", "microbatches", "virtual-stages", "microbatch-group"})
      if (a.has(name))
        return makeError(std::string("--") + name +
                         " does not apply with --custom: the custom schedule file sets the "
                         "schedule and its P, M and V; leave --" +
                         name + " out, or drop --custom to generate a schedule");
  const bool model_options = a.has("model") || a.has("hardware");
  if (model_options || plan.model)
    for (const char *name : kCostOptions)
      if (a.has(name))
        return makeError(std::string("--") + name + " does not apply with " +
                         (model_options ? "--model and --hardware" : "the plan's model") +
                         ": every cost is derived from the model, hardware and mesh; drop --" +
                         name + ", or drop the model to give explicit costs");
  if (!a.has("custom")) {
    const auto *family = findScheduleFamily(plan.request.name);
    if (family && a.has("virtual-stages") && family->placement != PlacementKind::Loop) {
      auto v = a.integer("virtual-stages", 1, kMaxChunks);
      if (v && *v && **v != 2)
        return makeError("--virtual-stages " + std::to_string(**v) + " does not apply to " +
                         family->name + ": its " + std::string(placementName(family->placement)) +
                         " placement fixes V = 2; leave --virtual-stages out");
    }
    if (family && a.has("microbatch-group") && !family->uses_microbatch_group)
      return makeError("--microbatch-group does not apply to " + family->name +
                       ": only interleaved-1f1b groups microbatches; leave it out, or use "
                       "--schedule interleaved-1f1b");
  }
  struct NumberOption {
    const char *name;
    double *target;
  } numbers[] = {{"forward", &plan.costs.forward_us},
                 {"backward", &plan.costs.backward_us},
                 {"weight", &plan.costs.weight_us},
                 {"overlapped", &plan.costs.overlapped_us},
                 {"p2p-latency", &plan.costs.p2p_latency_us},
                 {"p2p-bandwidth", &plan.costs.p2p_bandwidth_gbps},
                 {"activation-bytes", &plan.costs.activation_bytes}};
  for (const auto &o : numbers) {
    // Only the syntax here; the bounds are Costs::check's, the same as a plan file's.
    auto v =
        a.number(o.name, std::numeric_limits<double>::lowest(), std::numeric_limits<double>::max());
    if (!v) return v.error();
    if (*v) *o.target = **v;
  }
  if (auto status = plan.costs.check(-1, CostNaming::CommandLine); !status) return status.error();
  if (plan.costs.p2p_bandwidth_gbps > 0 && plan.costs.activation_bytes == 0 &&
      a.has("p2p-bandwidth"))
    return makeError("--p2p-bandwidth needs --activation-bytes (the bytes sent per boundary per "
                     "microbatch)");
  if (a.has("activation-bytes") && plan.costs.p2p_bandwidth_gbps == 0)
    return makeError("--activation-bytes does not apply without a bandwidth: with "
                     "--p2p-bandwidth 0 transfers cost only the latency; add --p2p-bandwidth "
                     "GB/s");
  if (auto order = a.text("rank-order")) {
    auto parsed = Mesh::parseOrder(*order, plan.mesh.cp);
    if (!parsed) return parsed.error();
    plan.mesh.order = *parsed;
  }
  if (auto path = a.text("custom")) {
    auto schedule = loadCustomSchedule(*path);
    if (!schedule) return schedule.error();
    plan.request.name = "custom";
    plan.request.pp = plan.mesh.pp = schedule->pp();
    plan.request.microbatches = schedule->microbatches();
    plan.request.chunks = schedule->chunks();
    plan.custom = std::move(*schedule);
  } else if (a.has("schedule") || a.has("pp") || a.has("microbatches") || a.has("virtual-stages")) {
    plan.custom.reset();
  }
  if (model_options || plan.model) {
    ModelSetup setup = plan.model.value_or(ModelSetup{});
    if (model_options && (!a.has("model") || !a.has("hardware")) && !plan.model)
      return makeError("--model and --hardware go together: name both (see 'pipescope presets')");
    if (auto name = a.text("model")) {
      auto model = loadModelSpec(*name);
      if (!model) return model.error();
      setup.model = std::move(*model);
    }
    if (auto name = a.text("hardware")) {
      auto hardware = loadHardwareSpec(*name);
      if (!hardware) return hardware.error();
      setup.hardware = std::move(*hardware);
      if (!a.has("gpus-per-node")) plan.mesh.gpus_per_node = setup.hardware.gpus_per_node;
    }
    if (auto r = a.text("recompute")) {
      auto parsed = parseRecompute(*r);
      if (!parsed) return parsed.error();
      setup.training.recompute = *parsed;
    }
    if (auto list = a.text("recompute-modules")) {
      auto modules = parseRecomputeModules(*list);
      if (!modules) return makeError("--recompute-modules: " + modules.error().message);
      if (setup.training.recompute != Recompute::None &&
          setup.training.recompute != Recompute::Selective)
        return makeError("--recompute-modules go with --recompute none or selective (Megatron's "
                         "selective granularity), not " +
                         std::string(recomputeName(setup.training.recompute)));
      setup.training.recompute_modules = std::move(*modules);
    }
    if (auto status = applyPrecisionAndCollectiveOptions(a, setup.training); !status)
      return status.error();
    auto zero_stage = a.integer("zero-stage", 0, 3);
    if (!zero_stage) return zero_stage.error();
    if (a.has("zero1") && *zero_stage && **zero_stage != 1)
      return makeError("--zero1 is --zero-stage 1; give one of them");
    if (a.has("zero1")) setup.training.zero_stage = 1;
    if (*zero_stage) setup.training.zero_stage = **zero_stage;
    if (a.has("seq-parallel")) setup.training.sequence_parallel = true;
    if (a.has("balance")) setup.training.balance_layers = true;
    if (a.has("overlap-dp")) setup.training.overlap_gradient_sync = true;
    if (a.has("tp-comm-overlap")) setup.training.tp_comm_overlap = true;
    if (a.has("tp-backward-overlap")) setup.training.tp_backward_overlap = true;
    if (a.has("fp32-gradients")) setup.training.fp32_gradients = true;
    if (a.has("no-swiglu-fusion")) setup.training.swiglu_fusion = false;
    if (a.has("no-gradient-accumulation-fusion"))
      setup.training.gradient_accumulation_fusion = false;
    if (a.has("no-masked-softmax-fusion")) setup.training.masked_softmax_fusion = false;
    auto imbalance = a.number("expert-imbalance", 1, 1e6);
    if (!imbalance) return imbalance.error();
    if (*imbalance) setup.training.expert_load_imbalance = **imbalance;
    if (auto loss = a.text("cross-entropy")) {
      if (!isCrossEntropyMode(*loss))
        return makeError("--cross-entropy '" + *loss + "' is not known; use " +
                         crossEntropyModesText());
      setup.training.cross_entropy = *loss;
    }
    if (auto dispatcher = a.text("moe-dispatcher")) {
      if (!isMoeDispatcher(*dispatcher))
        return makeError("--moe-dispatcher '" + *dispatcher +
                         "' is not known; use alltoall, deepep or hybridep");
      setup.training.moe_dispatcher = *dispatcher;
    }
    auto dispatcher_sms = a.integer("moe-dispatcher-sms", 1, 1 << 16);
    if (!dispatcher_sms) return dispatcher_sms.error();
    if (*dispatcher_sms) setup.training.moe_dispatcher_sms = **dispatcher_sms;
    auto host_us = a.number("moe-layer-host-us", 0, 1e7);
    if (!host_us) return host_us.error();
    if (*host_us) setup.training.moe_layer_host_us = **host_us;
    if (hasLayoutOption(a)) setup.training.balance_layers = false;
    if (auto status = applyLayoutOptions(a, plan.request, setup.model, setup.training); !status)
      return status.error();
    plan.model = std::move(setup);
  } else {
    for (const char *name : {"recompute",
                             "recompute-modules",
                             "zero1",
                             "zero-stage",
                             "seq-parallel",
                             "balance",
                             "overlap-dp",
                             "tp-comm-overlap",
                             "tp-backward-overlap",
                             "fp32-gradients",
                             "no-swiglu-fusion",
                             "no-gradient-accumulation-fusion",
                             "no-masked-softmax-fusion",
                             "expert-imbalance",
                             "cross-entropy",
                             "moe-dispatcher",
                             "moe-dispatcher-sms",
                             "moe-layer-host-us",
                             "collective-algorithm",
                             "gemm-precision",
                             "fp8",
                             "fp8-params"})
      if (a.has(name)) return makeError(std::string("--") + name + " needs --model and --hardware");
    for (const char *name : kLayoutOptionNames)
      if (a.has(name)) return makeError(std::string("--") + name + " needs --model and --hardware");
  }
  if (auto status = plan.mesh.check(); !status) return status.error();
  if (!plan.custom)
    if (auto status = checkScheduleRequest(plan.request); !status) return status.error();
  return plan;
}

} // namespace pipescope
