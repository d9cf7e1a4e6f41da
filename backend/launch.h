#pragma once
// How the processes of a run were started: Open MPI's or MPICH's mpirun, Slurm's srun, torchrun,
// or a single process. Read from the environment each launcher sets, before MPI is initialized, so
// that a torchrun launch does not start MPI at all.
#include <string>

namespace pipescope::backend {

enum class Launcher { Single, Mpirun, Slurm, Torchrun };

struct LaunchEnvironment {
  Launcher launcher = Launcher::Single;
  int rank = 0; ///< as the launcher numbers the processes (MPI's own numbering wins)
  int world_size = 1;
  int local_rank = 0;      ///< position on this node: which GPU this rank takes
  std::string master_addr; ///< torchrun: MASTER_ADDR
  int master_port = 0;     ///< torchrun: MASTER_PORT

  std::string name() const; ///< "mpirun", "srun", "torchrun", "single process"
  /// Whether the processes talk through MPI (mpirun, srun) or not (torchrun, single process).
  bool usesMpi() const { return launcher == Launcher::Mpirun || launcher == Launcher::Slurm; }
};

/// Reads OMPI_COMM_WORLD_* / PMI_* / PMIX_RANK (mpirun), SLURM_PROCID / SLURM_STEP_NUM_TASKS /
/// SLURM_LOCALID (srun) and RANK / WORLD_SIZE / LOCAL_RANK / MASTER_ADDR / MASTER_PORT
/// (torchrun), in that order of precedence (mpirun inside a Slurm allocation sets both).
LaunchEnvironment detectLaunch();

} // namespace pipescope::backend
