// The GPU rungs of --gemm-bench: cuBLAS bf16 GEMMs with fp32 accumulation (cublasGemmEx, the call
// the stages make), timed with device events over batches long enough that launch gaps vanish.
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>

#include "backend/cuda_common.h"
#include "backend/gemm_bench.h"
#include "kernels/cuda_check.h"

namespace pipescope::backend {

namespace {

// Frees what one rung allocated, whatever way it ends.
struct RungResources {
  std::vector<void *> buffers;
  cublasHandle_t cublas = nullptr;
  cudaStream_t stream = nullptr;
  ~RungResources() {
    for (void *buffer : buffers)
      cudaFree(buffer);
    if (cublas) cublasDestroy(cublas);
    if (stream) cudaStreamDestroy(stream);
  }
};

Result<GemmRate> timeRung(int n) {
  RungResources r;
  PIPESCOPE_CUDA_CHECK(cudaStreamCreateWithFlags(&r.stream, cudaStreamNonBlocking));
  PIPESCOPE_CUBLAS_CHECK(cublasCreate(&r.cublas));
  PIPESCOPE_CUBLAS_CHECK(cublasSetStream(r.cublas, r.stream));
  const std::size_t elements = static_cast<std::size_t>(n) * n;
  kernels::bf16 *matrices[3] = {};
  for (int i = 0; i < 3; ++i) {
    void *pointer = nullptr;
    PIPESCOPE_CUDA_CHECK(cudaMalloc(&pointer, elements * sizeof(kernels::bf16)));
    r.buffers.push_back(pointer);
    matrices[i] = static_cast<kernels::bf16 *>(pointer);
    // Random operands: zeros would draw less power and let the clocks run higher than in use.
    PIPESCOPE_CUDA_CHECK(kernels::launchFillUniform(matrices[i], elements, 1.0f,
                                                    static_cast<std::uint32_t>(n + i), r.stream));
  }
  const float alpha = 1.0f, beta = 0.0f;
  const auto gemm = [&]() -> Status {
    PIPESCOPE_CUBLAS_CHECK(cublasGemmEx(r.cublas, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &alpha,
                                        matrices[0], CUDA_R_16BF, n, matrices[1], CUDA_R_16BF, n,
                                        &beta, matrices[2], CUDA_R_16BF, n, CUBLAS_COMPUTE_32F,
                                        CUBLAS_GEMM_DEFAULT));
    return Ok{};
  };
  EventPool events;
  PIPESCOPE_TRY(events.resize(2));
  const auto timeBatch = [&](int repetitions) -> Result<double> {
    PIPESCOPE_CUDA_CHECK(cudaEventRecord(events[0], r.stream));
    for (int i = 0; i < repetitions; ++i)
      PIPESCOPE_TRY(gemm());
    PIPESCOPE_CUDA_CHECK(cudaEventRecord(events[1], r.stream));
    PIPESCOPE_CUDA_CHECK(cudaEventSynchronize(events[1]));
    float ms = 0;
    PIPESCOPE_CUDA_CHECK(cudaEventElapsedTime(&ms, events[0], events[1]));
    return 1000.0 * static_cast<double>(ms) / repetitions;
  };
  // Warm-up: cuBLAS picks its kernel, the clocks rise.
  auto estimate = timeBatch(3);
  if (!estimate) return estimate.error();
  // Batches of about 100 ms; the best of 3.
  const int repetitions = std::clamp(static_cast<int>(1e5 / std::max(1.0, *estimate)), 3, 20000);
  double best = 1e300;
  for (int batch = 0; batch < 3; ++batch) {
    auto us = timeBatch(repetitions);
    if (!us) return us.error();
    best = std::min(best, *us);
  }
  return gemmRate(n, "bf16", best, repetitions);
}

} // namespace

Result<GemmBenchmark> benchmarkCudaGemms(int local_rank) {
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess || count == 0)
    return makeError("--gemm-bench: no CUDA GPU is visible (" +
                     (status != cudaSuccess ? kernels::cudaErrorText(status)
                                            : std::string("cudaGetDeviceCount found 0")) +
                     "); use --device cpu, or run where a GPU and its driver are");
  const int device = local_rank % count;
  PIPESCOPE_CUDA_CHECK(cudaSetDevice(device));
  cudaDeviceProp properties{};
  PIPESCOPE_CUDA_CHECK(cudaGetDeviceProperties(&properties, device));
  GemmBenchmark benchmark;
  benchmark.gpu_name = properties.name;
  benchmark.device = "cuda: " + gpuDescription(device) + ", cuBLAS bf16 GEMM, fp32 accumulation";
  std::size_t free_bytes = 0, total_bytes = 0;
  PIPESCOPE_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
  for (int n : {1024, 2048, 4096, 8192, 16384}) {
    // Three operands with room to spare for cuBLAS's workspace.
    if (3.0 * n * n * sizeof(kernels::bf16) > 0.5 * static_cast<double>(free_bytes)) break;
    auto rate = timeRung(n);
    if (!rate) return rate.error();
    benchmark.rates.push_back(*rate);
  }
  if (benchmark.rates.empty())
    return makeError("--gemm-bench: too little free memory on GPU " + std::to_string(device) +
                     " for even a 1024 x 1024 GEMM");
  return benchmark;
}

} // namespace pipescope::backend
