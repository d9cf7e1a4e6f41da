#pragma once
// The stages' GEMM: row-major bf16 in and out with fp32 accumulation, its algorithm chosen per
// shape by timing. cublasGemmEx's default algorithm comes from a heuristic that sees neither the
// SM partition a gpu-shared stage runs in nor the real cost of each kernel: on one H100 it lost
// up to 29 % to the best of cuBLASLt's proposals at 1024³ (docs/measurements/gpu-shared-h100.md).
// So, like Transformer Engine's and PyTorch's TunableOp autotuning, each new shape is timed once
// with the default call and with every algorithm cuBLASLt's heuristic proposes (told the
// partition's SM count), and the fastest is kept for every later call of that shape.
//
// Tuning synchronizes its stream, so it runs only while `tuning` is on (a stage turns it on for
// one pass through its ops when it is created, before any step is timed); a shape first met with
// tuning off runs the default call. Decisions are shared by the process (a pipeline's middle
// stages have the same shapes), keyed by everything an algorithm's validity depends on.
#include <compare>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include <cublasLt.h>
#include <cublas_v2.h>

#include "engine/result.h"
#include "kernels/cuda_kernels.h"

namespace pipescope::kernels {

/// Row-major C = alpha·op(A)·op(B) + beta·C; A is m×k after op, B is k×n, C is m×n.
struct GemmCall {
  bool transpose_a = false, transpose_b = false;
  int m = 0, n = 0, k = 0;
  float alpha = 1, beta = 0;
  const bf16 *a = nullptr;
  int lda = 0;
  const bf16 *b = nullptr;
  int ldb = 0;
  bf16 *c = nullptr;
  int ldc = 0;
};

/// Everything a decision's validity depends on: the device and SM partition, the shape, the
/// transposes, the leading dimensions, whether C is accumulated, and the alignment of each
/// matrix. Plain numbers, so that finding a call's decision costs the host next to nothing
/// (a 1024³ GEMM takes about 10 us on an H100, not much more than launching it).
struct GemmKey {
  int device = 0, sm_count_target = 0;
  bool transpose_a = false, transpose_b = false, accumulate = false;
  int m = 0, n = 0, k = 0, lda = 0, ldb = 0, ldc = 0;
  std::uint32_t align_a = 0, align_b = 0, align_c = 0;
  auto operator<=>(const GemmKey &) const = default;
};

struct LtProblem; // cuBLASLt's descriptors of one GemmKey (cuda_gemm.cpp)

/// What tuning chose for one shape.
struct GemmChoice {
  bool default_call = true; ///< cublasGemmEx with CUBLAS_GEMM_DEFAULT won (or nothing else ran)
  cublasLtMatmulAlgo_t algorithm{};
  std::size_t workspace_bytes = 0;
  double us = 0;         ///< the chosen one's time when tuned
  double default_us = 0; ///< cublasGemmEx's default algorithm's time when tuned
  int candidates = 0;    ///< cuBLASLt algorithms that ran (those that refused the problem aside)
};

class TunedGemm {
public:
  /// `sm_count_target`: the SMs the stream's work may use (a green context's partition), 0 for
  /// the whole GPU; it steers cuBLASLt's heuristic and is part of every decision's key.
  static Result<std::unique_ptr<TunedGemm>> create(int sm_count_target = 0);
  ~TunedGemm();
  TunedGemm(const TunedGemm &) = delete;
  TunedGemm &operator=(const TunedGemm &) = delete;

  void setTuning(bool on) { tuning_ = on; }
  bool tuning() const { return tuning_; }

  /// Enqueues the GEMM with the shape's tuned algorithm (tuning it first while tuning is on).
  Status run(const GemmCall &call, cudaStream_t stream);
  /// Enqueues it with the default call (candidate -1) or cuBLASLt's candidate `index` for this
  /// shape, for checks against a reference; an index past the candidates is an error.
  Status runCandidate(const GemmCall &call, int index, cudaStream_t stream);
  /// How many algorithms cuBLASLt's heuristic proposes for this shape.
  Result<int> candidateCount(const GemmCall &call);
  /// The decision for this shape, tuning it now if it has none (synchronizes `stream`).
  Result<GemmChoice> choiceFor(const GemmCall &call, cudaStream_t stream);

private:
  TunedGemm() = default;
  Status runDefault(const GemmCall &call, cudaStream_t stream);
  Status runAlgorithm(const GemmCall &call, const LtProblem &problem,
                      const cublasLtMatmulAlgo_t &algorithm, std::size_t workspace_bytes,
                      cudaStream_t stream);
  Result<GemmChoice> tune(const GemmCall &call, cudaStream_t stream);
  GemmKey keyOf(const GemmCall &call) const;

  int sm_count_target_ = 0;
  int device_ = 0;
  bool tuning_ = false;
  cublasHandle_t cublas_ = nullptr;
  cublasLtHandle_t lt_ = nullptr;
  void *workspace_ = nullptr;
  cudaEvent_t start_ = nullptr, stop_ = nullptr;
};

/// What tuning decided in this process so far, for a device's description: how many shapes, how
/// many run a cuBLASLt algorithm rather than the default call, and the time saved summed over
/// one call of each shape ("" before any shape was tuned).
std::string gemmTuningSummary();

/// The workspace every TunedGemm gives cuBLASLt: cuBLAS's own default on Hopper is 32 MiB.
constexpr std::size_t kGemmWorkspaceBytes = 32u << 20;

} // namespace pipescope::kernels
