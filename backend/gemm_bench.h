#pragma once
// `pipescope-backend --gemm-bench`: the device's GEMM throughput over a ladder of square sizes,
// the reference that a run's achieved throughput is read against (DESIGN.md §7 "Compute"). On a
// GPU the GEMMs are cuBLAS bf16 with fp32 accumulation, the kernels the stages run, and the best
// rung is "cuBLAS's peak" on this GPU; it is also set beside the datasheet's dense bf16 peak
// where the GPU matches a hardware preset. On a GPU with FP8 tensor cores (compute capability
// 8.9 and up) a second ladder runs FP8 E4M3 GEMMs (bf16 out) through cuBLASLt, the kernels
// Transformer Engine calls, for the FP8 curve. On the cpu device they are the blocked fp32 GEMM.
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "backend/options.h"
#include "engine/model/model_setup.h"
#include "engine/result.h"

namespace pipescope::backend {

struct GemmRate {
  int size = 0;        ///< m = n = k
  std::string dtype;   ///< "bf16" (fp32 accumulation), "fp8-e4m3" (bf16 out) or "fp32"
  double us = 0;       ///< one GEMM, the best of the timed batches
  double tflops = 0;   ///< 2·size³ / us
  int repetitions = 0; ///< GEMMs per timed batch
  /// GPU rungs: `us` is the stages' tuned GEMM (kernels/cuda_gemm.h), and what its tuning chose.
  std::string backend_choice;
  /// GPU rungs: cublasGemmEx with its default algorithm (the stages' call before tuning).
  double default_algorithm_us = 0;
  /// GPU rungs: cuBLAS's own best for the same GEMM, the fastest of the algorithms cuBLASLt's
  /// heuristic proposes (each timed as above); 0 where not searched (cpu).
  double best_algorithm_us = 0;
  int algorithms_tried = 0;
};

/// A rung from its measured time: tflops = 2·size³ / us.
GemmRate gemmRate(int size, std::string dtype, double us, int repetitions);

/// GPU: one GEMM held for a while after the ladder, as a training step holds the GPU. A GPU at
/// its power limit lowers its clocks within seconds of a sustained GEMM load, below what the
/// ladder's short batches see: one H100 SXM ran 8192^3 at 771 TFLOP/s in 30 ms batches and at
/// 667-680 TFLOP/s from 4 s to 40 s of back-to-back GEMMs, its SM clock down from 1980 MHz to
/// 1335-1410 MHz at 700 W (docs/measurements/h100-gemm-shapes.md).
struct SustainedGemm {
  int size = 0;                      ///< m = n = k, a ladder rung
  double seconds = 0;                ///< how long it was held
  std::vector<double> window_tflops; ///< each window's rate (about half a second), in order
  double ladder_tflops = 0;          ///< the ladder's rate at the same size
  /// The held rate: the median window of the second half, once the clocks have settled.
  double tflops() const;
  /// tflops() over the ladder's rate at this size, at most 1 (0 when nothing was measured).
  double fraction_of_ladder() const;
};

/// GPU: what a collective's resident kernel costs the GEMMs beside it. NCCL runs a collective as
/// one kernel whose CTAs (one per channel) stay on their SMs until it is done, and a Hopper GEMM
/// CTA needs a whole SM, so a GEMM beside them loses more than their SMs' share: one H100 SXM ran
/// the validation rows' GEMM shapes a median 22 % slower with 2 to 8 such CTAs resident
/// (docs/measurements/h100-sm-contention.md). Each sample times one square bf16 GEMM
/// (cublasGemmEx's default algorithm, cuBLAS's own choice, as frameworks call it) alone and with
/// `resident_ctas` stand-in channel CTAs resident (kernels::launchResidentChannels).
struct ContentionSample {
  int size = 0;          ///< m = n = k
  int resident_ctas = 0; ///< the stand-in collective's CTAs, one per SM
  double alone_us = 0;   ///< the GEMM with nothing beside it, best batch
  double beside_us = 0;  ///< the same with the CTAs resident, best batch
  /// beside / alone - 1 (0 when nothing was measured).
  double slowdown() const { return alone_us > 0 ? beside_us / alone_us - 1 : 0; }
};

struct GemmBenchmark {
  std::string device;          ///< the device's description
  std::string gpu_name;        ///< empty on the cpu
  std::string software;        ///< GPU: driver, CUDA runtime, cuBLAS and NCCL versions
  int sm_count = 0;            ///< the GPU's streaming multiprocessors (0 on the cpu)
  std::vector<GemmRate> rates; ///< ascending size
  /// GPU with FP8 tensor cores: the FP8 ladder, ascending size; `us` is cuBLAS's best of the
  /// algorithms cuBLASLt proposes (there is no FP8 path of the stages' to tune).
  std::vector<GemmRate> fp8_rates;
  std::optional<std::string> datasheet_preset; ///< the hardware preset the GPU matched
  double datasheet_tflops = 0;                 ///< its dense bf16 peak (0: unknown)
  double datasheet_fp8_tflops = 0;             ///< its dense FP8 peak (0: unknown or none)
  std::optional<SustainedGemm> sustained;      ///< GPU with --sustain above 0
  std::vector<ContentionSample> contention;    ///< GPU: GEMMs beside a resident collective
  double best_tflops() const;
  /// The median of the contention samples' slowdowns, within [0, 1] (the hardware file's
  /// collective_gemm_slowdown); nothing without samples.
  std::optional<double> collective_gemm_slowdown() const;
  double best_fp8_tflops() const; ///< 0 without an FP8 ladder
};

/// Runs the ladder on this process's device (local rank picks the GPU), then on a GPU holds its
/// largest GEMM up to 8192^3 for `sustain_s` seconds (0: not held).
Result<GemmBenchmark> benchmarkGemms(DeviceKind kind, int local_rank, double sustain_s = 0);

/// The hardware preset whose datasheet describes a GPU of this name ("NVIDIA H100 80GB HBM3" is
/// h100-sxm), or nothing when none does (a PCIe H100 has another peak than the SXM part).
std::optional<std::string> hardwarePresetForGpu(const std::string &gpu_name);

/// A hardware file with the ladder as its GEMM efficiency curve (DESIGN.md §5a), starting from
/// `base` (links, memory, peak). On a GPU the efficiencies are the bf16 rates over the base's
/// datasheet peak (raised to the best rate if the GPU beats it), each rate first scaled by the
/// held GEMM's fraction of the ladder where one was held, so the curve is the GPU's rate at its
/// power limit; on the cpu device (fp32) the peak becomes the best measured rate. An FP8 ladder
/// becomes the FP8 curve the same way, over the base's peak_fp8_tflops, scaled by the same held
/// fraction (the bf16 GEMM's: one power limit); without one (no FP8 tensor cores, or the cpu)
/// the file has no FP8 peak or curve, so FP8 plans on it are refused rather than priced.
/// Contention samples become its collective_gemm_slowdown (their median); the cpu device's file
/// has none (0: not priced), and a GPU without samples keeps the base's.
/// The sources name the device, the ladder and the scaling.
Result<HardwareSpec> hardwareFromBenchmark(const GemmBenchmark &benchmark, HardwareSpec base);

/// On a GPU, the hardware_saved event's comparison of the saved curve with its base's at the
/// largest GEMM the ladder timed: largest_gemm_flops, saved_efficiency, base_efficiency and a note
/// saying what each curve is and how much faster (or slower) plans priced with the file run such
/// GEMMs. The saved file is the GPU's kernels alone at its power limit; a preset's curve is the
/// level GEMMs run at inside training at scale, fitted on published runs: on one H200 the saved
/// 0.69 of peak against the preset's 0.56 predicted the two H200 validation rows 13 % fast where
/// the preset is within 3.6 % (docs/measurements/gpu-shared-h200.md). Empty on the cpu device
/// (its file's peak is its own best rate: nothing to set beside a GPU preset).
nlohmann::json savedAgainstBaseFields(const GemmBenchmark &benchmark, const HardwareSpec &saved,
                                      const HardwareSpec &base);

/// One "gemm" event per rung, then the "gemm_summary" event (with the held rate, if any).
std::vector<nlohmann::json> gemmBenchmarkEvents(const GemmBenchmark &benchmark);

#ifdef PIPESCOPE_HAVE_CUDA
/// The GPU ladder, the GEMMs beside a resident collective and the held GEMM
/// (gemm_bench_cuda.cpp).
Result<GemmBenchmark> benchmarkCudaGemms(int local_rank, double sustain_s);
#endif

} // namespace pipescope::backend
