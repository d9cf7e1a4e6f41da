#include "backend/clock_sync.h"

#include <unistd.h>

#include <fstream>
#include <limits>

#include "backend/clock.h"

namespace pipescope::backend {

std::string clockDomainId() {
  std::ifstream boot_id("/proc/sys/kernel/random/boot_id");
  std::string id;
  if (boot_id && std::getline(boot_id, id) && !id.empty()) return id;
  char name[256] = "?";
  gethostname(name, sizeof name - 1);
  return name;
}

Result<ClockDomains> findClockDomains(ControlChannel &channel, double timeout_s) {
  const std::string mine = clockDomainId();
  auto all = channel.gather(std::vector<double>(mine.begin(), mine.end()), timeout_s);
  if (!all) return all.error();
  ClockDomains domains;
  std::vector<char> root(mine.begin(), mine.end());
  if (auto status = channel.broadcast(root, timeout_s); !status) return status.error();
  domains.this_rank_shares_root_clock = std::string(root.begin(), root.end()) == mine;
  if (channel.rank() == 0)
    for (const auto &values : *all)
      domains.shares_root_clock.push_back(
          static_cast<char>(values == std::vector<double>(mine.begin(), mine.end())));
  return domains;
}

Result<ClockAlignment> alignClocks(ControlChannel &channel, const ClockDomains &domains,
                                   double timeout_s, int rounds) {
  ClockAlignment alignment;
  const int size = channel.size();
  if (channel.rank() != 0) {
    if (domains.this_rank_shares_root_clock) return alignment;
    for (int round = 0; round < rounds; ++round) {
      auto ping = channel.receiveFrom(0, timeout_s);
      if (!ping) return ping.error();
      if (auto s = channel.sendTo(0, {nowMicroseconds()}, timeout_s); !s) return s.error();
    }
    return alignment;
  }
  alignment.offsets_us.assign(static_cast<std::size_t>(size), 0.0);
  for (int peer = 1; peer < size; ++peer) {
    if (static_cast<std::size_t>(peer) < domains.shares_root_clock.size() &&
        domains.shares_root_clock[static_cast<std::size_t>(peer)])
      continue; // the same clock: offset 0, exactly
    double best_round_trip = std::numeric_limits<double>::infinity();
    for (int round = 0; round < rounds; ++round) {
      const double sent = nowMicroseconds();
      if (auto s = channel.sendTo(peer, {sent}, timeout_s); !s) return s.error();
      auto reply = channel.receiveFrom(peer, timeout_s);
      if (!reply) return reply.error();
      const double received = nowMicroseconds();
      if (reply->empty()) return makeError("rank " + std::to_string(peer) + " sent no time");
      const double round_trip = received - sent;
      if (round_trip < best_round_trip) {
        best_round_trip = round_trip;
        alignment.offsets_us[static_cast<std::size_t>(peer)] =
            reply->front() - 0.5 * (sent + received);
      }
    }
    alignment.error_us = std::max(alignment.error_us, 0.5 * best_round_trip);
  }
  return alignment;
}

} // namespace pipescope::backend
