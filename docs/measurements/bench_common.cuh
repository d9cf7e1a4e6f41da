// What the standalone CUDA benchmarks beside it share (sm_contention_bench.cu,
// wgrad_accumulate_bench.cu): error checks that say where a call failed, and operands filled
// with data that draws the power training's does.
#pragma once
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>

#define CHECK_CUDA(call)                                                                           \
  do {                                                                                             \
    cudaError_t e_ = (call);                                                                       \
    if (e_ != cudaSuccess) {                                                                       \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_));   \
      std::exit(1);                                                                                \
    }                                                                                              \
  } while (0)
// A cuBLASLt call that must succeed, else `on_failure` (exit, or return a value that says so).
#define CHECK_LT_OR(call, on_failure)                                                              \
  do {                                                                                             \
    cublasStatus_t s_ = (call);                                                                    \
    if (s_ != CUBLAS_STATUS_SUCCESS) {                                                             \
      std::fprintf(stderr, "%s:%d %s: status %d\n", __FILE__, __LINE__, #call, int(s_));           \
      on_failure;                                                                                  \
    }                                                                                              \
  } while (0)

// `elements` random normal-range values of either sign with random mantissas, FP8 e4m3 (one byte
// each) or bf16 (two): zeros or repeated bits draw less power and let the clocks run higher than
// training's data does. e4m3 exponents 2^-3..2^0; bf16 0x3e00..0x3fff, exponents 2^-3..2^0, then
// a random low mantissa byte.
__global__ void fill(unsigned char *p, size_t elements, bool fp8, unsigned seed) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < elements;
       i += size_t(gridDim.x) * blockDim.x) {
    unsigned x = unsigned(i) * 2654435761u + seed * 40503u;
    x ^= x >> 15;
    x *= 2246822519u;
    x ^= x >> 13;
    const unsigned sign = (x >> 31) << 7, exponent = (x >> 8) & 3;
    if (fp8) {
      p[i] = (unsigned char)(sign | ((4 + exponent) << 3) | (x & 7));
    } else {
      p[2 * i + 1] = (unsigned char)(sign | 0x3e | (exponent >> 1));
      p[2 * i] = (unsigned char)(((exponent & 1) << 7) | (x & 0x7f));
    }
  }
}
