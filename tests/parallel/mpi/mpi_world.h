// This MPI test job's rank and size in MPI_COMM_WORLD, for the tests of this
// folder (their main has initialised MPI). Each call is checked: a test must
// not run on with a rank or size it could not read.
#pragma once
#include <mpi.h>

#include <stdexcept>

namespace gpuledger::testing {

inline int world_rank() {
  int rank = 0;
  if (MPI_Comm_rank(MPI_COMM_WORLD, &rank) != MPI_SUCCESS) throw std::runtime_error("MPI_Comm_rank(world) failed");
  return rank;
}

inline int world_size() {
  int size = 0;
  if (MPI_Comm_size(MPI_COMM_WORLD, &size) != MPI_SUCCESS) throw std::runtime_error("MPI_Comm_size(world) failed");
  return size;
}

}  // namespace gpuledger::testing
