#pragma once
// The control channel for torchrun-style launches (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT)
// without MPI: a star of TCP connections to rank 0. torchrun's agent already serves its own store
// on MASTER_PORT, so the backend listens on MASTER_PORT + 1 unless PIPESCOPE_RENDEZVOUS_PORT names
// another port. Only the cuda device runs this way (its data moves through NCCL).
#include <memory>
#include <string>
#include <vector>

#include "backend/control_channel.h"

namespace pipescope::backend {

/// Connects the star (rank 0 accepts world_size - 1 connections). Bounded by timeout_s.
Result<std::unique_ptr<ControlChannel>> connectTcpChannel(int rank, int world_size,
                                                          const std::string &master_addr, int port,
                                                          double timeout_s);

} // namespace pipescope::backend
