#pragma once
// What the backend measures of the CPU itself, with or without MPI: its name, its GEMM rate (to
// size the cpu device's work) and the time of one stage forward (to refine a model's size).
#include <string>

#include "backend/workload.h"
#include "kernels/stage_work.h"

namespace pipescope::backend {

/// The CPU's model name from /proc/cpuinfo ("unknown CPU" when it says none).
std::string cpuModelName();

/// One n×n×n fp32 GEMM on this core: the best of `batches` timed batches of about `batch_us`
/// each, after an untimed one that warms the caches. `repetitions` receives the batch length.
double timeCpuGemm(int n, double batch_us, int batches, int *repetitions = nullptr);

/// Times the CPU's GEMMs: the unit GEMM of plans without a model and the rate for sizing models.
DeviceSpeed measureCpuSpeed();

/// Time of one forward of a stage on this CPU (the best of two), to refine the automatic size.
Result<double> timeCpuForward(const kernels::StageWork &work);

} // namespace pipescope::backend
