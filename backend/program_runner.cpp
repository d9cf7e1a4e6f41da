#include "backend/program_runner.h"

#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <string>

#include "backend/events.h"

namespace pipescope::backend {

namespace {

long long integerVariable(const char *name, long long fallback) {
  const char *value = std::getenv(name);
  if (!value || !*value) return fallback;
  return std::strtoll(value, nullptr, 10);
}

} // namespace

FaultInjection FaultInjection::fromEnvironment(int world_rank, bool stage_threads) {
  FaultInjection faults;
  faults.stage_threads_ = stage_threads;
  faults.kill_ = integerVariable("PIPESCOPE_BACKEND_TEST_KILL_RANK", -1) == world_rank;
  faults.hang_ = integerVariable("PIPESCOPE_BACKEND_TEST_HANG_RANK", -1) == world_rank;
  faults.after_ops_ = integerVariable("PIPESCOPE_BACKEND_TEST_AFTER_OPS", 1);
  return faults;
}

void FaultInjection::beforeCompute() {
  if (!kill_ && !hang_) return;
  if (++ops_started_ < after_ops_) return;
  if (kill_ && stage_threads_) throw StageThreadKilled{};
  if (kill_) std::raise(SIGKILL);
  for (;;) // a hung rank: alive, silent, never progressing
    ::pause();
}

std::vector<int> RankSetup::localStages() const {
  std::vector<int> stages;
  const Placement &placement = schedule->placement;
  for (int s = 0; s < placement.stageCount(); ++s)
    if (placement.rankOf(s) == pipelineRank()) stages.push_back(s);
  return stages;
}

std::string RankSetup::messageName(std::int32_t message_id) const {
  const Message &m = program->messages[static_cast<std::size_t>(message_id)];
  return std::string(m.gradient ? "gradient " : "activation ") + std::to_string(m.stage) +
         (m.gradient ? "B" : "F") + std::to_string(m.microbatch) + " (pipeline rank " +
         std::to_string(m.from_rank) + " -> " + std::to_string(m.to_rank) + ", world rank " +
         std::to_string(worldRankOf(m.from_rank)) + " -> " +
         std::to_string(worldRankOf(m.to_rank)) + ")";
}

Result<StepTimings> runProgramStep(Device &device, const RankSetup &setup, FaultInjection &faults) {
  const int rank = setup.pipelineRank();
  const auto &instructions = setup.program->ranks[static_cast<std::size_t>(rank)];
  const auto &ops = setup.schedule->ranks[static_cast<std::size_t>(rank)];
  if (auto status = device.beginStep(); !status) return status.error();
  for (const Instruction &instruction : instructions) {
    switch (instruction.kind) {
    case InstructionKind::Compute: {
      const auto index = static_cast<std::size_t>(instruction.index);
      setActivity(setup.world_rank, "computing " + formatOp(ops[index]));
      faults.beforeCompute();
      if (auto status = device.compute(index, ops[index]); !status) return status.error();
      break;
    }
    case InstructionKind::Send:
      if (auto status = device.send(instruction.index); !status) return status.error();
      break;
    case InstructionKind::Recv:
      setActivity(
          setup.world_rank, "waiting for " + setup.messageName(instruction.index),
          setup.worldRankOf(
              setup.program->messages[static_cast<std::size_t>(instruction.index)].from_rank));
      if (auto status = device.recv(instruction.index); !status) return status.error();
      break;
    }
  }
  setActivity(setup.world_rank, "finishing a step (sends, gradient all-reduce)");
  return device.endStep();
}

} // namespace pipescope::backend
