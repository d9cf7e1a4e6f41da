#pragma once
// Pieces the cuda and gpu-shared devices share: the NCCL check macro, the mapping of device events
// onto the host clock, and the activation buffers keyed by the tensor they hold.
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include <cuda_runtime_api.h>
#include <nccl.h>

#include "backend/clock.h"
#include "backend/device.h"
#include "engine/op.h"
#include "engine/result.h"
#include "kernels/cuda_check.h"
#include "kernels/cuda_kernels.h"
#include "kernels/cuda_stage.h"

/// Check macro for NCCL calls; ncclInProgress (non-blocking communicators) is not a failure.
#define PIPESCOPE_NCCL_CHECK(call)                                                                 \
  do {                                                                                             \
    const ncclResult_t pipescope_nccl_status_ = (call);                                            \
    if (pipescope_nccl_status_ != ncclSuccess && pipescope_nccl_status_ != ncclInProgress)         \
      return ::pipescope::makeError(::pipescope::kernels::callFailure(                             \
          #call,                                                                                   \
          std::string(ncclGetErrorString(pipescope_nccl_status_)) + ": " +                         \
              ncclGetLastError(nullptr),                                                           \
          __FILE__, __LINE__));                                                                    \
  } while (0)

namespace pipescope::backend {

/// Maps device events onto the host clock. At the start of a step the stream is idle; an anchor
/// event recorded then completes between two host readings, whose midpoint is its host time and
/// whose half distance the error bound of every time derived from it.
class EventClock {
public:
  ~EventClock() {
    if (anchor_) cudaEventDestroy(anchor_);
  }
  Status start(cudaStream_t stream) {
    if (!anchor_) PIPESCOPE_CUDA_CHECK(cudaEventCreate(&anchor_));
    PIPESCOPE_CUDA_CHECK(cudaStreamSynchronize(stream));
    const double before = nowMicroseconds();
    PIPESCOPE_CUDA_CHECK(cudaEventRecord(anchor_, stream));
    PIPESCOPE_CUDA_CHECK(cudaEventSynchronize(anchor_));
    const double after = nowMicroseconds();
    host_us_ = 0.5 * (before + after);
    error_us_ = 0.5 * (after - before);
    return Ok{};
  }
  /// Host time of a completed event.
  Result<double> toHost(cudaEvent_t event) const {
    float ms = 0;
    PIPESCOPE_CUDA_CHECK(cudaEventElapsedTime(&ms, anchor_, event));
    return host_us_ + 1000.0 * static_cast<double>(ms);
  }
  double errorMicroseconds() const { return error_us_; }

private:
  cudaEvent_t anchor_ = nullptr;
  double host_us_ = 0, error_us_ = 0;
};

/// A pool of events reused every step.
class EventPool {
public:
  ~EventPool() {
    for (cudaEvent_t e : events_)
      cudaEventDestroy(e);
  }
  Status resize(std::size_t count) {
    while (events_.size() < count) {
      cudaEvent_t e = nullptr;
      PIPESCOPE_CUDA_CHECK(cudaEventCreate(&e));
      events_.push_back(e);
    }
    return Ok{};
  }
  cudaEvent_t operator[](std::size_t i) const { return events_[i]; }
  std::size_t size() const { return events_.size(); }

private:
  std::vector<cudaEvent_t> events_;
};

/// bf16 activation buffers, one per produced tensor (stage, microbatch, activation or gradient).
class ActivationBuffers {
public:
  explicit ActivationBuffers(std::size_t elements, int microbatches)
      : elements_(elements), microbatches_(microbatches) {}
  ~ActivationBuffers() {
    for (auto &entry : buffers_)
      cudaFree(entry.second);
  }
  ActivationBuffers(const ActivationBuffers &) = delete;
  ActivationBuffers &operator=(const ActivationBuffers &) = delete;

  Result<kernels::bf16 *> get(int stage, int microbatch, bool gradient) {
    const long long key =
        (static_cast<long long>(stage) * microbatches_ + microbatch) * 2 + (gradient ? 1 : 0);
    auto it = buffers_.find(key);
    if (it != buffers_.end()) return it->second;
    void *pointer = nullptr;
    PIPESCOPE_CUDA_CHECK(cudaMalloc(&pointer, bytes()));
    PIPESCOPE_CUDA_CHECK(cudaMemset(pointer, 0, bytes()));
    return buffers_[key] = static_cast<kernels::bf16 *>(pointer);
  }
  std::size_t elements() const { return elements_; }
  std::size_t bytes() const { return elements_ * sizeof(kernels::bf16); }

private:
  std::size_t elements_;
  int microbatches_;
  std::unordered_map<long long, kernels::bf16 *> buffers_;
};

/// Runs an overlapped F&B pair (DualPipe) with its halves concurrent: the forward enqueued on
/// `main`, the backward (its stage `backward_stage` moved to `side` meanwhile) forked from and
/// joined back into `main` with two events, so the kernels of one half fill the gaps
/// (communication, small kernels) of the other as DualPipe's overlap intends (DeepSeek-V3
/// technical report, §3.2.1). Work before the pair on `main` (its receives) comes before both
/// halves; work after it comes after both.
template <typename EnqueueForward, typename EnqueueBackward>
Status runPairConcurrently(cudaStream_t main, cudaStream_t side, cudaEvent_t fork, cudaEvent_t join,
                           kernels::CudaStage &backward_stage, EnqueueForward &&forward,
                           EnqueueBackward &&backward) {
  PIPESCOPE_CUDA_CHECK(cudaEventRecord(fork, main));
  PIPESCOPE_CUDA_CHECK(cudaStreamWaitEvent(side, fork, 0));
  PIPESCOPE_TRY(forward());
  backward_stage.setStream(side);
  const Status status = backward();
  backward_stage.setStream(main);
  if (!status) return status.error();
  PIPESCOPE_CUDA_CHECK(cudaEventRecord(join, side));
  PIPESCOPE_CUDA_CHECK(cudaStreamWaitEvent(main, join, 0));
  return Ok{};
}

/// Whether an op is a pair whose halves can run at once: two different stages, so neither half
/// touches the other's weights or scratch buffers.
inline bool concurrentPair(const Op &op) {
  return op.kind == OpKind::OverlappedPair && op.stage != op.backward_stage;
}

/// The streams and events an overlapped pair forks onto and joins back from.
struct PairStreams {
  cudaStream_t main = nullptr, side = nullptr;
  cudaEvent_t fork = nullptr, join = nullptr;
};

/// Enqueues one compute op of a GPU device: its parts through runOpParts (device.h), except a
/// concurrent pair, whose backward half runs on the side stream (runPairConcurrently).
/// `input_grad(stage, microbatch, on_side)` says which stream's collectives it may use.
template <typename Forward, typename InputGrad>
Status runGpuOp(const Op &op, const PairStreams &streams,
                const std::map<int, std::unique_ptr<kernels::CudaStage>> &stages, Forward &&forward,
                InputGrad &&input_grad) {
  const auto weight_grad = [&](int stage, int) { return stages.at(stage)->weightGrad(); };
  if (!concurrentPair(op))
    return runOpParts(
        op, forward,
        [&](int stage, int microbatch) { return input_grad(stage, microbatch, false); },
        weight_grad);
  return runPairConcurrently(
      streams.main, streams.side, streams.fork, streams.join, *stages.at(op.backward_stage),
      [&] { return forward(op.stage, op.microbatch); },
      [&]() -> Status {
        PIPESCOPE_TRY(input_grad(op.backward_stage, op.backward_microbatch, true));
        return weight_grad(op.backward_stage, op.backward_microbatch);
      });
}

/// "; " and what the GEMM tuning decided (kernels::gemmTuningSummary), or "" before any tuning.
inline std::string tuningNote() {
  const std::string summary = kernels::gemmTuningSummary();
  return summary.empty() ? summary : "; " + summary;
}

/// The device's name and shape, e.g. "NVIDIA H100 80GB HBM3 (GPU 0, sm_90, 132 SMs)".
std::string gpuDescription(int device);

} // namespace pipescope::backend
