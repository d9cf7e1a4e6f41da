#pragma once
// Plan and trace files (DESIGN.md §6): JSON with "format" and "version" keys. Readers refuse a
// bad file with one message naming the field as a JSON pointer and what was expected.
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "engine/costs.h"
#include "engine/evaluation.h"
#include "engine/json_io.h"
#include "engine/mesh.h"
#include "engine/model/model_setup.h"
#include "engine/schedule.h"

namespace pipescope {

inline constexpr std::string_view kPlanFormat = "pipescope.plan";
/// Version 2 added the layer layout (training.layout); version 1 files load as before.
inline constexpr int kPlanVersion = 2;
inline constexpr int kPlanOldestVersion = 1;
inline constexpr std::string_view kTraceFormat = "pipescope.trace";
inline constexpr int kTraceVersion = 1;

/// Everything needed to reproduce one simulation, or to run it on the backend.
struct Plan {
  ScheduleRequest request;         ///< name "custom" when `custom` holds the op lists
  Mesh mesh;                       ///< mesh.pp == request.pp
  Costs costs;                     ///< explicit costs (ignored where `model` derives them)
  std::optional<ModelSetup> model; ///< model + hardware + training, or none
  std::optional<Schedule> custom;  ///< explicit per-rank op lists (custom schedules)
  /// The lowered programs as read from the file, if it had them (checked against lowering).
  std::optional<LoweredProgram> program;
};

/// The schedule the plan describes: its custom op lists, or the generated family.
Result<Schedule> planSchedule(const Plan &plan);
/// The costs the plan implies: derived from the model when present, else the explicit ones.
/// `derivation` receives the model derivation when there is one.
Result<Costs> planCosts(const Plan &plan, const Placement &placement,
                        ModelDerivation *derivation = nullptr);

/// Evaluates planSchedule's schedule of the plan: a custom one with the op-coverage pass
/// (evaluateSchedule), a generated one without it (evaluateGenerated).
Result<Evaluation> evaluatePlanSchedule(const Plan &plan, Schedule schedule, const Costs &costs,
                                        const SimulationOptions &options = {});

/// Evaluates the plan: its schedule, its costs (derived from the model when present, with the
/// stage activation bytes tracked), lowering and simulation.
Result<Evaluation> evaluatePlan(const Plan &plan, SimulationOptions options = {},
                                ModelDerivation *derivation = nullptr);

/// Lowered program in text form, PyTorch-style actions per rank: compute ops as "2F0", sends as
/// "2SEND_F0" (producing stage), receives as "3RECV_F0" (consuming stage), "B" for gradients.
nlohmann::json programToJson(const Schedule &schedule, const LoweredProgram &program);

/// JSON form. With `program`, the lowered per-rank programs are included (what the backend runs).
nlohmann::json planToJson(const Plan &plan, const LoweredProgram *program = nullptr);
Result<Plan> planFromJson(const nlohmann::json &json);
/// Reads a "mesh" object (dp, tp, pp, cp, ep, gpus_per_node, rank_order) over `mesh`'s values,
/// and checks the result; errors name the field under `pointer`.
Status readMesh(const nlohmann::json &object, const std::string &pointer, Mesh &mesh,
                bool sizes_required);
Result<Plan> loadPlan(const std::string &path);
Status savePlan(const std::string &path, const Plan &plan, const LoweredProgram *program = nullptr);

/// A custom schedule file: {"format":"pipescope.schedule","version":1,"placement":?,
/// "ranks":[["0F0","0B0",...],...]} or PyTorch's CSV (one row per rank).
Result<Schedule> loadCustomSchedule(const std::string &path);

} // namespace pipescope
