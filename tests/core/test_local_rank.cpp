// The GPU a rank drives comes from its local rank, as the launcher states it
// (core/local_rank.h): Open MPI's variable first, then Slurm's, then MPICH's;
// nothing usable set gives nullopt (MpiRuntime then asks MPI).
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "core/local_rank.h"

namespace gpuledger {
namespace {

std::optional<int64_t> with_env(const std::map<std::string, std::string>& env) {
  return local_rank_from_env([&](const char* name) -> const char* {
    const auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  });
}

TEST(LocalRank, OpenMpiSlurmAndHydraVariables) {
  EXPECT_EQ(with_env({{"OMPI_COMM_WORLD_LOCAL_RANK", "3"}}), 3);
  EXPECT_EQ(with_env({{"SLURM_LOCALID", "5"}}), 5);
  EXPECT_EQ(with_env({{"MPI_LOCALRANKID", "2"}}), 2);
  // mpirun inside a Slurm job: Open MPI's own count of its ranks wins over the
  // batch step's SLURM_LOCALID (0 for the batch script).
  EXPECT_EQ(with_env({{"OMPI_COMM_WORLD_LOCAL_RANK", "1"}, {"SLURM_LOCALID", "0"}}), 1);
  EXPECT_EQ(with_env({{"SLURM_LOCALID", "4"}, {"MPI_LOCALRANKID", "7"}}), 4);
}

TEST(LocalRank, TheWorldRankIsNeverUsed) {
  // Rank 9 of a job placed by node, 8 a node: local rank 1, not 9 mod anything.
  EXPECT_EQ(with_env({{"OMPI_COMM_WORLD_RANK", "9"}, {"OMPI_COMM_WORLD_LOCAL_RANK", "1"}}), 1);
  EXPECT_EQ(with_env({{"OMPI_COMM_WORLD_RANK", "9"}, {"SLURM_PROCID", "9"}}), std::nullopt);
}

TEST(LocalRank, UnsetEmptyOrMalformedIsNone) {
  EXPECT_EQ(with_env({}), std::nullopt);
  EXPECT_EQ(with_env({{"OMPI_COMM_WORLD_LOCAL_RANK", ""}}), std::nullopt);
  EXPECT_EQ(with_env({{"SLURM_LOCALID", "-1"}}), std::nullopt);
  EXPECT_EQ(with_env({{"SLURM_LOCALID", "two"}}), std::nullopt);
  // A malformed first variable falls through to the next one that is set.
  EXPECT_EQ(with_env({{"OMPI_COMM_WORLD_LOCAL_RANK", "x"}, {"SLURM_LOCALID", "6"}}), 6);
}

TEST(LocalRank, GpuIsTheLocalRankModuloTheVisibleGpus) {
  EXPECT_EQ(gpu_for_local_rank(0, 8), 0);
  EXPECT_EQ(gpu_for_local_rank(7, 8), 7);
  EXPECT_EQ(gpu_for_local_rank(9, 8), 1);  // more ranks than GPUs on the node: they share
  // srun --gpus-per-task=1: each rank sees one GPU (CUDA_VISIBLE_DEVICES), its GPU 0.
  EXPECT_EQ(gpu_for_local_rank(3, 1), 0);
  EXPECT_EQ(gpu_for_local_rank(-1, 4), 0);
}

}  // namespace
}  // namespace gpuledger
