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

double timeCpuGemm(int n, double batch_us, int batches, int *repetitions) {
  using kernels::Transpose;
  std::vector<float> a(static_cast<std::size_t>(n) * n), b(a.size()), c(a.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    a[i] = static_cast<float>(i % 7) * 0.1f - 0.3f;
    b[i] = static_cast<float>(i % 5) * 0.1f - 0.2f;
  }
  const auto once = [&] {
    kernels::gemm(Transpose::No, Transpose::No, n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f,
                  c.data(), n);
  };
  // Thread CPU time, not the wall clock: a batch in which another runnable process shares the
  // core (on a 2-vCPU VM, mpirun or the other rank's start-up beside two ranks) would otherwise
  // time the GEMM up to twice as slow for all its batches, and every op of the run would be
  // sized from that (docs/measurements/cpu.md, the note on its DualPipeV row).
  const double first = threadCpuMicroseconds();
  once();
  const int count = std::clamp(
      static_cast<int>(batch_us / std::max(1.0, threadCpuMicroseconds() - first)), 1, 4096);
  double best = 1e300;
  for (int batch = 0; batch < batches; ++batch) {
    const double start = threadCpuMicroseconds();
    for (int i = 0; i < count; ++i)
      once();
    best = std::min(best, (threadCpuMicroseconds() - start) / count);
  }
  if (repetitions) *repetitions = count;
  return std::max(1e-3, best);
}

DeviceSpeed measureCpuSpeed() {
  // The best of 5 batches of about 10 ms: every op of the run is sized from these numbers, so a
  // batch slowed by a clock ramp or a busy neighbour must not set them (on 2 vCPUs that share a
  // core, the other rank's start-up slows this one's GEMMs).
  DeviceSpeed speed;
  speed.unit = 64;
  speed.unit_gemm_us = timeCpuGemm(speed.unit, 1e4, 5);
  const int n = 256;
  speed.flops_per_us = 2.0 * n * n * n / timeCpuGemm(n, 1e4, 5);
  return speed;
}

Result<double> timeCpuForward(const kernels::StageWork &work) {
  try {
    kernels::CpuStage stage(work, 1);
    std::vector<float> output(stage.activationElements());
    double best = 1e300;
    for (int trial = 0; trial < 2; ++trial) { // thread CPU time, as timeCpuGemm
      const double start = threadCpuMicroseconds();
      stage.forward(nullptr, output.data(), {});
      best = std::min(best, threadCpuMicroseconds() - start);
    }
    return best;
  } catch (const std::bad_alloc &) {
    return makeError("not enough memory to size the work; give a smaller --size-scale");
  }
}

} // namespace pipescope::backend
