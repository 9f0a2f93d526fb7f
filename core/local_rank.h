// Which GPU a rank drives: its rank among the ranks of its own node (the local
// rank), never its world rank modulo the GPUs — with 8 GPUs a node and ranks
// placed by node, world rank 9 is local rank 1 on the second node, but with
// ranks placed round-robin over nodes (mpirun --map-by node) world rank 1 is
// local rank 0 on the second node, and a modulo would put two ranks of one node
// on one GPU. The launcher says it:
//   OMPI_COMM_WORLD_LOCAL_RANK   Open MPI's mpirun
//   SLURM_LOCALID                srun (any MPI)
//   MPI_LOCALRANKID              MPICH's Hydra
// and without any of them MpiRuntime::local_rank() asks MPI itself
// (MPI_Comm_split_type(MPI_COMM_TYPE_SHARED), MPI 3.0 §6.4.2).
#pragma once
#include <cstdint>
#include <functional>
#include <optional>

namespace gpuledger {

using EnvLookup = std::function<const char*(const char*)>;

// The local rank the launcher's environment gives (looked up in the order
// above), or nullopt when none is set to a whole number >= 0.
std::optional<int64_t> local_rank_from_env(const EnvLookup& getenv);
std::optional<int64_t> local_rank_from_env();  // the process's own environment

// The GPU of a rank: its local rank modulo the GPUs it sees (with
// CUDA_VISIBLE_DEVICES narrowed to one GPU per rank, as srun --gpus-per-task
// does, every rank sees one GPU, GPU 0).
int gpu_for_local_rank(int64_t local_rank, int gpu_count);

}  // namespace gpuledger
