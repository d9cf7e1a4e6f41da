// GEMM time from its shape through the hardware's efficiency curve (gemm_efficiency.h).
#include "engine/model/gemm_efficiency.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace pipescope {

double gemmEfficiency(const GemmHardware &hardware, double flops) {
  const auto &curve = hardware.curve;
  if (curve.empty()) return hardware.flat_efficiency;
  if (flops <= curve.front().flops)
    // Below the smallest measured GEMM the kernel does not get faster than that rung's time
    // scaled by the work: efficiency falls with size in proportion.
    return std::max(curve.front().efficiency * flops / curve.front().flops, 1e-6);
  if (flops >= curve.back().flops) return curve.back().efficiency;
  const auto upper = std::upper_bound(
      curve.begin(), curve.end(), flops,
      [](double value, const GemmEfficiencyPoint &point) { return value < point.flops; });
  const auto lower = upper - 1;
  const double x = std::log(flops / lower->flops) / std::log(upper->flops / lower->flops);
  return lower->efficiency + x * (upper->efficiency - lower->efficiency);
}

double gemmTimeUs(const GemmHardware &hardware, const GemmShape &shape, double element_bytes) {
  if (shape.m <= 0 || shape.n <= 0 || shape.k <= 0 || shape.batch <= 0) return 0;
  // A batched call fills the GPU with all its GEMMs at once, so the curve is read at the call's
  // whole work; the roofline below still sees each GEMM's own shape (a thin k of one head).
  const double compute_us =
      shape.flops() / (hardware.peak_tflops * 1e6 * gemmEfficiency(hardware, shape.flops()));
  if (hardware.hbm_gbps <= 0) return compute_us;
  const double operand_bytes = hardware.operand_bytes > 0 ? hardware.operand_bytes : element_bytes;
  const double bytes = shape.batch * (operand_bytes * (shape.m * shape.k + shape.k * shape.n) +
                                      element_bytes * shape.m * shape.n);
  const double memory_us = bytes / (hardware.hbm_gbps * hardware.memory_efficiency * 1e3);
  return std::max(compute_us, memory_us);
}

std::vector<GemmEfficiencyPoint> curveAtFasterRate(std::vector<GemmEfficiencyPoint> curve,
                                                   double speedup) {
  if (!(speedup > 0) || !std::isfinite(speedup)) return curve;
  for (auto &point : curve)
    point.flops *= speedup;
  return curve;
}

Status checkGemmCurve(const std::vector<GemmEfficiencyPoint> &curve, const std::string &pointer) {
  const auto text = [](double v) {
    char buffer[32];
    std::snprintf(buffer, sizeof buffer, "%g", v);
    return std::string(buffer);
  };
  for (std::size_t i = 0; i < curve.size(); ++i) {
    const std::string at = pointer + "/" + std::to_string(i);
    const auto &point = curve[i];
    if (!std::isfinite(point.flops) || point.flops <= 0)
      return makeError(at + "/flops: a GEMM size in FLOPs must be positive, got " +
                       text(point.flops));
    if (!std::isfinite(point.efficiency) || point.efficiency <= 0 || point.efficiency > 1)
      return makeError(at + "/efficiency: a fraction of peak in (0, 1], got " +
                       text(point.efficiency));
    if (i == 0) continue;
    if (point.flops <= curve[i - 1].flops)
      return makeError(at + "/flops: the curve's sizes must increase (" + text(point.flops) +
                       " after " + text(curve[i - 1].flops) + "); sort the points by size");
    if (point.efficiency < curve[i - 1].efficiency)
      return makeError(at + "/efficiency: the curve must not fall with size (" +
                       text(point.efficiency) + " after " + text(curve[i - 1].efficiency) +
                       "); a larger GEMM can run as the smaller one's tiles, so carry the "
                       "better efficiency up");
  }
  return Ok{};
}

std::vector<GemmEfficiencyPoint> curveFromSquareLadder(const std::vector<int> &sizes,
                                                       const std::vector<double> &tflops,
                                                       double peak_tflops) {
  std::vector<GemmEfficiencyPoint> curve;
  double best = 0;
  for (std::size_t i = 0; i < sizes.size() && i < tflops.size(); ++i) {
    if (sizes[i] <= 0 || !(tflops[i] > 0) || !(peak_tflops > 0)) continue;
    const double n = sizes[i];
    const double flops = 2 * n * n * n;
    if (!curve.empty() && flops <= curve.back().flops) continue;
    best = std::max(best, std::min(1.0, tflops[i] / peak_tflops));
    curve.push_back({flops, best});
  }
  return curve;
}

} // namespace pipescope
