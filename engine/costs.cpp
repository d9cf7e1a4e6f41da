#include "engine/costs.h"

#include <cmath>
#include <string>

namespace pipescope {

namespace {

Status checkTime(double value, const std::string &field) {
  if (!std::isfinite(value) || value < 0)
    return makeError(field + " must be a finite, non-negative number of microseconds, got " +
                     std::to_string(value));
  return Ok{};
}

} // namespace

Status Costs::check(int stage_count) const {
  const struct {
    double value;
    const char *field;
  } fields[] = {{forward_us, "forward"},
                {backward_us, "backward"},
                {weight_us, "weight"},
                {overlapped_us, "overlapped"},
                {p2p_latency_us, "p2p_latency"},
                {p2p_bandwidth_gbps, "p2p_bandwidth"},
                {activation_bytes, "activation_bytes"},
                {gradient_sync_us, "gradient_sync"}};
  for (const auto &f : fields)
    if (auto s = checkTime(f.value, f.field); !s) return s;
  if (weight_us > backward_us)
    return makeError("weight (W = " + std::to_string(weight_us) +
                     ") must not exceed backward (B = I + W = " + std::to_string(backward_us) +
                     "); B is the full backward");
  if (!stage_overrides.empty() && static_cast<int>(stage_overrides.size()) != stage_count)
    return makeError("stage_overrides has " + std::to_string(stage_overrides.size()) +
                     " entries; give one per virtual stage (" + std::to_string(stage_count) + ")");
  for (std::size_t s = 0; s < stage_overrides.size(); ++s) {
    const auto &o = stage_overrides[s];
    const std::string at = "stage_overrides[" + std::to_string(s) + "].";
    if (auto st = checkTime(o.forward_us, at + "forward"); !st) return st;
    if (auto st = checkTime(o.backward_us, at + "backward"); !st) return st;
    if (auto st = checkTime(o.weight_us, at + "weight"); !st) return st;
    if (o.weight_us > o.backward_us)
      return makeError(at + "weight must not exceed " + at + "backward (B = I + W)");
  }
  if (!boundary_transfer_us.empty() && static_cast<int>(boundary_transfer_us.size()) != stage_count)
    return makeError("boundary_transfer has " + std::to_string(boundary_transfer_us.size()) +
                     " entries; give one per virtual stage (" + std::to_string(stage_count) + ")");
  for (std::size_t s = 0; s < boundary_transfer_us.size(); ++s)
    if (auto st =
            checkTime(boundary_transfer_us[s], "boundary_transfer[" + std::to_string(s) + "]");
        !st)
      return st;
  return Ok{};
}

Result<StageTimes> resolveStageTimes(const Costs &costs, const Placement &placement) {
  const int stages = placement.stageCount();
  if (auto status = costs.check(stages); !status) return status.error();
  StageTimes times;
  const auto n = static_cast<std::size_t>(stages);
  times.forward.resize(n);
  times.input_grad.resize(n);
  times.weight_grad.resize(n);
  times.full_backward.resize(n);
  times.send_forward.assign(n, 0.0);
  times.send_backward.assign(n, 0.0);
  for (std::size_t s = 0; s < n; ++s) {
    double f = costs.forward_us * placement.stage_share[s];
    double b = costs.backward_us * placement.stage_share[s];
    double w = costs.weight_us * placement.stage_share[s];
    if (!costs.stage_overrides.empty()) {
      f = costs.stage_overrides[s].forward_us;
      b = costs.stage_overrides[s].backward_us;
      w = costs.stage_overrides[s].weight_us;
    }
    times.forward[s] = f;
    times.full_backward[s] = b;
    times.weight_grad[s] = w;
    times.input_grad[s] = b - w;
  }
  // latency + bytes / bandwidth; GB/s = 1e3 bytes per microsecond.
  const double link_time =
      costs.p2p_latency_us + (costs.p2p_bandwidth_gbps > 0
                                  ? costs.activation_bytes / (costs.p2p_bandwidth_gbps * 1e3)
                                  : 0);
  for (int s = 0; s < stages; ++s) {
    const auto i = static_cast<std::size_t>(s);
    const double boundary =
        costs.boundary_transfer_us.empty() ? link_time : costs.boundary_transfer_us[i];
    const int next = placement.nextStage(s);
    if (next >= 0 && placement.rankOf(next) != placement.rankOf(s)) {
      times.send_forward[i] = boundary;
      times.send_backward[static_cast<std::size_t>(next)] = boundary;
    }
  }
  const double pair = costs.forward_us + costs.backward_us;
  times.overlap_factor = (costs.overlapped_us > 0 && pair > 0) ? costs.overlapped_us / pair : 1.0;
  times.gradient_sync = costs.gradient_sync_us;
  return times;
}

} // namespace pipescope
