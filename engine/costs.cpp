#include "engine/costs.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

namespace pipescope {

namespace {

// Shortest text that reads back as the same double ("1e-300", "0.5", "4000000").
std::string numberText(double value) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.6g", value);
  return buffer;
}

// The name of a cost field in a message. `key` is the plan file's key; `index` >= 0 names an
// entry of a per-stage list, `sub` its field.
std::string fieldName(CostNaming naming, const std::string &key, int index = -1,
                      const std::string &sub = "") {
  const bool has_option = index < 0 && key != "gradient_sync" && key != "concurrency_slowdown";
  if (naming == CostNaming::CommandLine && has_option) {
    std::string option = "--" + key;
    std::replace(option.begin(), option.end(), '_', '-');
    return option;
  }
  if (naming == CostNaming::Field)
    return key + (index >= 0 ? "[" + std::to_string(index) + "]" : "") +
           (sub.empty() ? "" : "." + sub);
  return "/costs/" + key + (index >= 0 ? "/" + std::to_string(index) : "") +
         (sub.empty() ? "" : "/" + sub);
}

/// A cost field, named only when a message needs it: the checks run once per derived cost set,
/// hundreds of thousands of times in a search, where building every name took a third of it.
struct FieldRef {
  CostNaming naming;
  const char *key;
  int index = -1;
  const char *sub = "";
  std::string text() const { return fieldName(naming, key, index, sub); }
};

Status checkRange(double value, const FieldRef &field, double max, const char *unit) {
  if (!std::isfinite(value) || value < 0 || value > max)
    return makeError(field.text() + ": expected a finite number of " + unit + " from 0 to " +
                     numberText(max) + ", got " + numberText(value));
  return Ok{};
}

Status checkTime(double value, const FieldRef &field) {
  return checkRange(value, field, kMaxCostMicroseconds, "microseconds");
}

} // namespace

Status Costs::check(int stage_count, CostNaming naming) const {
  const auto name = [naming](const std::string &key, int index = -1, const std::string &sub = "") {
    return fieldName(naming, key, index, sub);
  };
  const auto field = [naming](const char *key, int index = -1, const char *sub = "") {
    return FieldRef{naming, key, index, sub};
  };
  const struct {
    double value;
    const char *key;
  } times[] = {{forward_us, "forward"},
               {backward_us, "backward"},
               {weight_us, "weight"},
               {overlapped_us, "overlapped"},
               {p2p_latency_us, "p2p_latency"},
               {gradient_sync_us, "gradient_sync"},
               {input_grad_split_extra_us, "input_grad_split_extra"}};
  for (const auto &f : times)
    if (auto s = checkTime(f.value, field(f.key)); !s) return s;
  if (auto s =
          checkRange(activation_bytes, field("activation_bytes"), kMaxActivationBytes, "bytes");
      !s)
    return s;
  if (!std::isfinite(p2p_bandwidth_gbps) || p2p_bandwidth_gbps < 0 ||
      p2p_bandwidth_gbps > kMaxLinkBandwidthGbps ||
      (p2p_bandwidth_gbps > 0 && p2p_bandwidth_gbps < kMinLinkBandwidthGbps)) {
    std::string message =
        name("p2p_bandwidth") + ": expected 0 (transfers cost only the latency) or from " +
        numberText(kMinLinkBandwidthGbps) + " to " + numberText(kMaxLinkBandwidthGbps) +
        " GB/s, got " + numberText(p2p_bandwidth_gbps);
    if (p2p_bandwidth_gbps > 0 && p2p_bandwidth_gbps < kMinLinkBandwidthGbps &&
        activation_bytes > 0)
      message += " (a " + numberText(activation_bytes) + "-byte transfer would take " +
                 numberText(activation_bytes / (p2p_bandwidth_gbps * 1e3)) + " us)";
    return makeError(message);
  }
  if (weight_us > backward_us)
    return makeError(name("weight") + ": W (" + numberText(weight_us) + ") must not exceed " +
                     name("backward") + " (B = I + W = " + numberText(backward_us) +
                     "); B is the full backward");
  // An overlapped F&B pair runs both parts at once: it cannot end before the longer part would
  // alone. It can take longer than the two one after the other when the halves slow each other
  // down (they share the SMs, caches and memory bandwidth: 1.06 x (F + B) in one H100 green-
  // context partition, docs/measurements/gpu-shared-h100.md), but not twice as long: that is no
  // overlap but a broken measurement or input.
  if (overlapped_us > 0) {
    const double lower = std::max(forward_us, backward_us),
                 upper = kMaxOverlapSlowdown * (forward_us + backward_us);
    if (overlapped_us < lower || overlapped_us > upper)
      return makeError(name("overlapped") + ": the F&B pair time (" + numberText(overlapped_us) +
                       " us) must be from max(F, B) = " + numberText(lower) + " to 2(F + B) = " +
                       numberText(upper) + " us, or 0 for F + B (no overlap gain)");
  }
  if (stage_count >= 0 && !stage_overrides.empty() &&
      static_cast<int>(stage_overrides.size()) != stage_count)
    return makeError(name("stage_overrides") + ": has " + std::to_string(stage_overrides.size()) +
                     " entries; give one per virtual stage (" + std::to_string(stage_count) + ")");
  for (std::size_t s = 0; s < stage_overrides.size(); ++s) {
    const auto &o = stage_overrides[s];
    const int i = static_cast<int>(s);
    if (auto st = checkTime(o.forward_us, field("stage_overrides", i, "forward")); !st) return st;
    if (auto st = checkTime(o.backward_us, field("stage_overrides", i, "backward")); !st) return st;
    if (auto st = checkTime(o.weight_us, field("stage_overrides", i, "weight")); !st) return st;
    if (auto st = checkTime(o.input_grad_split_extra_us,
                            field("stage_overrides", i, "input_grad_split_extra"));
        !st)
      return st;
    if (o.weight_us > o.backward_us)
      return makeError(name("stage_overrides", i, "weight") + ": must not exceed " +
                       name("stage_overrides", i, "backward") + " (B = I + W)");
  }
  if (stage_count >= 0 && !boundary_transfer_us.empty() &&
      static_cast<int>(boundary_transfer_us.size()) != stage_count)
    return makeError(name("boundary_transfer") + ": has " +
                     std::to_string(boundary_transfer_us.size()) +
                     " entries; give one per virtual stage (" + std::to_string(stage_count) + ")");
  for (std::size_t s = 0; s < boundary_transfer_us.size(); ++s)
    if (auto st =
            checkTime(boundary_transfer_us[s], field("boundary_transfer", static_cast<int>(s)));
        !st)
      return st;
  if (concurrency_slowdown.size() > kMaxConcurrencySlowdownEntries)
    return makeError(name("concurrency_slowdown") + ": has " +
                     std::to_string(concurrency_slowdown.size()) +
                     " entries; give one per count of other ranks (at most " +
                     std::to_string(kMaxConcurrencySlowdownEntries) + ")");
  for (std::size_t n = 0; n < concurrency_slowdown.size(); ++n) {
    const double f = concurrency_slowdown[n];
    if (!std::isfinite(f) || f < kMinConcurrencySlowdown || f > kMaxConcurrencySlowdown)
      return makeError(name("concurrency_slowdown", static_cast<int>(n)) +
                       ": expected a factor from " + numberText(kMinConcurrencySlowdown) + " to " +
                       numberText(kMaxConcurrencySlowdown) + ", got " + numberText(f));
  }
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
    double split_extra = costs.input_grad_split_extra_us * placement.stage_share[s];
    if (!costs.stage_overrides.empty()) {
      f = costs.stage_overrides[s].forward_us;
      b = costs.stage_overrides[s].backward_us;
      w = costs.stage_overrides[s].weight_us;
      split_extra = costs.stage_overrides[s].input_grad_split_extra_us;
    }
    times.forward[s] = f;
    times.full_backward[s] = b;
    times.weight_grad[s] = w;
    // An input-grad op exists only where W runs as its own op.
    times.input_grad[s] = b - w + split_extra;
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
  times.concurrency_slowdown = costs.concurrency_slowdown;
  return times;
}

} // namespace pipescope
