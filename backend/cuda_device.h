#pragma once
// The GPU devices (built only with CUDA and NCCL, PIPESCOPE_HAVE_CUDA):
// - cuda: one rank per GPU (its local rank picks the GPU); NCCL communicators split per mesh group
//   (TP, DP) and one two-rank communicator per direction of every pipeline link, so each link's
//   sends and receives are matched in one order and a pre-posted receive never blocks other
//   traffic; bf16 cuBLAS stages; an overlapped F&B pair's halves on two streams at once (the
//   backward's TP all-reduces on a second TP communicator); device events around every op;
//   non-blocking communicators that are aborted when a step makes no progress within the timeout
//   or NCCL reports an error.
// - gpu-shared: all P stages of one pipeline on one GPU, a thread and a stream per stage, each
//   stream in a green context holding its share of the SMs where the driver has them (the trace's
//   device line says which), transfers as device-to-device copies.
#include <memory>

#include <cuda_runtime_api.h>
#include <vector>

#include <nlohmann/json.hpp>

#include "backend/control_channel.h"
#include "backend/device.h"
#include "backend/workload.h"

namespace pipescope::backend {

Status checkCudaAvailable(int local_rank);
Result<DeviceSpeed> measureCudaSpeed(int local_rank);
/// The unit-GEMM rate on `stream` (a stage's stream: its green context decides the SMs, and
/// `sm_count_target` tells the GEMM tuning how many there are; 0: the whole GPU).
Result<DeviceSpeed> measureCudaSpeedOn(cudaStream_t stream, int sm_count_target = 0);
/// gpu-shared: the rate of one stage's partition (1/stages of the SMs, in a green context, the
/// others idle), which is what each stage computes on; the whole GPU without green contexts.
Result<DeviceSpeed> measureSharedGpuStageSpeed(int local_rank, int stages);
Result<double> checkCudaDeviceKernels(int local_rank);
Result<std::unique_ptr<Device>> createCudaDevice(const RankSetup &setup, ControlChannel &channel);
Result<std::vector<std::unique_ptr<Device>>>
createSharedGpuDevices(const std::vector<RankSetup> &setups);
double cudaTimingOverheadMicroseconds();
/// "gpus", their names, the driver version, whether green contexts are available.
nlohmann::json describeCudaDevices();

} // namespace pipescope::backend
