// What an overlapped collective costs the GEMMs beside it on one GPU. NCCL runs a collective as
// one kernel of a few CTAs (one per channel) that stays resident until the collective is done,
// for a whole gradient bucket or TP exchange, mostly waiting on the network. A Hopper GEMM CTA
// takes an SM's whole register file, so none shares an SM with such a CTA: while the collective
// runs, the GEMMs have the other SMs. Whether they then lose only those SMs' share (k / SMs) or
// more depends on how the GEMM kernel hands out its tiles (a persistent kernel with a static tile
// schedule waits for its last CTAs to find a free SM), which this program measures.
//
// For each GEMM shape (FP8 e4m3 and BF16, through cuBLASLt's first heuristic with 32 MiB of
// workspace, as Transformer Engine and PyTorch take it) and each k, k "channel" CTAs are made
// resident first (one per SM: 512 threads and 120 KiB of shared memory each, like an NCCL
// kernel's footprint), then the GEMM is timed on another stream, then the CTAs are released:
//   - hold: the channel CTAs only poll a flag (a collective waiting on the network);
//   - copy: they stream a 256 MiB buffer through HBM (a collective reducing at NVLink rates);
//   - target: hold, with the GEMM chosen for SMs − k (CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET, what
//     Transformer Engine sets when its userbuffers overlap takes SMs).
//
//   nvcc -O2 -std=c++17 -arch=sm_90 sm_contention_bench.cu -lcublasLt -o sm_contention_bench
//   ./sm_contention_bench M N K [M N K ...]   (prints one JSON object per line)
// Results: docs/measurements/h100-sm-contention.md.
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

#include "bench_common.cuh"

#define CHECK_LT(call) CHECK_LT_OR(call, std::exit(1))

constexpr int kChannelThreads = 512;
constexpr int kChannelSharedBytes = 120 << 10; // over half an SM's 228 KiB: one CTA per SM
constexpr size_t kCopyBytes = size_t(256) << 20;

// One collective channel: counts itself in, then waits for `stop` (hold) or streams `copy_bytes`
// of `src` into `dst` (copy) until the host sets it. As in NCCL, one thread polls the flag in
// host memory, a few microseconds apart; the others wait for its word at a barrier (512 threads
// each reading host memory over PCIe would load the memory system far beyond any collective).
__global__ void __launch_bounds__(kChannelThreads, 1)
    channel(volatile int *stop, int *started, const int4 *src, int4 *dst, size_t copy_bytes) {
  extern __shared__ int4 staging[];
  __shared__ int done;
  if (threadIdx.x == 0) atomicAdd_system(started, 1);
  const size_t n = copy_bytes / sizeof(int4);
  const size_t slice = n / gridDim.x, begin = slice * blockIdx.x;
  const size_t step = size_t(blockDim.x) * 16; // 128 KiB a CTA between polls
  size_t at = 0;
  for (;;) {
    if (threadIdx.x == 0) {
      done = *stop;
      if (!done && n == 0) __nanosleep(4000);
    }
    __syncthreads();
    if (done) break;
    if (n > 0) {
      for (size_t i = threadIdx.x; i < step; i += blockDim.x) {
        const size_t j = begin + (at + i) % slice;
        staging[threadIdx.x] = src[j];
        dst[j] = staging[threadIdx.x];
      }
      at = (at + step) % slice;
    }
    __syncthreads();
  }
}

struct Gemm {
  cublasLtHandle_t lt = nullptr;
  void *workspace = nullptr;
  size_t workspace_bytes = 0;
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t la = nullptr, lb = nullptr, ld = nullptr;
  cublasLtMatmulAlgo_t algo{};
  void *a = nullptr, *b = nullptr, *d = nullptr;
  cudaStream_t stream = nullptr;

  // D[m x n] (bf16) = A[k x m]ᵀ · B[k x n], the "TN" form cuBLASLt's FP8 GEMMs want. sm_target 0:
  // cuBLASLt's own choice for the whole GPU.
  Gemm(cublasLtHandle_t handle, void *ws, size_t ws_bytes, int m, int n, int k, bool fp8,
       int sm_target, cudaStream_t s)
      : lt(handle), workspace(ws), workspace_bytes(ws_bytes), stream(s) {
    const cudaDataType_t in_type = fp8 ? CUDA_R_8F_E4M3 : CUDA_R_16BF;
    const size_t in_bytes = fp8 ? 1 : 2;
    CHECK_CUDA(cudaMalloc(&a, size_t(k) * m * in_bytes));
    CHECK_CUDA(cudaMalloc(&b, size_t(k) * n * in_bytes));
    CHECK_CUDA(cudaMalloc(&d, size_t(m) * n * 2));
    fill<<<1024, 256>>>(static_cast<unsigned char *>(a), size_t(k) * m, fp8, 1);
    fill<<<1024, 256>>>(static_cast<unsigned char *>(b), size_t(k) * n, fp8, 2);
    CHECK_LT(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    const cublasOperation_t transa = CUBLAS_OP_T, transb = CUBLAS_OP_N;
    CHECK_LT(
        cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &transa, sizeof transa));
    CHECK_LT(
        cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &transb, sizeof transb));
    if (sm_target > 0)
      CHECK_LT(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET, &sm_target,
                                              sizeof sm_target));
    CHECK_LT(cublasLtMatrixLayoutCreate(&la, in_type, k, m, k));
    CHECK_LT(cublasLtMatrixLayoutCreate(&lb, in_type, k, n, k));
    CHECK_LT(cublasLtMatrixLayoutCreate(&ld, CUDA_R_16BF, m, n, m));
    cublasLtMatmulPreference_t pref = nullptr;
    CHECK_LT(cublasLtMatmulPreferenceCreate(&pref));
    CHECK_LT(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                  &workspace_bytes, sizeof workspace_bytes));
    cublasLtMatmulHeuristicResult_t heuristic = {};
    int found = 0;
    CHECK_LT(cublasLtMatmulAlgoGetHeuristic(lt, op, la, lb, ld, ld, pref, 1, &heuristic, &found));
    cublasLtMatmulPreferenceDestroy(pref);
    if (found == 0) {
      std::fprintf(stderr, "no cuBLASLt algorithm for %d %d %d fp8=%d\n", m, n, k, fp8);
      std::exit(1);
    }
    algo = heuristic.algo;
  }
  ~Gemm() {
    cublasLtMatrixLayoutDestroy(la);
    cublasLtMatrixLayoutDestroy(lb);
    cublasLtMatrixLayoutDestroy(ld);
    cublasLtMatmulDescDestroy(op);
    cudaFree(a);
    cudaFree(b);
    cudaFree(d);
  }
  void run() const {
    const float alpha = 1.0f, beta = 0.0f;
    CHECK_LT(cublasLtMatmul(lt, op, &alpha, a, la, b, lb, &beta, d, ld, d, ld, &algo, workspace,
                            workspace_bytes, stream));
  }
};

struct Channels {
  // The stop flag lives in device memory, set by a copy on a stream of its own (the copy engine
  // writes it while the GEMMs run), or in mapped host memory (`in_host`), as NCCL's network
  // transport keeps its FIFO pointers without GPUDirect RDMA. `started` is mapped host memory the
  // host reads.
  int *device_stop = nullptr, *host_stop = nullptr, *started = nullptr, *one = nullptr;
  int4 *src = nullptr, *dst = nullptr;
  cudaStream_t stream = nullptr, control = nullptr;
  bool stop_in_host = false;

  Channels() {
    CHECK_CUDA(cudaMalloc(&device_stop, sizeof(int)));
    CHECK_CUDA(cudaHostAlloc(&host_stop, sizeof(int), cudaHostAllocMapped));
    CHECK_CUDA(cudaHostAlloc(&started, sizeof(int), cudaHostAllocMapped));
    CHECK_CUDA(cudaHostAlloc(&one, sizeof(int), cudaHostAllocDefault));
    *one = 1;
    CHECK_CUDA(cudaMalloc(&src, kCopyBytes));
    CHECK_CUDA(cudaMalloc(&dst, kCopyBytes));
    CHECK_CUDA(cudaMemset(src, 1, kCopyBytes));
    CHECK_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    CHECK_CUDA(cudaStreamCreateWithFlags(&control, cudaStreamNonBlocking));
    CHECK_CUDA(cudaFuncSetAttribute(channel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    kChannelSharedBytes));
  }
  // Starts k channel CTAs and returns once all are resident.
  void start(int k, bool copy, bool in_host) {
    stop_in_host = in_host;
    *host_stop = 0;
    *started = 0;
    CHECK_CUDA(cudaMemset(device_stop, 0, sizeof(int)));
    CHECK_CUDA(cudaDeviceSynchronize());
    int *mapped_stop = nullptr, *mapped_started = nullptr;
    CHECK_CUDA(cudaHostGetDevicePointer(&mapped_stop, host_stop, 0));
    CHECK_CUDA(cudaHostGetDevicePointer(&mapped_started, started, 0));
    channel<<<k, kChannelThreads, kChannelSharedBytes, stream>>>(
        in_host ? mapped_stop : device_stop, mapped_started, src, dst, copy ? kCopyBytes : 0);
    CHECK_CUDA(cudaGetLastError());
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (*reinterpret_cast<volatile int *>(started) < k) {
      if (std::chrono::steady_clock::now() > deadline) {
        std::fprintf(stderr, "only %d of %d channel CTAs became resident\n", *started, k);
        std::exit(1);
      }
      std::this_thread::yield();
    }
  }
  void finish() {
    if (stop_in_host)
      *reinterpret_cast<volatile int *>(host_stop) = 1;
    else
      CHECK_CUDA(cudaMemcpyAsync(device_stop, one, sizeof(int), cudaMemcpyHostToDevice, control));
    CHECK_CUDA(cudaStreamSynchronize(stream));
  }
};

// µs of one call of `work` on `stream`, the best of three batches of `reps` after a warm-up, with
// k channels resident (k 0: none).
template <typename Work>
double timeWork(const Work &work, cudaStream_t stream, Channels &channels, int k, bool copy,
                int reps, bool stop_in_host = false) {
  for (int i = 0; i < 3; ++i)
    work();
  CHECK_CUDA(cudaStreamSynchronize(stream));
  cudaEvent_t start, stop;
  CHECK_CUDA(cudaEventCreate(&start));
  CHECK_CUDA(cudaEventCreate(&stop));
  double best = 1e30;
  for (int batch = 0; batch < 3; ++batch) {
    if (k > 0) channels.start(k, copy, stop_in_host);
    CHECK_CUDA(cudaEventRecord(start, stream));
    for (int i = 0; i < reps; ++i)
      work();
    CHECK_CUDA(cudaEventRecord(stop, stream));
    CHECK_CUDA(cudaEventSynchronize(stop));
    if (k > 0) channels.finish();
    float ms = 0;
    CHECK_CUDA(cudaEventElapsedTime(&ms, start, stop));
    best = std::min(best, 1e3 * ms / reps);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return best;
}

// A GEMM's batches hold at least ~5 ms of work.
double timeGemm(const Gemm &gemm, Channels &channels, int k, bool copy, double flops,
                bool stop_in_host = false) {
  const int reps = int(std::max(3.0, std::min(500.0, 5e-3 / (flops / 600e12))));
  return timeWork([&] { gemm.run(); }, gemm.stream, channels, k, copy, reps, stop_in_host);
}

// A memory-bound kernel as PyTorch launches them: a residual add out = x + y over `n` bf16 pairs
// (as uint32, two a lane), one element a thread, as many CTAs as the tensor needs.
__global__ void residualAdd(const unsigned *x, const unsigned *y, unsigned *out, size_t n) {
  const size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  const unsigned a = x[i], b = y[i];
  const float lo = __uint_as_float(a << 16) + __uint_as_float(b << 16);
  const float hi = __uint_as_float(a & 0xffff0000u) + __uint_as_float(b & 0xffff0000u);
  out[i] = (__float_as_uint(hi) & 0xffff0000u) | (__float_as_uint(lo) >> 16);
}

int main(int argc, char **argv) {
  if (argc < 4 || (argc - 1) % 3 != 0) {
    std::fprintf(stderr, "usage: %s M N K [M N K ...]\n", argv[0]);
    return 2;
  }
  cudaDeviceProp props{};
  CHECK_CUDA(cudaGetDeviceProperties(&props, 0));
  const int sms = props.multiProcessorCount;
  cublasLtHandle_t lt = nullptr;
  if (cublasLtCreate(&lt) != CUBLAS_STATUS_SUCCESS) return 1;
  const size_t workspace_bytes = size_t(32) << 20;
  void *workspace = nullptr;
  CHECK_CUDA(cudaMalloc(&workspace, workspace_bytes));
  cudaStream_t stream = nullptr;
  CHECK_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  Channels channels;
  std::printf("{\"device\": \"%s\", \"sms\": %d, \"cublasLt\": %zu}\n", props.name, sms,
              cublasLtGetVersion());
  // The channel counts: CHANNELS="1,2,4" in the environment, else 2, 8, 16 and 32.
  std::vector<int> channel_counts;
  if (const char *list = std::getenv("CHANNELS")) {
    for (const char *at = list; *at != '\0';) {
      channel_counts.push_back(std::atoi(at));
      while (*at != '\0' && *at != ',')
        ++at;
      if (*at == ',') ++at;
    }
  } else {
    channel_counts = {2, 8, 16, 32};
  }
  {
    // The memory-bound kernel: 2^26 bf16 pairs (3 x 256 MiB through HBM a call).
    const size_t n = size_t(1) << 26;
    unsigned *x = nullptr, *y = nullptr, *out = nullptr;
    CHECK_CUDA(cudaMalloc(&x, n * 4));
    CHECK_CUDA(cudaMalloc(&y, n * 4));
    CHECK_CUDA(cudaMalloc(&out, n * 4));
    fill<<<1024, 256>>>(reinterpret_cast<unsigned char *>(x), n * 2, false, 3);
    fill<<<1024, 256>>>(reinterpret_cast<unsigned char *>(y), n * 2, false, 4);
    const auto add = [&] {
      residualAdd<<<unsigned((n + 255) / 256), 256, 0, stream>>>(x, y, out, n);
    };
    const double alone = timeWork(add, stream, channels, 0, false, 20);
    std::printf(
        "{\"kernel\": \"residual_add\", \"bytes\": %zu, \"alone_us\": %.2f, \"channels\": [",
        n * 12, alone);
    for (size_t c = 0; c < channel_counts.size(); ++c)
      std::printf("%s{\"k\": %d, \"hold_us\": %.2f}", c == 0 ? "" : ", ", channel_counts[c],
                  timeWork(add, stream, channels, channel_counts[c], false, 20));
    std::printf("]}\n");
    cudaFree(x);
    cudaFree(y);
    cudaFree(out);
  }
  for (int i = 1; i + 2 < argc; i += 3) {
    const int m = std::atoi(argv[i]), n = std::atoi(argv[i + 1]), k = std::atoi(argv[i + 2]);
    const double flops = 2.0 * m * n * k;
    for (const bool fp8 : {true, false}) {
      const Gemm whole(lt, workspace, workspace_bytes, m, n, k, fp8, 0, stream);
      const double alone = timeGemm(whole, channels, 0, false, flops);
      std::printf(
          "{\"m\": %d, \"n\": %d, \"k\": %d, \"fp8\": %s, \"alone_us\": %.2f, \"channels\": [", m,
          n, k, fp8 ? "true" : "false", alone);
      for (size_t c = 0; c < channel_counts.size(); ++c) {
        const int held = channel_counts[c];
        const double hold = timeGemm(whole, channels, held, false, flops);
        const double hold_host = timeGemm(whole, channels, held, false, flops, true);
        const double copy = timeGemm(whole, channels, held, true, flops);
        const Gemm fitted(lt, workspace, workspace_bytes, m, n, k, fp8, sms - held, stream);
        const double target_alone = timeGemm(fitted, channels, 0, false, flops);
        const double target = timeGemm(fitted, channels, held, false, flops);
        std::printf(
            "%s{\"k\": %d, \"hold_us\": %.2f, \"hold_host_flag_us\": %.2f, \"copy_us\": %.2f, "
            "\"target_alone_us\": %.2f, "
            "\"target_hold_us\": %.2f}",
            c == 0 ? "" : ", ", held, hold, hold_host, copy, target_alone, target);
      }
      std::printf("]}\n");
      std::fflush(stdout);
    }
  }
  cudaFree(workspace);
  cublasLtDestroy(lt);
  return 0;
}
