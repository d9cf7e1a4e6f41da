#pragma once
// One generator per schedule family. Each takes a request that already passed its check and the
// placement built for it, and returns the per-rank op lists. Each family documents its phases
// and the P, M, V it accepts next to its code.
#include <vector>

#include "engine/op.h"
#include "engine/placement.h"
#include "engine/result.h"
#include "engine/schedule.h"

namespace pipescope::generators {

using RankOps = std::vector<std::vector<Op>>;

/// Refuses V != 1 for the single-chunk families, naming `alternative` as what would work.
Status requireSingleChunk(const ScheduleRequest &request, const char *alternative);

Status checkNaive(const ScheduleRequest &request);
RankOps naive(const ScheduleRequest &request, const Placement &placement);
Status checkGpipe(const ScheduleRequest &request);
RankOps gpipe(const ScheduleRequest &request, const Placement &placement);
Status checkOneFOneB(const ScheduleRequest &request);
RankOps oneFOneB(const ScheduleRequest &request, const Placement &placement);

Status checkInterleaved(const ScheduleRequest &request);
RankOps interleaved(const ScheduleRequest &request, const Placement &placement);
Status checkCombinedOneFOneB(const ScheduleRequest &request);
RankOps combinedOneFOneB(const ScheduleRequest &request, const Placement &placement);
Status checkInterleavedZeroBubble(const ScheduleRequest &request);
RankOps interleavedZeroBubble(const ScheduleRequest &request, const Placement &placement);
Status checkLoopedBfs(const ScheduleRequest &request);
RankOps loopedBfs(const ScheduleRequest &request, const Placement &placement);

Status checkZeroBubbleH1(const ScheduleRequest &request);
RankOps zeroBubbleH1(const ScheduleRequest &request, const Placement &placement);
Status checkZeroBubbleH2(const ScheduleRequest &request);
RankOps zeroBubbleH2(const ScheduleRequest &request, const Placement &placement);
Status checkZeroBubbleV(const ScheduleRequest &request);
RankOps zeroBubbleV(const ScheduleRequest &request, const Placement &placement);

Status checkDualPipe(const ScheduleRequest &request);
RankOps dualPipe(const ScheduleRequest &request, const Placement &placement);
Status checkDualPipeV(const ScheduleRequest &request);
RankOps dualPipeV(const ScheduleRequest &request, const Placement &placement);

Status checkControllableMemoryV(const ScheduleRequest &request);
RankOps vHalf(const ScheduleRequest &request, const Placement &placement);
RankOps vMin(const ScheduleRequest &request, const Placement &placement);

} // namespace pipescope::generators
