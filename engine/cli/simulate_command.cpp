// `pipescope simulate`: generates (or loads) a schedule, lowers it, simulates one training step and
// prints its metrics, or writes the plan, the trace, the PyTorch CSV and the Chrome trace.
#include <algorithm>
#include <cstdio>
#include <iostream>
#include <set>

#include <nlohmann/json.hpp>

#include "engine/cli/arguments.h"
#include "engine/cli/commands.h"
#include "engine/evaluation.h"
#include "engine/json_text.h"
#include "engine/layout_options.h"
#include "engine/model/model_setup.h"
#include "engine/model/speed_of_light.h"
#include "engine/model/validated_accuracy.h"
#include "engine/output_file.h"
#include "engine/plan_file.h"
#include "engine/plan_options.h"
#include "engine/pytorch_csv.h"
#include "engine/trace_file.h"

namespace pipescope::cli {

using nlohmann::json;

namespace {

std::string bytesText(double bytes) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.2f GiB", bytes / (1024.0 * 1024.0 * 1024.0));
  return buffer;
}

// A departure's share of the closed-form gap, signed: "adds 2.49 points" or "takes 0.10 points".
std::string pointsOfGap(double share) {
  char buffer[48];
  std::snprintf(buffer, sizeof buffer, "%s %.2f points", share < 0 ? "takes" : "adds",
                std::abs(share) * 100);
  return buffer;
}

// The summary's labels take 17 columns; its explanations wrap (wrappedLine) under the text they
// continue, two columns further in.
const std::string kSummaryIndent(17, ' ');
const std::string kSummaryContinuation = kSummaryIndent + "  ";

const std::string kSimulateHelp = R"(usage: pipescope simulate [options]

Generates (or loads) a schedule, lowers it, simulates one training step and prints a summary;
with a model, also how far the model was from the published runs of the same GPU type,
precision and kind of model ("checked against", docs/validation.md; "validated_accuracy" in the
JSON), and the step at its speed of light: the same plan with every kernel at the GPU's peak,
every link at its line rate and nothing else, which no run of it can beat
("speed_of_light_step_s"). Times are in microseconds, bandwidth in GB/s, sizes in bytes.

schedule:
  --schedule NAME          naive, gpipe, 1f1b, interleaved-1f1b, looped-bfs, zb-h1, zb-h2,
                           interleaved-zb, zb-v, v-half, v-min, dualpipe, dualpipev,
                           combined-1f1b
                           (default 1f1b); see 'pipescope schedules'
  --pp P                   pipeline ranks (default 4)
  --microbatches M         microbatches per step (default 8)
  --virtual-stages V       chunks per rank (interleaved-1f1b, looped-bfs, interleaved-zb)
  --microbatch-group G     interleaved-1f1b: P = depth-first (default), M = Megatron's
                           breadth-first interleaving (not looped-bfs)
  --custom FILE            a custom schedule: pipescope.schedule JSON or PyTorch CSV
  --plan FILE              start from a plan file; other options override it
costs (ignored with --model):
  --forward F --backward B --weight W     one rank's share; B = I + W (default 1, 2, 1)
  --overlapped FB          time of an overlapped F&B pair (default F + B)
  --p2p-latency X --p2p-bandwidth Y --activation-bytes Z
model (derives every cost from the model, hardware and mesh):
  --model NAME|FILE --hardware NAME|FILE --dp D --tp T --gpus-per-node G
  --rank-order ORDER (tp-pp-dp) --recompute none|selective|full --seq-parallel
  --zero-stage Z (DP sharding: 0 none, 1 optimizer state (= --zero1), 2 + gradients,
  3 + parameters as FSDP) --balance --overlap-dp (also ZeRO-3's gathers) --ep E (expert parallelism, within dp) --expert-imbalance X (>= 1)
  --etp T (expert tensor parallelism: experts split over T | tp GPUs; below tp EP spans tp too)
  --moe-dispatcher alltoall|deepep|hybridep (NCCL all-to-all of every routed copy, or DeepEP /
  HybridEP sending a token once per node and GPU; schedule combined-1f1b overlaps it)
  --moe-dispatcher-sms N (SMs DeepEP / HybridEP hold beside an overlapped pair; default 20)
  --moe-layer-host-us X (host time per MoE layer and microbatch; default 3500, 0 = none)
  --cp C (context parallelism: each sequence split over C of the dp ranks)
  --collective-algorithm auto|ring|tree (all-reduces; auto: NCCL's cheaper per message)
  --gemm-precision bf16|fp8 (or --fp8): linear-layer GEMMs at the FP8 peak with TE's casts
  --fp8-params (with --fp8: the layers' weights held in FP8, as --fp8-param-gather; without
  it TE keeps 16-bit weights and caches their FP8 copies for the step)
  --tp-comm-overlap (TP all-gathers / reduce-scatters under their GEMMs; needs --seq-parallel)
  --tp-backward-overlap (column-parallel layers' backward TP collectives beside their GEMMs,
  Megatron-LM since 2021) --fp32-gradients (gradients accumulated and reduced in fp32)
  --no-swiglu-fusion (a gated MLP keeps silu's output too, as eager PyTorch does)
  --no-gradient-accumulation-fusion (each weight's gradient added into its buffer by a kernel
  of its own every microbatch) --no-masked-softmax-fusion (materialized attention's mask as a
  pass of its own, forward and backward), as Megatron-LM runs without Apex or TE
)" + std::string(kLayoutHelp) + R"(output:
  --json                   one JSON object instead of the text summary
  --ops                    with --json: every op with its start and end
  --save-plan FILE         write the plan (with its lowered programs) for the backend
  --trace FILE             write the simulated pipescope.trace
  --csv FILE               write the compute schedule as PyTorch's schedule CSV
  --chrome-trace FILE      write a Chrome trace (Perfetto, chrome://tracing)
)";

json rankJson(const RankStats &stats) {
  return {{"busy", stats.busy_us},
          {"idle", stats.idle_us},
          {"peak_inflight", stats.peak_inflight},
          {"peak_inflight_microbatches", stats.peak_inflight_microbatches}};
}

json analyticJson(const Evaluation &evaluation, double step_overhead_us) {
  const std::optional<AnalyticMetrics> &analytic = evaluation.analytic;
  if (!analytic) return nullptr;
  json out = {
      {"makespan", analytic->makespan_us},          {"bubble_fraction", analytic->bubble_fraction},
      {"bubble_ratio", analytic->bubble_ratio},     {"bubble_formula", analytic->bubble_formula},
      {"memory_formula", analytic->memory_formula}, {"source", analytic->source},
      {"exact_when", analytic->exact_when}};
  if (!analytic->peak_inflight.empty()) out["peak_inflight"] = analytic->peak_inflight;
  // Which of exact_when's assumptions this plan breaks (empty: none), each with the simulated
  // bubble fraction without it alone and its Shapley share of the gap where that is a matter of
  // costs (null for M or G, and the share on plans too large to simulate 2^n times).
  json departures = json::array();
  const std::vector<AnalyticDeparture> found = analyticDepartures(evaluation, step_overhead_us);
  const std::optional<GapShares> shares = closedFormGapShares(evaluation, found);
  const auto orNull = [](const std::optional<double> &value) {
    return value ? json(*value) : json(nullptr);
  };
  for (std::size_t i = 0; i < found.size(); ++i)
    departures.push_back({{"what", found[i].text},
                          {"bubble_fraction_without",
                           orNull(shares ? shares->without_alone[i]
                                         : bubbleFractionWithout(evaluation, found[i].kind))},
                          {"share_of_gap", shares ? orNull(shares->shares[i]) : json(nullptr)}});
  out["departures"] = std::move(departures);
  out["bubble_fraction_with_costs_as_assumed"] = shares ? json(shares->without_all) : json(nullptr);
  return out;
}

} // namespace

int runSimulate(const std::vector<std::string> &args) {
  if (wantsHelp(args)) {
    std::cout << kSimulateHelp;
    return 0;
  }
  std::set<std::string> valued = {"save-plan", "csv", "chrome-trace", "trace"};
  std::set<std::string> flags = {"json", "ops"};
  for (const PlanOption &option : planOptions())
    (option.value_name ? valued : flags).insert(option.name);
  auto parsed = Arguments::parse(args, valued, flags, "simulate");
  if (!parsed) return fail(parsed.error().message);
  const Arguments &a = *parsed;
  if (!a.positional().empty())
    return fail("unexpected argument '" + a.positional().front() + "' for 'simulate'");
  if (a.has("ops") && !a.has("json"))
    return fail("--ops lists every op in the JSON output; add --json");
  auto plan = planFromOptions(a);
  if (!plan) return fail(plan.error().message);

  // Every output is opened before the simulation, so a missing folder or a read-only file is
  // reported at once; all of them appear together or none does (OutputTransaction).
  const std::vector<std::string> kOutputFlags = {"save-plan", "csv", "trace", "chrome-trace"};
  int to_standard_output = a.has("json") ? 1 : 0;
  for (const auto &flag : kOutputFlags)
    if (auto path = a.text(flag); path && isStandardOutput(*path)) ++to_standard_output;
  if (to_standard_output > 1)
    return fail("only one output can go to standard output: give the others a file name ('-' "
                "is standard output, and --json prints there)");
  OutputTransaction outputs;
  std::vector<std::string> output_kinds; // the flag behind outputs.output(i)
  for (const auto &flag : kOutputFlags)
    if (auto path = a.text(flag)) {
      auto added = outputs.add(*path);
      if (!added) return fail(added.error().message);
      output_kinds.push_back(flag);
    }
  if (a.has("json")) {
    auto added = outputs.add("-");
    if (!added) return fail(added.error().message);
    output_kinds.emplace_back("json");
  }

  SimulationOptions options;
  // Only the Chrome trace draws the in-flight counters; the pipescope.trace file has no memory
  // timeline, so --trace alone does not pay for one.
  options.memory_timeline = a.has("chrome-trace");
  ModelDerivation derivation;
  currentActivity() = "generating, lowering and simulating the schedule";
  auto evaluation = evaluatePlan(*plan, options, &derivation);
  if (!evaluation) return fail(evaluation.error().message);
  const auto &e = *evaluation;
  const auto &sim = e.simulation;
  if (a.has("overlapped")) {
    bool has_pairs = false;
    for (const auto &ops : e.schedule.ranks)
      for (const auto &op : ops)
        has_pairs = has_pairs || op.kind == OpKind::OverlappedPair;
    if (!has_pairs)
      return fail("--overlapped does not apply to " + e.schedule.name +
                  ": it has no overlapped F&B pairs; use it with dualpipe, dualpipev or "
                  "combined-1f1b (with M > P), or a custom schedule with OVERLAP_F_B actions");
  }
  std::optional<ModelReport> report;
  std::optional<ValidatedAccuracy> accuracy;
  double speed_of_light_s = 0; // the plan's step at its speed of light (speedOfLightSetup)
  // The hardware's step overhead, which the step's tail holds beside the sync.
  const double step_overhead_us = plan->model ? plan->model->hardware.step_overhead_us : 0;
  if (plan->model) {
    report = reportModel(*plan->model, plan->mesh, e.schedule, derivation, sim);
    if (auto status = checkModelReport(*report); !status) return fail(status.error().message);
    accuracy = validatedAccuracy(*plan->model);
    currentActivity() = "simulating the plan at its speed of light";
    auto fastest = speedOfLightStepS(*plan);
    if (!fastest) return fail(fastest.error().message);
    speed_of_light_s = *fastest;
  }

  // The --json document: the summary through nlohmann/json, then the ops (--ops, millions of
  // them) streamed record by record.
  const auto writeJson = [&](const TextSink &write) {
    json out;
    out["schedule"] = e.schedule.name;
    out["pp"] = e.schedule.pp();
    out["microbatches"] = e.schedule.microbatches();
    out["virtual_stages"] = e.schedule.chunks();
    out["placement"] = std::string(placementName(e.schedule.placement.kind));
    out["ops_count"] = e.schedule.opCount();
    out["makespan"] = sim.makespan_us;
    out["bubble_fraction"] = sim.bubble_fraction;
    out["bubble_ratio"] = sim.bubble_ratio;
    out["analytic"] = analyticJson(e, step_overhead_us);
    json ranks = json::array();
    for (std::size_t r = 0; r < sim.ranks.size(); ++r) {
      json rank = rankJson(sim.ranks[r]);
      if (report) {
        const auto &m = report->memory[r];
        rank["memory"] = {{"params", m.params},
                          {"grads", m.grads},
                          {"optimizer", m.optimizer},
                          {"activations_peak", m.activations_peak},
                          {"total", m.total},
                          {"capacity", m.capacity},
                          {"fits", m.fits}};
      }
      ranks.push_back(std::move(rank));
    }
    out["ranks"] = std::move(ranks);
    if (report) {
      out["step_time_s"] = report->step_time_s;
      out["tokens_per_s"] = report->tokens_per_s;
      out["mfu"] = report->mfu;
      if (report->mfu_fp8 > 0) out["mfu_fp8"] = report->mfu_fp8;
      out["speed_of_light_step_s"] = speed_of_light_s;
      // Part of the step's tail, so a reader can tell it from the sync and the optimizer step.
      out["step_overhead_s"] = step_overhead_us / 1e6;
      out["communication"] = {
          {"tp", toJson(report->tp)}, {"pp", toJson(report->pp)}, {"dp", toJson(report->dp)}};
      out["cost_breakdown"] = costBreakdownJson(derivation.stage_breakdown, derivation.layer_ops,
                                                derivation.moe_layer_ops);
      out["validated_accuracy"] = validatedAccuracyJson(*accuracy);
    }
    std::string text = out.dump(2);
    if (!a.has("ops")) {
      write(text + "\n");
      return;
    }
    text.erase(text.find_last_of('}')); // reopen the object to append "ops"
    while (!text.empty() && (text.back() == '\n' || text.back() == ' '))
      text.pop_back();
    text += ",\n  \"ops\": [";
    write(text);
    std::string record;
    bool first = true;
    for (std::size_t r = 0; r < e.schedule.ranks.size(); ++r)
      for (std::size_t i = 0; i < e.schedule.ranks[r].size(); ++i) {
        const Op &op = e.schedule.ranks[r][i];
        const OpTiming &t = sim.op_times[r][i];
        using json_text::appendField;
        using json_text::appendFields;
        record.assign(first ? "\n    {" : ",\n    {");
        first = false;
        appendFields(record, "rank", r, "kind", opKindLetter(op.kind), "stage", op.stage,
                     "microbatch", op.microbatch, "start", t.start_us, "end", t.end_us);
        if (op.kind == OpKind::OverlappedPair) {
          record += ',';
          appendFields(record, "backward_stage", op.backward_stage, "backward_microbatch",
                       op.backward_microbatch);
        }
        record += '}';
        write(record);
      }
    write("\n  ]\n}\n");
  };

  // Staged files first, in-place outputs (devices, FIFOs, standard output) last: a failure
  // anywhere withholds every staged file (see OutputTransaction).
  for (const std::size_t index : outputs.writeOrder()) {
    OutputFile &file = outputs.output(index);
    const TextSink write = [&file](std::string_view text) { file.write(text); };
    const std::string &kind = output_kinds[index];
    currentActivity() = "writing --" + kind + " " + file.path();
    if (kind == "save-plan")
      write(planToJson(*plan, &e.program).dump(2) + "\n");
    else if (kind == "csv")
      write(scheduleToPytorchCsv(e.schedule));
    else if (kind == "trace")
      streamSimulatedTrace(write, *plan, e);
    else if (kind == "chrome-trace")
      streamSimulatedChromeTrace(write, *plan, e);
    else if (kind == "json")
      writeJson(write);
    if (!file.good()) break;
  }
  if (auto status = outputs.commit(); !status) {
    // The reader of standard output went away (`| head`): a quiet, normal end (see main.cpp).
    if (outputs.brokenPipe()) return 0;
    return fail(status.error().message);
  }
  if (a.has("json")) return 0;

  // With a file on standard output the summary goes to standard error, out of the data's way.
  std::ostream &summary = to_standard_output > 0 ? std::cerr : std::cout;
  const auto *family = findScheduleFamily(e.schedule.name);
  summary << (family ? family->title : e.schedule.name) << ": P=" << e.schedule.pp()
          << " M=" << e.schedule.microbatches() << " V=" << e.schedule.chunks() << " ("
          << placementName(e.schedule.placement.kind) << " placement, " << e.schedule.opCount()
          << " ops)\n";
  if (!plan->model)
    summary << "costs: F=" << number(plan->costs.forward_us)
            << " B=" << number(plan->costs.backward_us) << " W=" << number(plan->costs.weight_us)
            << " us per rank share"
            << (plan->costs.p2p_latency_us > 0 || plan->costs.p2p_bandwidth_gbps > 0
                    ? ", priced transfers"
                    : ", free transfers")
            << (plan->costs.concurrency_slowdown.empty()
                    ? ""
                    : ", ranks sharing a device (ops faster while fewer others compute)")
            << "\n";
  const TimeUnit unit = timeUnitFor(sim.makespan_us);
  summary << "makespan         " << number(sim.makespan_us * unit.per_us) << " " << unit.name
          << "\n";
  summary << "bubble_fraction  " << percent(sim.bubble_fraction) << "   (idle / total time)";
  if (e.analytic) summary << "   analytic " << percent(e.analytic->bubble_fraction);
  summary << "\nbubble_ratio     " << percent(sim.bubble_ratio) << "   (idle / busy time)";
  if (e.analytic) summary << "   analytic " << percent(e.analytic->bubble_ratio);
  summary << '\n';
  if (e.analytic)
    summary << "closed form      " << e.analytic->bubble_formula << '\n'
            << wrappedLine(kSummaryIndent, kSummaryContinuation,
                           e.analytic->source + "; exact for " + e.analytic->exact_when);
  // Where the simulation and the closed form part, which of its assumptions this plan breaks.
  // Each with its share of the gap (Shapley's, so the shares add up) and the bubble without it
  // alone; then, where the schedule's own conditions leave a rest, the bubble with every cost as
  // the formula assumes.
  if (departsFromClosedForm(e)) {
    const std::vector<AnalyticDeparture> departures = analyticDepartures(e, step_overhead_us);
    const std::optional<GapShares> shares = closedFormGapShares(e, departures);
    for (std::size_t i = 0; i < departures.size(); ++i) {
      std::string line = departures[i].text;
      if (shares && shares->shares[i]) line += "; " + pointsOfGap(*shares->shares[i]);
      if (const auto without =
              shares ? shares->without_alone[i] : bubbleFractionWithout(e, departures[i].kind))
        line += " (bubble_fraction " + percent(*without) + " without it alone)";
      summary << wrappedLine(i == 0 ? "not here:        " : kSummaryIndent, kSummaryContinuation,
                             line);
    }
    if (shares && std::abs(shares->without_all - e.analytic->bubble_fraction) >= 1e-6)
      summary << "                 with every cost as the formula assumes: bubble_fraction "
              << percent(shares->without_all) << '\n';
  }
  const std::string header = "rank  busy " + std::string(4 - std::string(unit.name).size(), ' ') +
                             "(" + unit.name + ")  idle (" + unit.name +
                             ")   peak in-flight (chunks / microbatches)";
  // The memory is the rank's peak: parameters, gradients, optimizer state and activations (each
  // part in --json's ranks[].memory), in a column under its header.
  const std::size_t memory_column = header.size() + 3;
  summary << '\n' << header << (report ? "   peak memory / capacity" : "") << '\n';
  for (std::size_t r = 0; r < sim.ranks.size(); ++r) {
    const auto &s = sim.ranks[r];
    char line[160];
    std::snprintf(line, sizeof line, "%4zu %10.5g %10.5g   %6d / %-8.6g", r,
                  s.busy_us * unit.per_us, s.idle_us * unit.per_us, s.peak_inflight,
                  s.peak_inflight_microbatches);
    std::string row = line;
    row.erase(row.find_last_not_of(' ') + 1); // the left-aligned microbatches' padding
    if (report) {
      const auto &m = report->memory[r];
      row.resize(std::max(row.size() + 2, memory_column), ' ');
      row += bytesText(m.total) + " / " + bytesText(m.capacity) + (m.fits ? "" : "  OUT OF MEMORY");
    }
    summary << row << '\n';
  }
  if (report) {
    char fp8[64] = "";
    if (report->mfu_fp8 > 0)
      std::snprintf(fp8, sizeof fp8, " of the 16-bit peak, %.1f %% of the FP8 peak",
                    report->mfu_fp8 * 100);
    char line[512];
    // Bytes are summed over one pipeline replica's transfers (all its TP ranks' collectives, every
    // stage boundary), times are the busiest rank's: a 64-GPU llama3-70b step moves terabytes of
    // TP traffic in a second, and the line should not read as one rank's.
    std::snprintf(line, sizeof line, "\nstep time %.4g s, %.4g tokens/s, MFU %.1f %%%s\n",
                  report->step_time_s, report->tokens_per_s, report->mfu * 100, fp8);
    summary << line;
    if (step_overhead_us > 0) {
      std::snprintf(line, sizeof line,
                    "of which the step overhead %.4g ms (the hardware file's step_overhead_us: "
                    "its framework's per-step host work, in the tail after each rank's last "
                    "op)",
                    step_overhead_us / 1000);
      summary << wrappedLine("", "  ", line);
    }
    std::snprintf(line, sizeof line,
                  "communication per step (bytes over one pipeline replica, time on its busiest "
                  "rank): TP %s (%.3g s, %s), PP %s (%.3g s, %s), DP %s (%.3g s, %s)",
                  bytesText(report->tp.bytes).c_str(), report->tp.time_s, report->tp.link.c_str(),
                  bytesText(report->pp.bytes).c_str(), report->pp.time_s, report->pp.link.c_str(),
                  bytesText(report->dp.bytes).c_str(), report->dp.time_s, report->dp.link.c_str());
    summary << wrappedLine("", "  ", line);
    std::snprintf(line, sizeof line,
                  "speed of light %.4g s (every kernel at the GPU's peak, every link at its line "
                  "rate, nothing else): the step is %.2fx it",
                  speed_of_light_s, report->step_time_s / speed_of_light_s);
    summary << wrappedLine("", "  ", line)
            << wrappedLine("", "  ", "checked against: " + validatedAccuracyText(*accuracy));
  }
  return 0;
}

} // namespace pipescope::cli
