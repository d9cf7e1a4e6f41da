// Weight-gradient GEMMs as Megatron-Core runs them with the gradient-accumulation fusion: the
// product dW = dYᵀ·X over a microbatch's tokens, added into the weight's fp32 gradient buffer
// (main_grad) by the GEMM itself (beta = 1, D = C in fp32). Beside them the same products
// written to a fresh 16-bit output, which is what a GEMM curve over FLOPs prices. The difference
// is the fp32 buffer's read and write, once per weight and microbatch whatever the microbatch
// holds: a cost per microbatch that more tokens per microbatch dilute.
//
// Each shape also runs accumulating into a bf16 buffer (Megatron with bf16 main gradients, as
// NVIDIA's MLPerf GPT-3 runs). Each shape runs in FP8 (e4m3 operands, as Transformer Engine's wgrad
// with its split accumulator: no fast accumulation) and in BF16, through cuBLASLt with its first
// heuristic (as TE and PyTorch take it), 32 MiB of workspace. cuBLASLt's FP8 GEMMs want the "TN"
// form: A transposed, B not, column-major; so D[m x n] = A[k x m]ᵀ · B[k x n] with m the weight's
// output rows, n its input columns and k the microbatch's tokens.
//
//   nvcc -O2 -std=c++17 -arch=sm_90 wgrad_accumulate_bench.cu -lcublasLt -o wgrad_bench
//   ./wgrad_bench M N K [M N K ...]   (prints one JSON object per line)
// Results: docs/measurements/h100-microbatch-scaling.md.
#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "bench_common.cuh"

#define CHECK_LT(call) CHECK_LT_OR(call, return -1.0)

// µs of one D = alpha·AᵀB + beta·C, the best of three batches of `reps` after a warm-up.
enum class Output { Bf16, Bf16Accumulate, Fp32Accumulate };

double timeGemm(cublasLtHandle_t lt, void *workspace, size_t workspace_bytes, int m, int n, int k,
                bool fp8, Output output) {
  const bool accumulate_fp32 = output == Output::Fp32Accumulate;
  const cudaDataType_t in_type = fp8 ? CUDA_R_8F_E4M3 : CUDA_R_16BF;
  const cudaDataType_t out_type = accumulate_fp32 ? CUDA_R_32F : CUDA_R_16BF;
  const size_t in_bytes = fp8 ? 1 : 2, out_bytes = accumulate_fp32 ? 4 : 2;
  void *a = nullptr, *b = nullptr, *d = nullptr;
  CHECK_CUDA(cudaMalloc(&a, size_t(k) * m * in_bytes));
  CHECK_CUDA(cudaMalloc(&b, size_t(k) * n * in_bytes));
  CHECK_CUDA(cudaMalloc(&d, size_t(m) * n * out_bytes));
  fill<<<1024, 256>>>(static_cast<unsigned char *>(a), size_t(k) * m, fp8, 1);
  fill<<<1024, 256>>>(static_cast<unsigned char *>(b), size_t(k) * n, fp8, 2);
  CHECK_CUDA(cudaMemset(d, 0, size_t(m) * n * out_bytes));

  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t la = nullptr, lb = nullptr, ld = nullptr;
  cublasLtMatmulPreference_t pref = nullptr;
  CHECK_LT(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t transa = CUBLAS_OP_T, transb = CUBLAS_OP_N;
  CHECK_LT(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &transa, sizeof transa));
  CHECK_LT(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &transb, sizeof transb));
  if (fp8) {
    const int8_t fast_accumulate = 0;
    CHECK_LT(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_FAST_ACCUM, &fast_accumulate,
                                            sizeof fast_accumulate));
  }
  CHECK_LT(cublasLtMatrixLayoutCreate(&la, in_type, k, m, k));
  CHECK_LT(cublasLtMatrixLayoutCreate(&lb, in_type, k, n, k));
  CHECK_LT(cublasLtMatrixLayoutCreate(&ld, out_type, m, n, m));
  CHECK_LT(cublasLtMatmulPreferenceCreate(&pref));
  CHECK_LT(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                &workspace_bytes, sizeof workspace_bytes));
  cublasLtMatmulHeuristicResult_t heuristic = {};
  int found = 0;
  CHECK_LT(cublasLtMatmulAlgoGetHeuristic(lt, op, la, lb, ld, ld, pref, 1, &heuristic, &found));
  if (found == 0) {
    std::fprintf(stderr, "no cuBLASLt algorithm for %d %d %d fp8=%d output=%d\n", m, n, k, fp8,
                 int(output));
    return -1.0;
  }
  const float alpha = 1.0f, beta = output == Output::Bf16 ? 0.0f : 1.0f;
  auto call = [&] {
    return cublasLtMatmul(lt, op, &alpha, a, la, b, lb, &beta, d, ld, d, ld, &heuristic.algo,
                          workspace, workspace_bytes, nullptr);
  };
  for (int i = 0; i < 3; ++i)
    CHECK_LT(call());
  CHECK_CUDA(cudaDeviceSynchronize());
  cudaEvent_t start, stop;
  CHECK_CUDA(cudaEventCreate(&start));
  CHECK_CUDA(cudaEventCreate(&stop));
  const double flops = 2.0 * m * n * k;
  const int reps = int(std::max(3.0, std::min(500.0, 5e-3 / (flops / 600e12))));
  double best = 1e30;
  for (int batch = 0; batch < 3; ++batch) {
    CHECK_CUDA(cudaEventRecord(start));
    for (int i = 0; i < reps; ++i)
      CHECK_LT(call());
    CHECK_CUDA(cudaEventRecord(stop));
    CHECK_CUDA(cudaEventSynchronize(stop));
    float ms = 0;
    CHECK_CUDA(cudaEventElapsedTime(&ms, start, stop));
    best = std::min(best, 1e3 * ms / reps);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  cublasLtMatmulPreferenceDestroy(pref);
  cublasLtMatrixLayoutDestroy(la);
  cublasLtMatrixLayoutDestroy(lb);
  cublasLtMatrixLayoutDestroy(ld);
  cublasLtMatmulDescDestroy(op);
  cudaFree(a);
  cudaFree(b);
  cudaFree(d);
  return best;
}

int main(int argc, char **argv) {
  if (argc < 4 || (argc - 1) % 3 != 0) {
    std::fprintf(stderr, "usage: %s M N K [M N K ...]\n", argv[0]);
    return 2;
  }
  cudaDeviceProp props{};
  CHECK_CUDA(cudaGetDeviceProperties(&props, 0));
  cublasLtHandle_t lt = nullptr;
  if (cublasLtCreate(&lt) != CUBLAS_STATUS_SUCCESS) return 1;
  const size_t workspace_bytes = size_t(32) << 20;
  void *workspace = nullptr;
  CHECK_CUDA(cudaMalloc(&workspace, workspace_bytes));
  std::printf("{\"device\": \"%s\", \"cublasLt\": %zu}\n", props.name, cublasLtGetVersion());
  for (int i = 1; i + 2 < argc; i += 3) {
    const int m = std::atoi(argv[i]), n = std::atoi(argv[i + 1]), k = std::atoi(argv[i + 2]);
    for (const bool fp8 : {true, false}) {
      const double plain = timeGemm(lt, workspace, workspace_bytes, m, n, k, fp8, Output::Bf16);
      const double bf16_accumulate =
          timeGemm(lt, workspace, workspace_bytes, m, n, k, fp8, Output::Bf16Accumulate);
      const double fp32_accumulate =
          timeGemm(lt, workspace, workspace_bytes, m, n, k, fp8, Output::Fp32Accumulate);
      std::printf("{\"m\": %d, \"n\": %d, \"k\": %d, \"fp8\": %s, \"bf16_out_us\": %.2f, "
                  "\"bf16_accumulate_us\": %.2f, \"fp32_accumulate_us\": %.2f}\n",
                  m, n, k, fp8 ? "true" : "false", plain, bf16_accumulate, fp32_accumulate);
      std::fflush(stdout);
    }
  }
  cudaFree(workspace);
  cublasLtDestroy(lt);
  return 0;
}
