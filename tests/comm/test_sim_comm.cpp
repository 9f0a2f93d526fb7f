// SimComm books, call for call, what a real comm of the same size books
// (nccl-tests sizing: all-reduce/broadcast the buffer, reduce-scatter the input
// and all-gather the output of n·size elements, send/recv the message), with 0
// seconds and no data. The figures below are computed by hand; the MPI test
// (tests/parallel/mpi/test_mpi_comm.cpp) checks MpiComm against the same figures.
#include "comm/sim_comm.h"

#include <gtest/gtest.h>

#include <stdexcept>

namespace gpuledger {
namespace {

// The call sequence both tests run: n per rank, on group "dp".
void run_sequence(Comm& c) {
  c.all_reduce(nullptr, 1000, DType::kBF16);                // 1000·2
  c.all_reduce(nullptr, 10, DType::kFP32, ReduceOp::kMax);  // 10·4
  c.reduce_scatter(nullptr, nullptr, 256, DType::kBF16);    // 256·size·2
  c.all_gather(nullptr, nullptr, 256, DType::kFP32);        // 256·size·4
  c.broadcast(nullptr, 3, DType::kFP16, 0);                 // 3·2
  c.send(nullptr, 100, DType::kBF16, c.rank() ^ 1);         // 100·2 (to the pair partner)
  c.recv(nullptr, 100, DType::kBF16, c.rank() ^ 1);         // 100·2
  c.barrier();                                              // nothing
}

void expect_count(const CommCounters& cc, const std::string& key, int64_t calls, int64_t bytes) {
  auto it = cc.by_key().find(key);
  ASSERT_NE(it, cc.by_key().end()) << key;
  EXPECT_EQ(it->second.calls, calls) << key;
  EXPECT_EQ(it->second.bytes, bytes) << key;
  EXPECT_EQ(it->second.seconds, 0.0) << key;
}

TEST(SimComm, BooksTheSequenceAtSize4) {
  CommCounters cc;
  SimComm c("dp", cc, 4, 0);
  EXPECT_EQ(c.size(), 4);
  EXPECT_EQ(c.rank(), 0);
  run_sequence(c);
  ASSERT_EQ(cc.by_key().size(), 6u);
  expect_count(cc, "all_reduce@dp", 2, 2000 + 40);
  expect_count(cc, "reduce_scatter@dp", 1, 2048);  // 256 · 4 · 2
  expect_count(cc, "all_gather@dp", 1, 4096);      // 256 · 4 · 4
  expect_count(cc, "broadcast@dp", 1, 6);
  expect_count(cc, "send@dp", 1, 200);
  expect_count(cc, "recv@dp", 1, 200);
}

// The started send/recv pair (Comm's default: the blocking pair inside the
// start) books one send and one recv, complete at once; its peers are checked.
TEST(SimComm, StartedSendRecvBooksAPair) {
  CommCounters cc;
  SimComm c("cp", cc, 4, 1);
  CommHandle h = c.send_recv_start(nullptr, 100, 2, nullptr, 50, 0, DType::kBF16);
  EXPECT_TRUE(h->test());
  h->wait();
  ASSERT_EQ(cc.by_key().size(), 2u);
  expect_count(cc, "send@cp", 1, 200);
  expect_count(cc, "recv@cp", 1, 100);
  EXPECT_THROW(c.send_recv_start(nullptr, 1, 1, nullptr, 1, 0, DType::kBF16), std::invalid_argument);  // to itself
  EXPECT_THROW(c.send_recv_start(nullptr, 1, 2, nullptr, 1, 4, DType::kBF16), std::invalid_argument);  // outside
}

TEST(SimComm, BooksTheSequenceAtSize2) {
  CommCounters cc;
  SimComm c("dp", cc, 2, 1);
  run_sequence(c);
  ASSERT_EQ(cc.by_key().size(), 6u);
  expect_count(cc, "all_reduce@dp", 2, 2040);
  expect_count(cc, "reduce_scatter@dp", 1, 1024);  // 256 · 2 · 2
  expect_count(cc, "all_gather@dp", 1, 2048);      // 256 · 2 · 4
  expect_count(cc, "broadcast@dp", 1, 6);
  expect_count(cc, "send@dp", 1, 200);
  expect_count(cc, "recv@dp", 1, 200);
}

// All-to-all: n elements to each of the group's ranks, booked as the n·size
// elements of the send buffer (nccl-tests' alltoall size).
TEST(SimComm, BooksAllToAllAsItsSendBuffer) {
  CommCounters cc;
  SimComm ep("ep", cc, 8, 5);
  ep.all_to_all(nullptr, nullptr, 96, DType::kBF16);  // 96 · 8 · 2
  ep.all_to_all(nullptr, nullptr, 10, DType::kFP32);  // 10 · 8 · 4
  ep.all_to_all(nullptr, nullptr, 0, DType::kFP32);   // a call of nothing is still a call
  ASSERT_EQ(cc.by_key().size(), 1u);
  expect_count(cc, "all_to_all@ep", 3, 1536 + 320);
  EXPECT_THROW(ep.all_to_all(nullptr, nullptr, -1, DType::kBF16), std::invalid_argument);
  expect_count(cc, "all_to_all@ep", 3, 1856);  // the rejected call booked nothing
}

TEST(SimComm, KeysByGroupAndAccumulates) {
  CommCounters cc;
  SimComm tp("tp", cc, 8, 3), pp("pp", cc, 4, 2);
  for (int i = 0; i < 5; ++i) tp.all_reduce(nullptr, 4096, DType::kBF16);
  pp.send(nullptr, 1 << 20, DType::kBF16, 3);
  pp.recv(nullptr, 1 << 20, DType::kBF16, 1);
  ASSERT_EQ(cc.by_key().size(), 3u);
  expect_count(cc, "all_reduce@tp", 5, 5 * 4096 * 2);
  expect_count(cc, "send@pp", 1, 2 << 20);
  expect_count(cc, "recv@pp", 1, 2 << 20);
}

TEST(SimComm, RejectsWhatARealCommWould) {
  CommCounters cc;
  EXPECT_THROW(SimComm("dp", cc, 0, 0), std::invalid_argument);
  EXPECT_THROW(SimComm("dp", cc, 2, 2), std::invalid_argument);
  SimComm c("pp", cc, 4, 1);
  EXPECT_THROW(c.send(nullptr, 1, DType::kFP32, 4), std::invalid_argument);
  EXPECT_THROW(c.recv(nullptr, 1, DType::kFP32, -1), std::invalid_argument);
  EXPECT_THROW(c.send(nullptr, 1, DType::kFP32, 1), std::invalid_argument);  // itself
  EXPECT_THROW(c.broadcast(nullptr, 1, DType::kFP32, 4), std::invalid_argument);
  EXPECT_THROW(c.all_reduce(nullptr, -1, DType::kFP32), std::invalid_argument);
  EXPECT_TRUE(cc.by_key().empty());  // a rejected call books nothing
}

}  // namespace
}  // namespace gpuledger
