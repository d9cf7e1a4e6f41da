#pragma once
// The cpu device: one MPI process per rank, real fp32 GEMMs on the CPU (kernels/cpu_stage.h; it
// never sleeps in place of compute), activations and gradients moved with MPI_Isend/MPI_Irecv of
// the real buffers, the TP all-reduces inside the layers and the DP gradient all-reduce at the end
// of the step as MPI collectives. Runs on every machine with MPI; the test suite uses it.
// (cpu_speed.h: the CPU timings the backend needs with or without MPI.)
#include <memory>

#include "backend/device.h"
#include "backend/mpi_channel.h"

namespace pipescope::backend {

/// Builds the rank's stages and communicators (collective over the world: every rank calls it).
Result<std::unique_ptr<Device>> createCpuDevice(const RankSetup &setup, MpiChannel &channel);

} // namespace pipescope::backend
