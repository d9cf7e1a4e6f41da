#pragma once
// Aligning the ranks' clocks to rank 0's.
// - Ranks on rank 0's host read the same clock (steady_clock is CLOCK_MONOTONIC, one per booted
//   kernel, recognized by its boot id): their offset is exactly 0.
// - Other ranks: Cristian's algorithm (F. Cristian, "Probabilistic clock synchronization",
//   Distributed Computing 3, 1989): rank 0 sends its time, the rank answers with its own, and with
//   round-trip time d the rank's offset is known to within ±d/2. The best of several rounds is
//   kept; that half round trip is the error bound the trace reports.
#include <string>
#include <vector>

#include "backend/control_channel.h"

namespace pipescope::backend {

struct ClockAlignment {
  /// Rank 0 only: per rank, its clock minus rank 0's (subtract to get rank 0's time).
  std::vector<double> offsets_us;
  /// Rank 0 only: the largest error bound over the ranks.
  double error_us = 0;
};

/// Which ranks share rank 0's clock, learned once per run (collective).
struct ClockDomains {
  std::vector<char> shares_root_clock; ///< rank 0 only: per rank
  bool this_rank_shares_root_clock = true;
};

/// The identity of this host's monotonic clock: the kernel's boot id (or the host name).
std::string clockDomainId();

/// Collective: gathers every rank's clock domain on rank 0 and tells each rank its own answer.
Result<ClockDomains> findClockDomains(ControlChannel &channel, double timeout_s);

/// Collective. `rounds` ping-pongs with each rank on another host; bounded by timeout_s.
Result<ClockAlignment> alignClocks(ControlChannel &channel, const ClockDomains &domains,
                                   double timeout_s, int rounds = 8);

} // namespace pipescope::backend
