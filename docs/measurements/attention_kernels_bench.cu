// What the backend's materialized-attention kernels reach on one GPU, whole and in one stage's
// share of the SMs (a green context, as `--device gpu-shared` runs each pipeline stage): the
// scores GEMM Q·Kᵀ, the row softmax (forward and backward) and the context GEMM P·V, at the shapes
// a stage of the scaled llama3-8b runs (docs/measurements/gpu-shared-h200.md), beside a plain
// copy kernel as the memory ceiling. The softmax is timed twice: the backend's kernels
// (kernels/cuda_elementwise.cu, linked) and the strided kernels they replaced for rows that fit
// in shared memory (copied below), so the two are compared on the same GPU in the same run.
//
//   nvcc -O2 -std=c++17 -arch=sm_90 -I. docs/measurements/attention_kernels_bench.cu \
//     build/kernels/libpipescope_cuda_kernels.a -lcublas -lcuda -o attention_kernels_bench
//   ./attention_kernels_bench [sequence 4096] [head_dim 64] [heads_per_kv_group 4] [partition_sms
//   32]
// Prints one JSON object per line: kernel, where (gpu or partition), microseconds, GB/s moved
// (bytes each kernel must read and write once) and, for GEMMs, TFLOP/s.
#include <cublas_v2.h>
#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "docs/measurements/bench_common.cuh"
#include "kernels/cuda_kernels.h"

using bf16 = __nv_bfloat16;

#define CHECK_CU(call)                                                                             \
  do {                                                                                             \
    CUresult r_ = (call);                                                                          \
    if (r_ != CUDA_SUCCESS) {                                                                      \
      std::fprintf(stderr, "%s:%d %s: %d\n", __FILE__, __LINE__, #call, int(r_));                  \
      std::exit(1);                                                                                \
    }                                                                                              \
  } while (0)
#define CHECK_BLAS(call)                                                                           \
  do {                                                                                             \
    cublasStatus_t s_ = (call);                                                                    \
    if (s_ != CUBLAS_STATUS_SUCCESS) {                                                             \
      std::fprintf(stderr, "%s:%d %s: %d\n", __FILE__, __LINE__, #call, int(s_));                  \
      std::exit(1);                                                                                \
    }                                                                                              \
  } while (0)

constexpr int kThreads = 256;

__device__ float reduceBlock(float value, float *partial, bool maximum) {
  __syncthreads();
  partial[threadIdx.x] = value;
  __syncthreads();
  for (int stride = blockDim.x / 2; stride > 0; stride /= 2) {
    if (int(threadIdx.x) < stride) {
      const float other = partial[threadIdx.x + stride];
      partial[threadIdx.x] =
          maximum ? fmaxf(partial[threadIdx.x], other) : partial[threadIdx.x] + other;
    }
    __syncthreads();
  }
  return partial[0];
}

// The strided kernels as they were before the row-cached ones (commit ec8be2e).
__global__ void stridedSoftmax(bf16 *matrix, int columns) {
  __shared__ float partial[kThreads];
  bf16 *row = matrix + size_t(blockIdx.x) * columns;
  float largest = -INFINITY;
  for (int c = threadIdx.x; c < columns; c += blockDim.x)
    largest = fmaxf(largest, __bfloat162float(row[c]));
  largest = reduceBlock(largest, partial, true);
  float sum = 0.0f;
  for (int c = threadIdx.x; c < columns; c += blockDim.x)
    sum += __expf(__bfloat162float(row[c]) - largest);
  sum = reduceBlock(sum, partial, false);
  const float inverse = 1.0f / sum;
  for (int c = threadIdx.x; c < columns; c += blockDim.x)
    row[c] = __float2bfloat16(__expf(__bfloat162float(row[c]) - largest) * inverse);
}

__global__ void stridedSoftmaxBackward(const bf16 *probs, bf16 *grad, int columns) {
  __shared__ float partial[kThreads];
  const size_t offset = size_t(blockIdx.x) * columns;
  const bf16 *p = probs + offset;
  bf16 *g = grad + offset;
  float dot = 0.0f;
  for (int c = threadIdx.x; c < columns; c += blockDim.x)
    dot += __bfloat162float(g[c]) * __bfloat162float(p[c]);
  dot = reduceBlock(dot, partial, false);
  for (int c = threadIdx.x; c < columns; c += blockDim.x)
    g[c] = __float2bfloat16(__bfloat162float(p[c]) * (__bfloat162float(g[c]) - dot));
}

// The memory ceiling: one read and one write of every byte, 16 bytes a thread at a time.
__global__ void copyVectors(const uint4 *in, uint4 *out, size_t vectors) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < vectors;
       i += size_t(gridDim.x) * blockDim.x)
    out[i] = in[i];
}

// Mean microseconds of `launch` over enough repetitions for about 50 ms, after 3 warm-ups.
double timeUs(cudaStream_t stream, const std::function<void()> &launch) {
  cudaEvent_t start, stop;
  CHECK_CUDA(cudaEventCreate(&start));
  CHECK_CUDA(cudaEventCreate(&stop));
  for (int i = 0; i < 3; ++i)
    launch();
  CHECK_CUDA(cudaEventRecord(start, stream));
  launch();
  CHECK_CUDA(cudaEventRecord(stop, stream));
  CHECK_CUDA(cudaEventSynchronize(stop));
  float ms = 0;
  CHECK_CUDA(cudaEventElapsedTime(&ms, start, stop));
  const int repetitions = std::clamp(int(50.0 / std::max(0.001f, ms)), 3, 2000);
  CHECK_CUDA(cudaEventRecord(start, stream));
  for (int i = 0; i < repetitions; ++i)
    launch();
  CHECK_CUDA(cudaEventRecord(stop, stream));
  CHECK_CUDA(cudaEventSynchronize(stop));
  CHECK_CUDA(cudaEventElapsedTime(&ms, start, stop));
  CHECK_CUDA(cudaGetLastError());
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return 1000.0 * ms / repetitions;
}

// A stream on a green context of `sms` SMs (the split rounds to the GPU's granularity); the SM
// count it got is written to `got`.
cudaStream_t partitionStream(int sms, int *got) {
  CUdevice device;
  CHECK_CU(cuDeviceGet(&device, 0));
  CUdevResource all{};
  CHECK_CU(cuDeviceGetDevResource(device, &all, CU_DEV_RESOURCE_TYPE_SM));
  CUdevResource part{};
  unsigned groups = 1;
  CHECK_CU(cuDevSmResourceSplitByCount(&part, &groups, &all, nullptr, 0, unsigned(sms)));
  CUdevResourceDesc desc{};
  CHECK_CU(cuDevResourceGenerateDesc(&desc, &part, 1));
  CUgreenCtx context = nullptr;
  CHECK_CU(cuGreenCtxCreate(&context, desc, device, CU_GREEN_CTX_DEFAULT_STREAM));
  CUstream stream = nullptr;
  CHECK_CU(cuGreenCtxStreamCreate(&stream, context, CU_STREAM_NON_BLOCKING, 0));
  *got = int(part.sm.smCount);
  return stream;
}

int main(int argc, char **argv) {
  const int s = argc > 1 ? std::atoi(argv[1]) : 4096;
  const int d = argc > 2 ? std::atoi(argv[2]) : 64;
  const int group = argc > 3 ? std::atoi(argv[3]) : 4;
  const int partition_sms = argc > 4 ? std::atoi(argv[4]) : 32;
  CHECK_CUDA(cudaSetDevice(0));
  CHECK_CUDA(cudaFree(nullptr)); // the primary context, before the green one
  cudaDeviceProp properties{};
  CHECK_CUDA(cudaGetDeviceProperties(&properties, 0));
  const size_t square = size_t(s) * s, elements = square * group;
  bf16 *scores, *grad, *q, *k, *v, *context;
  CHECK_CUDA(cudaMalloc(&scores, elements * sizeof(bf16)));
  CHECK_CUDA(cudaMalloc(&grad, elements * sizeof(bf16)));
  CHECK_CUDA(cudaMalloc(&q, size_t(s) * d * group * sizeof(bf16)));
  CHECK_CUDA(cudaMalloc(&k, size_t(s) * d * sizeof(bf16)));
  CHECK_CUDA(cudaMalloc(&v, size_t(s) * d * sizeof(bf16)));
  CHECK_CUDA(cudaMalloc(&context, size_t(s) * d * group * sizeof(bf16)));
  const auto fillBf16 = [](bf16 *p, size_t n, unsigned seed) {
    fill<<<1024, 256>>>(reinterpret_cast<unsigned char *>(p), n, false, seed);
    CHECK_CUDA(cudaGetLastError());
  };
  fillBf16(scores, elements, 1);
  fillBf16(grad, elements, 2);
  fillBf16(q, size_t(s) * d * group, 3);
  fillBf16(k, size_t(s) * d, 4);
  fillBf16(v, size_t(s) * d, 5);
  CHECK_CUDA(cudaDeviceSynchronize());

  int got_sms = 0;
  cudaStream_t whole = nullptr;
  CHECK_CUDA(cudaStreamCreateWithFlags(&whole, cudaStreamNonBlocking));
  cudaStream_t partition = partitionStream(partition_sms, &got_sms);
  cublasHandle_t blas;
  CHECK_BLAS(cublasCreate(&blas));
  const float one = 1.0f, zero = 0.0f, scale = 1.0f / std::sqrt(float(d));
  const double bytes = double(elements) * sizeof(bf16);

  struct Where {
    const char *name;
    cudaStream_t stream;
    int sms;
  };
  for (const Where where : {Where{"gpu", whole, properties.multiProcessorCount},
                            Where{"partition", partition, got_sms}}) {
    cudaStream_t st = where.stream;
    CHECK_BLAS(cublasSetStream(blas, st));
    // Library kernels the backend calls take `sm_count_target` only through cuBLASLt; cuBLAS
    // here sizes its grid for the whole GPU and the green context confines it.
    const auto report = [&](const char *kernel, double us, double moved, double flops) {
      std::printf("{\"kernel\":\"%s\",\"where\":\"%s\",\"sms\":%d,\"sequence\":%d,\"head_dim\":%d,"
                  "\"group\":%d,\"us\":%.2f,\"gbps\":%.1f,\"tflops\":%.1f}\n",
                  kernel, where.name, where.sms, s, d, group, us, moved / us * 1e-3,
                  flops > 0 ? flops / us * 1e-6 : 0.0);
    };
    const size_t vectors = elements * sizeof(bf16) / sizeof(uint4);
    report("copy",
           timeUs(st,
                  [&] {
                    copyVectors<<<where.sms * 8, kThreads, 0, st>>>(
                        reinterpret_cast<const uint4 *>(scores), reinterpret_cast<uint4 *>(grad),
                        vectors);
                  }),
           2 * bytes, 0);
    // Q·Kᵀ for the group's heads (K shared: stride 0), written as bf16 scores.
    report("scores-gemm",
           timeUs(st,
                  [&] {
                    CHECK_BLAS(cublasGemmStridedBatchedEx(
                        blas, CUBLAS_OP_T, CUBLAS_OP_N, s, s, d, &scale, k, CUDA_R_16BF, d, 0, q,
                        CUDA_R_16BF, d, static_cast<long long>(s) * d, &zero, scores, CUDA_R_16BF,
                        s, square, group, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
                  }),
           bytes + 2.0 * s * d * (group + 1), 2.0 * square * d * group);
    report("softmax-strided",
           timeUs(st, [&] { stridedSoftmax<<<unsigned(group * s), kThreads, 0, st>>>(scores, s); }),
           2 * bytes, 0);
    report("softmax-backend",
           timeUs(st,
                  [&] {
                    CHECK_CUDA(pipescope::kernels::launchSoftmaxRows(scores, group * s, s, st));
                  }),
           2 * bytes, 0);
    report("softmax-backward-strided",
           timeUs(st,
                  [&] {
                    stridedSoftmaxBackward<<<unsigned(group * s), kThreads, 0, st>>>(scores, grad,
                                                                                     s);
                  }),
           3 * bytes, 0);
    report("softmax-backward-backend",
           timeUs(st,
                  [&] {
                    CHECK_CUDA(pipescope::kernels::launchSoftmaxRowsBackward(scores, grad,
                                                                             group * s, s, st));
                  }),
           3 * bytes, 0);
    // P·V for the group's heads (V shared).
    report("context-gemm",
           timeUs(st,
                  [&] {
                    CHECK_BLAS(cublasGemmStridedBatchedEx(
                        blas, CUBLAS_OP_N, CUBLAS_OP_N, d, s, s, &one, v, CUDA_R_16BF, d, 0, scores,
                        CUDA_R_16BF, s, square, &zero, context, CUDA_R_16BF, d,
                        static_cast<long long>(s) * d, group, CUBLAS_COMPUTE_32F,
                        CUBLAS_GEMM_DEFAULT));
                  }),
           bytes + 2.0 * s * d * (group + 1), 2.0 * square * d * group);
  }
  return 0;
}
