#pragma once
// PyTorch's schedule CSV (torch.distributed.pipelining _dump_csv/_load_csv): one row per rank,
// one action per cell ("2F0", "1I3", "0W2", "(0F7;7B3)OVERLAP_F_B"), empty cells for idle steps.
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/op.h"
#include "engine/result.h"
#include "engine/schedule.h"

namespace pipescope {

/// What a PyTorch action does (torch.distributed.pipelining's _ComputationType): a compute op,
/// or one of the communication and resharding actions that its lowering adds.
enum class PytorchActionType {
  Compute,        ///< F, I, W, B or an overlapped F&B pair: `op`
  SendForward,    ///< SEND_F: stage sends its output for the microbatch
  ReceiveForward, ///< RECV_F: stage receives its input
  SendBackward,   ///< SEND_B: stage sends its input gradient
  ReceiveBackward,
  WaitSendForward, ///< WAIT_SEND_F / WAIT_SEND_B: waits for an earlier send to complete
  WaitSendBackward,
  Unshard, ///< UNSHARD / RESHARD: FSDP parameter gathering around a stage's ops
  Reshard,
  ReduceGradient, ///< REDUCE_GRAD / WAIT_REDUCE_GRAD: the stage's data-parallel gradient sync
  WaitReduceGradient,
};

/// One PyTorch action, e.g. "2F0", "(0F7;7B3)OVERLAP_F_B", "3SEND_F1", "0UNSHARD".
struct PytorchAction {
  PytorchActionType type = PytorchActionType::Compute;
  Op op;               ///< for Compute
  int stage = 0;       ///< for the others
  int microbatch = -1; ///< for the others; -1 when the action names none (UNSHARD, REDUCE_GRAD)
};

/// Parses one action in PyTorch's grammar (_Action.from_str); nothing when it is not one.
std::optional<PytorchAction> parsePytorchAction(std::string_view text);

/// Compute-only CSV of the schedule, one row per rank, no idle cells.
std::string scheduleToPytorchCsv(const Schedule &schedule);

/// Per-rank op lists from CSV text. Empty cells are idle steps; PyTorch's communication and
/// resharding actions (SEND_F, RECV_B, UNSHARD, REDUCE_GRAD, their WAIT_ forms, ...) are skipped
/// because lowering derives them.
/// The error names the row, the column and the cell.
Result<std::vector<std::vector<Op>>> parsePytorchCsv(std::string_view text);

} // namespace pipescope
