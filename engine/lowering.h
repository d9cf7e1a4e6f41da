#pragma once
// Lowering: each rank's compute list becomes a program with explicit send and recv instructions
// (DESIGN.md §2 "Lowering"). The simulator and the backend both execute this program.
#include <cstdint>
#include <vector>

#include "engine/schedule.h"

namespace pipescope {

enum class InstructionKind : std::uint8_t { Compute, Send, Recv };

/// One step of a rank's program. Compute: `index` is the op's position in the rank's compute
/// list. Send/Recv: `index` is a message id and `peer` the other rank.
struct Instruction {
  std::int32_t index = 0;
  std::int16_t peer = -1; ///< ranks fit: P <= kMaxPipelineRanks (16384)
  InstructionKind kind = InstructionKind::Compute;
};
static_assert(sizeof(Instruction) == 8, "programs of a million ops stay compact");
static_assert(kMaxPipelineRanks <= 32767, "Instruction::peer is 16 bits");

/// A point-to-point transfer between two ranks: the output of the producer op.
struct Message {
  std::int32_t from_rank = 0;
  std::int32_t to_rank = 0;
  std::int32_t stage = 0; ///< the producing stage
  std::int32_t microbatch = 0;
  bool gradient = false; ///< false: activation to the next stage; true: gradient back
};

/// Per-rank programs. Sends follow the compute that produces them at once and are
/// non-blocking (the transfer runs beside compute); a recv sits just before the compute that
/// consumes it, and waits for the data. Under these semantics a program that completes in the
/// simulator cannot deadlock on a device that pre-posts receives, which the backend does.
struct LoweredProgram {
  std::vector<std::vector<Instruction>> ranks;
  std::vector<Message> messages;
  std::size_t instructionCount() const;
};

/// Lowers a schedule whose op coverage has been checked (checkOpCoverage).
LoweredProgram lowerSchedule(const Schedule &schedule);

} // namespace pipescope
