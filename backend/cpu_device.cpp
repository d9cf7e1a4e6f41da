#include "backend/cpu_device.h"

#include "backend/cpu_speed.h"

#include <unistd.h>

#include <algorithm>
#include <climits>
#include <fstream>
#include <new>
#include <unordered_map>

#include "backend/clock.h"
#include "kernels/cpu_gemm.h"
#include "kernels/cpu_stage.h"

namespace pipescope::backend {

namespace {

std::string hostName() {
  char name[256] = "?";
  gethostname(name, sizeof name - 1);
  return name;
}

class CpuMpiDevice final : public Device {
public:
  CpuMpiDevice(const RankSetup &setup, MpiChannel &channel) : setup_(setup), channel_(channel) {}
  ~CpuMpiDevice() override {
    for (MPI_Comm *comm : {&tensor_parallel_, &data_parallel_})
      if (*comm != MPI_COMM_NULL) MPI_Comm_free(comm);
  }

  Status initialize() {
    // Communicators per mesh group (DESIGN.md §2): TP = fixed (d, p), DP = fixed (p, t). Every
    // rank takes part in both splits, as MPI requires.
    if (!setup_.single_replica) {
      const RankCoords c = setup_.coords;
      const Mesh &mesh = setup_.mesh;
      PIPESCOPE_MPI_CHECK(
          MPI_Comm_split(channel_.world(), c.d * mesh.pp + c.p, c.t, &tensor_parallel_));
      PIPESCOPE_MPI_CHECK(
          MPI_Comm_split(channel_.world(), c.p * mesh.tp + c.t, c.d, &data_parallel_));
    }
    int *tag_bound = nullptr, found = 0;
    PIPESCOPE_MPI_CHECK(MPI_Comm_get_attr(channel_.world(), MPI_TAG_UB, &tag_bound, &found));
    tag_limit_ = found && tag_bound ? *tag_bound : 32767;
    try {
      for (int stage : setup_.localStages()) {
        const auto &work = setup_.stages[static_cast<std::size_t>(stage)];
        stages_[stage] = std::make_unique<kernels::CpuStage>(
            work, static_cast<std::uint32_t>(stage * 7919 + setup_.coords.t * 104729 + 1));
        stages_[stage]->setProgressHook([this] { driveTransfers(); });
        activation_elements_ = std::max(activation_elements_, stages_[stage]->activationElements());
      }
      // Every stage boundary carries the same activation shape, also into stages this rank
      // does not hold.
      for (const auto &work : setup_.stages)
        activation_elements_ =
            std::max(activation_elements_, static_cast<std::size_t>(work.activationElements()));
    } catch (const std::bad_alloc &) {
      return makeError("not enough memory for the stages' buffers on rank " +
                       std::to_string(setup_.world_rank) + "; give a smaller --size-scale");
    }
    if (activation_elements_ > static_cast<std::size_t>(INT_MAX))
      return makeError("an activation of " + std::to_string(activation_elements_) +
                       " elements is too large for one MPI message; give a smaller --size-scale");
    return Ok{};
  }

  std::string description() const override {
    return "cpu: " + cpuModelName() + ", fp32 GEMMs on one core, host " + hostName() +
           ", world rank " + std::to_string(setup_.world_rank);
  }

  Status beginStep() override {
    const int rank = setup_.pipelineRank();
    timings_ = StepTimings{};
    timings_.ops.assign(setup_.schedule->ranks[static_cast<std::size_t>(rank)].size(), {});
    pending_arrivals_.clear();
    sends_.clear();
    for (const Instruction &instruction : setup_.program->ranks[static_cast<std::size_t>(rank)]) {
      if (instruction.kind != InstructionKind::Recv) continue;
      const Message &m = message(instruction.index);
      MPI_Request request;
      PIPESCOPE_MPI_CHECK(MPI_Irecv(buffer(m.stage, m.microbatch, m.gradient),
                                    static_cast<int>(activation_elements_), MPI_FLOAT,
                                    setup_.worldRankOf(m.from_rank), tagOf(instruction.index),
                                    channel_.world(), &request));
      pending_arrivals_.push_back({instruction.index, request});
    }
    return Ok{};
  }

  Status compute(std::size_t index, const Op &op) override {
    const double start = nowMicroseconds();
    // An overlapped pair runs its halves one after the other: a CPU core has nothing to overlap
    // them with.
    // forward and inputGrad return false when a TP all-reduce inside the layer failed; its
    // message was kept in collective_error_.
    const auto checked = [this](bool done) -> Status {
      if (!done) return makeError(collective_error_);
      return Ok{};
    };
    if (auto status = runOpParts(
            op, [&](int stage, int microbatch) { return checked(forward(stage, microbatch)); },
            [&](int stage, int microbatch) { return checked(inputGrad(stage, microbatch)); },
            [this](int stage, int) -> Status {
              this->stage(stage).weightGrad();
              return Ok{};
            });
        !status)
      return status;
    timings_.ops[index] = {start, nowMicroseconds()};
    return notePendingArrivals();
  }

  Status send(std::int32_t id) override {
    const Message &m = message(id);
    MPI_Request request;
    timings_.sends.push_back({id, nowMicroseconds()});
    PIPESCOPE_MPI_CHECK(
        MPI_Isend(buffer(m.stage, m.microbatch, m.gradient), static_cast<int>(activation_elements_),
                  MPI_FLOAT, setup_.worldRankOf(m.to_rank), tagOf(id), channel_.world(), &request));
    sends_.push_back({id, request});
    return Ok{};
  }

  Status recv(std::int32_t id) override {
    const auto it = std::find_if(pending_arrivals_.begin(), pending_arrivals_.end(),
                                 [id](const auto &entry) { return entry.first == id; });
    if (it == pending_arrivals_.end()) return Ok{}; // already arrived and noted
    if (auto status =
            waitForRequest(it->second, setup_.timeout_s, "waiting for " + setup_.messageName(id));
        !status)
      return status;
    timings_.arrivals.push_back({id, nowMicroseconds()});
    pending_arrivals_.erase(it);
    return Ok{};
  }

  Result<StepTimings> endStep() override {
    for (auto &[id, request] : sends_)
      if (auto status = waitForRequest(request, setup_.timeout_s,
                                       "waiting for the receiver of " + setup_.messageName(id));
          !status)
        return status.error();
    sends_.clear();
    if (setup_.dataParallel()) {
      // The DP gradient all-reduce of every local stage, then the "optimizer step" that starts
      // the next step's accumulation from zero.
      const double start = nowMicroseconds();
      for (auto &[stage_id, stage] : stages_) {
        auto &grads = stage->weightGradients();
        MPI_Request request;
        PIPESCOPE_MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, grads.data(),
                                           static_cast<int>(grads.size()), MPI_FLOAT, MPI_SUM,
                                           data_parallel_, &request));
        if (auto status = waitForRequest(request, setup_.timeout_s,
                                         "in the DP gradient all-reduce of stage " +
                                             std::to_string(stage_id));
            !status)
          return status.error();
      }
      timings_.gradient_sync_us = nowMicroseconds() - start;
    }
    for (auto &entry : stages_)
      std::fill(entry.second->weightGradients().begin(), entry.second->weightGradients().end(),
                0.0f);
    return std::move(timings_);
  }

private:
  const Message &message(std::int32_t id) const {
    return setup_.program->messages[static_cast<std::size_t>(id)];
  }
  int tagOf(std::int32_t id) const {
    return static_cast<int>(id % (static_cast<long long>(tag_limit_) + 1));
  }

  kernels::CpuStage &stage(int s) { return *stages_.at(s); }

  // The buffer of one produced tensor: stage s's output for microbatch m (activation) or its
  // input gradient (gradient). Local and received tensors live in the same place.
  float *buffer(int s, int microbatch, bool gradient) {
    const long long key =
        (static_cast<long long>(s) * setup_.schedule->microbatches() + microbatch) * 2 +
        (gradient ? 1 : 0);
    auto &storage = buffers_[key];
    if (storage.size() != activation_elements_) storage.assign(activation_elements_, 0.0f);
    return storage.data();
  }

  kernels::AllReduceSum tensorParallelSum() {
    if (!setup_.tensorParallel()) return {};
    return [this](float *data, std::size_t count) {
      MPI_Request request;
      const int code = MPI_Iallreduce(MPI_IN_PLACE, data, static_cast<int>(count), MPI_FLOAT,
                                      MPI_SUM, tensor_parallel_, &request);
      if (code != MPI_SUCCESS) {
        collective_error_ = mpiFailure("MPI_Iallreduce", code, __FILE__, __LINE__);
        return false;
      }
      auto status = waitForRequest(request, setup_.timeout_s, "in a TP all-reduce inside a layer");
      if (!status) collective_error_ = status.error().message;
      return status.ok();
    };
  }

  bool forward(int s, int microbatch) {
    const Placement &placement = setup_.schedule->placement;
    const int previous = placement.previousStage(s), next = placement.nextStage(s);
    const float *input = previous >= 0 ? buffer(previous, microbatch, false) : nullptr;
    float *output = next >= 0 ? buffer(s, microbatch, false) : nullptr;
    return stage(s).forward(input, output, tensorParallelSum());
  }

  bool inputGrad(int s, int microbatch) {
    const Placement &placement = setup_.schedule->placement;
    const int previous = placement.previousStage(s), next = placement.nextStage(s);
    const float *output_grad = next >= 0 ? buffer(next, microbatch, true) : nullptr;
    float *input_grad = previous >= 0 ? buffer(s, microbatch, true) : nullptr;
    return stage(s).inputGrad(output_grad, input_grad, tensorParallelSum());
  }

  // Between the GEMMs of an op: lets MPI move this rank's outgoing messages (the rendezvous
  // protocol of a large message needs the sender inside MPI) and notes arrivals. At most every
  // 50 µs, so it costs well under 1% of the op.
  void driveTransfers() {
    const double now = nowMicroseconds();
    if (now - last_drive_us_ < 50) return;
    last_drive_us_ = now;
    for (auto &entry : sends_) {
      int done = 0;
      if (entry.second != MPI_REQUEST_NULL) MPI_Test(&entry.second, &done, MPI_STATUS_IGNORE);
    }
    (void)notePendingArrivals(); // a failure shows again where the receive is waited for
  }

  // Notes receives that completed during the last op, for the transfer records.
  Status notePendingArrivals() {
    for (auto it = pending_arrivals_.begin(); it != pending_arrivals_.end();) {
      int done = 0;
      PIPESCOPE_MPI_CHECK(MPI_Test(&it->second, &done, MPI_STATUS_IGNORE));
      if (done) {
        timings_.arrivals.push_back({it->first, nowMicroseconds()});
        it = pending_arrivals_.erase(it);
      } else {
        ++it;
      }
    }
    return Ok{};
  }

  const RankSetup &setup_;
  MpiChannel &channel_;
  MPI_Comm tensor_parallel_ = MPI_COMM_NULL, data_parallel_ = MPI_COMM_NULL;
  int tag_limit_ = 32767;
  std::unordered_map<int, std::unique_ptr<kernels::CpuStage>> stages_;
  std::size_t activation_elements_ = 0;
  std::unordered_map<long long, std::vector<float>> buffers_;
  std::vector<std::pair<std::int32_t, MPI_Request>> pending_arrivals_, sends_;
  StepTimings timings_;
  std::string collective_error_;
  double last_drive_us_ = 0;
};

} // namespace

Result<std::unique_ptr<Device>> createCpuDevice(const RankSetup &setup, MpiChannel &channel) {
  auto device = std::make_unique<CpuMpiDevice>(setup, channel);
  if (auto status = device->initialize(); !status) return status.error();
  return std::unique_ptr<Device>(std::move(device));
}

} // namespace pipescope::backend
