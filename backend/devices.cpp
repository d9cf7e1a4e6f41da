#include "backend/devices.h"

#include <algorithm>
#include <vector>

#include "backend/clock.h"
#include "backend/cpu_speed.h"
#ifdef PIPESCOPE_HAVE_MPI
#include "backend/cpu_device.h"
#include "backend/mpi_channel.h"
#endif
#include "kernels/cpu_gemm.h"
#ifdef PIPESCOPE_HAVE_CUDA
#include "backend/cuda_device.h"
#endif

namespace pipescope::backend {

namespace {

[[maybe_unused]] Error builtWithoutCuda(DeviceKind kind) {
  return makeError("--device " + deviceKindName(kind) +
                   ": this pipescope-backend was built without CUDA (the configure step found no "
                   "CUDA toolkit or no NCCL); use --device cpu, or rebuild where both exist");
}

Result<double> checkCpuKernels() {
  using kernels::Transpose;
  double worst = 0;
  const int m = 37, n = 45, k = 53; // odd sizes cross the blocking edges
  std::vector<float> a(static_cast<std::size_t>(m) * k), b(static_cast<std::size_t>(k) * n);
  for (std::size_t i = 0; i < a.size(); ++i)
    a[i] = static_cast<float>((i * 7919) % 200) / 100.0f - 1.0f;
  for (std::size_t i = 0; i < b.size(); ++i)
    b[i] = static_cast<float>((i * 104729) % 200) / 100.0f - 1.0f;
  for (int variant = 0; variant < 4; ++variant) {
    const Transpose ta = variant & 1 ? Transpose::Yes : Transpose::No;
    const Transpose tb = variant & 2 ? Transpose::Yes : Transpose::No;
    const int lda = ta == Transpose::Yes ? m : k, ldb = tb == Transpose::Yes ? k : n;
    std::vector<float> got(static_cast<std::size_t>(m) * n, 1.0f), want = got;
    kernels::gemm(ta, tb, m, n, k, 0.5f, a.data(), lda, b.data(), ldb, 0.25f, got.data(), n);
    kernels::gemmReference(ta, tb, m, n, k, 0.5f, a.data(), lda, b.data(), ldb, 0.25f, want.data(),
                           n);
    worst = std::max(worst, kernels::maxRelativeError(got.data(), want.data(), got.size()));
  }
  if (!(worst < 1e-4))
    return makeError("CPU GEMM check: the blocked GEMM differs from the reference by " +
                     std::to_string(worst));
  return worst;
}

} // namespace

Status checkDeviceAvailable(DeviceKind kind, int local_rank) {
#ifdef PIPESCOPE_HAVE_MPI
  if (kind == DeviceKind::Cpu) return Ok{};
#else
  if (kind == DeviceKind::Cpu) return makeError(std::string("--device cpu: ") + kBuiltWithoutMpi);
#endif
#ifdef PIPESCOPE_HAVE_CUDA
  return checkCudaAvailable(local_rank);
#else
  (void)local_rank;
  return builtWithoutCuda(kind);
#endif
}

Result<DeviceSpeed> measureDeviceSpeed(DeviceKind kind, int local_rank, int stages) {
  if (kind == DeviceKind::Cpu) return measureCpuSpeed();
#ifdef PIPESCOPE_HAVE_CUDA
  if (kind == DeviceKind::SharedGpu && stages > 1)
    return measureSharedGpuStageSpeed(local_rank, stages);
  return measureCudaSpeed(local_rank);
#else
  (void)local_rank;
  (void)stages;
  return builtWithoutCuda(kind);
#endif
}

Result<DeviceSpeed> refineSpeedForModel(DeviceKind kind, const Plan &plan,
                                        const Evaluation &evaluation,
                                        const ModelDerivation &derivation, DeviceSpeed speed) {
  // GPUs run models at full size; only the cpu device picks a size automatically.
  if (kind != DeviceKind::Cpu || !plan.model) return speed;
  for (int round = 0; round < 2; ++round) {
    auto workload = planWorkload(plan, evaluation, derivation, kind, 0, speed);
    if (!workload) return workload.error();
    const kernels::StageWork *largest = &workload->stages.front();
    for (const auto &work : workload->stages)
      if (work.forwardFlops() > largest->forwardFlops()) largest = &work;
    auto us = timeCpuForward(*largest);
    if (!us) return us.error();
    speed.flops_per_us = largest->forwardFlops() / std::max(1.0, *us);
  }
  return speed;
}

Result<double> checkDeviceKernels(DeviceKind kind, int local_rank) {
  if (kind == DeviceKind::Cpu) return checkCpuKernels();
#ifdef PIPESCOPE_HAVE_CUDA
  return checkCudaDeviceKernels(local_rank);
#else
  (void)local_rank;
  return builtWithoutCuda(kind);
#endif
}

Result<std::vector<std::unique_ptr<Device>>> createDevices(DeviceKind kind,
                                                           const std::vector<RankSetup> &setups,
                                                           ControlChannel &channel,
                                                           MpiChannel *mpi) {
  std::vector<std::unique_ptr<Device>> devices;
  switch (kind) {
  case DeviceKind::Cpu: {
#ifdef PIPESCOPE_HAVE_MPI
    if (!mpi)
      return makeError("--device cpu needs MPI between its processes: launch with mpirun or srun "
                       "(torchrun-style launches run --device cuda)");
    auto device = createCpuDevice(setups.front(), *mpi);
    if (!device) return device.error();
    devices.push_back(std::move(*device));
    return devices;
#else
    (void)mpi;
    return makeError(kBuiltWithoutMpi);
#endif
  }
  case DeviceKind::Cuda:
  case DeviceKind::SharedGpu:
#ifdef PIPESCOPE_HAVE_CUDA
    if (kind == DeviceKind::Cuda) {
      auto device = createCudaDevice(setups.front(), channel);
      if (!device) return device.error();
      devices.push_back(std::move(*device));
      return devices;
    }
    return createSharedGpuDevices(setups);
#else
    (void)channel;
    return builtWithoutCuda(kind);
#endif
  }
  return makeError("unknown device");
}

double timingOverheadMicroseconds(DeviceKind kind) {
  if (kind != DeviceKind::Cpu) {
#ifdef PIPESCOPE_HAVE_CUDA
    return cudaTimingOverheadMicroseconds();
#else
    return 0;
#endif
  }
  // Two clock reads per op.
  const int reads = 10000;
  const double start = nowMicroseconds();
  volatile double last = 0; // keeps the reads from being optimized away
  for (int i = 0; i < reads; ++i)
    last = nowMicroseconds();
  (void)last;
  return 2 * (nowMicroseconds() - start) / reads;
}

nlohmann::json listDevices() {
#ifdef PIPESCOPE_HAVE_MPI
  nlohmann::json out = {{"event", "devices"}, {"cpu", true}, {"mpi_built", true}};
#else
  nlohmann::json out = {{"event", "devices"}, {"cpu", false}, {"mpi_built", false}};
#endif
#ifdef PIPESCOPE_HAVE_CUDA
  out["cuda_built"] = true;
  out.update(describeCudaDevices());
#else
  out["cuda_built"] = false;
  out["gpus"] = 0;
#endif
  return out;
}

} // namespace pipescope::backend
