#include "backend/cuda_device.h"

#include <sched.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <set>

#include "backend/cuda_common.h"
#include "kernels/cuda_stage.h"

namespace pipescope::backend {

using kernels::bf16;
using kernels::CudaStage;

std::string gpuDescription(int device) {
  cudaDeviceProp properties{};
  if (cudaGetDeviceProperties(&properties, device) != cudaSuccess) return "unknown GPU";
  return std::string(properties.name) + " (GPU " + std::to_string(device) + ", sm_" +
         std::to_string(properties.major) + std::to_string(properties.minor) + ", " +
         std::to_string(properties.multiProcessorCount) + " SMs, " +
         std::to_string(properties.totalGlobalMem >> 30) + " GiB)";
}

namespace {

std::string hostName() {
  char name[256] = "?";
  gethostname(name, sizeof name - 1);
  return name;
}

// NCCL refuses two ranks on one GPU ("Duplicate GPU detected"), which is what starting more
// ranks on a node than it has GPUs (or binding several tasks to one GPU) leads to: say the fix.
std::string explainSharedGpu(const std::string &nccl_message) {
  if (nccl_message.find("Duplicate GPU") == std::string::npos) return nccl_message;
  int gpus = 0;
  cudaGetDeviceCount(&gpus);
  return "two ranks use the same GPU, which --device cuda cannot run (one rank per GPU; this rank "
         "sees " +
         std::to_string(gpus) + " GPU" + (gpus == 1 ? "" : "s") +
         "): start at most as many ranks per node as it has GPUs, or run every pipeline stage on "
         "one GPU with --device gpu-shared (one process, no mpirun). NCCL said: " +
         nccl_message;
}

void briefPause() {
  const timespec pause{0, 20000};
  nanosleep(&pause, nullptr);
}

// A non-blocking communicator finishes each call in the background; NCCL asks that its state be
// ncclSuccess again before the next call on it (NCCL docs, "Fault Tolerance").
Status waitForComm(ncclComm_t comm, double deadline_us, const std::string &what) {
  for (;;) {
    ncclResult_t state = ncclSuccess;
    PIPESCOPE_NCCL_CHECK(ncclCommGetAsyncError(comm, &state));
    if (state == ncclSuccess) return Ok{};
    if (state != ncclInProgress)
      return makeError(std::string("NCCL reported ") + ncclGetErrorString(state) + " while " +
                       what + ": " + ncclGetLastError(comm));
    if (nowMicroseconds() > deadline_us) return makeError("no progress while " + what);
    sched_yield();
  }
}

Result<int> gpuCount() {
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess)
    return makeError(
        "no CUDA GPU is visible (cudaGetDeviceCount: " + kernels::cudaErrorText(status) +
        "); use --device cpu, or run where a GPU and its driver are");
  if (count == 0)
    return makeError("no CUDA GPU is visible (cudaGetDeviceCount found 0); use --device cpu");
  return count;
}

Result<int> selectGpu(int local_rank) {
  auto count = gpuCount();
  if (!count) return count.error();
  const int device = local_rank % *count;
  PIPESCOPE_CUDA_CHECK(cudaSetDevice(device));
  return device;
}

// One direction of one pipeline link: its two-rank communicator (sender = rank 0 in it) and the
// stream its transfers run on.
struct Link {
  ncclComm_t comm = nullptr;
  cudaStream_t stream = nullptr;
};

class CudaNcclDevice final : public Device {
public:
  CudaNcclDevice(const RankSetup &setup, ControlChannel &channel)
      : setup_(setup), channel_(channel),
        outputs_(static_cast<std::size_t>(setup.stages.front().activationElements()),
                 setup.schedule->microbatches()),
        inbox_(static_cast<std::size_t>(setup.stages.front().activationElements()),
               setup.schedule->microbatches()) {}

  ~CudaNcclDevice() override {
    stages_.clear();
    std::vector<ncclComm_t> comms{world_, tensor_parallel_, side_tensor_parallel_, data_parallel_};
    for (auto &[pair, link] : links_) {
      comms.push_back(link.comm);
      if (link.stream) cudaStreamDestroy(link.stream);
    }
    for (ncclComm_t comm : comms)
      if (comm) failed_ ? ncclCommAbort(comm) : ncclCommDestroy(comm);
    if (side_) cudaStreamDestroy(side_);
    if (compute_) cudaStreamDestroy(compute_);
  }

  Status initialize() {
    auto device = selectGpu(setup_.local_rank);
    if (!device) return device.error();
    device_ = *device;
    const double deadline = nowMicroseconds() + setup_.timeout_s * 1e6;
    // World communicator: rank 0 makes the id, the control channel carries it (as nccl-tests
    // broadcasts it with MPI).
    ncclUniqueId id{};
    if (setup_.world_rank == 0) PIPESCOPE_NCCL_CHECK(ncclGetUniqueId(&id));
    std::vector<char> bytes(reinterpret_cast<char *>(&id),
                            reinterpret_cast<char *>(&id) + sizeof id);
    if (auto status = channel_.broadcast(bytes, setup_.timeout_s); !status) return status;
    std::memcpy(&id, bytes.data(), std::min(bytes.size(), sizeof id));
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0; // so a hung peer can be timed out and aborted
    PIPESCOPE_NCCL_CHECK(
        ncclCommInitRankConfig(&world_, setup_.world_size, id, setup_.world_rank, &config));
    if (auto created = waitForComm(world_, deadline, "creating the NCCL world communicator");
        !created)
      return makeError(explainSharedGpu(created.error().message));

    // Mesh groups (DESIGN.md §2): TP = fixed (d, p), DP = fixed (p, t).
    const RankCoords c = setup_.coords;
    const Mesh &mesh = setup_.mesh;
    if (setup_.tensorParallel())
      PIPESCOPE_TRY(split(c.d * mesh.pp + c.p, c.t, &tensor_parallel_, deadline, "TP"));
    if (setup_.dataParallel())
      PIPESCOPE_TRY(split(c.p * mesh.tp + c.t, c.d, &data_parallel_, deadline, "DP"));
    // One communicator per direction of each pipeline link, in the same order on every rank.
    std::set<std::pair<int, int>> directions;
    for (const Message &m : setup_.program->messages)
      directions.insert({m.from_rank, m.to_rank});
    const int replica = c.d * mesh.tp + c.t;
    for (const auto &[from, to] : directions) {
      const bool member = c.p == from || c.p == to;
      ncclComm_t comm = nullptr;
      PIPESCOPE_TRY(split(member ? replica : NCCL_SPLIT_NOCOLOR, c.p == from ? 0 : 1, &comm,
                          deadline,
                          "pipeline link " + std::to_string(from) + "->" + std::to_string(to)));
      if (!member) continue;
      Link &link = links_[{from, to}];
      link.comm = comm;
      PIPESCOPE_CUDA_CHECK(cudaStreamCreateWithFlags(&link.stream, cudaStreamNonBlocking));
    }
    PIPESCOPE_CUDA_CHECK(cudaStreamCreateWithFlags(&compute_, cudaStreamNonBlocking));
    // Overlapped pairs: a side stream for their backward halves and, with TP, a second TP
    // communicator for its all-reduces (split in the same order on every rank).
    bool pairs = false;
    for (const auto &plan : setup_.schedule->ranks)
      for (const Op &op : plan)
        pairs = pairs || concurrentPair(op);
    if (pairs) {
      PIPESCOPE_CUDA_CHECK(cudaStreamCreateWithFlags(&side_, cudaStreamNonBlocking));
      if (setup_.tensorParallel())
        PIPESCOPE_TRY(split(c.d * mesh.pp + c.p, c.t, &side_tensor_parallel_, deadline,
                            "second TP (overlapped pairs)"));
    }

    // Memory: refuse a size that cannot fit before allocating any of it.
    std::size_t needed = 0;
    const auto local = setup_.localStages();
    for (int s : local)
      needed += CudaStage::memoryBytes(setup_.stages[static_cast<std::size_t>(s)]);
    needed += outputs_.bytes() * 2 * local.size() *
              static_cast<std::size_t>(setup_.schedule->microbatches());
    needed += inbox_.bytes() * setup_.program->messages.size() / std::max(1, mesh.pp) * 2;
    std::size_t free_bytes = 0, total_bytes = 0;
    PIPESCOPE_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
    if (needed > free_bytes)
      return makeError("the stages need about " + std::to_string(needed >> 20) + " MiB on GPU " +
                       std::to_string(device_) + " but " + std::to_string(free_bytes >> 20) +
                       " MiB are free; give a smaller --size-scale");
    for (int s : local) {
      auto stage =
          CudaStage::create(setup_.stages[static_cast<std::size_t>(s)],
                            static_cast<std::uint32_t>(s * 7919 + c.t * 104729 + 1), compute_);
      if (!stage) return stage.error();
      stages_[s] = std::move(*stage);
    }
    const std::size_t ops =
        setup_.schedule->ranks[static_cast<std::size_t>(setup_.pipelineRank())].size();
    PIPESCOPE_TRY(op_events_.resize(2 * ops));
    PIPESCOPE_TRY(message_events_.resize(2 * setup_.program->messages.size()));
    PIPESCOPE_TRY(step_events_.resize(3));
    PIPESCOPE_TRY(pair_events_.resize(2));
    return preallocate();
  }

  std::string description() const override {
    return "cuda: " + gpuDescription(device_) + ", bf16 cuBLAS, NCCL " +
           std::to_string(NCCL_MAJOR) + "." + std::to_string(NCCL_MINOR) + ", host " + hostName() +
           ", world rank " + std::to_string(setup_.world_rank) + tuningNote();
  }

  Status beginStep() override {
    PIPESCOPE_CUDA_CHECK(cudaSetDevice(device_));
    PIPESCOPE_TRY(clock_.start(compute_));
    deadline_us_ = nowMicroseconds() + setup_.timeout_s * 1e6;
    timings_ = StepTimings{};
    timings_.ops.assign(op_events_.size() / 2, {});
    sends_.clear();
    receives_.clear();
    // Every receive of the step, per link in the sender's order (ascending message id: the
    // lowering numbers each rank's messages in its program order).
    for (std::size_t id = 0; id < setup_.program->messages.size(); ++id) {
      const Message &m = setup_.program->messages[id];
      if (m.to_rank != setup_.pipelineRank()) continue;
      Link &link = links_.at({m.from_rank, m.to_rank});
      auto buffer = inbox_.get(m.stage, m.microbatch, m.gradient);
      if (!buffer) return buffer.error();
      PIPESCOPE_NCCL_CHECK(
          ncclRecv(*buffer, inbox_.elements(), ncclBfloat16, 0, link.comm, link.stream));
      PIPESCOPE_TRY(waitForComm(link.comm, deadline_us_,
                                "posting " + setup_.messageName(static_cast<std::int32_t>(id))));
      PIPESCOPE_CUDA_CHECK(cudaEventRecord(arrivedEvent(id), link.stream));
      receives_.push_back(static_cast<std::int32_t>(id));
    }
    return Ok{};
  }

  Status compute(std::size_t index, const Op &op) override {
    PIPESCOPE_CUDA_CHECK(cudaEventRecord(op_events_[2 * index], compute_));
    // A pair's backward half (on the side stream) sends its TP all-reduces through a
    // communicator of its own: NCCL orders the calls on one communicator, so two streams must
    // not share one.
    PIPESCOPE_TRY(runGpuOp(
        op, {compute_, side_, pair_events_[0], pair_events_[1]}, stages_,
        [this](int stage, int microbatch) { return forward(stage, microbatch); },
        [this](int stage, int microbatch, bool on_side) {
          return inputGrad(stage, microbatch, on_side ? side_tensor_parallel_ : tensor_parallel_);
        }));
    PIPESCOPE_CUDA_CHECK(cudaEventRecord(op_events_[2 * index + 1], compute_));
    return Ok{};
  }

  Status send(std::int32_t id) override {
    const Message &m = setup_.program->messages[static_cast<std::size_t>(id)];
    Link &link = links_.at({m.from_rank, m.to_rank});
    auto buffer = outputs_.get(m.stage, m.microbatch, m.gradient);
    if (!buffer) return buffer.error();
    // The link's stream waits for the producing op, then sends; compute goes on meanwhile.
    PIPESCOPE_CUDA_CHECK(cudaEventRecord(sentEvent(id), compute_));
    PIPESCOPE_CUDA_CHECK(cudaStreamWaitEvent(link.stream, sentEvent(id), 0));
    PIPESCOPE_NCCL_CHECK(
        ncclSend(*buffer, outputs_.elements(), ncclBfloat16, 1, link.comm, link.stream));
    PIPESCOPE_TRY(waitForComm(link.comm, deadline_us_, "posting " + setup_.messageName(id)));
    sends_.push_back(id);
    return Ok{};
  }

  Status recv(std::int32_t id) override {
    // The consumer's stream waits for the data; the host goes on enqueuing.
    PIPESCOPE_CUDA_CHECK(
        cudaStreamWaitEvent(compute_, arrivedEvent(static_cast<std::size_t>(id)), 0));
    return Ok{};
  }

  Result<StepTimings> endStep() override {
    PIPESCOPE_CUDA_CHECK(cudaEventRecord(step_events_[0], compute_));
    for (auto &[s, stage] : stages_) {
      if (setup_.dataParallel()) {
        PIPESCOPE_NCCL_CHECK(ncclAllReduce(stage->weightGradients(), stage->weightGradients(),
                                           stage->weightGradientCount(), ncclBfloat16, ncclSum,
                                           data_parallel_, compute_));
        PIPESCOPE_TRY(waitForComm(data_parallel_, deadline_us_, "posting the DP all-reduce"));
      }
    }
    PIPESCOPE_CUDA_CHECK(cudaEventRecord(step_events_[1], compute_));
    for (auto &[s, stage] : stages_) // the "optimizer step": accumulation restarts
      PIPESCOPE_CUDA_CHECK(cudaMemsetAsync(stage->weightGradients(), 0,
                                           stage->weightGradientCount() * sizeof(bf16), compute_));
    PIPESCOPE_CUDA_CHECK(cudaEventRecord(step_events_[2], compute_));
    if (auto status = waitForStep(); !status) {
      failed_ = true; // the destructor aborts the communicators instead of destroying them
      return status.error();
    }
    for (std::size_t i = 0; i < timings_.ops.size(); ++i) {
      auto start = clock_.toHost(op_events_[2 * i]);
      auto end = clock_.toHost(op_events_[2 * i + 1]);
      if (!start || !end) return (start ? end : start).error();
      timings_.ops[i] = {*start, *end};
    }
    for (std::int32_t id : sends_) {
      auto t = clock_.toHost(sentEvent(id));
      if (!t) return t.error();
      timings_.sends.push_back({id, *t});
    }
    for (std::int32_t id : receives_) {
      auto t = clock_.toHost(arrivedEvent(static_cast<std::size_t>(id)));
      if (!t) return t.error();
      timings_.arrivals.push_back({id, *t});
    }
    auto sync_start = clock_.toHost(step_events_[0]), sync_end = clock_.toHost(step_events_[1]);
    if (!sync_start || !sync_end) return (sync_start ? sync_end : sync_start).error();
    timings_.gradient_sync_us = setup_.dataParallel() ? *sync_end - *sync_start : 0.0;
    timings_.clock_error_us = clock_.errorMicroseconds();
    return std::move(timings_);
  }

private:
  cudaEvent_t sentEvent(std::size_t id) const { return message_events_[2 * id]; }
  cudaEvent_t arrivedEvent(std::size_t id) const { return message_events_[2 * id + 1]; }

  Status split(int color, int key, ncclComm_t *out, double deadline, const std::string &what) {
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    PIPESCOPE_NCCL_CHECK(ncclCommSplit(world_, color, key, out, &config));
    PIPESCOPE_TRY(waitForComm(world_, deadline, "splitting the " + what + " communicator"));
    if (*out) PIPESCOPE_TRY(waitForComm(*out, deadline, "creating the " + what + " communicator"));
    return Ok{};
  }

  // Allocates every buffer the rank's ops read or write, before any step is timed.
  Status preallocate() {
    const Placement &placement = setup_.schedule->placement;
    for (const Op &op : setup_.schedule->ranks[static_cast<std::size_t>(setup_.pipelineRank())]) {
      const int stages[] = {op.stage, op.kind == OpKind::OverlappedPair ? op.backward_stage : -1};
      for (int s : stages) {
        if (s < 0) continue;
        for (int mb : {op.microbatch, op.backward_microbatch})
          if (mb >= 0)
            for (bool gradient : {false, true}) {
              const int neighbour = gradient ? placement.nextStage(s) : placement.previousStage(s);
              if (auto b = outputs_.get(s, mb, gradient); !b) return b.error();
              if (neighbour >= 0 && placement.rankOf(neighbour) == setup_.pipelineRank())
                if (auto b = outputs_.get(neighbour, mb, gradient); !b) return b.error();
            }
      }
    }
    for (const Message &m : setup_.program->messages)
      if (m.to_rank == setup_.pipelineRank())
        if (auto b = inbox_.get(m.stage, m.microbatch, m.gradient); !b) return b.error();
    PIPESCOPE_CUDA_CHECK(cudaDeviceSynchronize());
    return Ok{};
  }

  // The input of stage s: from the previous stage on this rank, or as received.
  Result<const bf16 *> inputOf(int producer, int microbatch, bool gradient) {
    if (producer < 0) return static_cast<const bf16 *>(nullptr);
    const bool local = setup_.schedule->placement.rankOf(producer) == setup_.pipelineRank();
    auto buffer = local ? outputs_.get(producer, microbatch, gradient)
                        : inbox_.get(producer, microbatch, gradient);
    if (!buffer) return buffer.error();
    return static_cast<const bf16 *>(*buffer);
  }

  kernels::CudaAllReduceSum tensorParallelSum(ncclComm_t comm) {
    if (!setup_.tensorParallel() || !comm) return {};
    return [this, comm](bf16 *data, std::size_t count, cudaStream_t stream) -> Status {
      PIPESCOPE_NCCL_CHECK(ncclAllReduce(data, data, count, ncclBfloat16, ncclSum, comm, stream));
      return waitForComm(comm, deadline_us_, "posting a TP all-reduce");
    };
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
    return stages_.at(s)->forward(*input, output, tensorParallelSum(tensor_parallel_));
  }

  Status inputGrad(int s, int microbatch, ncclComm_t tensor_parallel) {
    const Placement &placement = setup_.schedule->placement;
    auto output_grad = inputOf(placement.nextStage(s), microbatch, true);
    if (!output_grad) return output_grad.error();
    bf16 *input_grad = nullptr;
    if (placement.previousStage(s) >= 0) {
      auto buffer = outputs_.get(s, microbatch, true);
      if (!buffer) return buffer.error();
      input_grad = *buffer;
    }
    return stages_.at(s)->inputGrad(*output_grad, input_grad, tensorParallelSum(tensor_parallel));
  }

  // Waits for the step's GPU work with a deadline, watching every communicator for errors.
  Status waitForStep() {
    std::vector<ncclComm_t> comms{world_, tensor_parallel_, side_tensor_parallel_, data_parallel_};
    for (auto &[pair, link] : links_)
      comms.push_back(link.comm);
    for (;;) {
      bool done = cudaEventQuery(step_events_[2]) == cudaSuccess;
      for (auto &[pair, link] : links_)
        done = done && cudaStreamQuery(link.stream) == cudaSuccess;
      if (done) return Ok{};
      for (ncclComm_t comm : comms) {
        if (!comm) continue;
        ncclResult_t state = ncclSuccess;
        ncclCommGetAsyncError(comm, &state);
        if (state != ncclSuccess && state != ncclInProgress)
          return makeError(std::string("NCCL reported ") + ncclGetErrorString(state) +
                           " during the step: " + ncclGetLastError(comm));
      }
      const cudaError_t sticky = cudaPeekAtLastError();
      if (sticky != cudaSuccess && sticky != cudaErrorNotReady)
        return makeError("CUDA error during the step: " + kernels::cudaErrorText(sticky));
      if (nowMicroseconds() > deadline_us_) {
        // Name the first receive that has not landed: its sender is the likely culprit.
        for (std::int32_t id : receives_)
          if (cudaEventQuery(arrivedEvent(static_cast<std::size_t>(id))) != cudaSuccess)
            return makeError("no progress for " +
                             std::to_string(static_cast<int>(setup_.timeout_s)) +
                             " s while waiting for " + setup_.messageName(id));
        return makeError("no progress for " + std::to_string(static_cast<int>(setup_.timeout_s)) +
                         " s in the step's GPU work (a collective or a send)");
      }
      briefPause();
    }
  }

  const RankSetup &setup_;
  ControlChannel &channel_;
  int device_ = 0;
  ncclComm_t world_ = nullptr, tensor_parallel_ = nullptr, data_parallel_ = nullptr;
  ncclComm_t side_tensor_parallel_ = nullptr; ///< TP all-reduces of overlapped pairs' backwards
  std::map<std::pair<int, int>, Link> links_;
  cudaStream_t compute_ = nullptr;
  cudaStream_t side_ = nullptr; ///< backward halves of overlapped pairs (null: no pairs)
  std::map<int, std::unique_ptr<CudaStage>> stages_;
  ActivationBuffers outputs_, inbox_;
  EventPool op_events_, message_events_, step_events_, pair_events_;
  EventClock clock_;
  double deadline_us_ = 0;
  StepTimings timings_;
  std::vector<std::int32_t> sends_, receives_;
  bool failed_ = false;
};

} // namespace

Status checkCudaAvailable(int local_rank) {
  // Rank r takes GPU (local rank mod visible GPUs): with one GPU per task (srun --gpus-per-task,
  // CUDA_VISIBLE_DEVICES) every rank sees GPU 0. Two ranks on one GPU are refused by NCCL.
  (void)local_rank;
  auto count = gpuCount();
  if (!count) return count.error();
  return Ok{};
}

Result<DeviceSpeed> measureCudaSpeed(int local_rank) {
  auto device = selectGpu(local_rank);
  if (!device) return device.error();
  cudaStream_t stream = nullptr;
  PIPESCOPE_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  auto speed = measureCudaSpeedOn(stream);
  cudaStreamDestroy(stream);
  return speed;
}

Result<DeviceSpeed> measureCudaSpeedOn(cudaStream_t stream, int sm_count_target) {
  kernels::StageWork work;
  work.unit = 2048; // 17 GFLOP: tens of microseconds on a current GPU, well above event jitter
  work.unit_forward = 8;
  auto stage = CudaStage::create(work, 1, stream, sm_count_target);
  if (!stage) return stage.error();
  EventPool events;
  PIPESCOPE_TRY(events.resize(2));
  PIPESCOPE_TRY((*stage)->forward(nullptr, nullptr, {})); // warm-up: clocks (create tuned GEMMs)
  PIPESCOPE_CUDA_CHECK(cudaEventRecord(events[0], stream));
  PIPESCOPE_TRY((*stage)->forward(nullptr, nullptr, {}));
  PIPESCOPE_CUDA_CHECK(cudaEventRecord(events[1], stream));
  PIPESCOPE_CUDA_CHECK(cudaEventSynchronize(events[1]));
  float ms = 0;
  PIPESCOPE_CUDA_CHECK(cudaEventElapsedTime(&ms, events[0], events[1]));
  stage->reset();
  DeviceSpeed speed;
  speed.unit = work.unit;
  speed.unit_gemm_us = std::max(1e-3, 1000.0 * ms / work.unit_forward);
  speed.flops_per_us =
      2.0 * work.unit * work.unit * static_cast<double>(work.unit) / speed.unit_gemm_us;
  return speed;
}

Result<double> checkCudaDeviceKernels(int local_rank) {
  auto device = selectGpu(local_rank);
  if (!device) return device.error();
  double worst = 0;
  PIPESCOPE_TRY(kernels::checkCudaKernels(&worst));
  return worst;
}

Result<std::unique_ptr<Device>> createCudaDevice(const RankSetup &setup, ControlChannel &channel) {
  auto device = std::make_unique<CudaNcclDevice>(setup, channel);
  if (auto status = device->initialize(); !status) return status.error();
  return std::unique_ptr<Device>(std::move(device));
}

double cudaTimingOverheadMicroseconds() {
  // GPU time of one op's pair of timing events, from 200 pairs between two outer events.
  cudaStream_t stream = nullptr;
  if (cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) != cudaSuccess) return 0;
  EventPool events;
  double per_op = 0;
  if (events.resize(4)) {
    cudaEventRecord(events[0], stream);
    for (int i = 0; i < 200; ++i) {
      cudaEventRecord(events[2], stream);
      cudaEventRecord(events[3], stream);
    }
    cudaEventRecord(events[1], stream);
    float ms = 0;
    if (cudaEventSynchronize(events[1]) == cudaSuccess &&
        cudaEventElapsedTime(&ms, events[0], events[1]) == cudaSuccess)
      per_op = 1000.0 * ms / 200;
  }
  cudaStreamDestroy(stream);
  return per_op;
}

nlohmann::json describeCudaDevices() {
  nlohmann::json out;
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  out["gpus"] = status == cudaSuccess ? count : 0;
  if (status != cudaSuccess) out["cuda_error"] = kernels::cudaErrorText(status);
  nlohmann::json names = nlohmann::json::array();
  for (int d = 0; status == cudaSuccess && d < count; ++d)
    names.push_back(gpuDescription(d));
  out["gpu_names"] = std::move(names);
  int driver = 0;
  cudaDriverGetVersion(&driver);
  out["driver_version"] = driver;
  out["runtime_version"] = CUDART_VERSION;
  // Green contexts came with CUDA 12.4 drivers; the gpu-shared device uses them where present.
  out["green_contexts"] = driver >= 12040;
  return out;
}

} // namespace pipescope::backend
