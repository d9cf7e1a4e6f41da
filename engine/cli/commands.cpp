#include "engine/cli/commands.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <limits>
#include <sstream>

#include <nlohmann/json.hpp>

#include "engine/cli/arguments.h"
#include "engine/evaluation.h"
#include "engine/json_text.h"
#include "engine/model/model_setup.h"
#include "engine/output_file.h"
#include "engine/plan_file.h"
#include "engine/pytorch_csv.h"
#include "engine/trace_file.h"

namespace pipescope::cli {

using nlohmann::json;

std::string &currentActivity() {
  static std::string activity = "starting";
  activity.reserve(256);
  return activity;
}

int fail(const std::string &message) {
  const auto newline = message.find('\n');
  std::cerr << "pipescope: " << message.substr(0, newline) << '\n';
  if (newline != std::string::npos) std::cerr << message.substr(newline + 1) << '\n';
  return 2;
}

namespace {

bool wantsHelp(const std::vector<std::string> &args) {
  return std::find(args.begin(), args.end(), "--help") != args.end() ||
         std::find(args.begin(), args.end(), "-h") != args.end();
}

std::string percent(double fraction) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.2f %%", fraction * 100);
  return buffer;
}

std::string number(double value) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.6g", value);
  return buffer;
}

// A unit that keeps the step's numbers short: microseconds, milliseconds or seconds.
struct TimeUnit {
  double per_us;
  const char *name;
};
TimeUnit unitFor(double makespan_us) {
  if (makespan_us >= 1e6) return {1e-6, "s"};
  if (makespan_us >= 1e3) return {1e-3, "ms"};
  return {1, "us"};
}

std::string bytesText(double bytes) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.2f GiB", bytes / (1024.0 * 1024.0 * 1024.0));
  return buffer;
}

// ---------------------------------------------------------------------------------------------
// simulate

constexpr const char *kSimulateHelp = R"(usage: pipescope simulate [options]

Generates (or loads) a schedule, lowers it, simulates one training step and prints a summary.
Times are in microseconds, bandwidth in GB/s, sizes in bytes.

schedule:
  --schedule NAME          naive, gpipe, 1f1b, interleaved-1f1b, zb-h1, zb-h2, zb-v,
                           dualpipe, dualpipev (default 1f1b); see 'pipescope schedules'
  --pp P                   pipeline ranks (default 4)
  --microbatches M         microbatches per step (default 8)
  --virtual-stages V       chunks per rank (interleaved-1f1b)
  --microbatch-group G     interleaved-1f1b: P = depth-first (default), M = breadth-first
  --custom FILE            a custom schedule: pipescope.schedule JSON or PyTorch CSV
  --plan FILE              start from a plan file; other options override it
costs (ignored with --model):
  --forward F --backward B --weight W     one rank's share; B = I + W (default 1, 2, 1)
  --overlapped FB          time of an overlapped F&B pair (default F + B)
  --p2p-latency X --p2p-bandwidth Y --activation-bytes Z
model (derives every cost from the model, hardware and mesh):
  --model NAME|FILE --hardware NAME|FILE --dp D --tp T --gpus-per-node G
  --rank-order ORDER (tp-pp-dp) --recompute none|selective|full --zero1 --seq-parallel
  --balance --overlap-dp --ep E (expert parallelism, within dp) --expert-imbalance X (>= 1)
  --cp C (context parallelism: each sequence split over C of the dp ranks)
output:
  --json                   one JSON object instead of the text summary
  --ops                    with --json: every op with its start and end
  --save-plan FILE         write the plan (with its lowered programs) for the backend
  --trace FILE             write the simulated pipescope.trace
  --csv FILE               write the compute schedule as PyTorch's schedule CSV
  --chrome-trace FILE      write a Chrome trace (Perfetto, chrome://tracing)
)";

Result<Plan> planFromArguments(const Arguments &a) {
  Plan plan;
  if (auto path = a.text("plan")) {
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
  if (a.has("ops") && !a.has("json"))
    return makeError("--ops lists every op in the JSON output; add --json");
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
    auto parsed = Mesh::parseOrder(*order);
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
    if (a.has("zero1")) setup.training.zero1 = true;
    if (a.has("seq-parallel")) setup.training.sequence_parallel = true;
    if (a.has("balance")) setup.training.balance_layers = true;
    if (a.has("overlap-dp")) setup.training.overlap_gradient_sync = true;
    auto ep = a.integer("ep", 1, kMaxWorldSize);
    if (!ep) return ep.error();
    if (*ep) setup.training.expert_parallel = **ep;
    auto imbalance = a.number("expert-imbalance", 1, 1e6);
    if (!imbalance) return imbalance.error();
    if (*imbalance) setup.training.expert_load_imbalance = **imbalance;
    auto cp = a.integer("cp", 1, kMaxWorldSize);
    if (!cp) return cp.error();
    if (*cp) setup.training.context_parallel = **cp;
    plan.model = std::move(setup);
  } else {
    for (const char *name : {"recompute", "zero1", "seq-parallel", "balance", "overlap-dp", "ep",
                             "expert-imbalance", "cp"})
      if (a.has(name)) return makeError(std::string("--") + name + " needs --model and --hardware");
  }
  if (auto status = plan.mesh.check(); !status) return status.error();
  if (!plan.custom)
    if (auto status = checkScheduleRequest(plan.request); !status) return status.error();
  return plan;
}

json rankJson(const RankStats &stats) {
  return {{"busy", stats.busy_us},
          {"idle", stats.idle_us},
          {"peak_inflight", stats.peak_inflight},
          {"peak_inflight_microbatches", stats.peak_inflight_microbatches}};
}

json analyticJson(const std::optional<AnalyticMetrics> &analytic) {
  if (!analytic) return nullptr;
  json out = {
      {"makespan", analytic->makespan_us},          {"bubble_fraction", analytic->bubble_fraction},
      {"bubble_ratio", analytic->bubble_ratio},     {"bubble_formula", analytic->bubble_formula},
      {"memory_formula", analytic->memory_formula}, {"source", analytic->source},
      {"exact_when", analytic->exact_when}};
  if (!analytic->peak_inflight.empty()) out["peak_inflight"] = analytic->peak_inflight;
  return out;
}

json communicationJson(const CommunicationKind &kind) {
  return {{"bytes", kind.bytes}, {"time_s", kind.time_s}, {"link", kind.link}};
}

} // namespace

int runSimulate(const std::vector<std::string> &args) {
  if (wantsHelp(args)) {
    std::cout << kSimulateHelp;
    return 0;
  }
  auto parsed = Arguments::parse(args,
                                 {"schedule",
                                  "pp",
                                  "microbatches",
                                  "virtual-stages",
                                  "microbatch-group",
                                  "forward",
                                  "backward",
                                  "weight",
                                  "overlapped",
                                  "p2p-latency",
                                  "p2p-bandwidth",
                                  "activation-bytes",
                                  "plan",
                                  "save-plan",
                                  "csv",
                                  "chrome-trace",
                                  "trace",
                                  "custom",
                                  "model",
                                  "hardware",
                                  "dp",
                                  "tp",
                                  "gpus-per-node",
                                  "rank-order",
                                  "recompute",
                                  "ep",
                                  "expert-imbalance",
                                  "cp"},
                                 {"json", "ops", "zero1", "seq-parallel", "balance", "overlap-dp"},
                                 "simulate");
  if (!parsed) return fail(parsed.error().message);
  const Arguments &a = *parsed;
  if (!a.positional().empty())
    return fail("unexpected argument '" + a.positional().front() + "' for 'simulate'");
  auto plan = planFromArguments(a);
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
                  ": it has no overlapped F&B pairs; use it with dualpipe or dualpipev (or a "
                  "custom schedule with OVERLAP_F_B actions)");
  }
  std::optional<ModelReport> report;
  if (plan->model) {
    report = reportModel(*plan->model, plan->mesh, e.schedule, derivation, sim);
    if (auto status = checkModelReport(*report); !status) return fail(status.error().message);
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
    out["analytic"] = analyticJson(e.analytic);
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
      out["communication"] = {{"tp", communicationJson(report->tp)},
                              {"pp", communicationJson(report->pp)},
                              {"dp", communicationJson(report->dp)}};
      out["cost_breakdown"] = costBreakdownJson(derivation.stage_breakdown, derivation.layer_ops);
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
        record.assign(first ? "\n    {" : ",\n    {");
        first = false;
        appendField(record, "rank", r);
        record += ',';
        appendField(record, "kind", opKindLetter(op.kind));
        record += ',';
        appendField(record, "stage", op.stage);
        record += ',';
        appendField(record, "microbatch", op.microbatch);
        record += ',';
        appendField(record, "start", t.start_us);
        record += ',';
        appendField(record, "end", t.end_us);
        if (op.kind == OpKind::OverlappedPair) {
          record += ',';
          appendField(record, "backward_stage", op.backward_stage);
          record += ',';
          appendField(record, "backward_microbatch", op.backward_microbatch);
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
            << "\n";
  const TimeUnit unit = unitFor(sim.makespan_us);
  summary << "makespan         " << number(sim.makespan_us * unit.per_us) << " " << unit.name
          << "\n";
  summary << "bubble_fraction  " << percent(sim.bubble_fraction) << "   (idle / total time)";
  if (e.analytic) summary << "   analytic " << percent(e.analytic->bubble_fraction);
  summary << "\nbubble_ratio     " << percent(sim.bubble_ratio) << "   (idle / busy time)";
  if (e.analytic) summary << "   analytic " << percent(e.analytic->bubble_ratio);
  summary << '\n';
  if (e.analytic)
    summary << "closed form      " << e.analytic->bubble_formula << "\n                 "
            << e.analytic->source << "; exact for " << e.analytic->exact_when << '\n';
  summary << "\nrank  busy " << std::string(4 - std::string(unit.name).size(), ' ') << "("
          << unit.name << ")  idle (" << unit.name << ")   peak in-flight (chunks / microbatches)";
  if (report) summary << "   memory (params+grads+optimizer+activations / capacity)";
  summary << '\n';
  for (std::size_t r = 0; r < sim.ranks.size(); ++r) {
    const auto &s = sim.ranks[r];
    char line[160];
    std::snprintf(line, sizeof line, "%4zu %10.5g %10.5g   %6d / %-8.6g", r,
                  s.busy_us * unit.per_us, s.idle_us * unit.per_us, s.peak_inflight,
                  s.peak_inflight_microbatches);
    summary << line;
    if (report) {
      const auto &m = report->memory[r];
      summary << "          " << bytesText(m.total) << " / " << bytesText(m.capacity)
              << (m.fits ? "" : "  OUT OF MEMORY");
    }
    summary << '\n';
  }
  if (report) {
    char line[256];
    std::snprintf(line, sizeof line,
                  "\nstep time %.4g s, %.4g tokens/s, MFU %.1f %%\ncommunication per step: TP %s "
                  "(%.3g s, %s), PP %s (%.3g s, %s), DP %s (%.3g s, %s)\n",
                  report->step_time_s, report->tokens_per_s, report->mfu * 100,
                  bytesText(report->tp.bytes).c_str(), report->tp.time_s, report->tp.link.c_str(),
                  bytesText(report->pp.bytes).c_str(), report->pp.time_s, report->pp.link.c_str(),
                  bytesText(report->dp.bytes).c_str(), report->dp.time_s, report->dp.link.c_str());
    summary << line;
  }
  return 0;
}

// ---------------------------------------------------------------------------------------------
// table

namespace {

constexpr const char *kTableHelp = R"(usage: pipescope table [options]

Bubble tables over lists of P and M: one table per schedule, a row per M, a column per P.
Each cell is simulated with uniform op times and free transfers (F=1, B=2, W=1 unless given).

  --schedules LIST     comma-separated schedule names (default gpipe)
  --pp LIST            pipeline ranks (default 4,8,16,32)
  --microbatches LIST  microbatch counts (default 4,8,16,32,64,128)
  --virtual-stages V   chunks per rank for interleaved-1f1b (default 2)
  --metric NAME        bubble_fraction (default) or bubble_ratio
  --format FORMAT      text (default), csv or json
  --forward F --backward B --weight W   op times
)";

std::vector<std::string> splitList(const std::string &text) {
  std::vector<std::string> items;
  std::stringstream stream(text);
  std::string item;
  while (std::getline(stream, item, ','))
    if (!item.empty()) items.push_back(item);
  return items;
}

} // namespace

int runTable(const std::vector<std::string> &args) {
  if (wantsHelp(args)) {
    std::cout << kTableHelp;
    return 0;
  }
  auto parsed = Arguments::parse(args,
                                 {"schedules", "pp", "microbatches", "virtual-stages", "metric",
                                  "format", "forward", "backward", "weight"},
                                 {}, "table");
  if (!parsed) return fail(parsed.error().message);
  const Arguments &a = *parsed;
  const auto schedules = splitList(a.text("schedules").value_or("gpipe"));
  if (schedules.empty())
    return fail("--schedules lists no schedule; give comma-separated names such as "
                "gpipe,1f1b,interleaved-1f1b (see 'pipescope schedules')");
  auto pps = a.integerList("pp", 1, 4096);
  auto ms = a.integerList("microbatches", 1, 1 << 16);
  auto v = a.integer("virtual-stages", 1, kMaxChunks);
  if (!pps) return fail(pps.error().message);
  if (!ms) return fail(ms.error().message);
  if (!v) return fail(v.error().message);
  const std::vector<int> pp_list = pps->value_or(std::vector<int>{4, 8, 16, 32});
  const std::vector<int> m_list = ms->value_or(std::vector<int>{4, 8, 16, 32, 64, 128});
  const std::string metric = a.text("metric").value_or("bubble_fraction");
  const std::string format = a.text("format").value_or("text");
  if (metric != "bubble_fraction" && metric != "bubble_ratio")
    return fail("--metric must be bubble_fraction or bubble_ratio, got '" + metric + "'");
  if (format != "text" && format != "csv" && format != "json")
    return fail("--format must be text, csv or json, got '" + format + "'");
  Costs costs;
  for (auto [name, target] :
       {std::pair{"forward", &costs.forward_us}, std::pair{"backward", &costs.backward_us},
        std::pair{"weight", &costs.weight_us}}) {
    auto value =
        a.number(name, std::numeric_limits<double>::lowest(), std::numeric_limits<double>::max());
    if (!value) return fail(value.error().message);
    if (*value) *target = **value;
  }
  if (auto status = costs.check(-1, CostNaming::CommandLine); !status)
    return fail(status.error().message);
  bool any_uses_chunks = false;
  for (const auto &name : schedules) {
    const auto *family = findScheduleFamily(name);
    if (!family) return fail("unknown schedule '" + name + "'; see 'pipescope schedules'");
    any_uses_chunks = any_uses_chunks || family->uses_chunks;
  }
  if (a.has("virtual-stages") && !any_uses_chunks)
    return fail("--virtual-stages does not apply to " + a.text("schedules").value_or("gpipe") +
                ": only interleaved-1f1b takes a V; leave it out, or add interleaved-1f1b to "
                "--schedules");

  json tables = json::array();
  std::ostringstream text, csv;
  csv << "schedule,pp,microbatches,virtual_stages," << metric << ",analytic\n";
  for (const auto &name : schedules) {
    const auto *family = findScheduleFamily(name);
    const int chunks = family->uses_chunks ? v->value_or(2) : 1;
    text << family->title << " " << metric << " (%)";
    if (family->uses_chunks) text << ", V=" << chunks;
    text << "\n";
    char cell[32];
    std::snprintf(cell, sizeof cell, "%-8s", "M \\ P");
    text << cell;
    for (int p : pp_list) {
      std::snprintf(cell, sizeof cell, "%9s", ("P=" + std::to_string(p)).c_str());
      text << cell;
    }
    text << '\n';
    json rows = json::array();
    for (int m : m_list) {
      std::snprintf(cell, sizeof cell, "M=%-6d", m);
      text << cell;
      for (int p : pp_list) {
        ScheduleRequest request{name, p, m, chunks, 0};
        json entry = {{"pp", p}, {"microbatches", m}, {"virtual_stages", chunks}};
        if (auto status = checkScheduleRequest(request); !status) {
          text << "        -";
          entry[metric] = nullptr;
          entry["refused"] = status.error().message;
          csv << name << ',' << p << ',' << m << ',' << chunks << ",,\n";
          rows.push_back(std::move(entry));
          continue;
        }
        auto evaluation = evaluate(request, costs);
        if (!evaluation) return fail(evaluation.error().message);
        const double value = metric == "bubble_fraction" ? evaluation->simulation.bubble_fraction
                                                         : evaluation->simulation.bubble_ratio;
        const auto &analytic = evaluation->analytic;
        std::string closed_text; // empty where no closed form is published
        entry["analytic"] = nullptr;
        if (analytic) {
          const double closed =
              metric == "bubble_fraction" ? analytic->bubble_fraction : analytic->bubble_ratio;
          entry["analytic"] = closed;
          closed_text = json(closed).dump();
        }
        std::snprintf(cell, sizeof cell, "%9.1f", value * 100);
        text << cell;
        entry[metric] = value;
        csv << name << ',' << p << ',' << m << ',' << chunks << ',' << json(value).dump() << ','
            << closed_text << '\n';
        rows.push_back(std::move(entry));
      }
      text << '\n';
    }
    text << '\n';
    tables.push_back({{"schedule", name}, {"metric", metric}, {"cells", std::move(rows)}});
  }
  if (format == "json")
    std::cout << tables.dump(2) << '\n';
  else if (format == "csv")
    std::cout << csv.str();
  else
    std::cout << text.str();
  return 0;
}

// ---------------------------------------------------------------------------------------------
// validate

int runValidate(const std::vector<std::string> &args) {
  if (wantsHelp(args)) {
    std::cout
        << "usage: pipescope validate FILE\n\nChecks a plan (pipescope.plan JSON) or a custom "
           "schedule (pipescope.schedule JSON or PyTorch's schedule CSV): every op once on "
           "its owning rank, and the lowered program runs to completion. Prints a summary, "
           "or the precise problem.\n";
    return 0;
  }
  if (args.size() != 1)
    return fail(std::string(args.empty() ? "validate needs the FILE to check"
                                         : "validate takes one FILE, got " +
                                               std::to_string(args.size()) + " arguments") +
                "; usage: pipescope validate FILE (see 'pipescope validate --help')");
  if (args[0].starts_with("--"))
    return fail("unknown option " + args[0] +
                " for 'validate'; usage: pipescope validate FILE (see 'pipescope validate "
                "--help')");
  const std::string &path = args[0];
  auto text = readTextFile(path);
  if (!text) return fail(text.error().message);
  Plan plan;
  const auto first = text->find_first_not_of(" \t\r\n");
  bool is_plan = false;
  if (first != std::string::npos && (*text)[first] == '{') {
    auto parsed = parseJsonLimited(*text);
    if (!parsed) return fail(escapeControlCharacters(path) + ": " + parsed.error().message);
    if (const auto f = parsed->find("format"); f != parsed->end() && *f == kPlanFormat) {
      auto loaded = planFromJson(*parsed);
      if (!loaded) return fail(escapeControlCharacters(path) + ": " + loaded.error().message);
      plan = std::move(*loaded);
      is_plan = true;
    }
  }
  if (!is_plan) {
    auto schedule = loadCustomSchedule(path);
    if (!schedule) return fail(schedule.error().message);
    plan.request.name = "custom";
    plan.request.pp = plan.mesh.pp = schedule->pp();
    plan.request.microbatches = schedule->microbatches();
    plan.request.chunks = schedule->chunks();
    plan.custom = std::move(*schedule);
  }
  auto evaluation = evaluatePlan(plan);
  if (!evaluation) return fail(escapeControlCharacters(path) + ": " + evaluation.error().message);
  const auto &e = *evaluation;
  std::cout << path << ": valid " << (is_plan ? "plan" : "custom schedule") << " ("
            << e.schedule.name << ", P=" << e.schedule.pp() << " M=" << e.schedule.microbatches()
            << " V=" << e.schedule.chunks() << ", " << placementName(e.schedule.placement.kind)
            << " placement, " << e.schedule.opCount() << " ops, " << e.program.messages.size()
            << " transfers)\n"
            << "makespan " << number(e.simulation.makespan_us) << " us, bubble_fraction "
            << percent(e.simulation.bubble_fraction) << ", bubble_ratio "
            << percent(e.simulation.bubble_ratio) << '\n';
  return 0;
}

// ---------------------------------------------------------------------------------------------
// bench

int runBench(const std::vector<std::string> &args) {
  if (wantsHelp(args)) {
    std::cout << "usage: pipescope bench [--schedules LIST] [--repeat N] [--json]\n\nTimes "
                 "generation + lowering + simulation over a ladder of sizes up to P=64, M=1024, "
                 "V=4 (about a million ops; one rung beyond at M=2048) and prints ops per second "
                 "(the best of N runs, default 5).\n";
    return 0;
  }
  auto parsed = Arguments::parse(args, {"schedules", "repeat"}, {"json"}, "bench");
  if (!parsed) return fail(parsed.error().message);
  const auto schedules =
      splitList(parsed->text("schedules").value_or("1f1b,interleaved-1f1b,zb-h1,zb-v,dualpipev"));
  auto repeat = parsed->integer("repeat", 1, 1000);
  if (!repeat) return fail(repeat.error().message);
  const int runs = repeat->value_or(5);
  struct Size {
    int pp, microbatches, chunks;
  };
  const Size ladder[] = {{4, 8, 4},    {8, 32, 4},    {16, 64, 4},  {32, 256, 4},
                         {64, 512, 4}, {64, 1024, 4}, {64, 2048, 4}};
  json rows = json::array();
  std::printf("%-18s %5s %6s %3s %10s %12s %12s %14s\n", "schedule", "P", "M", "V", "ops",
              "generate ms", "total ms", "ops/s");
  for (const auto &name : schedules) {
    const auto *family = findScheduleFamily(name);
    if (!family) return fail("unknown schedule '" + name + "'; see 'pipescope schedules'");
    for (const auto &size : ladder) {
      ScheduleRequest request{name, size.pp, size.microbatches,
                              family->uses_chunks ? size.chunks : 1, 0};
      if (!checkScheduleRequest(request)) continue;
      double best_total = 1e30, best_generate = 1e30;
      std::size_t ops = 0;
      for (int run = 0; run < runs; ++run) {
        const auto t0 = std::chrono::steady_clock::now();
        auto schedule = generateSchedule(request);
        const auto t1 = std::chrono::steady_clock::now();
        if (!schedule) return fail(schedule.error().message);
        ops = schedule->opCount();
        auto evaluation = evaluateSchedule(std::move(*schedule), Costs{});
        const auto t2 = std::chrono::steady_clock::now();
        if (!evaluation) return fail(evaluation.error().message);
        best_generate =
            std::min(best_generate, std::chrono::duration<double, std::milli>(t1 - t0).count());
        best_total =
            std::min(best_total, std::chrono::duration<double, std::milli>(t2 - t0).count());
      }
      const double ops_per_s = static_cast<double>(ops) / (best_total / 1e3);
      std::printf("%-18s %5d %6d %3d %10zu %12.3f %12.3f %14.3g\n", name.c_str(), request.pp,
                  request.microbatches, request.chunks, ops, best_generate, best_total, ops_per_s);
      rows.push_back({{"schedule", name},
                      {"pp", request.pp},
                      {"microbatches", request.microbatches},
                      {"virtual_stages", request.chunks},
                      {"ops", ops},
                      {"generate_ms", best_generate},
                      {"total_ms", best_total},
                      {"ops_per_s", ops_per_s}});
    }
  }
  if (parsed->has("json")) std::cout << rows.dump(2) << '\n';
  return 0;
}

// ---------------------------------------------------------------------------------------------
// schedules, presets

int runSchedules(const std::vector<std::string> &args) {
  if (!args.empty() && !wantsHelp(args)) return fail("'schedules' takes no arguments");
  for (const auto &family : scheduleFamilies()) {
    std::cout << family.name << " — " << family.title << "\n  " << family.summary
              << "\n  accepts: " << family.constraints
              << "\n  placement: " << placementName(family.placement)
              << (family.splits_backward ? ", backward split into I and W" : "")
              << "\n  source: " << family.reference << "\n\n";
  }
  std::cout << "custom — per-rank op lists from a pipescope.schedule JSON file or PyTorch's "
               "schedule CSV (--custom FILE, pipescope validate FILE)\n";
  return 0;
}

int runPresets(const std::vector<std::string> &args) {
  if (!args.empty() && !wantsHelp(args)) return fail("'presets' takes no arguments");
  std::cout << "models:\n";
  for (const auto &name : modelPresetNames()) {
    auto model = loadModelSpec(name);
    std::cout << "  " << name;
    if (model)
      std::cout << "  (" << model->layers << " layers, h=" << model->hidden << ", " << model->heads
                << " heads; " << model->source.substr(0, model->source.find(';')) << ")";
    std::cout << '\n';
  }
  std::cout << "hardware:\n";
  for (const auto &name : hardwarePresetNames()) {
    auto hardware = loadHardwareSpec(name);
    std::cout << "  " << name;
    if (hardware)
      std::cout << "  (" << hardware->peak_tflops << " TFLOP/s bf16, " << hardware->memory_gib
                << " GiB; " << hardware->source.substr(0, hardware->source.find(" (")) << ")";
    std::cout << '\n';
  }
  std::cout
      << "--model and --hardware also take a JSON file of your own (see resources/presets).\n";
  return 0;
}

} // namespace pipescope::cli
