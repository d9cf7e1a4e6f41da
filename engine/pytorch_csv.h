#pragma once
// PyTorch's schedule CSV (torch.distributed.pipelining _dump_csv/_load_csv): one row per rank,
// one action per cell ("2F0", "1I3", "0W2", "(0F7;7B3)OVERLAP_F_B"), empty cells for idle steps.
#include <string>
#include <string_view>
#include <vector>

#include "engine/op.h"
#include "engine/result.h"
#include "engine/schedule.h"

namespace pipescope {

/// Compute-only CSV of the schedule, one row per rank, no idle cells.
std::string scheduleToPytorchCsv(const Schedule &schedule);

/// Per-rank op lists from CSV text. Empty cells are idle steps; PyTorch's communication and
/// resharding actions (SEND_F, RECV_B, UNSHARD, REDUCE_GRAD, their WAIT_ forms, ...) are skipped
/// because lowering derives them.
/// The error names the row, the column and the cell.
Result<std::vector<std::vector<Op>>> parsePytorchCsv(std::string_view text);

} // namespace pipescope
