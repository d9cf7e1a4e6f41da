// naive, GPipe and 1F1B: the V = 1 schedules with a full (unsplit) backward.
#include "engine/generators/generators.h"

namespace pipescope::generators {

Status requireSingleChunk(const ScheduleRequest &request, const char *alternative) {
  if (request.chunks != 1)
    return makeError(request.name + " runs one chunk per rank (V = 1), got V = " +
                     std::to_string(request.chunks) + "; set V = 1, or " + alternative);
  return Ok{};
}

namespace {
constexpr const char *kInterleavedInstead = "use interleaved-1f1b for V >= 2";
} // namespace

Status checkNaive(const ScheduleRequest &request) {
  return requireSingleChunk(request, kInterleavedInstead);
}
Status checkGpipe(const ScheduleRequest &request) {
  return requireSingleChunk(request, kInterleavedInstead);
}
Status checkOneFOneB(const ScheduleRequest &request) {
  return requireSingleChunk(request, kInterleavedInstead);
}

// Naive: each rank alternates F(m), B(m); since F(r, m+1) on rank 0 waits behind B(0, m), which
// waits for the whole round trip of microbatch m, only one microbatch is in the pipe at a time.
RankOps naive(const ScheduleRequest &request, const Placement &placement) {
  RankOps ranks(static_cast<std::size_t>(placement.pp));
  for (int r = 0; r < placement.pp; ++r) {
    auto &ops = ranks[static_cast<std::size_t>(r)];
    ops.reserve(2 * static_cast<std::size_t>(request.microbatches));
    for (int m = 0; m < request.microbatches; ++m) {
      ops.push_back(forwardOp(r, m));
      ops.push_back(fullBackwardOp(r, m));
    }
  }
  return ranks;
}

// GPipe (Huang et al. 2019): all forwards (fill), then all backwards (drain), microbatches in
// order as PyTorch's ScheduleGPipe runs them.
RankOps gpipe(const ScheduleRequest &request, const Placement &placement) {
  RankOps ranks(static_cast<std::size_t>(placement.pp));
  for (int r = 0; r < placement.pp; ++r) {
    auto &ops = ranks[static_cast<std::size_t>(r)];
    ops.reserve(2 * static_cast<std::size_t>(request.microbatches));
    for (int m = 0; m < request.microbatches; ++m)
      ops.push_back(forwardOp(r, m));
    for (int m = 0; m < request.microbatches; ++m)
      ops.push_back(fullBackwardOp(r, m));
  }
  return ranks;
}

// 1F1B (PipeDream-Flush, Narayanan et al. 2021) in three phases per rank r:
//   warm-up:   min(P-1-r, M) forwards
//   steady:    M - warm-up pairs of one forward then one backward
//   cool-down: the remaining warm-up backwards
// Rank r therefore holds at most min(P-r, M) activations.
RankOps oneFOneB(const ScheduleRequest &request, const Placement &placement) {
  const int pp = placement.pp;
  const int microbatches = request.microbatches;
  RankOps ranks(static_cast<std::size_t>(pp));
  for (int r = 0; r < pp; ++r) {
    auto &ops = ranks[static_cast<std::size_t>(r)];
    ops.reserve(2 * static_cast<std::size_t>(microbatches));
    const int warmup = std::min(pp - 1 - r, microbatches);
    for (int m = 0; m < warmup; ++m)
      ops.push_back(forwardOp(r, m));
    for (int i = 0; i < microbatches - warmup; ++i) {
      ops.push_back(forwardOp(r, warmup + i));
      ops.push_back(fullBackwardOp(r, i));
    }
    for (int m = microbatches - warmup; m < microbatches; ++m)
      ops.push_back(fullBackwardOp(r, m));
  }
  return ranks;
}

} // namespace pipescope::generators
