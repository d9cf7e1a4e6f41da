#pragma once
// The host clock every rank times against: steady_clock (CLOCK_MONOTONIC on Linux), which all
// processes of one host share, in microseconds as a double.
#include <chrono>

namespace pipescope::backend {

inline double nowMicroseconds() {
  return std::chrono::duration<double, std::micro>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

} // namespace pipescope::backend
