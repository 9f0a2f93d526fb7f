// MpiRuntime, agree_status and gather_strings (see mpi_runtime.h).
#include "comm/mpi_runtime.h"

#include <climits>
#include <stdexcept>

#include "comm/mpi_check.h"
#include "core/check.h"
#include "core/local_rank.h"

namespace gpuledger {

MpiRuntime::MpiRuntime(int* argc, char*** argv) {
  int initialised = 0;
  MPI_CHECK(MPI_Initialized(&initialised), "checking whether MPI is initialised");
  if (!initialised) {
    int provided = 0;
    // MPI_Init's errors go to MPI_COMM_WORLD's default handler (fatal); the check is for form.
    MPI_CHECK(MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided), "initialising MPI");
    initialised_here_ = true;
  }
  MPI_CHECK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN), "making MPI return errors instead of aborting");
  int rank = 0, size = 1;
  MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &rank), "reading the world rank");
  MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &size), "reading the world size");
  world_rank_ = rank;
  world_size_ = size;
  // Every error this process reports from now on names its world rank (check.h).
  error_origin().rank = rank;
  hostname_ = error_origin().host;
}

int64_t MpiRuntime::local_rank() {
  if (local_rank_ >= 0) return local_rank_;
  if (const auto env = local_rank_from_env()) return local_rank_ = *env;
  MPI_Comm node = MPI_COMM_NULL;
  MPI_CHECK(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node),
            "splitting the world by node to find the local rank");
  int rank = 0;
  MPI_CHECK(MPI_Comm_rank(node, &rank), "reading the rank on this node");
  MPI_CHECK(MPI_Comm_free(&node), "freeing the node communicator");
  return local_rank_ = rank;
}

MpiRuntime::~MpiRuntime() {
  if (!initialised_here_) return;
  int finalised = 0;
  MPI_Finalized(&finalised);
  if (!finalised) MPI_CHECK_NOTHROW(MPI_Finalize(), "finalising MPI");
}

AgreedStatus agree_status(bool ok, const std::string& error, MPI_Comm comm) {
  int rank = 0;
  MPI_CHECK(MPI_Comm_rank(comm, &rank), "reading this rank to agree on a status");
  // MIN over (ok flag, failing rank or INT_MAX): one call gives "all ok?" and the lowest failure.
  int mine[2] = {ok ? 1 : 0, ok ? INT_MAX : rank};
  int agreed[2] = {1, INT_MAX};
  MPI_CHECK(MPI_Allreduce(mine, agreed, 2, MPI_INT, MPI_MIN, comm), "agreeing on the status of every rank");
  AgreedStatus s;
  s.all_ok = agreed[0] == 1;
  if (s.all_ok) return s;

  int failed_mine = ok ? 0 : 1, failed = 0;
  MPI_CHECK(MPI_Allreduce(&failed_mine, &failed, 1, MPI_INT, MPI_SUM, comm), "counting the failed ranks");
  s.failed_ranks = failed;
  s.first_failed_rank = agreed[1];

  // The lowest failing rank broadcasts its message: length first, then the bytes.
  const int root = agreed[1];
  long long len = rank == root ? static_cast<long long>(error.size()) : 0;
  MPI_CHECK(MPI_Bcast(&len, 1, MPI_LONG_LONG, root, comm), "broadcasting the error's length");
  if (len > INT_MAX) len = INT_MAX;  // a 2 GiB message is truncated, not a reason to hang
  s.error = rank == root ? error.substr(0, static_cast<size_t>(len)) : std::string(static_cast<size_t>(len), '\0');
  if (len > 0)
    MPI_CHECK(MPI_Bcast(s.error.data(), static_cast<int>(len), MPI_CHAR, root, comm),
              "broadcasting the failing rank's error");
  return s;
}

std::vector<std::string> gather_strings(const std::string& mine, MPI_Comm comm) {
  int rank = 0, size = 1;
  MPI_CHECK(MPI_Comm_rank(comm, &rank), "reading this rank to gather strings");
  MPI_CHECK(MPI_Comm_size(comm, &size), "reading the size to gather strings");
  if (mine.size() > static_cast<size_t>(INT_MAX))
    throw std::length_error("gather_strings: a " + std::to_string(mine.size()) +
                            "-byte string exceeds MPI's int count");
  int my_len = static_cast<int>(mine.size());
  // Every rank learns every length (Allgather, not Gather) so that every rank
  // makes the same decision about the total below: a throw on rank 0 alone
  // would leave the others waiting in MPI_Gatherv.
  std::vector<int> lens(static_cast<size_t>(size)), offsets(static_cast<size_t>(size));
  MPI_CHECK(MPI_Allgather(&my_len, 1, MPI_INT, lens.data(), 1, MPI_INT, comm), "gathering the per-rank string lengths");
  long long total = 0;
  for (int r = 0; r < size; ++r) {
    offsets[r] = static_cast<int>(total);
    total += lens[r];
    if (total > INT_MAX)
      throw std::length_error("gather_strings: " + std::to_string(total) +
                              " bytes in all exceed MPI's int displacements");
  }
  std::vector<char> all(rank == 0 ? static_cast<size_t>(total) : 0);
  // Gatherv's send buffer is read-only; MPI-3 takes it as const void*.
  MPI_CHECK(MPI_Gatherv(mine.data(), my_len, MPI_CHAR, all.data(), lens.data(), offsets.data(), MPI_CHAR, 0, comm),
            "gathering the per-rank strings on rank 0");
  std::vector<std::string> out;
  if (rank == 0) {
    out.reserve(static_cast<size_t>(size));
    for (int r = 0; r < size; ++r) out.emplace_back(all.data() + offsets[r], lens[r]);
  }
  return out;
}

}  // namespace gpuledger
