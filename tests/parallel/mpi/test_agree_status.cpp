// agree_status on 2 and 4 ranks: when one rank fails (injected), every rank
// learns it, with the failing rank's id and message, and every rank then goes
// on to the same next collective, so nobody hangs (ctest's TIMEOUT would catch
// a hang). Also MpiRuntime over an MPI that main() already initialised.
#include "comm/mpi_runtime.h"
#include "tests/parallel/mpi/mpi_world.h"

#include <gtest/gtest.h>

#include <stdexcept>

namespace gpuledger {
namespace {

using testing::world_rank;
using testing::world_size;

TEST(MpiRuntime, JoinsAnInitialisedMpiWithoutOwningIt) {
  MpiRuntime rt;
  EXPECT_FALSE(rt.initialised_here());  // so its destructor leaves MPI_Finalize to main()
  EXPECT_EQ(rt.world_rank(), world_rank());
  EXPECT_EQ(rt.world_size(), world_size());
  EXPECT_FALSE(rt.hostname().empty());
}

TEST(AgreeStatus, AllOk) {
  AgreedStatus s = agree_status(true, "");
  EXPECT_TRUE(s.all_ok);
  EXPECT_EQ(s.failed_ranks, 0);
  EXPECT_EQ(s.first_failed_rank, -1);
  EXPECT_EQ(s.error, "");
}

TEST(AgreeStatus, OneRankFailsEveryRankLearnsItsMessage) {
  const int64_t bad = world_size() - 1;
  const bool ok = world_rank() != bad;
  AgreedStatus s = agree_status(ok, ok ? "" : "rank " + std::to_string(bad) + ": out of memory in layer 3");
  EXPECT_FALSE(s.all_ok);
  EXPECT_EQ(s.failed_ranks, 1);
  EXPECT_EQ(s.first_failed_rank, bad);
  EXPECT_EQ(s.error, "rank " + std::to_string(bad) + ": out of memory in layer 3");
}

TEST(AgreeStatus, SeveralFailTheLowestRanksMessageWins) {
  // Odd ranks fail: 1 of 2, or 1 and 3 of 4. A passing rank's text is ignored.
  const bool ok = world_rank() % 2 == 0;
  AgreedStatus s = agree_status(ok, ok ? "not an error" : "failure on " + std::to_string(world_rank()));
  EXPECT_FALSE(s.all_ok);
  EXPECT_EQ(s.failed_ranks, world_size() / 2);
  EXPECT_EQ(s.first_failed_rank, 1);
  EXPECT_EQ(s.error, "failure on 1");
}

TEST(AgreeStatus, LongAndEmptyMessages) {
  const std::string big(200000, 'e');
  AgreedStatus s = agree_status(world_rank() != 0, world_rank() == 0 ? big : "");
  EXPECT_EQ(s.first_failed_rank, 0);
  EXPECT_EQ(s.error, big);
  AgreedStatus quiet = agree_status(world_rank() != 1, "");
  EXPECT_FALSE(quiet.all_ok);
  EXPECT_EQ(quiet.first_failed_rank, 1);
  EXPECT_EQ(quiet.error, "");
}

// The pattern the harness uses: a step throws on one rank; every rank agrees,
// then every rank runs the same next collective (here an all-reduce) and returns.
TEST(AgreeStatus, AFailureOnOneRankThenTheSameNextCollectiveEverywhere) {
  const int64_t bad = 1;
  auto step = [&] {
    if (world_rank() == bad) throw std::runtime_error("injected failure on rank 1");
  };
  bool ok = true;
  std::string error;
  try {
    step();
  } catch (const std::exception& e) {
    ok = false;
    error = e.what();
  }
  AgreedStatus s = agree_status(ok, error);
  ASSERT_FALSE(s.all_ok);
  EXPECT_EQ(s.first_failed_rank, bad);
  EXPECT_EQ(s.error, "injected failure on rank 1");
  int one = 1, n = 0;
  ASSERT_EQ(MPI_Allreduce(&one, &n, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD), MPI_SUCCESS);
  EXPECT_EQ(n, world_size());
}

TEST(AgreeStatus, OverASubCommunicator) {
  // Even and odd world ranks in two communicators; in each, its rank 0 fails.
  MPI_Comm half;
  ASSERT_EQ(MPI_Comm_split(MPI_COMM_WORLD, int(world_rank() % 2), int(world_rank()), &half), MPI_SUCCESS);
  int r = 0;
  MPI_Comm_rank(half, &r);
  AgreedStatus s = agree_status(r != 0, "world rank " + std::to_string(world_rank()), half);
  EXPECT_FALSE(s.all_ok);
  EXPECT_EQ(s.first_failed_rank, 0);
  EXPECT_EQ(s.error, "world rank " + std::to_string(world_rank() % 2));
  MPI_Comm_free(&half);
}

}  // namespace
}  // namespace gpuledger
