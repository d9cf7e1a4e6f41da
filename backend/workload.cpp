#include "backend/workload.h"

#include <algorithm>
#include <cmath>
#include <optional>

#include "engine/model/layer_costs.h"

namespace pipescope::backend {

namespace {

constexpr long long kMaxUnitGemmsPerOp = 1000000;

int scaled(double value, double scale, int minimum) {
  return std::max(minimum, static_cast<int>(std::lround(value * scale)));
}

std::vector<kernels::StageWork> modelStages(const Plan &plan, const Evaluation &evaluation,
                                            const ModelDerivation &derivation, double x) {
  const ModelSpec &m = plan.model->model;
  const int tp = plan.mesh.tp;
  kernels::LayerShape shape;
  shape.batch = m.microbatch_size;
  shape.sequence = scaled(m.sequence_length, x, 4);
  // The hidden width h·x is kept as heads × head width. Heads narrower than 16 would make GEMMs of
  // an unrepresentative shape, so below that the head count shrinks instead, in steps that keep
  // the TP split and the grouped-query ratio (heads per KV head).
  const int head_dim = m.hidden / m.heads;
  const int group = std::max(1, m.heads / std::max(1, m.kv_heads));
  shape.head_dim = std::min(head_dim, std::max(16, static_cast<int>(std::lround(head_dim * x))));
  const int step = tp * group;
  const double heads = static_cast<double>(m.hidden) * x / shape.head_dim;
  const int total_heads =
      std::min(m.heads, std::max(step, static_cast<int>(std::lround(heads / step)) * step));
  shape.heads = total_heads / tp;
  shape.kv_heads = std::max(1, shape.heads / group);
  shape.hidden = total_heads * shape.head_dim;
  shape.ffn = scaled(static_cast<double>(m.ffn_hidden) / tp, x, 2);
  shape.gated = m.gated_mlp;
  const Placement &placement = evaluation.schedule.placement;
  const int last_model_stage = placement.modelStageCount() - 1;
  std::vector<kernels::StageWork> stages(static_cast<std::size_t>(placement.stageCount()));
  for (int v = 0; v < placement.stageCount(); ++v) {
    auto &work = stages[static_cast<std::size_t>(v)];
    work.layer = shape;
    work.layers = v < static_cast<int>(derivation.stage_layers.size())
                      ? derivation.stage_layers[static_cast<std::size_t>(v)]
                      : 1;
    if (placement.model_stage[static_cast<std::size_t>(v)] == last_model_stage)
      work.head_vocab = scaled(static_cast<double>(m.vocab) / tp, x, 2);
  }
  return stages;
}

// Device time per planned time from the cost model, for model plans on GPUs: the stages' F + B
// priced at the shapes the stages run (the scaled model) on the device, over the plan's own F + B.
// The device is the plan's hardware with its peak scaled so that the startup GEMM (unit³, timed
// where a stage runs: in one stage's partition on gpu-shared) takes what it measured; on
// gpu-shared the P stages also share the GPU's memory bandwidth, as they do in the steady state
// (docs/measurements/gpu-shared-h100.md). Nothing when the model cannot price the scaled shapes.
std::optional<double> modeledTimeFactor(const Plan &plan, const Evaluation &evaluation,
                                        const std::vector<kernels::StageWork> &stages,
                                        DeviceKind device, const DeviceSpeed &speed) {
  if (stages.empty() || speed.unit_gemm_us <= 0) return std::nullopt;
  const kernels::LayerShape &shape = stages.front().layer;
  const int tp = plan.mesh.tp;
  Plan scaled = plan;
  ModelSpec &m = scaled.model->model;
  m.hidden = shape.hidden;
  m.heads = shape.heads * tp;
  m.kv_heads = shape.kv_heads * tp;
  m.head_dim = shape.head_dim;
  m.ffn_hidden = shape.ffn * tp;
  m.sequence_length = shape.sequence;
  for (const auto &work : stages)
    if (work.head_vocab > 0) m.vocab = work.head_vocab * tp;
  HardwareSpec &hardware = scaled.model->hardware;
  const double modeled_us =
      gemmTimeUs(gemmHardwareOf(plan.model->hardware),
                 {static_cast<double>(speed.unit), static_cast<double>(speed.unit),
                  static_cast<double>(speed.unit), 1},
                 2.0);
  if (!(modeled_us > 0)) return std::nullopt;
  hardware.peak_tflops *= modeled_us / speed.unit_gemm_us;
  if (device == DeviceKind::SharedGpu) hardware.hbm_gbps /= std::max(1, plan.mesh.pp);
  const Placement &placement = evaluation.schedule.placement;
  auto costs = planCosts(scaled, placement);
  if (!costs) return std::nullopt;
  auto times = resolveStageTimes(*costs, placement);
  if (!times) return std::nullopt;
  double device_us = 0, planned_us = 0;
  for (std::size_t v = 0; v < times->forward.size() && v < evaluation.times.forward.size(); ++v) {
    device_us += times->forward[v] + times->full_backward[v];
    planned_us += evaluation.times.forward[v] + evaluation.times.full_backward[v];
  }
  if (!(device_us > 0) || !(planned_us > 0)) return std::nullopt;
  return device_us / planned_us;
}

double largestForwardFlops(const std::vector<kernels::StageWork> &stages) {
  double largest = 0;
  for (const auto &work : stages)
    largest = std::max(largest, std::max(work.forwardFlops(), work.inputGradFlops()));
  return largest;
}

} // namespace

double automaticTargetMicroseconds(DeviceKind device) {
  // cpu: a few milliseconds per op keeps timer and MPI latencies well under 1% and a test run
  // under a second; GPUs run the plan at its own size unless that is too small to time.
  return device == DeviceKind::Cpu ? 5000.0 : 2000.0;
}

nlohmann::json Workload::toJson() const {
  nlohmann::json stage_list = nlohmann::json::array();
  for (std::size_t v = 0; v < stages.size(); ++v) {
    const auto &w = stages[v];
    nlohmann::json entry = {{"stage", v},
                            {"forward_gflop", w.forwardFlops() * 1e-9},
                            {"input_grad_gflop", w.inputGradFlops() * 1e-9},
                            {"weight_grad_gflop", w.weightGradFlops() * 1e-9}};
    if (w.unit > 0) {
      entry["unit_gemm"] = w.unit;
      entry["forward_gemms"] = w.unit_forward;
      entry["input_grad_gemms"] = w.unit_input_grad;
      entry["weight_grad_gemms"] = w.unit_weight_grad;
    } else {
      entry["layers"] = w.layers;
      entry["tokens"] = w.layer.tokens();
      entry["hidden"] = w.layer.hidden;
      entry["heads"] = w.layer.heads;
      entry["kv_heads"] = w.layer.kv_heads;
      entry["ffn"] = w.layer.ffn;
      entry["head_vocab"] = w.head_vocab;
    }
    stage_list.push_back(std::move(entry));
  }
  return {{"from_model", from_model},
          {"size_scale", size_scale},
          {"expected_time_factor", expected_time_factor},
          {"time_factor_source", time_factor_source},
          {"stages", std::move(stage_list)}};
}

Result<Workload> planWorkload(const Plan &plan, const Evaluation &evaluation,
                              const ModelDerivation &derivation, DeviceKind device,
                              double requested_scale, const DeviceSpeed &speed) {
  Workload workload;
  const double target_us = automaticTargetMicroseconds(device);
  if (plan.model) {
    workload.from_model = true;
    double x = requested_scale;
    if (x <= 0) {
      // The largest x <= 1 whose biggest op takes about the target time at the measured rate:
      // FLOPs grow monotonically with x, so bisect on log x.
      x = 1;
      if (device == DeviceKind::Cpu &&
          largestForwardFlops(modelStages(plan, evaluation, derivation, 1)) / speed.flops_per_us >
              target_us) {
        double low = 1e-5, high = 1;
        for (int i = 0; i < 60; ++i) {
          const double middle = std::sqrt(low * high);
          const double us = largestForwardFlops(modelStages(plan, evaluation, derivation, middle)) /
                            speed.flops_per_us;
          (us > target_us ? high : low) = middle;
        }
        x = low;
      }
    }
    workload.size_scale = x;
    workload.stages = modelStages(plan, evaluation, derivation, x);
    // Expected device time per planned time, from the largest forward.
    double planned = 0;
    for (double f : evaluation.times.forward)
      planned = std::max(planned, f);
    double largest_forward = 0;
    for (const auto &w : workload.stages)
      largest_forward = std::max(largest_forward, w.forwardFlops());
    workload.expected_time_factor =
        planned > 0 ? largest_forward / speed.flops_per_us / planned : 1;
    workload.time_factor_source = "the largest forward's FLOPs at the startup GEMM rate";
    // GPUs: the cost model at the stages' shapes, which prices their memory-bound work too (the
    // FLOPs at the startup GEMM's rate miss it: ops ran 1.8x longer on an H100).
    if (device != DeviceKind::Cpu)
      if (auto modeled = modeledTimeFactor(plan, evaluation, workload.stages, device, speed)) {
        workload.expected_time_factor = *modeled;
        workload.time_factor_source = "cost model at the stages' shapes on the measured device";
      }
    return workload;
  }

  const StageTimes &times = evaluation.times;
  double largest_op = 0;
  for (std::size_t v = 0; v < times.forward.size(); ++v)
    largest_op = std::max({largest_op, times.forward[v], times.full_backward[v]});
  if (largest_op <= 0)
    return makeError("/costs: every op takes 0 µs; give the plan its forward, backward and weight "
                     "times (or a model) so there is work to run");
  double x = requested_scale;
  if (x <= 0) {
    x = target_us / largest_op;
    if (device != DeviceKind::Cpu) x = std::max(1.0, x);
  }
  workload.size_scale = x;
  workload.expected_time_factor = x;
  const auto count = [&](double planned_us) -> long long {
    if (planned_us <= 0) return 0;
    return std::max(1LL, std::llround(planned_us * x / speed.unit_gemm_us));
  };
  workload.stages.resize(times.forward.size());
  for (std::size_t v = 0; v < times.forward.size(); ++v) {
    auto &work = workload.stages[v];
    work.unit = speed.unit;
    const long long counts[] = {count(times.forward[v]), count(times.input_grad[v]),
                                count(times.weight_grad[v])};
    for (long long c : counts)
      if (c > kMaxUnitGemmsPerOp)
        return makeError("--size-scale " + std::to_string(x) + " makes one op run " +
                         std::to_string(c) + " unit GEMMs (over " +
                         std::to_string(kMaxUnitGemmsPerOp) + "); give a smaller --size-scale");
    work.unit_forward = static_cast<int>(counts[0]);
    work.unit_input_grad = static_cast<int>(counts[1]);
    work.unit_weight_grad = static_cast<int>(counts[2]);
  }
  return workload;
}

} // namespace pipescope::backend
