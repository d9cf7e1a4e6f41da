#pragma once
// Which devices this build has, and making them. The CUDA devices exist only where the configure
// step found the CUDA toolkit and NCCL (PIPESCOPE_HAVE_CUDA), the cpu device only where it found
// MPI (PIPESCOPE_HAVE_MPI); elsewhere asking for them is refused with a message that says so.
#include <memory>
#include <vector>

#include <nlohmann/json.hpp>

#include "backend/control_channel.h"
#include "backend/device.h"
#include "backend/options.h"
#include "backend/workload.h"

namespace pipescope::backend {

class MpiChannel;

/// Why a build without MPI cannot run the cpu device or an mpirun/srun launch, and the fix.
inline constexpr const char *kBuiltWithoutMpi =
    "this pipescope-backend was built without MPI (the configure step found none), so it runs "
    "neither --device cpu nor mpirun/srun launches; install libopenmpi-dev and openmpi-bin and "
    "rebuild, or run --device gpu-shared (one process) or --device cuda under torchrun";

/// Whether this process can use the device at all (cuda: a GPU for its local rank); the error is
/// the one clear message a person sees ("no CUDA GPU is visible ...").
Status checkDeviceAvailable(DeviceKind kind, int local_rank);

/// Times the device's GEMMs (rank 0 calls it; the result is shared). gpu-shared times them in one
/// stage's share of the SMs (`stages` partitions), where each stage's ops run.
Result<DeviceSpeed> measureDeviceSpeed(DeviceKind kind, int local_rank, int stages = 1);

/// Refines rank 0's measured rate for a model plan with an automatic size: the GEMMs of small
/// layers run slower than the large GEMM the rate came from, so a stage of the chosen size is
/// timed and the rate corrected (twice), until the largest op takes about the target time.
Result<DeviceSpeed> refineSpeedForModel(DeviceKind kind, const Plan &plan,
                                        const Evaluation &evaluation,
                                        const ModelDerivation &derivation, DeviceSpeed speed);

/// Checks the device's GEMMs and fused kernels against the naive CPU reference on small sizes.
/// Returns the largest relative error.
Result<double> checkDeviceKernels(DeviceKind kind, int local_rank);

/// Makes the devices of this process: one for cpu and cuda, one per pipeline stage for
/// gpu-shared. Collective for cpu and cuda (communicators are split over the world).
Result<std::vector<std::unique_ptr<Device>>> createDevices(DeviceKind kind,
                                                           const std::vector<RankSetup> &setups,
                                                           ControlChannel &channel,
                                                           MpiChannel *mpi);

/// Time the device adds to each op it times, in microseconds (timer reads, events).
double timingOverheadMicroseconds(DeviceKind kind);

/// What this build and machine can run, for --list-devices.
nlohmann::json listDevices();

} // namespace pipescope::backend
