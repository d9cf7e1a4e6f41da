#include "backend/launch.h"

#include <cstdlib>
#include <optional>
#include <string>

namespace pipescope::backend {

namespace {

std::optional<int> integerVariable(const char *name) {
  const char *value = std::getenv(name);
  if (!value || !*value) return std::nullopt;
  char *end = nullptr;
  const long parsed = std::strtol(value, &end, 10);
  if (*end != '\0' || parsed < 0 || parsed > (1 << 24)) return std::nullopt;
  return static_cast<int>(parsed);
}

std::string textVariable(const char *name) {
  const char *value = std::getenv(name);
  return value ? value : "";
}

} // namespace

std::string LaunchEnvironment::name() const {
  switch (launcher) {
  case Launcher::Mpirun: return "mpirun";
  case Launcher::Slurm: return "srun";
  case Launcher::Torchrun: return "torchrun";
  case Launcher::Single: break;
  }
  return "single process";
}

LaunchEnvironment detectLaunch() {
  LaunchEnvironment env;
  const auto take = [&env](Launcher launcher, std::optional<int> rank, std::optional<int> size,
                           std::optional<int> local) {
    env.launcher = launcher;
    env.rank = rank.value_or(0);
    env.world_size = size.value_or(1);
    env.local_rank = local.value_or(0);
  };
  if (auto rank = integerVariable("OMPI_COMM_WORLD_RANK")) {
    take(Launcher::Mpirun, rank, integerVariable("OMPI_COMM_WORLD_SIZE"),
         integerVariable("OMPI_COMM_WORLD_LOCAL_RANK"));
  } else if (auto pmi = integerVariable("PMI_RANK")) { // MPICH / Intel MPI (Hydra)
    take(Launcher::Mpirun, pmi, integerVariable("PMI_SIZE"), integerVariable("MPI_LOCALRANKID"));
  } else if (auto pmix = integerVariable("PMIX_RANK")) {
    take(Launcher::Mpirun, pmix, integerVariable("OMPI_COMM_WORLD_SIZE"),
         integerVariable("OMPI_COMM_WORLD_LOCAL_RANK"));
  } else if (auto task = integerVariable("SLURM_PROCID");
             task && integerVariable("SLURM_STEP_NUM_TASKS")) {
    // SLURM_STEP_NUM_TASKS exists only inside an srun job step, not in the batch script itself.
    take(Launcher::Slurm, task, integerVariable("SLURM_STEP_NUM_TASKS"),
         integerVariable("SLURM_LOCALID"));
  } else if (auto rank = integerVariable("RANK"); rank && integerVariable("WORLD_SIZE")) {
    take(Launcher::Torchrun, rank, integerVariable("WORLD_SIZE"), integerVariable("LOCAL_RANK"));
    env.master_addr = textVariable("MASTER_ADDR");
    env.master_port = integerVariable("MASTER_PORT").value_or(0);
  }
  return env;
}

} // namespace pipescope::backend
