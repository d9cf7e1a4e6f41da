#pragma once
// The cpu device: one MPI process per rank, real fp32 GEMMs on the CPU (kernels/cpu_stage.h; it
// never sleeps in place of compute), activations and gradients moved with MPI_Isend/MPI_Irecv of
// the real buffers, the TP all-reduces inside the layers and the DP gradient all-reduce at the end
// of the step as MPI collectives. Runs on every machine; the test suite uses it.
#include <memory>
#include <string>

#include "backend/device.h"
#include "backend/mpi_channel.h"
#include "backend/workload.h"

namespace pipescope::backend {

/// Builds the rank's stages and communicators (collective over the world: every rank calls it).
Result<std::unique_ptr<Device>> createCpuDevice(const RankSetup &setup, MpiChannel &channel);

/// The CPU's model name from /proc/cpuinfo ("unknown CPU" when it says none).
std::string cpuModelName();

/// Times the CPU's GEMMs: the unit GEMM of plans without a model and the rate for sizing models.
DeviceSpeed measureCpuSpeed();

/// Time of one forward of a stage on this CPU (the best of two), to refine the automatic size.
Result<double> timeCpuForward(const kernels::StageWork &work);

} // namespace pipescope::backend
