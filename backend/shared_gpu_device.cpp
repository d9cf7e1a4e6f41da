// The gpu-shared device: all P stages of one pipeline on one GPU, so that a machine with a single
// GPU can check predictions. Each pipeline rank is a thread with its own stream (and a side stream
// on which an overlapped pair's backward half runs beside its forward half); where the driver
// has green contexts (CUDA 12.4+), the streams live in a green context that holds 1/P of the SMs,
// so a stage cannot borrow another's compute, as on separate GPUs. Transfers are device-to-device
// copies on a per-stage copy stream; a consumer thread waits (bounded) until the producer thread
// has enqueued the copy, then makes its stream wait for the copy's event.
#include <cuda.h>
#include <sched.h>

#include <atomic>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>

#include "backend/cuda_common.h"
#include "backend/cuda_device.h"
#include "kernels/cuda_stage.h"

namespace pipescope::backend {

using kernels::bf16;
using kernels::CudaStage;

namespace {

// Driver functions looked up through the runtime, so the backend never links libcuda itself
// (a machine without a driver still starts it and gets a clear message).
template <typename Function> Status driverFunction(const char *name, Function &out) {
  void *pointer = nullptr;
  cudaDriverEntryPointQueryResult found{};
  PIPESCOPE_CUDA_CHECK(
      cudaGetDriverEntryPointByVersion(name, &pointer, CUDA_VERSION, cudaEnableDefault, &found));
  if (found != cudaDriverEntryPointSuccess || !pointer)
    return makeError(std::string(name) + " is not in this driver");
  out = reinterpret_cast<Function>(pointer);
  return Ok{};
}

std::string driverFailure(const char *call, CUresult result) {
  return std::string(call) + " failed (CUresult " + std::to_string(static_cast<int>(result)) + ")";
}

/// What the stage threads share: the GPU, its partition, and the messages between stages.
struct SharedGpu {
  int device = 0;
  int stages = 1;
  std::vector<cudaStream_t> streams;      ///< per pipeline rank: compute (in its green context)
  std::vector<cudaStream_t> side_streams; ///< per pipeline rank: overlapped pairs' backward halves
  std::vector<cudaStream_t> copy_streams; ///< per pipeline rank: outgoing copies
  std::vector<CUgreenCtx> green_contexts;
  decltype(&cuGreenCtxDestroy) destroy_green_context = nullptr;
  std::string partition; ///< what the trace's device line says about SMs
  int partition_sms = 0; ///< SMs a stage's streams may use (0: all, no green contexts)

  std::unique_ptr<ActivationBuffers> inbox;
  EventPool copied; ///< per message: the copy into the consumer's buffer is done
  std::unique_ptr<std::atomic<int>[]> posted_step; ///< per message: step whose copy is enqueued
  std::mutex mutex;
  std::condition_variable posted;
  bool abandoned = false; ///< a stage failed, died or hung: the others stop waiting (under mutex)

  ~SharedGpu() {
    for (auto *list : {&streams, &side_streams, &copy_streams})
      for (cudaStream_t s : *list)
        if (s) cudaStreamDestroy(s);
    for (CUgreenCtx g : green_contexts)
      if (destroy_green_context) destroy_green_context(g);
  }

  // One green context per stage holding 1/P of the SMs; on any failure, plain streams that share
  // every SM, and the reason in `partition`.
  Status makeStreams() {
    cudaDeviceProp properties{};
    PIPESCOPE_CUDA_CHECK(cudaGetDeviceProperties(&properties, device));
    auto green = makeGreenStreams();
    if (green) return Ok{};
    for (auto *list : {&streams, &side_streams}) {
      for (cudaStream_t s : *list)
        if (s) cudaStreamDestroy(s);
      list->assign(static_cast<std::size_t>(stages), nullptr);
      for (auto &s : *list)
        PIPESCOPE_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    }
    partition = "no green contexts (" + green.error().message + "): the " + std::to_string(stages) +
                " stages share all " + std::to_string(properties.multiProcessorCount) + " SMs";
    return Ok{};
  }

  Status makeGreenStreams() {
    decltype(&cuDeviceGet) device_get = nullptr;
    decltype(&cuDeviceGetDevResource) get_resource = nullptr;
    decltype(&cuDevSmResourceSplitByCount) split = nullptr;
    decltype(&cuDevResourceGenerateDesc) describe = nullptr;
    decltype(&cuGreenCtxCreate) create = nullptr;
    decltype(&cuGreenCtxStreamCreate) stream_create = nullptr;
    PIPESCOPE_TRY(driverFunction("cuDeviceGet", device_get));
    PIPESCOPE_TRY(driverFunction("cuDeviceGetDevResource", get_resource));
    PIPESCOPE_TRY(driverFunction("cuDevSmResourceSplitByCount", split));
    PIPESCOPE_TRY(driverFunction("cuDevResourceGenerateDesc", describe));
    PIPESCOPE_TRY(driverFunction("cuGreenCtxCreate", create));
    PIPESCOPE_TRY(driverFunction("cuGreenCtxStreamCreate", stream_create));
    PIPESCOPE_TRY(driverFunction("cuGreenCtxDestroy", destroy_green_context));
    CUdevice dev = 0;
    if (CUresult r = device_get(&dev, device); r != CUDA_SUCCESS)
      return makeError(driverFailure("cuDeviceGet", r));
    CUdevResource all{};
    if (CUresult r = get_resource(dev, &all, CU_DEV_RESOURCE_TYPE_SM); r != CUDA_SUCCESS)
      return makeError(driverFailure("cuDeviceGetDevResource", r));
    // The largest per-stage SM count that still gives P groups (the split rounds to the GPU's
    // partition granularity, so ask for less until it fits).
    const auto wanted = static_cast<unsigned>(stages);
    unsigned count = all.sm.smCount / wanted, groups = 0;
    for (; count > 0; --count) {
      groups = 0;
      if (split(nullptr, &groups, &all, nullptr, 0, count) == CUDA_SUCCESS && groups >= wanted)
        break;
    }
    if (count == 0)
      return makeError("the GPU's SMs cannot be split " + std::to_string(stages) + " ways");
    std::vector<CUdevResource> parts(wanted);
    groups = wanted;
    if (CUresult r = split(parts.data(), &groups, &all, nullptr, 0, count); r != CUDA_SUCCESS)
      return makeError(driverFailure("cuDevSmResourceSplitByCount", r));
    streams.assign(wanted, nullptr);
    side_streams.assign(wanted, nullptr);
    for (unsigned i = 0; i < wanted; ++i) {
      CUdevResourceDesc desc{};
      if (CUresult r = describe(&desc, &parts[i], 1); r != CUDA_SUCCESS)
        return makeError(driverFailure("cuDevResourceGenerateDesc", r));
      CUgreenCtx context = nullptr;
      if (CUresult r = create(&context, desc, dev, CU_GREEN_CTX_DEFAULT_STREAM); r != CUDA_SUCCESS)
        return makeError(driverFailure("cuGreenCtxCreate", r));
      green_contexts.push_back(context);
      // Two streams in the stage's partition: its compute, and the side stream on which an
      // overlapped pair's backward half runs beside the forward half, on the same SMs.
      for (auto *list : {&streams, &side_streams}) {
        CUstream stream = nullptr;
        if (CUresult r = stream_create(&stream, context, CU_STREAM_NON_BLOCKING, 0);
            r != CUDA_SUCCESS)
          return makeError(driverFailure("cuGreenCtxStreamCreate", r));
        (*list)[i] = stream;
      }
    }
    partition_sms = static_cast<int>(parts[0].sm.smCount);
    partition = "green contexts: " + std::to_string(stages) + " partitions of " +
                std::to_string(parts[0].sm.smCount) + " of " + std::to_string(all.sm.smCount) +
                " SMs";
    return Ok{};
  }
};

class SharedGpuStageDevice final : public Device {
public:
  SharedGpuStageDevice(const RankSetup &setup, std::shared_ptr<SharedGpu> gpu)
      : setup_(setup), gpu_(std::move(gpu)),
        outputs_(static_cast<std::size_t>(setup.stages.front().activationElements()),
                 setup.schedule->microbatches()) {}

  Status initialize() {
    PIPESCOPE_CUDA_CHECK(cudaSetDevice(gpu_->device));
    stream_ = gpu_->streams[static_cast<std::size_t>(setup_.pipelineRank())];
    side_stream_ = gpu_->side_streams[static_cast<std::size_t>(setup_.pipelineRank())];
    PIPESCOPE_TRY(pair_events_.resize(2));
    for (int s : setup_.localStages()) {
      auto stage =
          CudaStage::create(setup_.stages[static_cast<std::size_t>(s)],
                            static_cast<std::uint32_t>(s * 7919 + 1), stream_, gpu_->partition_sms);
      if (!stage) return stage.error();
      stages_[s] = std::move(*stage);
    }
    const std::size_t ops =
        setup_.schedule->ranks[static_cast<std::size_t>(setup_.pipelineRank())].size();
    PIPESCOPE_TRY(op_events_.resize(2 * ops + 1));
    PIPESCOPE_TRY(sent_events_.resize(setup_.program->messages.size()));
    // Every output this rank writes, allocated now rather than during a timed step.
    for (int s : setup_.localStages())
      for (int m = 0; m < setup_.schedule->microbatches(); ++m)
        for (bool gradient : {false, true})
          if (auto b = outputs_.get(s, m, gradient); !b) return b.error();
    PIPESCOPE_CUDA_CHECK(cudaDeviceSynchronize());
    return Ok{};
  }

  std::string description() const override {
    return "gpu-shared: " + gpuDescription(gpu_->device) + ", pipeline rank " +
           std::to_string(setup_.pipelineRank()) + " of " + std::to_string(gpu_->stages) +
           " on one stream (and a side stream for overlapped pairs); " + gpu_->partition +
           "; transfers as device-to-device copies" + tuningNote();
  }

  Status beginStep() override {
    PIPESCOPE_CUDA_CHECK(cudaSetDevice(gpu_->device)); // this thread's device
    ++step_;
    PIPESCOPE_TRY(clock_.start(stream_));
    deadline_us_ = nowMicroseconds() + setup_.timeout_s * 1e6;
    timings_ = StepTimings{};
    timings_.ops.assign(op_events_.size() / 2, {});
    receives_.clear();
    sends_.clear();
    return Ok{};
  }

  Status compute(std::size_t index, const Op &op) override {
    PIPESCOPE_CUDA_CHECK(cudaEventRecord(op_events_[2 * index], stream_));
    PIPESCOPE_TRY(runGpuOp(
        op, {stream_, side_stream_, pair_events_[0], pair_events_[1]}, stages_,
        [this](int stage, int microbatch) { return forward(stage, microbatch); },
        [this](int stage, int microbatch, bool) { return inputGrad(stage, microbatch); }));
    PIPESCOPE_CUDA_CHECK(cudaEventRecord(op_events_[2 * index + 1], stream_));
    return Ok{};
  }

  Status send(std::int32_t id) override {
    const Message &m = setup_.program->messages[static_cast<std::size_t>(id)];
    auto from = outputs_.get(m.stage, m.microbatch, m.gradient);
    auto to = gpu_->inbox->get(m.stage, m.microbatch, m.gradient);
    if (!from || !to) return (from ? to : from).error();
    cudaStream_t copy = gpu_->copy_streams[static_cast<std::size_t>(setup_.pipelineRank())];
    PIPESCOPE_CUDA_CHECK(cudaEventRecord(sent_events_[static_cast<std::size_t>(id)], stream_));
    PIPESCOPE_CUDA_CHECK(cudaStreamWaitEvent(copy, sent_events_[static_cast<std::size_t>(id)], 0));
    PIPESCOPE_CUDA_CHECK(
        cudaMemcpyAsync(*to, *from, outputs_.bytes(), cudaMemcpyDeviceToDevice, copy));
    PIPESCOPE_CUDA_CHECK(cudaEventRecord(gpu_->copied[static_cast<std::size_t>(id)], copy));
    {
      std::lock_guard<std::mutex> lock(gpu_->mutex);
      gpu_->posted_step[static_cast<std::size_t>(id)].store(step_);
    }
    gpu_->posted.notify_all();
    sends_.push_back(id);
    return Ok{};
  }

  Status recv(std::int32_t id) override {
    {
      std::unique_lock<std::mutex> lock(gpu_->mutex);
      const auto remaining = std::chrono::microseconds(
          static_cast<long long>(std::max(0.0, deadline_us_ - nowMicroseconds())));
      const bool arrived = gpu_->posted.wait_for(lock, remaining, [&] {
        return gpu_->posted_step[static_cast<std::size_t>(id)].load() == step_ || gpu_->abandoned;
      });
      if (!arrived)
        return makeError("no progress for " + std::to_string(static_cast<int>(setup_.timeout_s)) +
                         " s while waiting for " + setup_.messageName(id));
      if (gpu_->posted_step[static_cast<std::size_t>(id)].load() != step_)
        return makeError("stopped waiting for " + setup_.messageName(id) +
                         ": another stage failed");
    }
    PIPESCOPE_CUDA_CHECK(
        cudaStreamWaitEvent(stream_, gpu_->copied[static_cast<std::size_t>(id)], 0));
    receives_.push_back(id);
    return Ok{};
  }

  Result<StepTimings> endStep() override {
    cudaEvent_t done = op_events_[op_events_.size() - 1];
    PIPESCOPE_CUDA_CHECK(cudaEventRecord(done, stream_));
    cudaStream_t copy = gpu_->copy_streams[static_cast<std::size_t>(setup_.pipelineRank())];
    for (;;) {
      if (cudaEventQuery(done) == cudaSuccess && cudaStreamQuery(copy) == cudaSuccess) break;
      if (abandoned()) return makeError("stopped at the end of the step: another stage failed");
      if (nowMicroseconds() > deadline_us_)
        return makeError("no progress for " + std::to_string(static_cast<int>(setup_.timeout_s)) +
                         " s in pipeline rank " + std::to_string(setup_.pipelineRank()) +
                         "'s GPU work");
      sched_yield();
    }
    for (std::size_t i = 0; i < timings_.ops.size(); ++i) {
      auto start = clock_.toHost(op_events_[2 * i]);
      auto end = clock_.toHost(op_events_[2 * i + 1]);
      if (!start || !end) return (start ? end : start).error();
      timings_.ops[i] = {*start, *end};
    }
    for (std::int32_t id : sends_) {
      auto t = clock_.toHost(sent_events_[static_cast<std::size_t>(id)]);
      if (!t) return t.error();
      timings_.sends.push_back({id, *t});
    }
    for (std::int32_t id : receives_) {
      auto t = clock_.toHost(gpu_->copied[static_cast<std::size_t>(id)]);
      if (!t) return t.error();
      timings_.arrivals.push_back({id, *t});
    }
    timings_.clock_error_us = clock_.errorMicroseconds();
    return std::move(timings_);
  }

  void abandonStep() override {
    {
      std::lock_guard<std::mutex> lock(gpu_->mutex);
      gpu_->abandoned = true;
    }
    gpu_->posted.notify_all();
  }

private:
  bool abandoned() {
    std::lock_guard<std::mutex> lock(gpu_->mutex);
    return gpu_->abandoned;
  }

  Result<const bf16 *> inputOf(int producer, int microbatch, bool gradient) {
    if (producer < 0) return static_cast<const bf16 *>(nullptr);
    const bool local = setup_.schedule->placement.rankOf(producer) == setup_.pipelineRank();
    auto buffer = local ? outputs_.get(producer, microbatch, gradient)
                        : gpu_->inbox->get(producer, microbatch, gradient);
    if (!buffer) return buffer.error();
    return static_cast<const bf16 *>(*buffer);
  }

  Status forward(int s, int microbatch) {
    const Placement &placement = setup_.schedule->placement;
    auto input = inputOf(placement.previousStage(s), microbatch, false);
    if (!input) return input.error();
    bf16 *output = nullptr;
    if (placement.nextStage(s) >= 0) {
      auto buffer = outputs_.get(s, microbatch, false);
      if (!buffer) return buffer.error();
      output = *buffer;
    }
    return stages_.at(s)->forward(*input, output, {});
  }

  Status inputGrad(int s, int microbatch) {
    const Placement &placement = setup_.schedule->placement;
    auto output_grad = inputOf(placement.nextStage(s), microbatch, true);
    if (!output_grad) return output_grad.error();
    bf16 *input_grad = nullptr;
    if (placement.previousStage(s) >= 0) {
      auto buffer = outputs_.get(s, microbatch, true);
      if (!buffer) return buffer.error();
      input_grad = *buffer;
    }
    return stages_.at(s)->inputGrad(*output_grad, input_grad, {});
  }

  const RankSetup &setup_;
  std::shared_ptr<SharedGpu> gpu_;
  cudaStream_t stream_ = nullptr, side_stream_ = nullptr;
  std::map<int, std::unique_ptr<CudaStage>> stages_;
  ActivationBuffers outputs_;
  EventPool op_events_, sent_events_, pair_events_;
  EventClock clock_;
  int step_ = 0;
  double deadline_us_ = 0;
  StepTimings timings_;
  std::vector<std::int32_t> sends_, receives_;
};

} // namespace

Result<DeviceSpeed> measureSharedGpuStageSpeed(int local_rank, int stages) {
  // The same partition the run gives stage 0, made for the measurement and released after it.
  SharedGpu gpu;
  gpu.device = local_rank;
  gpu.stages = std::max(1, stages);
  PIPESCOPE_CUDA_CHECK(cudaSetDevice(gpu.device));
  PIPESCOPE_CUDA_CHECK(cudaFree(nullptr)); // the primary context, before green contexts
  PIPESCOPE_TRY(gpu.makeStreams());
  return measureCudaSpeedOn(gpu.streams.front(), gpu.partition_sms);
}

Result<std::vector<std::unique_ptr<Device>>>
createSharedGpuDevices(const std::vector<RankSetup> &setups) {
  if (setups.empty()) return makeError("no pipeline stages to run");
  auto gpu = std::make_shared<SharedGpu>();
  gpu->device = setups.front().local_rank;
  gpu->stages = static_cast<int>(setups.size());
  PIPESCOPE_CUDA_CHECK(cudaSetDevice(gpu->device));
  PIPESCOPE_CUDA_CHECK(cudaFree(nullptr)); // the primary context, before green contexts
  PIPESCOPE_TRY(gpu->makeStreams());
  gpu->copy_streams.assign(setups.size(), nullptr);
  for (auto &s : gpu->copy_streams)
    PIPESCOPE_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  const RankSetup &first = setups.front();
  const std::size_t messages = first.program->messages.size();
  gpu->inbox = std::make_unique<ActivationBuffers>(
      static_cast<std::size_t>(first.stages.front().activationElements()),
      first.schedule->microbatches());
  for (const Message &m : first.program->messages)
    if (auto b = gpu->inbox->get(m.stage, m.microbatch, m.gradient); !b) return b.error();
  PIPESCOPE_TRY(gpu->copied.resize(messages));
  gpu->posted_step = std::make_unique<std::atomic<int>[]>(messages);
  for (std::size_t i = 0; i < messages; ++i)
    gpu->posted_step[i].store(-1);

  std::vector<std::unique_ptr<Device>> devices;
  for (const RankSetup &setup : setups) {
    auto device = std::make_unique<SharedGpuStageDevice>(setup, gpu);
    if (auto status = device->initialize(); !status) return status.error();
    devices.push_back(std::move(device));
  }
  return devices;
}

} // namespace pipescope::backend
