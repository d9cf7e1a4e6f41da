#include "engine/plan_file.h"

#include <limits>

#include "engine/json_fields.h"
#include "engine/output_file.h"
#include "engine/pytorch_csv.h"

namespace pipescope {

using nlohmann::json;

Result<Schedule> planSchedule(const Plan &plan) {
  if (plan.custom) return *plan.custom;
  return generateSchedule(plan.request);
}

Result<Costs> planCosts(const Plan &plan, const Placement &placement, ModelDerivation *derivation) {
  if (!plan.model) return plan.costs;
  auto derived = deriveModelCosts(*plan.model, plan.mesh, placement);
  if (!derived) return derived.error();
  Costs costs = derived->costs;
  if (derivation) *derivation = std::move(*derived);
  return costs;
}

Result<Evaluation> evaluatePlanSchedule(const Plan &plan, Schedule schedule, const Costs &costs,
                                        const SimulationOptions &options) {
  return plan.custom ? evaluateSchedule(std::move(schedule), costs, options)
                     : evaluateGenerated(std::move(schedule), costs, options);
}

Result<Evaluation> evaluatePlan(const Plan &plan, SimulationOptions options,
                                ModelDerivation *derivation) {
  auto schedule = planSchedule(plan);
  if (!schedule) return schedule.error();
  ModelDerivation local;
  auto costs = planCosts(plan, schedule->placement, &local);
  if (!costs) return costs.error();
  if (plan.model) {
    options.stage_activation_bytes = local.stage_activation_bytes;
    options.stage_activation_granule_bytes = local.stage_activation_granule_bytes;
  }
  auto evaluation = evaluatePlanSchedule(plan, std::move(*schedule), *costs, options);
  if (derivation) *derivation = std::move(local);
  return evaluation;
}

// ---------------------------------------------------------------------------------------------
// Writing

namespace {

json costsToJson(const Costs &costs) {
  json out = {{"forward", costs.forward_us},
              {"backward", costs.backward_us},
              {"weight", costs.weight_us},
              {"overlapped", costs.overlapped_us},
              {"p2p_latency", costs.p2p_latency_us},
              {"p2p_bandwidth", costs.p2p_bandwidth_gbps},
              {"activation_bytes", costs.activation_bytes},
              {"gradient_sync", costs.gradient_sync_us}};
  if (costs.input_grad_split_extra_us > 0)
    out["input_grad_split_extra"] = costs.input_grad_split_extra_us;
  if (!costs.stage_overrides.empty()) {
    json stages = json::array();
    for (const auto &s : costs.stage_overrides) {
      json stage = {
          {"forward", s.forward_us}, {"backward", s.backward_us}, {"weight", s.weight_us}};
      if (s.input_grad_split_extra_us > 0)
        stage["input_grad_split_extra"] = s.input_grad_split_extra_us;
      stages.push_back(std::move(stage));
    }
    out["stage_overrides"] = std::move(stages);
  }
  if (!costs.boundary_transfer_us.empty()) out["boundary_transfer"] = costs.boundary_transfer_us;
  if (!costs.concurrency_slowdown.empty()) out["concurrency_slowdown"] = costs.concurrency_slowdown;
  return out;
}

std::string instructionText(const Schedule &schedule, const LoweredProgram &program, int rank,
                            const Instruction &instruction) {
  if (instruction.kind == InstructionKind::Compute)
    return formatOp(schedule.ranks[static_cast<std::size_t>(rank)]
                                  [static_cast<std::size_t>(instruction.index)]);
  const Message &m = program.messages[static_cast<std::size_t>(instruction.index)];
  const char *direction = m.gradient ? "B" : "F";
  if (instruction.kind == InstructionKind::Send)
    return std::to_string(m.stage) + "SEND_" + direction + std::to_string(m.microbatch);
  const int consumer = m.gradient ? schedule.placement.previousStage(m.stage)
                                  : schedule.placement.nextStage(m.stage);
  return std::to_string(consumer) + "RECV_" + direction + std::to_string(m.microbatch);
}

} // namespace

json programToJson(const Schedule &schedule, const LoweredProgram &program) {
  json ranks = json::array();
  for (std::size_t r = 0; r < program.ranks.size(); ++r) {
    json list = json::array();
    for (const auto &instruction : program.ranks[r])
      list.push_back(instructionText(schedule, program, static_cast<int>(r), instruction));
    ranks.push_back(std::move(list));
  }
  return ranks;
}

json planToJson(const Plan &plan, const LoweredProgram *program) {
  json out;
  out["format"] = kPlanFormat;
  // A plan without a layer layout is written as version 1, so pipescope releases that predate
  // layouts still read it; only a layout needs version 2.
  const bool has_layout = plan.model && !plan.model->training.layout.empty();
  out["version"] = has_layout ? kPlanVersion : kPlanOldestVersion;
  out["schedule"] = {
      {"name", plan.custom ? std::string("custom") : plan.request.name},
      {"pp", plan.custom ? plan.custom->pp() : plan.request.pp},
      {"microbatches", plan.custom ? plan.custom->microbatches() : plan.request.microbatches},
      {"virtual_stages", plan.custom ? plan.custom->chunks() : plan.request.chunks},
      {"microbatch_group", plan.request.microbatch_group}};
  out["mesh"] = {{"dp", plan.mesh.dp},
                 {"tp", plan.mesh.tp},
                 {"pp", plan.mesh.pp},
                 {"gpus_per_node", plan.mesh.gpus_per_node},
                 {"rank_order", plan.mesh.orderName()}};
  // cp and ep only when used, so plans without them read as they always did (older releases too).
  if (plan.mesh.cp > 1) out["mesh"]["cp"] = plan.mesh.cp;
  if (plan.mesh.ep > 1) out["mesh"]["ep"] = plan.mesh.ep;
  if (plan.mesh.expertsFoldTp()) out["mesh"]["etp"] = plan.mesh.etp;
  out["costs"] = costsToJson(plan.costs);
  if (plan.model) {
    out["model"] = toJson(plan.model->model);
    out["hardware"] = toJson(plan.model->hardware);
    out["training"] = toJson(plan.model->training);
  } else {
    out["model"] = nullptr;
    out["hardware"] = nullptr;
    out["training"] = nullptr;
  }
  if (plan.custom) {
    json ranks = json::array();
    for (const auto &ops : plan.custom->ranks) {
      json list = json::array();
      for (const auto &op : ops)
        list.push_back(formatOp(op));
      ranks.push_back(std::move(list));
    }
    out["custom"] = {{"placement", std::string(placementName(plan.custom->placement.kind))},
                     {"ranks", std::move(ranks)}};
  } else {
    out["custom"] = nullptr;
  }
  if (program) {
    auto schedule = planSchedule(plan);
    if (schedule) out["program"] = programToJson(*schedule, *program);
  }
  return out;
}

Status savePlan(const std::string &path, const Plan &plan, const LoweredProgram *program) {
  return writeTextFile(path, planToJson(plan, program).dump(2) + "\n");
}

// ---------------------------------------------------------------------------------------------
// Reading

namespace {

Result<Costs> costsFromJson(const json &object) {
  Costs costs;
  // Only the types are read here; the bounds are Costs::check's, the same as on the command line.
  constexpr double kLow = std::numeric_limits<double>::lowest();
  constexpr double kHigh = std::numeric_limits<double>::max();
  JsonFields fields(object, "/costs");
  fields.number("forward", costs.forward_us, kLow, kHigh)
      .number("backward", costs.backward_us, kLow, kHigh)
      .number("weight", costs.weight_us, kLow, kHigh)
      .number("overlapped", costs.overlapped_us, kLow, kHigh)
      .number("p2p_latency", costs.p2p_latency_us, kLow, kHigh)
      .number("p2p_bandwidth", costs.p2p_bandwidth_gbps, kLow, kHigh)
      .number("activation_bytes", costs.activation_bytes, kLow, kHigh)
      .number("gradient_sync", costs.gradient_sync_us, kLow, kHigh)
      .number("input_grad_split_extra", costs.input_grad_split_extra_us, kLow, kHigh);
  if (const auto *stages = fields.array("stage_overrides")) {
    if (stages->size() > static_cast<std::size_t>(kMaxPipelineRanks) * kMaxChunks)
      fields.fail("stage_overrides", "too many entries");
    for (std::size_t i = 0; fields.ok() && i < stages->size(); ++i) {
      StageCost stage;
      JsonFields sf((*stages)[i], "/costs/stage_overrides/" + std::to_string(i));
      sf.number("forward", stage.forward_us, kLow, kHigh, true)
          .number("backward", stage.backward_us, kLow, kHigh, true)
          .number("weight", stage.weight_us, kLow, kHigh, true)
          .number("input_grad_split_extra", stage.input_grad_split_extra_us, kLow, kHigh);
      if (!sf.ok()) return sf.error();
      costs.stage_overrides.push_back(stage);
    }
  }
  // A list of numbers under /costs (the bounds are Costs::check's): at most `limit` of them.
  const auto numbers = [&fields](const char *key, std::size_t limit, const char *what,
                                 std::vector<double> &out) -> Status {
    const auto *list = fields.array(key);
    if (!list) return Ok{};
    if (list->size() > limit) fields.fail(key, "too many entries");
    for (std::size_t i = 0; fields.ok() && i < list->size(); ++i) {
      const auto &value = (*list)[i];
      if (!value.is_number())
        return makeError("/costs/" + std::string(key) + "/" + std::to_string(i) + ": expected " +
                         what + ", got " + jsonTypeName(value));
      out.push_back(value.get<double>());
    }
    return Ok{};
  };
  if (auto status =
          numbers("boundary_transfer", static_cast<std::size_t>(kMaxPipelineRanks) * kMaxChunks,
                  "a number of microseconds", costs.boundary_transfer_us);
      !status)
    return status.error();
  if (auto status = numbers("concurrency_slowdown", kMaxConcurrencySlowdownEntries,
                            "a factor on op times", costs.concurrency_slowdown);
      !status)
    return status.error();
  if (!fields.ok()) return fields.error();
  // The per-stage list lengths are checked against the schedule once it is known.
  if (auto status = costs.check(-1, CostNaming::PlanFile); !status) return status.error();
  return costs;
}

Result<std::vector<std::vector<Op>>> opListsFromJson(const json &ranks,
                                                     const std::string &pointer) {
  if (!ranks.is_array())
    return makeError(pointer + ": expected an array of per-rank lists, got " + jsonTypeName(ranks));
  if (ranks.empty()) return makeError(pointer + ": expected at least one rank");
  if (ranks.size() > static_cast<std::size_t>(kMaxPipelineRanks))
    return makeError(pointer + ": more than " + std::to_string(kMaxPipelineRanks) + " ranks");
  std::vector<std::vector<Op>> out(ranks.size());
  std::size_t total = 0;
  for (std::size_t r = 0; r < ranks.size(); ++r) {
    const auto &list = ranks[r];
    const std::string at = pointer + "/" + std::to_string(r);
    if (!list.is_array())
      return makeError(at + ": expected an array of actions, got " + jsonTypeName(list));
    total += list.size();
    if (total > kMaxScheduleOps)
      return makeError(pointer + ": more than " + std::to_string(kMaxScheduleOps) + " ops");
    out[r].reserve(list.size());
    for (std::size_t i = 0; i < list.size(); ++i) {
      const auto &cell = list[i];
      if (cell.is_null()) continue; // idle step
      if (!cell.is_string())
        return makeError(at + "/" + std::to_string(i) +
                         ": expected an action string such as \"2F0\", got " + jsonTypeName(cell));
      const auto text = cell.get<std::string>();
      if (text.empty()) continue;
      auto op = parseOp(text);
      if (!op || op->stage >= kMaxPipelineRanks * kMaxChunks ||
          op->microbatch >= kMaxMicrobatches ||
          op->backward_stage >= kMaxPipelineRanks * kMaxChunks ||
          op->backward_microbatch >= kMaxMicrobatches)
        return makeError(
            at + "/" + std::to_string(i) + ": '" + text +
            "' is not an action; expected e.g. 2F0, 1I3, 0W2, 3B1 or (0F7;7B3)OVERLAP_F_B");
      out[r].push_back(*op);
    }
  }
  return out;
}

Result<Schedule> customFromJson(const json &custom, const std::string &pointer) {
  JsonFields fields(custom, pointer);
  std::string placement;
  fields.text("placement", placement);
  const auto *ranks = fields.array("ranks", true);
  if (!fields.ok()) return fields.error();
  auto lists = opListsFromJson(*ranks, pointer + "/ranks");
  if (!lists) return lists.error();
  auto schedule = makeCustomSchedule(std::move(*lists), placement.empty() ? nullptr : &placement);
  if (!schedule)
    return makeError((pointer.empty() ? "" : pointer + ": ") + schedule.error().message);
  return schedule;
}

Result<LoweredProgram> programFromJson(const json &value, const Schedule &schedule) {
  // The backend runs exactly the plan's program; pipescope's lowering is deterministic, so a
  // program in the file must be the lowering of its schedule.
  LoweredProgram program = lowerSchedule(schedule);
  if (!value.is_array() || value.size() != program.ranks.size())
    return makeError("/program: expected one instruction list per rank (" +
                     std::to_string(program.ranks.size()) + ")");
  for (std::size_t r = 0; r < program.ranks.size(); ++r) {
    const auto &list = value[r];
    const std::string at = "/program/" + std::to_string(r);
    if (!list.is_array()) return makeError(at + ": expected an array of instructions");
    const auto &expected = program.ranks[r];
    for (std::size_t i = 0; i < std::max(list.size(), expected.size()); ++i) {
      const std::string want =
          i < expected.size() ? instructionText(schedule, program, static_cast<int>(r), expected[i])
                              : "(end)";
      const std::string got = i < list.size() && list[i].is_string() ? list[i].get<std::string>()
                              : i < list.size()                      ? list[i].dump()
                                                                     : "(end)";
      if (want != got)
        return makeError(at + "/" + std::to_string(i) + ": expected '" + want + "', got '" + got +
                         "'; the program must be the lowering of the plan's schedule (remove "
                         "\"program\" to let pipescope lower it)");
    }
  }
  return program;
}

} // namespace

Status readMesh(const json &object, const std::string &pointer, Mesh &mesh, bool sizes_required) {
  JsonFields mf(object, pointer);
  std::string order; // absent: the mesh's own order (the default places cp next to tp)
  mf.integer("dp", mesh.dp, 1, kMaxWorldSize, sizes_required)
      .integer("tp", mesh.tp, 1, kMaxWorldSize, sizes_required)
      .integer("pp", mesh.pp, 1, kMaxPipelineRanks, sizes_required)
      .integer("gpus_per_node", mesh.gpus_per_node, 1, 1 << 16)
      .integer("cp", mesh.cp, 1, kMaxWorldSize)
      .integer("ep", mesh.ep, 1, kMaxWorldSize)
      .integer("etp", mesh.etp, 0, kMaxWorldSize)
      .text("rank_order", order);
  if (!mf.ok()) return mf.error();
  if (!order.empty()) {
    auto parsed = Mesh::parseOrder(order, mesh.cp);
    if (!parsed) return makeError(pointer + "/rank_order: " + parsed.error().message);
    mesh.order = *parsed;
  }
  if (auto status = mesh.check(); !status)
    return makeError(pointer + ": " + status.error().message);
  return Ok{};
}

Result<Plan> planFromJson(const json &json_plan) {
  if (auto status = checkFormatAndVersion(json_plan, kPlanFormat, kPlanVersion, kPlanOldestVersion);
      !status)
    return status.error();
  Plan plan;
  JsonFields root(json_plan, "");
  const auto *schedule = root.object("schedule", true);
  const auto *mesh = root.object("mesh");
  const auto *costs = root.object("costs");
  const auto *model = root.object("model");
  const auto *hardware = root.object("hardware");
  const auto *training = root.object("training");
  const auto *custom = root.object("custom");
  if (!root.ok()) return root.error();

  JsonFields sf(*schedule, "/schedule");
  sf.text("name", plan.request.name, true)
      .integer("pp", plan.request.pp, 1, kMaxPipelineRanks, true)
      .integer("microbatches", plan.request.microbatches, 1, kMaxMicrobatches, true)
      .integer("virtual_stages", plan.request.chunks, 1, kMaxChunks)
      .integer("microbatch_group", plan.request.microbatch_group, 0, kMaxMicrobatches);
  if (!sf.ok()) return sf.error();

  plan.mesh.pp = plan.request.pp;
  if (mesh)
    if (auto status = readMesh(*mesh, "/mesh", plan.mesh, false); !status) return status.error();
  if (costs) {
    auto parsed = costsFromJson(*costs);
    if (!parsed) return parsed.error();
    plan.costs = std::move(*parsed);
  }
  if (model || hardware) {
    if (!model || !hardware)
      return makeError(std::string(model ? "/hardware" : "/model") +
                       ": missing; a plan with a model also needs its hardware (and vice versa)");
    ModelSetup setup;
    auto m = modelSpecFromJson(*model, "/model");
    if (!m) return m.error();
    auto h = hardwareSpecFromJson(*hardware, "/hardware");
    if (!h) return h.error();
    setup.model = std::move(*m);
    setup.hardware = std::move(*h);
    if (training) {
      auto t = trainingSetupFromJson(*training, "/training");
      if (!t) return t.error();
      setup.training = *t;
    }
    plan.model = std::move(setup);
  }
  if (plan.request.name == "custom" && !custom)
    return makeError(
        "/custom: missing; schedule \"custom\" needs {\"ranks\": [[\"0F0\", ...], ...]}");
  if (custom) {
    auto parsed = customFromJson(*custom, "/custom");
    if (!parsed) return parsed.error();
    if (parsed->pp() != plan.request.pp)
      return makeError("/custom/ranks: has " + std::to_string(parsed->pp()) +
                       " rank lists but /schedule/pp is " + std::to_string(plan.request.pp));
    plan.custom = std::move(*parsed);
    plan.request.name = "custom";
    plan.request.microbatches = plan.custom->microbatches();
    plan.request.chunks = plan.custom->chunks();
  } else if (auto status = checkScheduleRequest(plan.request); !status) {
    return makeError("/schedule: " + status.error().message);
  }
  if (plan.mesh.pp != plan.request.pp)
    return makeError("/mesh/pp: is " + std::to_string(plan.mesh.pp) + " but /schedule/pp is " +
                     std::to_string(plan.request.pp) + "; they name the same P");
  if (const auto it = json_plan.find("program"); it != json_plan.end() && !it->is_null()) {
    auto scheduled = planSchedule(plan);
    if (!scheduled) return scheduled.error();
    if (auto status = checkOpCoverage(*scheduled); !status)
      return makeError("/custom: " + status.error().message);
    auto program = programFromJson(*it, *scheduled);
    if (!program) return program.error();
    plan.program = std::move(*program);
  }
  return plan;
}

Result<Plan> loadPlan(const std::string &path) {
  return loadJsonFile(path, &planFromJson);
}

Result<Schedule> loadCustomSchedule(const std::string &path) {
  auto text = readTextFile(path);
  if (!text) return text.error();
  const std::string shown = escapeControlCharacters(path);
  const auto first = text->find_first_not_of(" \t\r\n");
  if (first != std::string::npos && (*text)[first] == '{') {
    auto parsed = parseJsonLimited(*text);
    if (!parsed) return makeError(shown + ": " + parsed.error().message);
    if (auto status = checkFormatAndVersion(*parsed, "pipescope.schedule", 1); !status)
      return makeError(shown + ": " + status.error().message);
    auto schedule = customFromJson(*parsed, "");
    if (!schedule) return makeError(shown + ": " + schedule.error().message);
    return schedule;
  }
  auto lists = parsePytorchCsv(*text);
  if (!lists) return makeError(shown + ": " + lists.error().message);
  auto schedule = makeCustomSchedule(std::move(*lists));
  if (!schedule) return makeError(shown + ": " + schedule.error().message);
  return schedule;
}

} // namespace pipescope
