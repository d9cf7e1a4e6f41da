// Published runs against the cost model's predictions (DESIGN.md §5a, docs/validation.md).
#include "engine/model/validation.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <tuple>

#include "engine/evaluation.h"
#include "engine/json_fields.h"
#include "engine/json_io.h"
#include "engine/model/speed_of_light.h"
#include "engine/plan_file.h"
#include "resources/embedded_resources.h"

namespace pipescope {

// Tokens of one step of the row's global batch: the dp replicas each take M × b sequences (CP
// splits each sequence over its ranks, it adds none).
double stepTokens(const ValidationCase &validation_case) {
  const ValidationCase &c = validation_case;
  return static_cast<double>(c.request.microbatches) * c.setup.model.microbatch_size *
         c.setup.model.sequence_length * c.mesh.dp;
}

Result<ValidationCase> configurationFromJson(const nlohmann::json &row,
                                             const std::string &pointer) {
  JsonFields fields(row, pointer);
  ValidationCase c;
  fields.text("hardware", c.hardware_name, true);
  const auto *model = fields.object("model", true);
  const auto *mesh = fields.object("mesh", true);
  const auto *schedule = fields.object("schedule", true);
  const auto *training = fields.object("training");
  if (!fields.ok()) return fields.error();

  auto spec = modelSpecFromJson(*model, pointer + "/model");
  if (!spec) return spec.error();
  c.setup.model = std::move(*spec);
  auto hardware = loadHardwareSpec(c.hardware_name);
  if (!hardware) return makeError(pointer + "/hardware: " + hardware.error().message);
  c.setup.hardware = std::move(*hardware);
  if (training) {
    auto setup = trainingSetupFromJson(*training, pointer + "/training");
    if (!setup) return setup.error();
    c.setup.training = *setup;
  }

  c.mesh.gpus_per_node = c.setup.hardware.gpus_per_node;
  if (auto status = readMesh(*mesh, pointer + "/mesh", c.mesh, true); !status)
    return status.error();

  JsonFields schedule_fields(*schedule, pointer + "/schedule");
  c.request.pp = c.mesh.pp;
  schedule_fields.text("name", c.request.name, true)
      .integer("microbatches", c.request.microbatches, 1, 1 << 20, true)
      .integer("virtual_stages", c.request.chunks, 1, 1 << 10);
  if (!schedule_fields.ok()) return schedule_fields.error();
  return c;
}

namespace {

constexpr std::string_view kValidationFormat = "pipescope.validation";
constexpr std::string_view kValidationFolder = "validation/";
constexpr int kValidationVersion = 1;
constexpr double kGiB = 1073741824.0;

Result<ValidationCase> caseFromJson(const nlohmann::json &row, const std::string &pointer) {
  JsonFields fields(row, pointer);
  std::string id, published;
  fields.text("id", id, true).text("published", published, true);
  const auto *measured = fields.object("measured", true);
  if (!fields.ok()) return fields.error();
  auto configuration = configurationFromJson(row, pointer);
  if (!configuration) return configuration.error();
  ValidationCase c = std::move(*configuration);
  c.id = std::move(id);
  c.published = std::move(published);

  JsonFields measured_fields(*measured, pointer + "/measured");
  double step_s = 0, tflops_per_gpu = 0, memory_gib = 0, gpu_hours_per_trillion = 0,
         tokens_per_s_per_gpu = 0;
  std::string formula;
  measured_fields.number("step_time_s", step_s, 0, 1e9)
      .number("tflops_per_gpu", tflops_per_gpu, 0, 1e6)
      .number("gpu_hours_per_trillion_tokens", gpu_hours_per_trillion, 0, 1e12)
      .number("tokens_per_s_per_gpu", tokens_per_s_per_gpu, 0, 1e12)
      .text("flops_formula", formula)
      .number("memory_gib", memory_gib, 0, 1e6)
      .text("memory_how", c.memory_how)
      .integer("memory_pipeline_rank", c.memory_pipeline_rank, 0, c.mesh.pp - 1)
      .text("set_aside", c.set_aside);
  if (!measured_fields.ok()) return measured_fields.error();
  if (memory_gib > 0) c.measured_memory_gib = memory_gib;
  const double step_tokens = stepTokens(c);
  if (step_s > 0) {
    c.measured_step_s = step_s;
    c.measured_how = "measured iteration time";
  } else if (tokens_per_s_per_gpu > 0) {
    c.measured_step_s = step_tokens / (tokens_per_s_per_gpu * c.mesh.worldSize());
    c.measured_how = "published tokens/s per GPU over the row's global batch";
  } else if (gpu_hours_per_trillion > 0) {
    // A training cost per token (GPU-hours per 10^12 tokens) spread over the mesh: one step of
    // the row's global batch takes hours·3600/10^12 GPU-seconds per token, over world GPUs.
    c.measured_step_s = gpu_hours_per_trillion * 3600 / 1e12 * step_tokens / c.mesh.worldSize();
    c.measured_how = "published GPU-hours per trillion tokens over the row's global batch";
  } else if (tflops_per_gpu > 0 && formula == "narayanan-2021") {
    const ModelSpec &m = c.setup.model;
    const double batch =
        static_cast<double>(c.mesh.dp) * c.request.microbatches * m.microbatch_size;
    const double flops =
        narayanan2021IterationFlops(batch, m.sequence_length, m.layers, m.hidden, m.vocab);
    c.measured_step_s = flops / (tflops_per_gpu * 1e12 * c.mesh.worldSize());
    c.measured_how = "published teraFLOP/s per GPU through Narayanan et al. 2021, eq. 3";
  } else if (tflops_per_gpu > 0 && formula == "megatron-core-2024") {
    const ModelSpec &m = c.setup.model;
    const double batch =
        static_cast<double>(c.mesh.dp) * c.request.microbatches * m.microbatch_size;
    c.measured_step_s =
        megatronCoreIterationFlops(m, batch) / (tflops_per_gpu * 1e12 * c.mesh.worldSize());
    c.measured_how = "published teraFLOP/s per GPU through Megatron-Core's "
                     "num_floating_point_operations";
  } else if (memory_gib <= 0) {
    return makeError(pointer + "/measured: give step_time_s, tokens_per_s_per_gpu, "
                               "gpu_hours_per_trillion_tokens, tflops_per_gpu with flops_formula "
                               "\"narayanan-2021\" or \"megatron-core-2024\", or memory_gib (a "
                               "row that checks memory only)");
  }
  if (!c.set_aside.empty() && c.measured_step_s <= 0)
    return makeError(pointer + "/measured/set_aside: only a measured time is set aside, and this "
                               "row has none; remove set_aside or give the row's step time");
  return c;
}

} // namespace

double narayanan2021IterationFlops(double batch, double sequence, double layers, double hidden,
                                   double vocab) {
  return 96 * batch * sequence * layers * hidden * hidden *
         (1 + sequence / (6 * hidden) + vocab / (16 * layers * hidden));
}

double megatronCoreIterationFlops(const ModelSpec &m, double batch) {
  const double h = m.hidden, s = m.sequence_length, heads = m.heads;
  const double kv_channels = m.head_dim > 0 ? m.head_dim : h / heads;
  const double query_ratio = kv_channels * heads / h;
  const double groups = m.kv_heads > 0 ? m.kv_heads : heads;
  const double routed = m.experts > 0 ? m.experts_per_token : 1;
  const double gated = m.gated_mlp ? 1.5 : 1.0;
  const double ffn = m.experts > 0 ? m.expert_ffn_hidden : m.ffn_hidden;
  return 12 * batch * s * m.layers * h * h *
         ((1 + groups / heads + s / h) * query_ratio + ffn / h * routed * gated +
          m.vocab / (2.0 * m.layers * h));
}

std::vector<std::string> validationSetNames() {
  std::vector<std::string> names;
  for (const auto &resource : embeddedResources()) {
    std::string_view name = resource.name;
    if (name.substr(0, kValidationFolder.size()) != kValidationFolder || name.size() <= 5 ||
        name.substr(name.size() - 5) != ".json")
      continue;
    name.remove_prefix(kValidationFolder.size());
    names.emplace_back(name.substr(0, name.size() - 5));
  }
  std::sort(names.begin(), names.end());
  return names;
}

Result<ValidationSet> validationSetFromJson(const nlohmann::json &json, const std::string &name) {
  if (auto status = checkFormatAndVersion(json, kValidationFormat, kValidationVersion); !status)
    return status.error();
  JsonFields fields(json, "");
  ValidationSet set;
  set.name = name;
  fields.text("title", set.title, true).text("source", set.source, true);
  const auto *rows = fields.array("rows", true);
  if (!fields.ok()) return fields.error();
  for (std::size_t i = 0; i < rows->size(); ++i) {
    auto row = caseFromJson((*rows)[i], "/rows/" + std::to_string(i));
    if (!row) return row.error();
    set.cases.push_back(std::move(*row));
  }
  return set;
}

Result<ValidationSet> loadValidationSet(const std::string &name_or_path) {
  std::string text, name;
  if (const auto embedded =
          findEmbeddedResource(std::string(kValidationFolder) + name_or_path + ".json")) {
    text = std::string(*embedded);
    name = name_or_path;
  } else {
    auto read = readTextFile(name_or_path);
    if (!read) {
      std::string known;
      for (const auto &n : validationSetNames())
        known += (known.empty() ? "" : ", ") + n;
      return makeError("no validation set or file named '" + escapeControlCharacters(name_or_path) +
                       "' (" + read.error().message + "); shipped sets: " + known);
    }
    text = std::move(*read);
    name = std::filesystem::path(name_or_path).stem().string();
  }
  auto json = parseJsonLimited(text);
  if (!json) return makeError(name + ": " + json.error().message);
  auto set = validationSetFromJson(*json, name);
  if (!set) return makeError(name + ": " + set.error().message);
  return set;
}

Plan validationCasePlan(const ValidationCase &validation_case) {
  Plan plan;
  plan.request = validation_case.request;
  plan.mesh = validation_case.mesh;
  plan.model = validation_case.setup;
  return plan;
}

LayoutRanking layoutRanking(const std::vector<ValidationResult> &results) {
  LayoutRanking ranking;
  for (std::size_t i = 0; i < results.size(); ++i)
    for (std::size_t j = i + 1; j < results.size(); ++j) {
      const ValidationCase &a = *results[i].validation_case, &b = *results[j].validation_case;
      if (!countsInStepAccuracy(results[i]) || !countsInStepAccuracy(results[j])) continue;
      if (a.setup.model.name != b.setup.model.name || a.hardware_name != b.hardware_name ||
          a.mesh.worldSize() != b.mesh.worldSize() || stepTokens(a) != stepTokens(b) ||
          a.setup.training.gemm_precision != b.setup.training.gemm_precision ||
          a.measured_step_s == b.measured_step_s)
        continue;
      ++ranking.pairs;
      const bool a_faster = a.measured_step_s < b.measured_step_s;
      const bool predicted_a_faster = results[i].predicted_step_s < results[j].predicted_step_s;
      if (a_faster == predicted_a_faster)
        ++ranking.ordered;
      else
        ranking.misordered.push_back(a_faster ? a.id + " vs " + b.id : b.id + " vs " + a.id);
    }
  return ranking;
}

double comparedMemoryGib(const ValidationCase &validation_case, const ModelReport &report) {
  const int rank = validation_case.memory_pipeline_rank;
  if (rank >= 0 && static_cast<std::size_t>(rank) < report.memory.size())
    return report.memory[static_cast<std::size_t>(rank)].total / kGiB;
  double busiest = 0;
  for (const auto &memory : report.memory)
    busiest = std::max(busiest, memory.total / kGiB);
  return busiest;
}

Result<ValidationResult> predictValidationCase(const ValidationCase &validation_case,
                                               bool with_speed_of_light) {
  const ValidationCase &c = validation_case;
  const Plan plan = validationCasePlan(c);
  ModelDerivation derivation;
  auto evaluation = evaluatePlan(plan, {}, &derivation);
  if (!evaluation) return makeError(c.id + ": " + evaluation.error().message);
  double speed_of_light_s = 0;
  if (with_speed_of_light) {
    auto fastest = speedOfLightStepS(plan);
    if (!fastest) return makeError(c.id + " " + fastest.error().message);
    speed_of_light_s = *fastest;
  }
  const ModelReport report =
      reportModel(c.setup, c.mesh, evaluation->schedule, derivation, evaluation->simulation);
  if (auto status = checkModelReport(report); !status)
    return makeError(c.id + ": " + status.error().message);
  ValidationResult result;
  result.validation_case = &c;
  result.predicted_step_s = report.step_time_s;
  result.speed_of_light_step_s = speed_of_light_s;
  result.report = report;
  result.stage_breakdown = derivation.stage_breakdown;
  result.layer_ops = derivation.layer_ops;
  result.moe_layer_ops = derivation.moe_layer_ops;
  if (c.measured_step_s > 0)
    result.step_error = (report.step_time_s - c.measured_step_s) / c.measured_step_s;
  result.predicted_memory_gib = comparedMemoryGib(c, report);
  if (c.measured_memory_gib)
    result.memory_error =
        (result.predicted_memory_gib - *c.measured_memory_gib) / *c.measured_memory_gib;
  return result;
}

SpeedOfLightSummary speedOfLightSummary(const std::vector<ValidationResult> &results) {
  SpeedOfLightSummary summary;
  std::vector<double> ratios;
  for (const auto &result : results) {
    if (belowSpeedOfLight(result)) summary.below.push_back(&result);
    if (countsInStepAccuracy(result) && result.speed_of_light_step_s > 0)
      ratios.push_back(result.validation_case->measured_step_s / result.speed_of_light_step_s);
  }
  if (ratios.empty()) return summary;
  std::sort(ratios.begin(), ratios.end());
  const std::size_t n = ratios.size();
  summary.runs = static_cast<int>(n);
  summary.lowest = ratios.front();
  summary.highest = ratios.back();
  summary.median = n % 2 == 1 ? ratios[n / 2] : (ratios[n / 2 - 1] + ratios[n / 2]) / 2;
  return summary;
}

nlohmann::json explanationJson(const ValidationResult &result) {
  const ModelReport &report = result.report;
  return {{"mfu", report.mfu},
          {"tokens_per_s", report.tokens_per_s},
          {"communication",
           {{"tp", toJson(report.tp)}, {"pp", toJson(report.pp)}, {"dp", toJson(report.dp)}}},
          {"cost_breakdown",
           costBreakdownJson(result.stage_breakdown, result.layer_ops, result.moe_layer_ops)}};
}

std::vector<std::string> explanationLines(const ValidationResult &result) {
  std::vector<std::string> lines;
  const auto ms = [](double seconds) {
    char text[32];
    std::snprintf(text, sizeof text, "%.1f ms", seconds * 1e3);
    return std::string(text);
  };
  // Each stage's passes; consecutive stages that cost the same are one group (a pipeline's
  // middle stages usually are).
  std::size_t group_start = 0;
  std::vector<std::string> group_passes;
  const auto closeGroup = [&](std::size_t end) {
    if (group_passes.empty()) return;
    const StageBreakdown &stage = result.stage_breakdown[group_start];
    std::string header = end - group_start == 1 ? "stage " + std::to_string(group_start)
                                                : "stages " + std::to_string(group_start) + "-" +
                                                      std::to_string(end - 1);
    header += " (" + std::to_string(stage.layers) + (stage.layers == 1 ? " layer" : " layers") +
              (end - group_start == 1 ? "" : " each") + "), per microbatch on one TP rank:";
    lines.push_back(header);
    for (const auto &pass : group_passes)
      lines.push_back("  " + pass);
  };
  for (std::size_t v = 0; v < result.stage_breakdown.size(); ++v) {
    std::vector<std::string> passes;
    const int stage_index = static_cast<int>(v);
    for (const Op &op :
         {forwardOp(stage_index, 0), inputGradOp(stage_index, 0), weightGradOp(stage_index, 0)}) {
      const auto parts = opBreakdown(result.stage_breakdown, op);
      if (!parts || parts->total() <= 0) continue;
      if (auto text = describeOpCost(result.stage_breakdown, op, parts->total()))
        passes.push_back(*text);
    }
    if (v > 0 && passes == group_passes &&
        result.stage_breakdown[v].layers == result.stage_breakdown[group_start].layers)
      continue;
    closeGroup(v);
    group_start = v;
    group_passes = std::move(passes);
  }
  closeGroup(result.stage_breakdown.size());
  // Each kind with where its time is paid: TP inside the ops, PP in the simulation, DP after the
  // last op, as much as overlap leaves exposed.
  std::string communication = "communication per step:";
  const ModelReport &report = result.report;
  const std::tuple<const char *, const CommunicationKind &, std::string> kinds[] = {
      {"TP", report.tp, "in the ops above"},
      {"PP", report.pp, "simulated"},
      {"DP", report.dp, ms(report.dp.exposed_time_s) + " exposed"}};
  for (const auto &[name, kind, where] : kinds)
    if (kind.link != "none" && kind.time_s > 0)
      communication +=
          std::string(" ") + name + " " + ms(kind.time_s) + " (" + kind.link + ", " + where + ");";
  if (communication.back() == ';') communication.pop_back();
  if (communication.back() == ':') communication += " none";
  lines.push_back(communication);
  char mfu[64];
  std::snprintf(mfu, sizeof mfu, "MFU %.1f %%", 100 * result.report.mfu);
  lines.push_back(mfu);
  return lines;
}

} // namespace pipescope
