// JSON forms of the model, hardware and training setup, and the presets shipped under
// resources/presets (compiled in) or given as a file path.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <set>
#include <sstream>
#include <string>

#include "engine/json_fields.h"
#include "engine/json_io.h"
#include "engine/model/model_setup.h"
#include "resources/embedded_resources.h"

namespace pipescope {

namespace {

constexpr std::string_view kModelFormat = "pipescope.model";
constexpr std::string_view kHardwareFormat = "pipescope.hardware";
constexpr int kVersion = 1;

std::string joined(const std::vector<std::string> &names) {
  std::string out;
  for (const auto &n : names)
    out += (out.empty() ? "" : ", ") + n;
  return out.empty() ? "(none)" : out;
}

std::vector<std::string> presetNames(std::string_view folder) {
  std::vector<std::string> names;
  for (const auto &resource : embeddedResources()) {
    if (resource.name.substr(0, folder.size()) != folder) continue;
    std::string_view rest = resource.name.substr(folder.size());
    if (rest.size() <= 5 || rest.substr(rest.size() - 5) != ".json" ||
        rest.find('/') != std::string_view::npos)
      continue;
    names.emplace_back(rest.substr(0, rest.size() - 5));
  }
  std::sort(names.begin(), names.end());
  return names;
}

/// Refuses keys a reader does not know, so a typo ("hiden") is not silently ignored.
Status checkKeys(const nlohmann::json &json, const std::string &pointer,
                 std::initializer_list<const char *> known) {
  if (!json.is_object()) return Ok{};
  for (const auto &item : json.items()) {
    bool found = false;
    for (const char *k : known)
      found = found || item.key() == k;
    if (!found) {
      std::string list;
      for (const char *k : known)
        list += (list.empty() ? "" : ", ") + std::string(k);
      return makeError(pointer + "/" + item.key() + ": unknown field; expected one of " + list);
    }
  }
  return Ok{};
}

/// "format" and "version" are optional inside a plan but must be right when present.
Status checkOptionalFormat(const nlohmann::json &json, const std::string &pointer,
                           std::string_view format) {
  if (!json.is_object()) return Ok{};
  if (const auto f = json.find("format"); f != json.end() && (!f->is_string() || *f != format))
    return makeError(pointer + "/format: expected \"" + std::string(format) + "\", got " +
                     f->dump());
  if (const auto v = json.find("version");
      v != json.end() && (!v->is_number_integer() || *v != kVersion))
    return makeError(pointer + "/version: expected " + std::to_string(kVersion) + ", got " +
                     v->dump());
  return Ok{};
}

template <typename Spec>
Result<Spec> loadSpec(const std::string &name_or_path, std::string_view folder,
                      std::string_view format, const char *kind,
                      const std::vector<std::string> &names,
                      Result<Spec> (*fromJson)(const nlohmann::json &, const std::string &)) {
  std::string text, where;
  if (const auto embedded = findEmbeddedResource(std::string(folder) + name_or_path + ".json")) {
    text = std::string(*embedded);
    where = std::string(kind) + " preset '" + name_or_path + "'";
  } else {
    // Read first (opened once, whatever it is); only a name that is nothing at all gets the list
    // of presets.
    auto read =
        name_or_path.empty() ? Result<std::string>(makeError("")) : readTextFile(name_or_path);
    std::error_code ec;
    if (!read && !std::filesystem::exists(std::filesystem::symlink_status(name_or_path, ec)))
      return makeError("no " + std::string(kind) + " preset or file named '" +
                       escapeControlCharacters(name_or_path) + "'; presets: " + joined(names) +
                       " (or give the path of a \"" + std::string(format) + "\" JSON file)");
    if (!read) return read.error();
    text = std::move(*read);
    where = "'" + escapeControlCharacters(name_or_path) + "'";
  }
  auto json = parseJsonLimited(text);
  if (!json) return makeError(where + ": " + json.error().message);
  if (auto status = checkFormatAndVersion(*json, format, kVersion); !status)
    return makeError(where + ": " + status.error().message);
  auto spec = fromJson(*json, "");
  if (!spec) return makeError(where + ": " + spec.error().message);
  if (spec->name.empty()) spec->name = std::filesystem::path(name_or_path).stem().string();
  return spec;
}

} // namespace

std::string_view recomputeName(Recompute recompute) {
  switch (recompute) {
  case Recompute::None: return "none";
  case Recompute::Selective: return "selective";
  case Recompute::Full: return "full";
  case Recompute::SelectiveOp: return "selective-op";
  }
  return "none";
}

const std::vector<std::string> &recomputeModuleNames() {
  static const std::vector<std::string> names = {"layernorm", "mla_up_proj", "mlp", "moe_act"};
  return names;
}

namespace {
/// The known modules among `given`, in canonical order, each once.
std::vector<std::string> inCanonicalOrder(const std::vector<std::string> &given) {
  std::vector<std::string> modules;
  for (const auto &name : recomputeModuleNames())
    if (std::find(given.begin(), given.end(), name) != given.end()) modules.push_back(name);
  return modules;
}
} // namespace

Result<std::vector<std::string>> parseRecomputeModules(std::string_view list) {
  const auto &known = recomputeModuleNames();
  std::vector<std::string> given;
  std::size_t start = 0;
  while (start <= list.size()) {
    const auto end = std::min(list.find(',', start), list.size());
    const std::string name(list.substr(start, end - start));
    if (std::find(known.begin(), known.end(), name) == known.end())
      return makeError("recompute module '" + name + "' is not known; use " + joined(known) +
                       ", comma-separated (core_attn is recompute selective)");
    given.push_back(name);
    start = end + 1;
  }
  return inCanonicalOrder(given);
}

bool recomputesModule(const TrainingSetup &training, std::string_view name) {
  return std::find(training.recompute_modules.begin(), training.recompute_modules.end(), name) !=
         training.recompute_modules.end();
}

Result<Recompute> parseRecompute(std::string_view text) {
  if (text == "none") return Recompute::None;
  if (text == "selective") return Recompute::Selective;
  if (text == "full") return Recompute::Full;
  if (text == "selective-op") return Recompute::SelectiveOp;
  return makeError("recomputation '" + std::string(text) +
                   "' is not known; use none, selective, full or selective-op");
}

std::string_view collectiveAlgorithmName(CollectiveAlgorithm algorithm) {
  switch (algorithm) {
  case CollectiveAlgorithm::Auto: return "auto";
  case CollectiveAlgorithm::Ring: return "ring";
  case CollectiveAlgorithm::Tree: return "tree";
  }
  return "auto";
}

Result<CollectiveAlgorithm> parseCollectiveAlgorithm(std::string_view text) {
  if (text == "auto") return CollectiveAlgorithm::Auto;
  if (text == "ring") return CollectiveAlgorithm::Ring;
  if (text == "tree") return CollectiveAlgorithm::Tree;
  return makeError("collective algorithm '" + std::string(text) +
                   "' is not known; use auto (NCCL's choice per message), ring or tree");
}

std::string_view gemmPrecisionName(GemmPrecision precision) {
  return precision == GemmPrecision::Fp8 ? "fp8" : "bf16";
}

Result<GemmPrecision> parseGemmPrecision(std::string_view text) {
  if (text == "bf16") return GemmPrecision::Bf16;
  if (text == "fp8") return GemmPrecision::Fp8;
  return makeError("GEMM precision '" + std::string(text) +
                   "' is not known; use bf16 or fp8 (Transformer Engine's FP8 linear layers)");
}

std::vector<std::string> modelPresetNames() {
  return presetNames("presets/models/");
}
std::vector<std::string> hardwarePresetNames() {
  return presetNames("presets/hardware/");
}

Result<ModelSpec> loadModelSpec(const std::string &name_or_path) {
  return loadSpec<ModelSpec>(name_or_path, "presets/models/", kModelFormat, "model",
                             modelPresetNames(), &modelSpecFromJson);
}

Result<HardwareSpec> loadHardwareSpec(const std::string &name_or_path) {
  return loadSpec<HardwareSpec>(name_or_path, "presets/hardware/", kHardwareFormat, "hardware",
                                hardwarePresetNames(), &hardwareSpecFromJson);
}

nlohmann::json toJson(const ModelSpec &m) {
  nlohmann::json out = {{"format", kModelFormat},
                        {"version", kVersion},
                        {"name", m.name},
                        {"source", m.source},
                        {"notes", m.notes},
                        {"layers", m.layers},
                        {"hidden", m.hidden},
                        {"ffn_hidden", m.ffn_hidden},
                        {"heads", m.heads},
                        {"kv_heads", m.kv_heads},
                        {"vocab", m.vocab},
                        {"sequence_length", m.sequence_length},
                        {"microbatch_size", m.microbatch_size},
                        {"dtype", m.dtype},
                        {"tied_embeddings", m.tied_embeddings},
                        {"gated_mlp", m.gated_mlp},
                        {"position_embeddings", m.position_embeddings},
                        {"linear_biases", m.linear_biases},
                        {"norm", m.norm},
                        {"attention", m.attention},
                        {"dropout", m.dropout},
                        {"experts", m.experts},
                        {"experts_per_token", m.experts_per_token},
                        {"shared_experts", m.shared_experts},
                        {"expert_ffn_hidden", m.expert_ffn_hidden},
                        {"first_dense_layers", m.first_dense_layers},
                        {"capacity_factor", m.capacity_factor}};
  if (m.mtp_layers > 0) out["mtp_layers"] = m.mtp_layers;
  if (m.router_groups > 0) {
    out["router_groups"] = m.router_groups;
    out["router_group_topk"] = m.router_group_topk;
  }
  if (m.head_dim > 0) out["head_dim"] = m.head_dim;
  if (m.kv_lora_rank > 0) {
    out["q_lora_rank"] = m.q_lora_rank;
    out["kv_lora_rank"] = m.kv_lora_rank;
    out["qk_nope_head_dim"] = m.qk_nope_head_dim;
    out["qk_rope_head_dim"] = m.qk_rope_head_dim;
    out["v_head_dim"] = m.v_head_dim;
  }
  return out;
}

nlohmann::json toJson(const HardwareSpec &hw) {
  nlohmann::json out = {{"format", kHardwareFormat},
                        {"version", kVersion},
                        {"name", hw.name},
                        {"source", hw.source},
                        {"notes", hw.notes},
                        {"peak_tflops", hw.peak_tflops},
                        {"efficiency", hw.efficiency},
                        {"memory_gib", hw.memory_gib},
                        {"intra_node_gbps", hw.intra_node_gbps},
                        {"intra_node_latency_us", hw.intra_node_latency_us},
                        {"inter_node_gbps", hw.inter_node_gbps},
                        {"inter_node_latency_us", hw.inter_node_latency_us},
                        {"intra_node_bus_efficiency", hw.intra_node_bus_efficiency},
                        {"inter_node_bus_efficiency", hw.inter_node_bus_efficiency},
                        {"hbm_gbps", hw.hbm_gbps},
                        {"memory_efficiency", hw.memory_efficiency},
                        {"attention_efficiency", hw.attention_efficiency},
                        {"gpus_per_node", hw.gpus_per_node}};
  if (hw.sm_count > 0) out["sm_count"] = hw.sm_count;
  if (hw.collective_gemm_slowdown > 0)
    out["collective_gemm_slowdown"] = hw.collective_gemm_slowdown;
  if (!hw.bus_efficiency_source.empty()) out["bus_efficiency_source"] = hw.bus_efficiency_source;
  const auto curveJson = [](const std::vector<GemmEfficiencyPoint> &points) {
    nlohmann::json curve = nlohmann::json::array();
    for (const auto &point : points)
      curve.push_back({{"flops", point.flops}, {"efficiency", point.efficiency}});
    return curve;
  };
  if (!hw.gemm_efficiency.empty()) {
    out["gemm_efficiency"] = curveJson(hw.gemm_efficiency);
    out["gemm_efficiency_source"] = hw.gemm_efficiency_source;
  }
  if (hw.peak_fp8_tflops > 0) out["peak_fp8_tflops"] = hw.peak_fp8_tflops;
  if (!hw.gemm_efficiency_fp8.empty()) {
    out["gemm_efficiency_fp8"] = curveJson(hw.gemm_efficiency_fp8);
    out["gemm_efficiency_fp8_source"] = hw.gemm_efficiency_fp8_source;
  }
  if (hw.moe_layer_host_us >= 0) out["moe_layer_host_us"] = hw.moe_layer_host_us;
  if (hw.layer_overhead_us > 0) out["layer_overhead_us"] = hw.layer_overhead_us;
  if (hw.step_overhead_us > 0) out["step_overhead_us"] = hw.step_overhead_us;
  if (const auto &c = hw.calibration)
    out["calibration"] = {{"runs", c->runs},
                          {"held_out_mean_abs_step_error", c->mean_abs_step_error},
                          {"held_out_worst_abs_step_error", c->worst_abs_step_error},
                          {"held_out_mean_step_error", c->mean_step_error},
                          {"sets", c->sets}};
  return out;
}

nlohmann::json toJson(const TrainingSetup &training) {
  nlohmann::json out = {
      {"recompute", recomputeName(training.recompute)},
      {"zero_stage", training.zero_stage},
      {"sequence_parallel", training.sequence_parallel},
      {"optimizer_bytes_per_param", training.optimizer_bytes_per_param},
      {"balance_layers", training.balance_layers},
      {"overlap_gradient_sync", training.overlap_gradient_sync},
      {"expert_load_imbalance", training.expert_load_imbalance},
      {"collective_algorithm", collectiveAlgorithmName(training.collective_algorithm)},
      {"gemm_precision", gemmPrecisionName(training.gemm_precision)},
      {"cross_entropy", training.cross_entropy}};
  if (training.moe_dispatcher != "alltoall") out["moe_dispatcher"] = training.moe_dispatcher;
  if (training.moe_dispatcher_sms > 0) out["moe_dispatcher_sms"] = training.moe_dispatcher_sms;
  if (training.moe_layer_host_us >= 0) out["moe_layer_host_us"] = training.moe_layer_host_us;
  if (training.tp_comm_overlap) out["tp_comm_overlap"] = true;
  if (training.tp_backward_overlap) out["tp_backward_overlap"] = true;
  if (training.fp32_gradients) out["fp32_gradients"] = true;
  if (!training.swiglu_fusion) out["swiglu_fusion"] = false;
  if (!training.gradient_accumulation_fusion) out["gradient_accumulation_fusion"] = false;
  if (!training.masked_softmax_fusion) out["masked_softmax_fusion"] = false;
  // The modules go with Megatron's selective granularity; under full recomputation they would
  // make a file the reader refuses, so they are written only where they apply.
  if (!training.recompute_modules.empty() &&
      (training.recompute == Recompute::None || training.recompute == Recompute::Selective))
    out["recompute_modules"] = training.recompute_modules;
  if (training.gemm_precision == GemmPrecision::Fp8) out["fp8_dispatch"] = training.fp8_dispatch;
  if (training.gemm_precision == GemmPrecision::Fp8 && training.fp8_params)
    out["fp8_params"] = true;
  if (!training.layout.empty()) out["layout"] = formatMegatronLayout(training.layout);
  return out;
}

Result<ModelSpec> modelSpecFromJson(const nlohmann::json &json, const std::string &pointer) {
  JsonFields fields(json, pointer);
  if (!fields.ok()) return fields.error();
  if (auto s = checkOptionalFormat(json, pointer, kModelFormat); !s) return s.error();
  if (auto s = checkKeys(json, pointer,
                         {"format",
                          "version",
                          "name",
                          "source",
                          "notes",
                          "layers",
                          "hidden",
                          "ffn_hidden",
                          "heads",
                          "kv_heads",
                          "head_dim",
                          "q_lora_rank",
                          "kv_lora_rank",
                          "qk_nope_head_dim",
                          "qk_rope_head_dim",
                          "v_head_dim",
                          "vocab",
                          "sequence_length",
                          "microbatch_size",
                          "dtype",
                          "tied_embeddings",
                          "gated_mlp",
                          "position_embeddings",
                          "linear_biases",
                          "norm",
                          "mtp_layers",
                          "attention",
                          "dropout",
                          "experts",
                          "experts_per_token",
                          "shared_experts",
                          "expert_ffn_hidden",
                          "first_dense_layers",
                          "capacity_factor",
                          "router_groups",
                          "router_group_topk"});
      !s)
    return s.error();
  ModelSpec m;
  m.kv_heads = -1;
  fields.text("name", m.name)
      .text("source", m.source)
      .text("notes", m.notes)
      .integer("layers", m.layers, 1, 100000, true)
      .integer("hidden", m.hidden, 1, 1 << 20, true)
      .integer("ffn_hidden", m.ffn_hidden, 1, 1 << 22, true)
      .integer("heads", m.heads, 1, 1 << 16, true)
      .integer("kv_heads", m.kv_heads, 1, 1 << 16)
      .integer("head_dim", m.head_dim, 0, 1 << 16)
      .integer("q_lora_rank", m.q_lora_rank, 0, 1 << 20)
      .integer("kv_lora_rank", m.kv_lora_rank, 0, 1 << 20)
      .integer("qk_nope_head_dim", m.qk_nope_head_dim, 0, 1 << 16)
      .integer("qk_rope_head_dim", m.qk_rope_head_dim, 0, 1 << 16)
      .integer("v_head_dim", m.v_head_dim, 0, 1 << 16)
      .integer("vocab", m.vocab, 1, 1 << 24, true)
      .integer("sequence_length", m.sequence_length, 1, 1 << 24, true)
      .integer("microbatch_size", m.microbatch_size, 1, 1 << 20)
      .text("dtype", m.dtype)
      .boolean("tied_embeddings", m.tied_embeddings)
      .boolean("gated_mlp", m.gated_mlp)
      .integer("position_embeddings", m.position_embeddings, 0, 1 << 24)
      .boolean("linear_biases", m.linear_biases)
      .text("norm", m.norm)
      .integer("mtp_layers", m.mtp_layers, 0, 100000)
      .text("attention", m.attention)
      .boolean("dropout", m.dropout)
      .integer("experts", m.experts, 0, 1 << 16)
      .integer("experts_per_token", m.experts_per_token, 0, 1 << 16)
      .integer("shared_experts", m.shared_experts, 0, 1 << 10)
      .integer("expert_ffn_hidden", m.expert_ffn_hidden, 0, 1 << 22)
      .integer("first_dense_layers", m.first_dense_layers, 0, 100000)
      .number("capacity_factor", m.capacity_factor, 0, 1e6)
      .integer("router_groups", m.router_groups, 0, 1 << 16)
      .integer("router_group_topk", m.router_group_topk, 0, 1 << 16);
  if (!fields.ok()) return fields.error();
  if (m.kv_heads < 0) m.kv_heads = m.heads; // absent: multi-head attention
  const bool latent = m.kv_lora_rank > 0;
  if (latent) {
    // Multi-head latent attention: its head sizes replace head_dim (DeepSeek-V3 §2.1.1).
    for (const auto &[field, value] :
         {std::pair<const char *, int>{"qk_nope_head_dim", m.qk_nope_head_dim},
          {"qk_rope_head_dim", m.qk_rope_head_dim},
          {"v_head_dim", m.v_head_dim}})
      if (value < 1)
        return makeError(pointer + "/" + field +
                         ": multi-head latent attention (kv_lora_rank > 0) needs it, at least 1");
    if (m.head_dim > 0)
      return makeError(pointer + "/head_dim: does not apply with multi-head latent attention "
                                 "(kv_lora_rank > 0); give qk_nope_head_dim, qk_rope_head_dim and "
                                 "v_head_dim instead");
  } else if (m.q_lora_rank > 0 || m.qk_nope_head_dim > 0 || m.qk_rope_head_dim > 0 ||
             m.v_head_dim > 0) {
    return makeError(pointer + "/kv_lora_rank: 0 (standard attention), but latent attention sizes "
                               "are set; give kv_lora_rank for multi-head latent attention");
  }
  if (!latent && m.head_dim == 0 && m.hidden % m.heads != 0)
    return makeError(pointer + "/heads: " + std::to_string(m.heads) + " does not divide hidden (" +
                     std::to_string(m.hidden) + "); give head_dim when heads × head_dim ≠ hidden");
  if (!latent && (m.kv_heads > m.heads || m.heads % m.kv_heads != 0))
    return makeError(pointer + "/kv_heads: " + std::to_string(m.kv_heads) + " must divide heads (" +
                     std::to_string(m.heads) + ")");
  if (dtypeBytes(m.dtype) == 0)
    return makeError(pointer + "/dtype: expected \"bf16\", \"fp16\" or \"fp32\", got \"" + m.dtype +
                     "\"");
  if (m.norm != "rmsnorm" && m.norm != "layernorm")
    return makeError(pointer + "/norm: expected \"rmsnorm\" or \"layernorm\", got \"" + m.norm +
                     "\"");
  if (m.experts > 0) {
    if (m.experts_per_token < 1 || m.experts_per_token > m.experts)
      return makeError(pointer + "/experts_per_token: " + std::to_string(m.experts_per_token) +
                       " must be between 1 and experts (" + std::to_string(m.experts) + ")");
    if (m.expert_ffn_hidden < 1)
      return makeError(pointer + "/expert_ffn_hidden: missing; give each expert's FFN size");
    if (m.first_dense_layers >= m.layers)
      return makeError(pointer + "/first_dense_layers: " + std::to_string(m.first_dense_layers) +
                       " leaves no MoE layer of " + std::to_string(m.layers));
    if (m.capacity_factor != 0 && m.capacity_factor < 1)
      return makeError(pointer + "/capacity_factor: 0 (dropless) or at least 1, got " +
                       std::to_string(m.capacity_factor));
    if (m.router_groups > 0) {
      if (m.experts % m.router_groups != 0)
        return makeError(pointer + "/router_groups: " + std::to_string(m.router_groups) +
                         " must divide experts (" + std::to_string(m.experts) + ")");
      if (m.router_group_topk < 1 || m.router_group_topk > m.router_groups)
        return makeError(pointer + "/router_group_topk: " + std::to_string(m.router_group_topk) +
                         " must be between 1 and router_groups (" +
                         std::to_string(m.router_groups) + ")");
      const long long reachable =
          static_cast<long long>(m.router_group_topk) * (m.experts / m.router_groups);
      if (m.experts_per_token > reachable)
        return makeError(pointer + "/router_group_topk: " + std::to_string(m.router_group_topk) +
                         " groups of " + std::to_string(m.experts / m.router_groups) +
                         " experts hold fewer than experts_per_token (" +
                         std::to_string(m.experts_per_token) + "); raise it");
    } else if (m.router_group_topk != 0) {
      return makeError(pointer + "/router_group_topk: set without router_groups; give both");
    }
  } else if (m.experts_per_token > 0 || m.shared_experts > 0) {
    return makeError(pointer + "/experts: 0 (dense), but experts_per_token or shared_experts is "
                               "set; give the number of routed experts");
  }
  if (m.attention != "materialized" && m.attention != "flash")
    return makeError(pointer + "/attention: expected \"materialized\" or \"flash\", got \"" +
                     m.attention + "\"");
  return m;
}

namespace {

/// A GEMM efficiency curve: points of a GEMM's FLOPs, or the side n of a square GEMM (2·n³ FLOPs)
/// as the backend's ladder measures them, each with its fraction of peak.
Result<std::vector<GemmEfficiencyPoint>> gemmCurveFromJson(const nlohmann::json &curve,
                                                           const std::string &curve_pointer) {
  std::vector<GemmEfficiencyPoint> points;
  for (std::size_t i = 0; i < curve.size(); ++i) {
    const std::string at = curve_pointer + "/" + std::to_string(i);
    JsonFields point_fields(curve[i], at);
    if (!point_fields.ok()) return point_fields.error();
    if (auto s = checkKeys(curve[i], at, {"flops", "efficiency", "size"}); !s) return s.error();
    // Range checks are checkGemmCurve's, with their own messages.
    constexpr double kAnyNumber = 1e300;
    GemmEfficiencyPoint point{0, 0};
    double size = 0;
    point_fields.number("flops", point.flops, -kAnyNumber, kAnyNumber)
        .number("size", size, -kAnyNumber, kAnyNumber)
        .number("efficiency", point.efficiency, -kAnyNumber, kAnyNumber, true);
    if (!point_fields.ok()) return point_fields.error();
    if (size != 0 && point.flops != 0) return makeError(at + ": give flops or size, not both");
    if (size != 0) point.flops = size > 0 ? 2 * size * size * size : size;
    if (size == 0 && point.flops == 0)
      return makeError(at + "/flops: missing; give the GEMM's flops (or the square size)");
    points.push_back(point);
  }
  if (auto s = checkGemmCurve(points, curve_pointer); !s) return s.error();
  return points;
}

} // namespace

Result<HardwareSpec> hardwareSpecFromJson(const nlohmann::json &json, const std::string &pointer) {
  JsonFields fields(json, pointer);
  if (!fields.ok()) return fields.error();
  if (auto s = checkOptionalFormat(json, pointer, kHardwareFormat); !s) return s.error();
  if (auto s = checkKeys(json, pointer,
                         {"format",
                          "version",
                          "name",
                          "source",
                          "notes",
                          "peak_tflops",
                          "efficiency",
                          "memory_gib",
                          "intra_node_gbps",
                          "intra_node_latency_us",
                          "inter_node_gbps",
                          "inter_node_latency_us",
                          "gpus_per_node",
                          "gemm_efficiency",
                          "gemm_efficiency_source",
                          "hbm_gbps",
                          "memory_efficiency",
                          "attention_efficiency",
                          "collective_gemm_slowdown",
                          "intra_node_bus_efficiency",
                          "inter_node_bus_efficiency",
                          "bus_efficiency_source",
                          "peak_fp8_tflops",
                          "gemm_efficiency_fp8",
                          "gemm_efficiency_fp8_source",
                          "sm_count",
                          "moe_layer_host_us",
                          "layer_overhead_us",
                          "step_overhead_us",
                          "calibration"});
      !s)
    return s.error();
  HardwareSpec hw;
  // Links and latencies share the bounds of the plan's p2p costs (costs.h), so a hardware file
  // cannot price a transfer that the explicit costs would refuse. 1 GFLOP/s and 0.1 % efficiency
  // keep every derived op time finite.
  constexpr double kMinTflops = 1e-3, kMinEfficiency = 1e-3, kHuge = 1e9;
  fields.text("name", hw.name)
      .text("source", hw.source)
      .text("notes", hw.notes)
      .number("peak_tflops", hw.peak_tflops, kMinTflops, kHuge, true)
      .number("efficiency", hw.efficiency, kMinEfficiency, 1)
      .number("memory_gib", hw.memory_gib, 1e-9, kHuge, true)
      .number("intra_node_gbps", hw.intra_node_gbps, kMinLinkBandwidthGbps, kMaxLinkBandwidthGbps,
              true)
      .number("intra_node_latency_us", hw.intra_node_latency_us, 0, kMaxCostMicroseconds)
      .number("inter_node_gbps", hw.inter_node_gbps, kMinLinkBandwidthGbps, kMaxLinkBandwidthGbps,
              true)
      .number("inter_node_latency_us", hw.inter_node_latency_us, 0, kMaxCostMicroseconds)
      .integer("gpus_per_node", hw.gpus_per_node, 1, 1 << 16, true)
      .integer("sm_count", hw.sm_count, 0, 1 << 16)
      .text("gemm_efficiency_source", hw.gemm_efficiency_source)
      .text("bus_efficiency_source", hw.bus_efficiency_source)
      .number("hbm_gbps", hw.hbm_gbps, 0, kMaxLinkBandwidthGbps)
      .number("memory_efficiency", hw.memory_efficiency, kMinEfficiency, 1)
      .number("attention_efficiency", hw.attention_efficiency, 0, 1)
      .number("collective_gemm_slowdown", hw.collective_gemm_slowdown, 0, 1)
      .number("intra_node_bus_efficiency", hw.intra_node_bus_efficiency, kMinEfficiency, 1)
      .number("inter_node_bus_efficiency", hw.inter_node_bus_efficiency, kMinEfficiency, 1);
  const auto *curve = fields.array("gemm_efficiency");
  const auto *fp8_curve = fields.array("gemm_efficiency_fp8");
  fields.text("gemm_efficiency_fp8_source", hw.gemm_efficiency_fp8_source)
      .number("peak_fp8_tflops", hw.peak_fp8_tflops, 0, kHuge)
      .number("moe_layer_host_us", hw.moe_layer_host_us, 0, kMaxCostMicroseconds)
      .number("layer_overhead_us", hw.layer_overhead_us, 0, kMaxCostMicroseconds)
      .number("step_overhead_us", hw.step_overhead_us, 0, kMaxCostMicroseconds);
  const auto *calibration = fields.object("calibration");
  if (!fields.ok()) return fields.error();
  if (calibration) {
    const std::string at = pointer + "/calibration";
    if (auto s = checkKeys(*calibration, at,
                           {"runs", "held_out_mean_abs_step_error", "held_out_worst_abs_step_error",
                            "held_out_mean_step_error", "sets"});
        !s)
      return s.error();
    HardwareCalibration c;
    // Errors are fractions of the measured step; 1000 (100 000 %) bounds what a fit can report.
    constexpr double kMaxError = 1e3;
    JsonFields calibration_fields(*calibration, at);
    calibration_fields.integer("runs", c.runs, 1, 1 << 20, true)
        .number("held_out_mean_abs_step_error", c.mean_abs_step_error, 0, kMaxError, true)
        .number("held_out_worst_abs_step_error", c.worst_abs_step_error, 0, kMaxError, true)
        .number("held_out_mean_step_error", c.mean_step_error, -kMaxError, kMaxError, true)
        .text("sets", c.sets);
    if (!calibration_fields.ok()) return calibration_fields.error();
    if (c.worst_abs_step_error < c.mean_abs_step_error ||
        std::abs(c.mean_step_error) > c.mean_abs_step_error * (1 + 1e-12))
      return makeError(at + ": the worst |error| is below the mean, or the signed mean above "
                            "the mean |error|: these figures cannot come from one set of runs");
    hw.calibration = c;
  }
  if (curve) {
    auto points = gemmCurveFromJson(*curve, pointer + "/gemm_efficiency");
    if (!points) return points.error();
    hw.gemm_efficiency = std::move(*points);
  }
  if (fp8_curve) {
    if (hw.peak_fp8_tflops <= 0)
      return makeError(pointer + "/gemm_efficiency_fp8: an FP8 curve needs peak_fp8_tflops, the "
                                 "dense FP8 peak it is a fraction of");
    auto points = gemmCurveFromJson(*fp8_curve, pointer + "/gemm_efficiency_fp8");
    if (!points) return points.error();
    hw.gemm_efficiency_fp8 = std::move(*points);
  }
  return hw;
}

Result<TrainingSetup> trainingSetupFromJson(const nlohmann::json &json,
                                            const std::string &pointer) {
  JsonFields fields(json, pointer);
  if (!fields.ok()) return fields.error();
  if (auto s = checkKeys(json, pointer,
                         {"recompute",
                          "zero1",
                          "zero_stage",
                          "sequence_parallel",
                          "optimizer_bytes_per_param",
                          "balance_layers",
                          "overlap_gradient_sync",
                          "layout",
                          "expert_load_imbalance",
                          "collective_algorithm",
                          "gemm_precision",
                          "fp8_dispatch",
                          "fp8_params",
                          "cross_entropy",
                          "moe_dispatcher",
                          "tp_comm_overlap",
                          "tp_backward_overlap",
                          "fp32_gradients",
                          "moe_dispatcher_sms",
                          "moe_layer_host_us",
                          "swiglu_fusion",
                          "gradient_accumulation_fusion",
                          "masked_softmax_fusion",
                          "recompute_modules"});
      !s)
    return s.error();
  TrainingSetup training;
  std::string recompute = std::string(recomputeName(training.recompute));
  std::string gemm_precision = std::string(gemmPrecisionName(training.gemm_precision));
  // "zero1": true (plan files before ZeRO stages) is stage 1; "zero_stage" says 0 to 3.
  bool zero1 = false;
  if (json.contains("zero1") && json.contains("zero_stage"))
    return makeError(pointer + "/zero1: give either \"zero1\" or \"zero_stage\" (0-3), not both");
  fields.text("recompute", recompute)
      .text("gemm_precision", gemm_precision)
      .boolean("fp8_dispatch", training.fp8_dispatch)
      .boolean("fp8_params", training.fp8_params)
      .boolean("zero1", zero1)
      .integer("zero_stage", training.zero_stage, 0, 3)
      .boolean("sequence_parallel", training.sequence_parallel)
      .number("optimizer_bytes_per_param", training.optimizer_bytes_per_param, 0, 1024)
      .boolean("balance_layers", training.balance_layers)
      .boolean("overlap_gradient_sync", training.overlap_gradient_sync)
      .boolean("tp_comm_overlap", training.tp_comm_overlap)
      .boolean("tp_backward_overlap", training.tp_backward_overlap)
      .boolean("fp32_gradients", training.fp32_gradients)
      .boolean("swiglu_fusion", training.swiglu_fusion)
      .boolean("gradient_accumulation_fusion", training.gradient_accumulation_fusion)
      .boolean("masked_softmax_fusion", training.masked_softmax_fusion)
      .number("expert_load_imbalance", training.expert_load_imbalance, 1, 1e6)
      .text("cross_entropy", training.cross_entropy)
      .text("moe_dispatcher", training.moe_dispatcher)
      .integer("moe_dispatcher_sms", training.moe_dispatcher_sms, 0, 1 << 16)
      .number("moe_layer_host_us", training.moe_layer_host_us, 0, 1e7);
  std::string layout;
  std::string algorithm = std::string(collectiveAlgorithmName(training.collective_algorithm));
  fields.text("layout", layout).text("collective_algorithm", algorithm);
  if (!fields.ok()) return fields.error();
  if (!layout.empty()) {
    // Plan version 2: the layer layout as a Megatron string (version 1 files have none).
    auto parsed = parseMegatronLayout(layout);
    if (!parsed) return makeError(pointer + "/layout: " + parsed.error().message);
    training.layout = std::move(*parsed);
    if (training.balance_layers)
      return makeError(pointer + "/balance_layers: true does not apply with a layout; set it "
                                 "false or remove \"layout\"");
  }
  if (zero1) training.zero_stage = 1;
  if (!isCrossEntropyMode(training.cross_entropy))
    return makeError(pointer + "/cross_entropy: '" + training.cross_entropy +
                     "' is not known; use " + crossEntropyModesText());
  if (!isMoeDispatcher(training.moe_dispatcher))
    return makeError(pointer + "/moe_dispatcher: '" + training.moe_dispatcher +
                     "' is not known; use alltoall, deepep or hybridep");
  auto parsed = parseRecompute(recompute);
  if (!parsed) return makeError(pointer + "/recompute: " + parsed.error().message);
  training.recompute = *parsed;
  if (json.contains("recompute_modules")) {
    const auto &modules = json["recompute_modules"];
    const std::string at = pointer + "/recompute_modules";
    const auto &known = recomputeModuleNames();
    if (!modules.is_array())
      return makeError(at + ": expected an array of module names (" + joined(known) + ")");
    if (!modules.empty() && training.recompute != Recompute::None &&
        training.recompute != Recompute::Selective)
      return makeError(at +
                       ": Megatron's recompute modules go with \"recompute\": \"none\" or "
                       "\"selective\" (its selective granularity), not \"" +
                       recompute + "\"");
    // Kept in the canonical order, each once, whatever order the file gives.
    std::vector<std::string> given;
    for (std::size_t i = 0; i < modules.size(); ++i) {
      const std::string here = at + "/" + std::to_string(i);
      if (!modules[i].is_string())
        return makeError(here + ": expected a module name (" + joined(known) + ")");
      const std::string name = modules[i].get<std::string>();
      if (std::find(known.begin(), known.end(), name) == known.end())
        return makeError(here + ": '" + name + "' is not a module pipescope prices; use " +
                         joined(known) + " (core_attn is \"recompute\": \"selective\")");
      given.push_back(name);
    }
    training.recompute_modules = inCanonicalOrder(given);
  }
  auto collective = parseCollectiveAlgorithm(algorithm);
  if (!collective)
    return makeError(pointer + "/collective_algorithm: " + collective.error().message);
  training.collective_algorithm = *collective;
  auto precision = parseGemmPrecision(gemm_precision);
  if (!precision) return makeError(pointer + "/gemm_precision: " + precision.error().message);
  training.gemm_precision = *precision;
  if (training.fp8_params && training.gemm_precision != GemmPrecision::Fp8)
    return makeError(pointer +
                     "/fp8_params: FP8 parameters need FP8 GEMMs; set \"gemm_precision\": "
                     "\"fp8\" or remove \"fp8_params\"");
  return training;
}

} // namespace pipescope
