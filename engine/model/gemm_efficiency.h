#pragma once
// GEMM time from the GEMM's shape (DESIGN.md §5): an efficiency curve of the hardware over GEMM
// size (FLOPs), read in log scale between its points, and a roofline on the bytes the GEMM moves
// through HBM, so a skinny GEMM (few tokens, a thin TP shard) is priced by its memory traffic.
#include <string>
#include <vector>

#include "engine/result.h"

namespace pipescope {

/// One point of a hardware's GEMM efficiency curve.
struct GemmEfficiencyPoint {
  double flops = 0;      ///< 2·m·n·k of the GEMM (a square ladder rung of size n: 2n³)
  double efficiency = 0; ///< achieved fraction of the dense peak, in (0, 1]
};

/// What pricing a GEMM needs from the hardware.
struct GemmHardware {
  double peak_tflops = 0;
  /// Empty: every GEMM runs at `flat_efficiency` (hardware files with only a factor).
  std::vector<GemmEfficiencyPoint> curve;
  double flat_efficiency = 0.5;
  double hbm_gbps = 0; ///< 0: no memory roofline
  double memory_efficiency = 1;
  /// Bytes per element of the operands A and B where they are narrower than the output: 1 for
  /// FP8 GEMMs (Transformer Engine's cuBLASLt calls read E4M3/E5M2 operands and write a 16-bit
  /// result); 0: the element size the call gives, as for 16-bit GEMMs.
  double operand_bytes = 0;
};

/// One GEMM (or `batch` identical ones in a batched call): C[m×n] = A[m×k] · B[k×n].
struct GemmShape {
  double m = 0, n = 0, k = 0;
  double batch = 1;
  double flops() const { return 2 * m * n * k * batch; }
};

/// The curve's efficiency at a GEMM of `flops` FLOPs: linear in log(flops) between points,
/// the first point's achieved rate below it (time scales down no faster than the smallest rung),
/// the last point's efficiency above it.
double gemmEfficiency(const GemmHardware &hardware, double flops);

/// Time in microseconds of the GEMM: its FLOPs at peak × curve efficiency (a batched call looked
/// up at its whole FLOPs), or its bytes (`element_bytes` per element of C, and of A and B unless
/// the hardware's operand_bytes says otherwise) at the achieved HBM bandwidth when that is
/// longer.
double gemmTimeUs(const GemmHardware &hardware, const GemmShape &shape, double element_bytes);

/// The curve of a GEMM kind `speedup` times faster per FLOP (FP8 against BF16: the dense FP8
/// peak over the BF16 one): each point's efficiency moved to `speedup` times its FLOPs. What
/// keeps a GEMM below the plateau (launch, tile and wave quantization, the epilogue) costs time,
/// not FLOPs, so a GEMM that does its FLOPs `speedup` times faster reaches an efficiency only at
/// `speedup` times the work. On one H100 the FP8 GEMMs of the validation rows' shapes run at
/// 0.88-0.94 of the BF16 efficiency at half their FLOPs, against 0.73-0.93 at the same FLOPs
/// (docs/measurements/h100-gemm-shapes.md).
std::vector<GemmEfficiencyPoint> curveAtFasterRate(std::vector<GemmEfficiencyPoint> curve,
                                                   double speedup);

/// Sizes strictly increasing, efficiencies in (0, 1] and not decreasing with size; the error
/// names the point as `pointer`/i/field.
Status checkGemmCurve(const std::vector<GemmEfficiencyPoint> &curve, const std::string &pointer);

/// A curve from a measured ladder of square GEMMs (size n, achieved TFLOP/s): efficiency =
/// achieved / peak, made monotone by carrying the best rate so far up the ladder (a larger GEMM
/// can always be run as the smaller one's tiles), clamped to 1.
std::vector<GemmEfficiencyPoint> curveFromSquareLadder(const std::vector<int> &sizes,
                                                       const std::vector<double> &tflops,
                                                       double peak_tflops);

} // namespace pipescope
