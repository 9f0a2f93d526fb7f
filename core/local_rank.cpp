// The local rank from the launcher's environment (see local_rank.h).
#include "core/local_rank.h"

#include <cstdlib>
#include <string>

namespace gpuledger {

std::optional<int64_t> local_rank_from_env(const EnvLookup& getenv) {
  for (const char* name : {"OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID", "MPI_LOCALRANKID"}) {
    const char* v = getenv(name);
    if (!v || !*v) continue;
    const std::string s(v);
    if (s.find_first_not_of("0123456789") != std::string::npos || s.size() > 9) continue;
    return std::stoll(s);
  }
  return std::nullopt;
}

std::optional<int64_t> local_rank_from_env() {
  return local_rank_from_env([](const char* name) { return static_cast<const char*>(std::getenv(name)); });
}

int gpu_for_local_rank(int64_t local_rank, int gpu_count) {
  if (gpu_count <= 0 || local_rank < 0) return 0;
  return static_cast<int>(local_rank % gpu_count);
}

}  // namespace gpuledger
