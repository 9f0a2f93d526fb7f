// gather_strings on 2 and 4 ranks: rank 0 receives every rank's string, in
// rank order, byte for byte (lengths differing by rank, empty strings,
// embedded NULs); the other ranks receive nothing.
#include "comm/mpi_runtime.h"
#include "tests/parallel/mpi/mpi_world.h"

#include <gtest/gtest.h>

namespace gpuledger {
namespace {

using testing::world_rank;
using testing::world_size;

std::string record_of(int r) {
  return "{\"rank\": " + std::to_string(r) + ", \"pad\": \"" + std::string(size_t(r) * 1000, 'x') + "\"}";
}

TEST(GatherStrings, RankZeroGetsEveryRecordInRankOrder) {
  auto all = gather_strings(record_of(world_rank()));
  if (world_rank() != 0) {
    EXPECT_TRUE(all.empty());
    return;
  }
  ASSERT_EQ(int(all.size()), world_size());
  for (int r = 0; r < world_size(); ++r) EXPECT_EQ(all[r], record_of(r)) << r;
  EXPECT_EQ(all[0], "{\"rank\": 0, \"pad\": \"\"}");  // by hand
}

TEST(GatherStrings, EmptyStringsAndEmbeddedNuls) {
  // Even ranks send nothing; odd ranks send 3 bytes with a NUL in the middle.
  std::string mine = world_rank() % 2 ? std::string("a\0b", 3) : std::string();
  auto all = gather_strings(mine);
  if (world_rank() != 0) return;
  ASSERT_EQ(int(all.size()), world_size());
  for (int r = 0; r < world_size(); ++r) {
    if (r % 2) {
      ASSERT_EQ(all[r].size(), 3u);
      EXPECT_EQ(all[r], std::string("a\0b", 3));
    } else {
      EXPECT_TRUE(all[r].empty());
    }
  }
}

TEST(GatherStrings, EveryRankEmpty) {
  auto all = gather_strings("");
  if (world_rank() == 0) {
    ASSERT_EQ(int(all.size()), world_size());
    for (const auto& s : all) EXPECT_TRUE(s.empty());
  }
}

TEST(GatherStrings, OverASubCommunicator) {
  MPI_Comm half;
  ASSERT_EQ(MPI_Comm_split(MPI_COMM_WORLD, world_rank() % 2, world_rank(), &half), MPI_SUCCESS);
  int r = 0, n = 0;
  MPI_Comm_rank(half, &r);
  MPI_Comm_size(half, &n);
  auto all = gather_strings(std::to_string(world_rank()), half);
  if (r == 0) {
    ASSERT_EQ(int(all.size()), n);
    // half 0 holds world ranks 0, 2, …; half 1 holds 1, 3, …
    for (int i = 0; i < n; ++i) EXPECT_EQ(all[i], std::to_string(2 * i + world_rank() % 2));
  } else {
    EXPECT_TRUE(all.empty());
  }
  MPI_Comm_free(&half);
}

}  // namespace
}  // namespace gpuledger
