// MpiRuntime: MPI's lifetime for one process (RAII), the world's rank, size and
// host, and the two world-wide exchanges the harness needs around failures and
// reports:
//   agree_status   every rank learns whether any rank failed, and the failing
//                  rank's message, before the next collective: a rank that
//                  skips a collective its peers enter hangs them (docs/architecture.md "Errors";
//                  nccl-tests' Allreduce of wrongElts);
//   gather_strings rank 0 collects one string per rank (the per-rank JSON records).
// Built only with MPI.
#pragma once
#include <mpi.h>

#include <cstdint>
#include <string>
#include <vector>

namespace gpuledger {

class MpiRuntime {
 public:
  // Calls MPI_Init_thread (MPI_THREAD_FUNNELED: only the main thread calls MPI)
  // unless MPI is already initialised, then sets MPI_ERRORS_RETURN on
  // MPI_COMM_WORLD so that MPI_CHECK sees errors (instead of MPI aborting),
  // and error_origin().rank (core/check.h) to the world rank.
  MpiRuntime(int* argc = nullptr, char*** argv = nullptr);
  // MPI_Finalize, only if this object initialised MPI.
  ~MpiRuntime();
  MpiRuntime(const MpiRuntime&) = delete;
  MpiRuntime& operator=(const MpiRuntime&) = delete;

  int64_t world_rank() const { return world_rank_; }
  int64_t world_size() const { return world_size_; }
  const std::string& hostname() const { return hostname_; }
  // The rank among this node's ranks (core/local_rank.h): the launcher's
  // variable, else the rank in MPI_Comm_split_type(MPI_COMM_TYPE_SHARED) —
  // collective over the world the first time, so every rank calls it together.
  int64_t local_rank();
  bool initialised_here() const { return initialised_here_; }

 private:
  bool initialised_here_ = false;
  int64_t world_rank_ = 0, world_size_ = 1;
  int64_t local_rank_ = -1;  // -1: not looked up yet
  std::string hostname_;
};

struct AgreedStatus {
  bool all_ok = true;
  int64_t failed_ranks = 0;        // how many ranks reported a failure
  int64_t first_failed_rank = -1;  // the lowest failing rank of `comm`; -1 when all ok
  std::string error;               // that rank's message; empty when all ok
};

// Collective over `comm`: every rank calls it, failed or not, and every rank
// returns the same AgreedStatus. Two all-reduces (MIN of (ok, failing rank),
// SUM of failures), then, only if a rank failed, that rank broadcasts its message.
AgreedStatus agree_status(bool ok, const std::string& error, MPI_Comm comm = MPI_COMM_WORLD);

// Collective over `comm`: rank 0 returns every rank's string in rank order
// (MPI_Allgather of the sizes, so that every rank checks the total the same
// way, then MPI_Gatherv of the bytes); other ranks return {}.
std::vector<std::string> gather_strings(const std::string& mine, MPI_Comm comm = MPI_COMM_WORLD);

}  // namespace gpuledger
