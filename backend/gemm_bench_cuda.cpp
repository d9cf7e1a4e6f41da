// The GPU rungs of --gemm-bench: cuBLAS bf16 GEMMs with fp32 accumulation through the stages' own
// path (kernels/cuda_gemm.h: the algorithm tuned per shape), timed with device events over
// batches long enough that launch gaps vanish. Each rung also times cublasGemmEx's default
// algorithm and every algorithm cuBLASLt's heuristic proposes for the same GEMM, so the report
// sets the backend's path beside cuBLAS's own best on this GPU, not only beside the datasheet.
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <thread>
#include <vector>

#include "backend/cuda_common.h"
#include "backend/gemm_bench.h"
#include "kernels/cuda_check.h"
#include "kernels/cuda_gemm.h"
#include "kernels/cuda_kernels.h"

namespace pipescope::backend {

namespace {

// Frees what one rung allocated, whatever way it ends.
struct RungResources {
  std::vector<void *> buffers;
  cublasHandle_t cublas = nullptr;
  cudaStream_t stream = nullptr;
  cublasLtHandle_t lt = nullptr;
  cublasLtMatmulDesc_t operation = nullptr;
  cublasLtMatrixLayout_t layout = nullptr;
  cublasLtMatrixLayout_t output_layout = nullptr; ///< FP8 rungs: the bf16 output's
  cublasLtMatmulPreference_t preference = nullptr;
  ~RungResources() {
    for (void *buffer : buffers)
      cudaFree(buffer);
    if (preference) cublasLtMatmulPreferenceDestroy(preference);
    if (output_layout) cublasLtMatrixLayoutDestroy(output_layout);
    if (layout) cublasLtMatrixLayoutDestroy(layout);
    if (operation) cublasLtMatmulDescDestroy(operation);
    if (lt) cublasLtDestroy(lt);
    if (cublas) cublasDestroy(cublas);
    if (stream) cudaStreamDestroy(stream);
  }
};

// The algorithms cuBLASLt's heuristic ranks first for this GEMM (n x n x n, bf16 in and out,
// fp32 compute, column-major, no transposes, as the backend's call) and their workspace.
constexpr int kAlgorithmsToTry = 16;
constexpr std::size_t kLtWorkspaceBytes = 64u << 20; // cuBLAS's own default on Hopper is 32 MiB

std::string versionText(int version, int major_divisor, int minor_divisor) {
  return std::to_string(version / major_divisor) + "." +
         std::to_string(version % major_divisor / minor_divisor);
}

// Microseconds per call of `enqueue` (which returns a Status) over a batch of `repetitions` on
// `stream`, between two device events.
template <typename Enqueue>
Result<double> usPerCall(const EventPool &events, cudaStream_t stream, int repetitions,
                         const Enqueue &enqueue) {
  PIPESCOPE_CUDA_CHECK(cudaEventRecord(events[0], stream));
  for (int i = 0; i < repetitions; ++i)
    PIPESCOPE_TRY(enqueue());
  PIPESCOPE_CUDA_CHECK(cudaEventRecord(events[1], stream));
  PIPESCOPE_CUDA_CHECK(cudaEventSynchronize(events[1]));
  float ms = 0;
  PIPESCOPE_CUDA_CHECK(cudaEventElapsedTime(&ms, events[0], events[1]));
  return 1000.0 * static_cast<double>(ms) / repetitions;
}

// A stream, a cuBLAS handle and the three n x n operands of one square GEMM, owned by `r`.
Status allocateSquareOperands(RungResources &r, int n, kernels::bf16 *(&matrices)[3]) {
  PIPESCOPE_CUDA_CHECK(cudaStreamCreateWithFlags(&r.stream, cudaStreamNonBlocking));
  PIPESCOPE_CUBLAS_CHECK(cublasCreate(&r.cublas));
  PIPESCOPE_CUBLAS_CHECK(cublasSetStream(r.cublas, r.stream));
  const std::size_t elements = static_cast<std::size_t>(n) * n;
  for (int i = 0; i < 3; ++i) {
    void *pointer = nullptr;
    PIPESCOPE_CUDA_CHECK(cudaMalloc(&pointer, elements * sizeof(kernels::bf16)));
    r.buffers.push_back(pointer);
    matrices[i] = static_cast<kernels::bf16 *>(pointer);
    // Random operands: zeros would draw less power and let the clocks run higher than in use.
    PIPESCOPE_CUDA_CHECK(kernels::launchFillUniform(matrices[i], elements, 1.0f,
                                                    static_cast<std::uint32_t>(n + i), r.stream));
  }
  return Ok{};
}

// C = A·B on the three n x n operands, through cublasGemmEx's default algorithm (cuBLAS's own
// choice for the whole GPU, as frameworks call it), on r's stream.
Status defaultSquareGemm(const RungResources &r, int n, kernels::bf16 *const (&matrices)[3]) {
  const float alpha = 1.0f, beta = 0.0f;
  PIPESCOPE_CUBLAS_CHECK(cublasGemmEx(
      r.cublas, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &alpha, matrices[0], CUDA_R_16BF, n, matrices[1],
      CUDA_R_16BF, n, &beta, matrices[2], CUDA_R_16BF, n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  return Ok{};
}

Result<GemmRate> timeRung(int n) {
  RungResources r;
  kernels::bf16 *matrices[3] = {};
  PIPESCOPE_TRY(allocateSquareOperands(r, n, matrices));
  const float alpha = 1.0f, beta = 0.0f;
  // The backend's own path: the stages' tuned GEMM (kernels/cuda_gemm.h), tuned for this shape
  // first, as a stage does when it is created.
  auto tuned = kernels::TunedGemm::create();
  if (!tuned) return tuned.error();
  const kernels::GemmCall call{false,       false, n,           n, n,           alpha, beta,
                               matrices[0], n,     matrices[1], n, matrices[2], n};
  auto choice = (*tuned)->choiceFor(call, r.stream);
  if (!choice) return choice.error();
  const auto backend_gemm = [&]() { return (*tuned)->run(call, r.stream); };
  // cublasGemmEx with its default algorithm: what the stages called before they were tuned.
  const auto default_gemm = [&]() { return defaultSquareGemm(r, n, matrices); };
  EventPool events;
  PIPESCOPE_TRY(events.resize(2));
  const auto timeCalls = [&](const auto &enqueue, int repetitions) {
    return usPerCall(events, r.stream, repetitions, enqueue);
  };
  // Warm-up: the clocks rise.
  auto estimate = timeCalls(backend_gemm, 3);
  if (!estimate) return estimate.error();

  // cuBLAS's own best: every algorithm cuBLASLt's heuristic proposes (for the whole GPU).
  PIPESCOPE_CUBLAS_CHECK(cublasLtCreate(&r.lt));
  PIPESCOPE_CUBLAS_CHECK(cublasLtMatmulDescCreate(&r.operation, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  PIPESCOPE_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&r.layout, CUDA_R_16BF, n, n, n));
  PIPESCOPE_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&r.preference));
  std::size_t workspace_bytes = kLtWorkspaceBytes;
  PIPESCOPE_CUBLAS_CHECK(
      cublasLtMatmulPreferenceSetAttribute(r.preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                           &workspace_bytes, sizeof workspace_bytes));
  void *workspace = nullptr;
  PIPESCOPE_CUDA_CHECK(cudaMalloc(&workspace, workspace_bytes));
  r.buffers.push_back(workspace);
  cublasLtMatmulHeuristicResult_t proposed[kAlgorithmsToTry] = {};
  int returned = 0;
  PIPESCOPE_CUBLAS_CHECK(cublasLtMatmulAlgoGetHeuristic(r.lt, r.operation, r.layout, r.layout,
                                                        r.layout, r.layout, r.preference,
                                                        kAlgorithmsToTry, proposed, &returned));
  std::vector<std::function<Status()>> algorithms;
  for (int a = 0; a < returned; ++a) {
    if (proposed[a].state != CUBLAS_STATUS_SUCCESS) continue;
    std::function<Status()> algorithm = [&, a]() -> Status {
      PIPESCOPE_CUBLAS_CHECK(cublasLtMatmul(r.lt, r.operation, &alpha, matrices[0], r.layout,
                                            matrices[1], r.layout, &beta, matrices[2], r.layout,
                                            matrices[2], r.layout, &proposed[a].algo, workspace,
                                            proposed[a].workspaceSize, r.stream));
      return Ok{};
    };
    // An algorithm the heuristic proposes may still refuse this problem at launch: skip it.
    if (auto warm = timeCalls(algorithm, 2); !warm) continue;
    algorithms.push_back(std::move(algorithm));
  }

  // Three rounds; in each, every algorithm is timed right after the backend's path and the
  // default call, each in batches of about 30 ms, and each side keeps its best batch. Both sides
  // so get the same number of batches: the best of many noisy batches is lower than the best of
  // few, and the clocks drifting with power and heat favour neither.
  const int repetitions = std::clamp(static_cast<int>(3e4 / std::max(1.0, *estimate)), 3, 20000);
  double best_backend = 1e300, best_default = 1e300, best_algorithm = 1e300;
  const auto keepBest = [&](const auto &enqueue, double &best) -> Status {
    auto us = timeCalls(enqueue, repetitions);
    if (!us) return us.error();
    best = std::min(best, *us);
    return Ok{};
  };
  for (int round = 0; round < 3; ++round) {
    for (std::size_t a = 0; a < std::max<std::size_t>(1, algorithms.size()); ++a) {
      PIPESCOPE_TRY(keepBest(backend_gemm, best_backend));
      PIPESCOPE_TRY(keepBest(default_gemm, best_default));
      if (a < algorithms.size()) PIPESCOPE_TRY(keepBest(algorithms[a], best_algorithm));
    }
  }
  GemmRate rate = gemmRate(n, "bf16", best_backend, repetitions);
  rate.default_algorithm_us = best_default;
  // Which of the algorithms timed here the tuner chose (the same algorithm compares equal
  // byte for byte), so that a gap to cuBLAS's best tells a wrong choice from a slow call.
  std::string chosen = "cublasGemmEx's default";
  if (!choice->default_call) {
    chosen = "a cuBLASLt algorithm not among those timed here";
    for (int a = 0; a < returned; ++a)
      if (proposed[a].state == CUBLAS_STATUS_SUCCESS &&
          std::memcmp(&proposed[a].algo, &choice->algorithm, sizeof choice->algorithm) == 0) {
        chosen = "cuBLASLt's proposal " + std::to_string(a + 1);
        break;
      }
  }
  char tuned_us[32];
  std::snprintf(tuned_us, sizeof tuned_us, "%.2f", choice->us);
  rate.backend_choice = chosen + ", the fastest of " + std::to_string(choice->candidates + 1) +
                        " timed (" + tuned_us + " us when tuned)";
  if (!algorithms.empty()) {
    rate.best_algorithm_us = best_algorithm;
    rate.algorithms_tried = static_cast<int>(algorithms.size());
  }
  return rate;
}

// An FP8 rung: n x n x n with E4M3 operands, bf16 out, fp32 compute, through cuBLASLt in the
// "TN" form its FP8 kernels take (A transposed; Transformer Engine's FP8 GEMMs are these calls),
// without fast accumulation (TE's input- and weight-gradient GEMMs; its forward accumulates
// fast). Every algorithm cuBLASLt's heuristic proposes is timed in three rounds of ~30 ms
// batches and the best kept: cuBLAS's best FP8 GEMM on this GPU.
Result<GemmRate> timeFp8Rung(int n) {
  RungResources r;
  PIPESCOPE_CUDA_CHECK(cudaStreamCreateWithFlags(&r.stream, cudaStreamNonBlocking));
  const std::size_t elements = static_cast<std::size_t>(n) * n;
  void *operands[2] = {};
  for (int i = 0; i < 2; ++i) {
    PIPESCOPE_CUDA_CHECK(cudaMalloc(&operands[i], elements)); // one byte an element
    r.buffers.push_back(operands[i]);
    // Random operands (as the bf16 rungs): zeros would draw less power than training's data.
    PIPESCOPE_CUDA_CHECK(kernels::launchFillUniformFp8(
        operands[i], elements, 1.0f, static_cast<std::uint32_t>(7 * n + i), r.stream));
  }
  void *output = nullptr;
  PIPESCOPE_CUDA_CHECK(cudaMalloc(&output, elements * sizeof(kernels::bf16)));
  r.buffers.push_back(output);
  std::size_t workspace_bytes = kLtWorkspaceBytes;
  void *workspace = nullptr;
  PIPESCOPE_CUDA_CHECK(cudaMalloc(&workspace, workspace_bytes));
  r.buffers.push_back(workspace);

  PIPESCOPE_CUBLAS_CHECK(cublasLtCreate(&r.lt));
  PIPESCOPE_CUBLAS_CHECK(cublasLtMatmulDescCreate(&r.operation, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t transpose = CUBLAS_OP_T, keep = CUBLAS_OP_N;
  PIPESCOPE_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(r.operation, CUBLASLT_MATMUL_DESC_TRANSA,
                                                        &transpose, sizeof transpose));
  PIPESCOPE_CUBLAS_CHECK(
      cublasLtMatmulDescSetAttribute(r.operation, CUBLASLT_MATMUL_DESC_TRANSB, &keep, sizeof keep));
  const std::int8_t fast_accumulation = 0;
  PIPESCOPE_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(
      r.operation, CUBLASLT_MATMUL_DESC_FAST_ACCUM, &fast_accumulation, sizeof fast_accumulation));
  PIPESCOPE_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&r.layout, CUDA_R_8F_E4M3, n, n, n));
  PIPESCOPE_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&r.output_layout, CUDA_R_16BF, n, n, n));
  PIPESCOPE_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&r.preference));
  PIPESCOPE_CUBLAS_CHECK(
      cublasLtMatmulPreferenceSetAttribute(r.preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                           &workspace_bytes, sizeof workspace_bytes));
  cublasLtMatmulHeuristicResult_t proposed[kAlgorithmsToTry] = {};
  int returned = 0;
  PIPESCOPE_CUBLAS_CHECK(cublasLtMatmulAlgoGetHeuristic(
      r.lt, r.operation, r.layout, r.layout, r.output_layout, r.output_layout, r.preference,
      kAlgorithmsToTry, proposed, &returned));
  const float alpha = 1.0f, beta = 0.0f;
  EventPool events;
  PIPESCOPE_TRY(events.resize(2));
  const auto timeCalls = [&](int a, int repetitions) {
    return usPerCall(events, r.stream, repetitions, [&]() -> Status {
      PIPESCOPE_CUBLAS_CHECK(cublasLtMatmul(r.lt, r.operation, &alpha, operands[0], r.layout,
                                            operands[1], r.layout, &beta, output, r.output_layout,
                                            output, r.output_layout, &proposed[a].algo, workspace,
                                            proposed[a].workspaceSize, r.stream));
      return Ok{};
    });
  };
  // Warm-up, and the proposals that run: one may still refuse this problem at launch.
  std::vector<int> runnable;
  double estimate = 1e300;
  for (int a = 0; a < returned; ++a) {
    if (proposed[a].state != CUBLAS_STATUS_SUCCESS) continue;
    auto warm = timeCalls(a, 3);
    if (!warm) continue;
    runnable.push_back(a);
    estimate = std::min(estimate, *warm);
  }
  if (runnable.empty())
    return makeError("--gemm-bench: cuBLASLt proposes no FP8 E4M3 GEMM that runs at " +
                     std::to_string(n) + "^3 on this GPU");
  const int repetitions = std::clamp(static_cast<int>(3e4 / std::max(1.0, estimate)), 3, 20000);
  double best = 1e300;
  for (int round = 0; round < 3; ++round)
    for (int a : runnable) {
      auto us = timeCalls(a, repetitions);
      if (!us) return us.error();
      best = std::min(best, *us);
    }
  GemmRate rate = gemmRate(n, "fp8-e4m3", best, repetitions);
  rate.best_algorithm_us = best;
  rate.algorithms_tried = static_cast<int>(runnable.size());
  return rate;
}

// The backend's tuned n x n GEMM back to back for `seconds`, timed in windows of about half a
// second with device events: the rate once the GPU has settled at its power limit.
Result<SustainedGemm> holdGemm(int n, double seconds, double ladder_tflops) {
  RungResources r;
  kernels::bf16 *matrices[3] = {};
  PIPESCOPE_TRY(allocateSquareOperands(r, n, matrices));
  auto tuned = kernels::TunedGemm::create();
  if (!tuned) return tuned.error();
  const kernels::GemmCall call{false,       false, n,           n, n,           1.0f, 0.0f,
                               matrices[0], n,     matrices[1], n, matrices[2], n};
  if (auto choice = (*tuned)->choiceFor(call, r.stream); !choice) return choice.error();
  EventPool events;
  PIPESCOPE_TRY(events.resize(2));
  SustainedGemm held;
  held.size = n;
  held.ladder_tflops = ladder_tflops;
  const double flops = 2.0 * n * n * static_cast<double>(n);
  const int per_window = std::clamp(
      static_cast<int>(0.5 / (flops / (std::max(1.0, ladder_tflops) * 1e12))), 1, 100000);
  double elapsed_s = 0;
  while (elapsed_s < seconds) {
    PIPESCOPE_CUDA_CHECK(cudaEventRecord(events[0], r.stream));
    for (int i = 0; i < per_window; ++i)
      PIPESCOPE_TRY((*tuned)->run(call, r.stream));
    PIPESCOPE_CUDA_CHECK(cudaEventRecord(events[1], r.stream));
    PIPESCOPE_CUDA_CHECK(cudaEventSynchronize(events[1]));
    float ms = 0;
    PIPESCOPE_CUDA_CHECK(cudaEventElapsedTime(&ms, events[0], events[1]));
    if (!(ms > 0)) break;
    held.window_tflops.push_back(flops * per_window / (static_cast<double>(ms) * 1e9));
    elapsed_s += static_cast<double>(ms) * 1e-3;
  }
  held.seconds = elapsed_s;
  return held;
}

// The stand-in collective of the contention samples: its stop flag in device memory, set by a
// copy on a stream of its own while the GEMMs run; the resident-CTA count in mapped host
// memory, which the host polls until every CTA is on an SM. (A flag in host memory polled by
// the CTAs is what NCCL's network transport does without GPUDirect, but many CTAs polling over
// PCIe slow every kernel beside them far more than the SMs they hold.)
struct ResidentChannels {
  int *stop = nullptr, *started = nullptr, *one = nullptr;
  cudaStream_t stream = nullptr, control = nullptr;
  ~ResidentChannels() {
    if (stop) cudaFree(stop);
    if (started) cudaFreeHost(started);
    if (one) cudaFreeHost(one);
    if (stream) cudaStreamDestroy(stream);
    if (control) cudaStreamDestroy(control);
  }
  Status create() {
    PIPESCOPE_CUDA_CHECK(cudaMalloc(&stop, sizeof(int)));
    PIPESCOPE_CUDA_CHECK(cudaHostAlloc(&started, sizeof(int), cudaHostAllocMapped));
    PIPESCOPE_CUDA_CHECK(cudaHostAlloc(&one, sizeof(int), cudaHostAllocDefault));
    *one = 1;
    PIPESCOPE_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    PIPESCOPE_CUDA_CHECK(cudaStreamCreateWithFlags(&control, cudaStreamNonBlocking));
    return Ok{};
  }
  // Starts `ctas` channel CTAs and returns once all of them are resident.
  Status start(int ctas) {
    PIPESCOPE_CUDA_CHECK(cudaMemset(stop, 0, sizeof(int)));
    *reinterpret_cast<volatile int *>(started) = 0;
    PIPESCOPE_CUDA_CHECK(cudaDeviceSynchronize());
    int *mapped = nullptr;
    PIPESCOPE_CUDA_CHECK(cudaHostGetDevicePointer(reinterpret_cast<void **>(&mapped), started, 0));
    PIPESCOPE_CUDA_CHECK(kernels::launchResidentChannels(ctas, stop, mapped, stream));
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (*reinterpret_cast<volatile int *>(started) < ctas) {
      if (std::chrono::steady_clock::now() > deadline) {
        // Release the ones that did start before giving up.
        cudaMemcpyAsync(stop, one, sizeof(int), cudaMemcpyHostToDevice, control);
        cudaStreamSynchronize(stream);
        return makeError("--gemm-bench: only " + std::to_string(*started) + " of " +
                         std::to_string(ctas) +
                         " stand-in collective CTAs became resident within 10 s");
      }
      std::this_thread::yield();
    }
    return Ok{};
  }
  Status finish() {
    PIPESCOPE_CUDA_CHECK(cudaMemcpyAsync(stop, one, sizeof(int), cudaMemcpyHostToDevice, control));
    PIPESCOPE_CUDA_CHECK(cudaStreamSynchronize(stream));
    return Ok{};
  }
};

// One n^3 bf16 GEMM (cublasGemmEx's default algorithm: cuBLAS's own choice for the whole GPU, as
// frameworks call it) alone and beside `resident` CTAs of a stand-in collective, each the best
// of three batches of about 10 ms.
Result<std::vector<ContentionSample>> sampleContention(int n, const std::vector<int> &resident) {
  RungResources r;
  kernels::bf16 *matrices[3] = {};
  PIPESCOPE_TRY(allocateSquareOperands(r, n, matrices));
  ResidentChannels channels;
  PIPESCOPE_TRY(channels.create());
  EventPool events;
  PIPESCOPE_TRY(events.resize(2));
  const auto batch = [&](int repetitions) {
    return usPerCall(events, r.stream, repetitions,
                     [&]() { return defaultSquareGemm(r, n, matrices); });
  };
  auto estimate = batch(3); // warm-up
  if (!estimate) return estimate.error();
  const int repetitions = std::clamp(static_cast<int>(1e4 / std::max(1.0, *estimate)), 3, 5000);
  // The best of three batches, with `ctas` resident during each (0: none).
  const auto best = [&](int ctas) -> Result<double> {
    double fastest = 1e300;
    for (int round = 0; round < 3; ++round) {
      if (ctas > 0) PIPESCOPE_TRY(channels.start(ctas));
      auto us = batch(repetitions);
      if (ctas > 0) PIPESCOPE_TRY(channels.finish());
      if (!us) return us.error();
      fastest = std::min(fastest, *us);
    }
    return fastest;
  };
  std::vector<ContentionSample> samples;
  for (int ctas : resident) {
    // Alone right before each: the clocks drift with power and heat between samples.
    auto alone = best(0);
    if (!alone) return alone.error();
    auto beside = best(ctas);
    if (!beside) return beside.error();
    samples.push_back({n, ctas, *alone, *beside});
  }
  return samples;
}

// Driver, runtime, cuBLAS and NCCL versions, for the report (results depend on all four).
std::string softwareVersions() {
  int driver = 0, runtime = 0;
  cudaDriverGetVersion(&driver);
  cudaRuntimeGetVersion(&runtime);
  int nccl = 0;
  ncclGetVersion(&nccl);
  const std::size_t cublas = cublasLtGetVersion();
  return "CUDA driver API " + versionText(driver, 1000, 10) + ", CUDA runtime " +
         versionText(runtime, 1000, 10) + ", cuBLAS " + std::to_string(cublas / 10000) + "." +
         std::to_string(cublas / 100 % 100) + "." + std::to_string(cublas % 100) + ", NCCL " +
         std::to_string(nccl / 10000) + "." + std::to_string(nccl / 100 % 100) + "." +
         std::to_string(nccl % 100);
}

} // namespace

Result<GemmBenchmark> benchmarkCudaGemms(int local_rank, double sustain_s) {
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
  benchmark.sm_count = properties.multiProcessorCount;
  benchmark.device = "cuda: " + gpuDescription(device) + ", cuBLAS bf16 GEMM, fp32 accumulation";
  benchmark.software = softwareVersions();
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
  // FP8 tensor cores: compute capability 8.9 (Ada) and up (Hopper 9.0, Blackwell 10.x).
  if (properties.major * 10 + properties.minor >= 89) {
    benchmark.device += "; FP8 E4M3 GEMMs through cuBLASLt";
    for (const auto &bf16_rung : benchmark.rates) {
      auto rate = timeFp8Rung(bf16_rung.size);
      if (!rate) return rate.error();
      benchmark.fp8_rates.push_back(*rate);
    }
  }
  // What a resident collective costs the GEMMs beside it: 2, 4 and 8 CTAs (NCCL's channels
  // for a DP ring; MLPerf's GPT-3 launch caps its DP collectives at 8) beside the 4096^3 and
  // 8192^3 rungs the GPU has room for.
  for (const auto &rung : benchmark.rates) {
    if (rung.size < 4096 || rung.size > 8192) continue;
    auto samples = sampleContention(rung.size, {2, 4, 8});
    if (!samples) return samples.error();
    benchmark.contention.insert(benchmark.contention.end(), samples->begin(), samples->end());
  }
  if (sustain_s > 0) {
    // The largest rung up to 8192^3 (1.4 ms a GEMM on an H100): long enough to fill the GPU,
    // short enough that a window holds hundreds of them.
    const GemmRate *rung = &benchmark.rates.front();
    for (const auto &rate : benchmark.rates)
      if (rate.size <= 8192) rung = &rate;
    auto held = holdGemm(rung->size, sustain_s, rung->tflops);
    if (!held) return held.error();
    benchmark.sustained = std::move(*held);
  }
  return benchmark;
}

} // namespace pipescope::backend
