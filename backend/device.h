#pragma once
// The "execute a lowered program" contract (DESIGN.md §2 Lowering, §7). The program runner walks
// one pipeline rank's instruction list and calls a Device for each instruction; the cpu (MPI), cuda
// (NCCL) and gpu-shared devices implement it, so one runner and one set of tests drive them all.
//
// Semantics, as the lowering defines them: a send follows the compute that produces its data and
// does not block; a recv sits right before the compute that consumes it and returns once the
// data is there (for a GPU: once the consumer's stream waits for it). Every receive of a step is
// posted when the step begins, so a program that completes in the simulator cannot deadlock here.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "engine/lowering.h"
#include "engine/mesh.h"
#include "engine/op.h"
#include "engine/plan_file.h"
#include "engine/simulator.h"
#include "kernels/stage_work.h"

namespace pipescope::backend {

/// What one step of one rank measured, on this rank's host clock (microseconds).
struct StepTimings {
  std::vector<OpTiming> ops;                             ///< per compute op, in list order
  std::vector<std::pair<std::int32_t, double>> sends;    ///< message id, time the send was posted
  std::vector<std::pair<std::int32_t, double>> arrivals; ///< message id, time it was seen complete
  double gradient_sync_us = 0;                           ///< DP all-reduce at the end of the step
  /// Error bound of mapping the device's own timer onto the host clock (GPU events: the anchor).
  double clock_error_us = 0;
};

/// Runs the parts of one compute op through a device's three hooks, each `Status(int stage,
/// int microbatch)`: F; I; W; B as I then W; an overlapped F&B pair as the forward of one
/// direction then the full backward of the other. Every device shares this mapping.
template <typename Forward, typename InputGrad, typename WeightGrad>
Status runOpParts(const Op &op, Forward &&forward, InputGrad &&input_grad,
                  WeightGrad &&weight_grad) {
  auto backward = [&](int stage, int microbatch) -> Status {
    if (auto status = input_grad(stage, microbatch); !status) return status;
    return weight_grad(stage, microbatch);
  };
  switch (op.kind) {
  case OpKind::Forward: return forward(op.stage, op.microbatch);
  case OpKind::InputGrad: return input_grad(op.stage, op.microbatch);
  case OpKind::WeightGrad: return weight_grad(op.stage, op.microbatch);
  case OpKind::FullBackward: return backward(op.stage, op.microbatch);
  case OpKind::OverlappedPair:
    if (auto status = forward(op.stage, op.microbatch); !status) return status;
    return backward(op.backward_stage, op.backward_microbatch);
  }
  return Ok{};
}

class Device {
public:
  virtual ~Device() = default;
  /// One line for the trace's device list, e.g. "cpu: Intel Xeon ..., fp32, host h1".
  virtual std::string description() const = 0;
  /// Posts every receive of the step.
  virtual Status beginStep() = 0;
  /// Runs (or enqueues) compute op `index` of the rank's list.
  virtual Status compute(std::size_t index, const Op &op) = 0;
  virtual Status send(std::int32_t message_id) = 0;
  virtual Status recv(std::int32_t message_id) = 0;
  /// Completes the step (outstanding sends, the DP gradient all-reduce) and reports its timings.
  virtual Result<StepTimings> endStep() = 0;
  /// Another stage of this process failed, died or hung in the middle of the step: stop waiting
  /// for it now rather than at --timeout. Only devices that run a stage per thread (gpu-shared)
  /// wait on one another inside a process; the others have nothing to do.
  virtual void abandonStep() {}
};

/// Everything a device needs to know about its rank.
struct RankSetup {
  const Plan *plan = nullptr;
  const Schedule *schedule = nullptr;
  const LoweredProgram *program = nullptr;
  Mesh mesh;
  /// The launch runs one pipeline replica (world = pp) of a mesh with dp or tp > 1 (cpu only):
  /// shapes stay those of one TP rank, the TP and DP collectives are left out.
  bool single_replica = false;
  int world_rank = 0;
  int world_size = 1;
  int local_rank = 0;
  RankCoords coords;
  std::vector<kernels::StageWork> stages; ///< per virtual stage of the plan
  double timeout_s = 120;

  int pipelineRank() const { return coords.p; }
  /// The world rank holding pipeline rank `p` in this rank's replica (same d and t).
  int worldRankOf(int p) const { return single_replica ? p : mesh.rankOf({coords.d, p, coords.t}); }
  bool tensorParallel() const { return !single_replica && mesh.tp > 1; }
  bool dataParallel() const { return !single_replica && mesh.dp > 1; }
  /// Virtual stages this rank computes.
  std::vector<int> localStages() const;
  /// Readable name of a message, e.g. "activation 3F1 from rank 2".
  std::string messageName(std::int32_t message_id) const;
};

} // namespace pipescope::backend
