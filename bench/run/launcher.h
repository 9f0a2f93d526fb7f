// Whether an MPI launcher (mpirun, mpiexec, srun) started this process: its
// environment names the process's rank or the job's size.
#pragma once
#include <cstdlib>

namespace gpuledger::run {

inline bool launched_by_mpi_launcher() {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "SLURM_PROCID"})
    if (std::getenv(v)) return true;
  return false;
}

}  // namespace gpuledger::run
