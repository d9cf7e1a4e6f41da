#pragma once
// The host clock every rank times against: steady_clock (CLOCK_MONOTONIC on Linux), which all
// processes of one host share, in microseconds as a double.
#include <chrono>
#include <ctime>

namespace pipescope::backend {

inline double nowMicroseconds() {
  return std::chrono::duration<double, std::micro>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

/// CPU time the calling thread has run, in microseconds (CLOCK_THREAD_CPUTIME_ID): what a
/// start-up timing of the cpu device needs, since time the thread spends descheduled (another
/// runnable process on its core: mpirun, a rank still starting) is not the kernel's. Falls back
/// to the wall clock where the platform has no thread CPU clock.
inline double threadCpuMicroseconds() {
#ifdef CLOCK_THREAD_CPUTIME_ID
  timespec now{};
  if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now) == 0)
    return static_cast<double>(now.tv_sec) * 1e6 + static_cast<double>(now.tv_nsec) * 1e-3;
#endif
  return nowMicroseconds();
}

} // namespace pipescope::backend
