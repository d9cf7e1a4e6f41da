#include "backend/cpu_speed.h"

#include <algorithm>
#include <fstream>
#include <new>
#include <vector>

#include "backend/clock.h"
#include "kernels/cpu_gemm.h"
#include "kernels/cpu_stage.h"

namespace pipescope::backend {

std::string cpuModelName() {
  std::ifstream info("/proc/cpuinfo");
  std::string line;
  while (std::getline(info, line))
    if (line.rfind("model name", 0) == 0) {
      const auto colon = line.find(':');
      if (colon != std::string::npos) return line.substr(colon + 2);
    }
  return "unknown CPU";
}

DeviceSpeed measureCpuSpeed() {
  using kernels::Transpose;
  DeviceSpeed speed;
  // The best of 5 trials of about 10 ms each, after one untimed GEMM: every op of the run is
  // sized from these numbers, so a trial slowed by a clock ramp or a busy neighbour must not set
  // them (on 2 vCPUs that share a core, the other rank's start-up slows this one's GEMMs).
  const auto time_gemm = [](int n) {
    std::vector<float> a(static_cast<std::size_t>(n) * n, 0.5f), b(a.size(), 0.25f), c(a.size());
    const auto once = [&] {
      kernels::gemm(Transpose::No, Transpose::No, n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f,
                    c.data(), n);
    };
    const double first = nowMicroseconds();
    once();
    const int repeats =
        std::clamp(static_cast<int>(1e4 / std::max(1.0, nowMicroseconds() - first)), 1, 4096);
    double best = 1e300;
    for (int trial = 0; trial < 5; ++trial) {
      const double start = nowMicroseconds();
      for (int i = 0; i < repeats; ++i)
        once();
      best = std::min(best, (nowMicroseconds() - start) / repeats);
    }
    return best;
  };
  speed.unit = 64;
  speed.unit_gemm_us = std::max(1e-3, time_gemm(speed.unit));
  const int n = 256;
  speed.flops_per_us = 2.0 * n * n * n / std::max(1e-3, time_gemm(n));
  return speed;
}

Result<double> timeCpuForward(const kernels::StageWork &work) {
  try {
    kernels::CpuStage stage(work, 1);
    std::vector<float> output(stage.activationElements());
    double best = 1e300;
    for (int trial = 0; trial < 2; ++trial) {
      const double start = nowMicroseconds();
      stage.forward(nullptr, output.data(), {});
      best = std::min(best, nowMicroseconds() - start);
    }
    return best;
  } catch (const std::bad_alloc &) {
    return makeError("not enough memory to size the work; give a smaller --size-scale");
  }
}

} // namespace pipescope::backend
