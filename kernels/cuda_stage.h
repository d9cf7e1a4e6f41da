#pragma once
// One virtual stage's synthetic compute on a GPU: bf16 GEMMs through cuBLAS (fp32 accumulation)
// and the fused elementwise kernels of cuda_kernels.h, with the backward split into an input-grad
// pass and a weight-grad pass as on the CPU (cpu_stage.h explains the shared buffers). Everything
// is enqueued on the stage's stream; nothing here synchronizes.
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <cublas_v2.h>

#include "engine/result.h"
#include "kernels/cuda_gemm.h"
#include "kernels/cuda_kernels.h"
#include "kernels/stage_work.h"

namespace pipescope::kernels {

/// Sums a bf16 buffer over the tensor-parallel group, enqueued on the stream (NCCL all-reduce).
/// Empty when tp = 1.
using CudaAllReduceSum = std::function<Status(bf16 *data, std::size_t count, cudaStream_t stream)>;

class CudaStage {
public:
  /// Allocates and initializes the stage's buffers on the current device, then tunes the
  /// algorithm of every GEMM shape it runs (cuda_gemm.h) on `stream`, whose work may use
  /// `sm_count_target` SMs (a green context's partition; 0: the whole GPU).
  static Result<std::unique_ptr<CudaStage>> create(const StageWork &work, std::uint32_t seed,
                                                   cudaStream_t stream, int sm_count_target = 0);
  ~CudaStage();
  CudaStage(const CudaStage &) = delete;
  CudaStage &operator=(const CudaStage &) = delete;

  /// Device memory the stage needs, in bytes (to refuse a size that cannot fit, before trying).
  static std::size_t memoryBytes(const StageWork &work);

  const StageWork &work() const { return work_; }
  std::size_t activationElements() const {
    return static_cast<std::size_t>(work_.activationElements());
  }
  cudaStream_t stream() const { return stream_; }
  /// Moves the stage's work to another stream (the gpu-shared device's per-stage streams).
  void setStream(cudaStream_t stream) { stream_ = stream; }

  /// Enqueues output = stage(input); input == nullptr: the first stage's own input.
  Status forward(const bf16 *input, bf16 *output, const CudaAllReduceSum &reduce);
  /// Enqueues the input-grad pass; output_grad == nullptr: the last stage's loss gradient.
  Status inputGrad(const bf16 *output_grad, bf16 *input_grad, const CudaAllReduceSum &reduce);
  /// Enqueues the weight-grad pass (accumulating).
  Status weightGrad();

  /// Row-major C = alpha·op(A)·op(B) + beta·C in bf16 with fp32 accumulation, on the stream,
  /// with the algorithm tuned for the shape.
  Status gemm(bool transpose_a, bool transpose_b, int m, int n, int k, float alpha, const bf16 *a,
              int lda, const bf16 *b, int ldb, float beta, bf16 *c, int ldc);

  TunedGemm &gemms() { return *gemms_; }

  bf16 *weightGradients() const { return weight_grads_; }
  std::size_t weightGradientCount() const { return weight_count_; }

private:
  explicit CudaStage(const StageWork &work, cudaStream_t stream) : work_(work), stream_(stream) {}
  Status allocate(std::uint32_t seed);
  Status tuneGemms();
  Status batchedGemm(bool transpose_a, bool transpose_b, int m, int n, int k, float alpha,
                     const bf16 *a, int lda, long long stride_a, const bf16 *b, int ldb,
                     long long stride_b, float beta, bf16 *c, int ldc, long long stride_c,
                     int count);
  Status layerForward(const bf16 *x, bf16 *y, const CudaAllReduceSum &reduce);
  Status layerInputGrad(const bf16 *dy, bf16 *dx, const CudaAllReduceSum &reduce);
  Status layerWeightGrad();

  StageWork work_;
  cudaStream_t stream_ = nullptr;
  cublasHandle_t cublas_ = nullptr; ///< the batched attention GEMMs
  std::unique_ptr<TunedGemm> gemms_;
  std::vector<void *> allocations_;
  bf16 *weights_ = nullptr, *weight_grads_ = nullptr;
  std::size_t weight_count_ = 0;
  bf16 *wqkv_ = nullptr, *wo_ = nullptr, *w1_ = nullptr, *b1_ = nullptr, *w2_ = nullptr,
       *head_ = nullptr;
  bf16 *dwqkv_ = nullptr, *dwo_ = nullptr, *dw1_ = nullptr, *db1_ = nullptr, *dw2_ = nullptr,
       *dhead_ = nullptr;
  bf16 *input_ = nullptr, *x_ = nullptr, *y_ = nullptr, *qkv_ = nullptr, *scores_ = nullptr,
       *context_ = nullptr, *projected_ = nullptr, *ffn_pre_ = nullptr, *ffn_act_ = nullptr,
       *logits_ = nullptr, *dy_ = nullptr, *dffn_act_ = nullptr, *dffn_pre_ = nullptr,
       *dprojected_ = nullptr, *dcontext_ = nullptr, *dscores_ = nullptr, *dqkv_ = nullptr,
       *dx_ = nullptr;
};

/// Checks cuBLAS bf16 GEMMs (every transpose case) and the fused kernels against the CPU
/// reference on small sizes, on the current device. `worst` receives the largest relative error.
Status checkCudaKernels(double *worst);

} // namespace pipescope::kernels
