// MpiComm on 2 and 4 real ranks: every collective on fp32 and bf16 with values
// known by construction (small integers, exact in both), the single rounding of
// 16-bit reductions, max, the send/recv ring, sub-groups from a Layout, the
// counters booked per nccl-tests sizing (the same hand figures as
// tests/parallel/test_sim_comm.cpp, and equal to a SimComm's for the same
// calls), and MPI_CHECK's CommError.
#include "comm/mpi_comm.h"

#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <numeric>

#include "comm/comm_error.h"
#include "comm/mpi_runtime.h"
#include "comm/sim_comm.h"
#include "core/layout.h"

namespace gpuledger {
namespace {

struct World {
  CommCounters counters;
  std::unique_ptr<MpiComm> comm;
  int64_t rank = 0, size = 1;
  World() {
    int r = 0, s = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &r);
    MPI_Comm_size(MPI_COMM_WORLD, &s);
    rank = r;
    size = s;
    std::vector<int64_t> all(static_cast<size_t>(size));
    std::iota(all.begin(), all.end(), 0);
    comm = split_world_comm("world", counters, all);
  }
};

std::vector<uint16_t> to_bf16(const std::vector<float>& v) {
  std::vector<uint16_t> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = fp32_to_bf16(v[i]);
  return out;
}

std::vector<float> from_bf16(const std::vector<uint16_t>& v) {
  std::vector<float> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = bf16_to_fp32(v[i]);
  return out;
}

// ---- all_reduce ----

TEST(MpiComm, WorldCommMatchesMpi) {
  World w;
  EXPECT_EQ(w.comm->size(), w.size);
  EXPECT_EQ(w.comm->rank(), w.rank);
  EXPECT_GE(w.size, 2);
}

TEST(MpiComm, AllReduceSumFp32AndBf16) {
  World w;
  const int64_t n = 1000, W = w.size;
  // element i of rank r: (r + 1) · (i % 8 + 1); sum = W(W+1)/2 · (i % 8 + 1) <= 80, exact in bf16.
  std::vector<float> x(n);
  for (int64_t i = 0; i < n; ++i) x[i] = float((w.rank + 1) * (i % 8 + 1));
  std::vector<uint16_t> xb = to_bf16(x);
  w.comm->all_reduce(x.data(), n, DType::kFP32);
  w.comm->all_reduce(xb.data(), n, DType::kBF16);
  std::vector<float> xb_back = from_bf16(xb);
  for (int64_t i = 0; i < n; ++i) {
    const float want = float(W * (W + 1) / 2 * (i % 8 + 1));
    ASSERT_EQ(x[i], want) << i;
    ASSERT_EQ(xb_back[i], want) << i;
  }
  // fp16 goes the same way.
  std::vector<uint16_t> xh(n);
  for (int64_t i = 0; i < n; ++i) xh[i] = fp32_to_fp16(float(w.rank + i % 3));
  w.comm->all_reduce(xh.data(), n, DType::kFP16);
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(fp16_to_fp32(xh[i]), float(W * (W - 1) / 2 + W * (i % 3)));
}

TEST(MpiComm, Bf16AllReduceRoundsOnceAfterTheFp32Sum) {
  World w;
  // Rank 0 holds 256, the others 1 (all exact in bf16, whose spacing in [256, 512) is 2).
  // fp32 sum 256 + (W − 1), rounded once, nearest-even: W = 2: 257 -> 256; W = 4: 259 -> 260.
  // Summing in bf16 instead would stick at 256 for W = 4 (256 + 1 = 257 -> 256, thrice).
  uint16_t v = fp32_to_bf16(w.rank == 0 ? 256.0f : 1.0f);
  w.comm->all_reduce(&v, 1, DType::kBF16);
  const std::map<int64_t, float> want = {{2, 256.0f}, {4, 260.0f}};
  ASSERT_TRUE(want.count(w.size)) << "hand figures for 2 and 4 ranks only";
  EXPECT_EQ(bf16_to_fp32(v), want.at(w.size));
}

TEST(MpiComm, ReductionResultIsBitIdenticalOnEveryRank) {
  World w;
  const int64_t n = 4096;
  // Values that are not exact sums: every rank must still hold the same bits.
  std::vector<float> x(n);
  for (int64_t i = 0; i < n; ++i) x[i] = 0.1f * float(w.rank + 1) / float(i + 3) + 1e-3f * float(i);
  std::vector<uint16_t> xb = to_bf16(x);
  w.comm->all_reduce(x.data(), n, DType::kFP32);
  w.comm->all_reduce(xb.data(), n, DType::kBF16);
  std::vector<float> all(n * w.size);
  std::vector<uint16_t> all_b(n * w.size);
  w.comm->all_gather(all.data(), x.data(), n, DType::kFP32);
  w.comm->all_gather(all_b.data(), xb.data(), n, DType::kBF16);
  for (int64_t r = 0; r < w.size; ++r) {
    ASSERT_EQ(std::memcmp(all.data() + r * n, x.data(), n * 4), 0) << "fp32 differs on rank " << r;
    ASSERT_EQ(std::memcmp(all_b.data() + r * n, xb.data(), n * 2), 0) << "bf16 differs on rank " << r;
  }
}

TEST(MpiComm, AllReduceMax) {
  World w;
  const int64_t n = 64, W = w.size;
  // Element i: the rank i % W holds i + 1, the others −rank; the max is i + 1.
  std::vector<float> x(n);
  for (int64_t i = 0; i < n; ++i) x[i] = (i % W == w.rank) ? float(i + 1) : -float(w.rank);
  std::vector<uint16_t> xb = to_bf16(x);
  w.comm->all_reduce(x.data(), n, DType::kFP32, ReduceOp::kMax);
  w.comm->all_reduce(xb.data(), n, DType::kBF16, ReduceOp::kMax);
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_EQ(x[i], float(i + 1)) << i;
    ASSERT_EQ(bf16_to_fp32(xb[i]), float(i + 1)) << i;
  }
}

// ---- all_gather, reduce_scatter, broadcast ----

TEST(MpiComm, AllGatherFp32AndBf16) {
  World w;
  const int64_t n = 37, W = w.size;
  std::vector<float> in(n), out(n * W, -1.0f);
  for (int64_t j = 0; j < n; ++j) in[j] = float(w.rank * 100 + j);
  std::vector<uint16_t> in_b = to_bf16(std::vector<float>(in.begin(), in.begin() + 16));
  std::vector<uint16_t> out_b(16 * W);
  for (int64_t j = 0; j < 16; ++j) in_b[j] = fp32_to_bf16(float(w.rank * 10 + j));  // <= 46
  w.comm->all_gather(out.data(), in.data(), n, DType::kFP32);
  w.comm->all_gather(out_b.data(), in_b.data(), 16, DType::kBF16);
  for (int64_t r = 0; r < W; ++r) {
    for (int64_t j = 0; j < n; ++j) ASSERT_EQ(out[r * n + j], float(r * 100 + j));
    for (int64_t j = 0; j < 16; ++j) ASSERT_EQ(bf16_to_fp32(out_b[r * 16 + j]), float(r * 10 + j));
  }
  // In place: `in` is this rank's slice of `out`.
  std::vector<float> buf(n * W, -1.0f);
  for (int64_t j = 0; j < n; ++j) buf[w.rank * n + j] = float(w.rank * 100 + j);
  w.comm->all_gather(buf.data(), buf.data() + w.rank * n, n, DType::kFP32);
  EXPECT_EQ(buf, out);
}

TEST(MpiComm, ReduceScatterFp32AndBf16) {
  World w;
  const int64_t n = 8, W = w.size;
  // in[k] = rank + k (k < n·W); this rank's slice j is k = me·n + j:
  // Σ_r (r + me·n + j) = W(W−1)/2 + W·(me·n + j) <= 6 + 4·31 = 130 (exact in bf16).
  std::vector<float> in(n * W), out(n, -1.0f);
  for (int64_t k = 0; k < n * W; ++k) in[k] = float(w.rank + k);
  std::vector<uint16_t> in_b = to_bf16(in), out_b(n);
  w.comm->reduce_scatter(out.data(), in.data(), n, DType::kFP32);
  w.comm->reduce_scatter(out_b.data(), in_b.data(), n, DType::kBF16);
  for (int64_t j = 0; j < n; ++j) {
    const float want = float(W * (W - 1) / 2 + W * (w.rank * n + j));
    ASSERT_EQ(out[j], want) << j;
    ASSERT_EQ(bf16_to_fp32(out_b[j]), want) << j;
  }
  // In place (fp32): the input is read from out, the slice lands at its start.
  std::vector<float> buf = in;
  w.comm->reduce_scatter(buf.data(), buf.data(), n, DType::kFP32);
  for (int64_t j = 0; j < n; ++j) ASSERT_EQ(buf[j], out[j]);
}

// ---- nonblocking collectives (Comm::*_start) ----

// Several requests in flight on one comm at once, completed in reverse order
// of starting, give the blocking calls' results; each is booked once, at its
// completion, with the same bytes as the blocking call.
TEST(MpiComm, NonblockingCollectivesMatchTheBlockingOnes) {
  World w;
  const int64_t n = 24, W = w.size;
  std::vector<float> ar(n), ar_want(n);
  for (int64_t j = 0; j < n; ++j) ar[j] = float(w.rank + j);
  for (int64_t j = 0; j < n; ++j) ar_want[j] = float(W * (W - 1) / 2 + W * j);
  std::vector<uint16_t> ar_b = to_bf16(std::vector<float>(ar.begin(), ar.begin() + 8));
  std::vector<float> ag_in(n), ag_out(n * W, -1.0f);
  for (int64_t j = 0; j < n; ++j) ag_in[j] = float(w.rank * 100 + j);
  std::vector<float> rs_in(n * W), rs_out(n, -1.0f);
  for (int64_t k = 0; k < n * W; ++k) rs_in[k] = float(w.rank + k);
  std::vector<uint16_t> rs_in_b = to_bf16(std::vector<float>(rs_in.begin(), rs_in.begin() + 4 * W)), rs_out_b(4);

  w.counters.reset();
  std::vector<CommHandle> reqs;
  reqs.push_back(w.comm->all_reduce_start(ar.data(), n, DType::kFP32));
  reqs.push_back(w.comm->all_reduce_start(ar_b.data(), 8, DType::kBF16));
  reqs.push_back(w.comm->all_gather_start(ag_out.data(), ag_in.data(), n, DType::kFP32));
  reqs.push_back(w.comm->reduce_scatter_start(rs_out.data(), rs_in.data(), n, DType::kFP32));
  reqs.push_back(w.comm->reduce_scatter_start(rs_out_b.data(), rs_in_b.data(), 4, DType::kBF16));
  EXPECT_TRUE(w.comm->overlaps_compute());
  // nothing booked before completion
  EXPECT_TRUE(w.counters.by_key().empty());
  for (auto it = reqs.rbegin(); it != reqs.rend(); ++it) {
    (*it)->wait();
    (*it)->wait();  // idempotent
    EXPECT_TRUE((*it)->test());
  }
  for (int64_t j = 0; j < n; ++j) ASSERT_EQ(ar[j], ar_want[j]) << j;
  for (int64_t j = 0; j < 8; ++j) ASSERT_EQ(bf16_to_fp32(ar_b[j]), ar_want[j]) << j;
  for (int64_t r = 0; r < W; ++r)
    for (int64_t j = 0; j < n; ++j) ASSERT_EQ(ag_out[r * n + j], float(r * 100 + j));
  for (int64_t j = 0; j < n; ++j) ASSERT_EQ(rs_out[j], float(W * (W - 1) / 2 + W * (w.rank * n + j))) << j;
  for (int64_t j = 0; j < 4; ++j)
    ASSERT_EQ(bf16_to_fp32(rs_out_b[j]), float(W * (W - 1) / 2 + W * (w.rank * 4 + j))) << j;
  const auto& c = w.counters.by_key();
  EXPECT_EQ(c.at("all_reduce@world").calls, 2);
  EXPECT_EQ(c.at("all_reduce@world").bytes, 4 * n + 2 * 8);
  EXPECT_EQ(c.at("all_gather@world").calls, 1);
  EXPECT_EQ(c.at("all_gather@world").bytes, 4 * n * W);
  EXPECT_EQ(c.at("reduce_scatter@world").calls, 2);
  EXPECT_EQ(c.at("reduce_scatter@world").bytes, 4 * n * W + 2 * 4 * W);
}

// test() drives a request to completion without wait(); a request dropped
// unwaited completes in its destructor (the buffer is never left in flight).
TEST(MpiComm, TestPollsToCompletionAndDestructorWaits) {
  World w;
  std::vector<float> x(1000, float(w.rank + 1));
  auto req = w.comm->all_reduce_start(x.data(), 1000, DType::kFP32);
  int64_t polls = 0;
  while (!req->test()) ++polls;
  const float want = float(w.size * (w.size + 1) / 2);
  EXPECT_EQ(x[999], want);
  std::vector<float> y(10, 1.0f);
  { auto dropped = w.comm->all_reduce_start(y.data(), 10, DType::kFP32); }
  EXPECT_EQ(y[0], float(w.size));
}

TEST(MpiComm, BroadcastFromTheLastRank) {
  World w;
  const int64_t n = 50, root = w.size - 1;
  std::vector<float> x(n, -1.0f);
  std::vector<uint16_t> xb(n, 0);
  if (w.rank == root)
    for (int64_t i = 0; i < n; ++i) {
      x[i] = float(7 * i);
      xb[i] = fp32_to_bf16(float(i));
    }
  w.comm->broadcast(x.data(), n, DType::kFP32, root);
  w.comm->broadcast(xb.data(), n, DType::kBF16, root);
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_EQ(x[i], float(7 * i));
    ASSERT_EQ(bf16_to_fp32(xb[i]), float(i));
  }
  EXPECT_THROW(w.comm->broadcast(x.data(), n, DType::kFP32, w.size), std::invalid_argument);
}

// ---- send / recv ----

TEST(MpiComm, SendRecvRing) {
  World w;
  // Big enough to leave the eager protocol: even ranks send first, odd ranks receive first.
  const int64_t n = 100000, W = w.size;
  const int64_t next = (w.rank + 1) % W, prev = (w.rank + W - 1) % W;
  std::vector<float> mine(n), got(n, -1.0f);
  for (int64_t i = 0; i < n; ++i) mine[i] = float(w.rank * 1000000 + i);
  if (w.rank % 2 == 0) {
    w.comm->send(mine.data(), n, DType::kFP32, next);
    w.comm->recv(got.data(), n, DType::kFP32, prev);
  } else {
    w.comm->recv(got.data(), n, DType::kFP32, prev);
    w.comm->send(mine.data(), n, DType::kFP32, next);
  }
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(got[i], float(prev * 1000000 + i)) << i;
  const auto& c = w.counters.by_key();
  EXPECT_EQ(c.at("send@world").bytes, n * 4);
  EXPECT_EQ(c.at("recv@world").bytes, n * 4);
}

// The started pair: every rank posts its send to the next and its receive from
// the previous at once (no parity), computes, then waits — a ring that a pair
// of blocking calls in that order could not run. Booked as one send and one
// recv each, at completion; a message of the wrong length is an error.
TEST(MpiComm, StartedSendRecvRingOverlapsAndBooksAPair) {
  World w;
  const int64_t n = 100000, W = w.size;  // past the eager protocol
  const int64_t next = (w.rank + 1) % W, prev = (w.rank + W - 1) % W;
  std::vector<float> mine(n), got(n, -1.0f);
  for (int64_t i = 0; i < n; ++i) mine[i] = float(w.rank * 1000000 + i);
  CommHandle h = w.comm->send_recv_start(mine.data(), n, next, got.data(), n, prev, DType::kFP32);
  EXPECT_TRUE(w.counters.by_key().empty());  // booked once complete
  double busy = 0;
  for (int64_t i = 0; i < n; ++i) busy += mine[i];  // the work the transfer overlaps
  EXPECT_GT(busy, 0.0);
  h->wait();
  h->wait();  // idempotent
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(got[i], float(prev * 1000000 + i)) << i;
  const auto& c = w.counters.by_key();
  EXPECT_EQ(c.at("send@world").calls, 1);
  EXPECT_EQ(c.at("recv@world").calls, 1);
  EXPECT_EQ(c.at("send@world").bytes, n * 4);
  EXPECT_EQ(c.at("recv@world").bytes, n * 4);
  // bf16: the values moved as they are
  const std::vector<uint16_t> b = to_bf16({float(w.rank), 0.5f});
  std::vector<uint16_t> b_got(2, 0);
  auto hb = w.comm->send_recv_start(b.data(), 2, next, b_got.data(), 2, prev, DType::kBF16);
  while (!hb->test()) {
  }
  EXPECT_EQ(from_bf16(b_got), (std::vector<float>{float(prev), 0.5f}));
  // a receive posted for 3 elements where 2 arrive
  std::vector<float> short_in(3, 0.0f);
  const std::vector<float> two = {1.0f, 2.0f};
  auto bad = w.comm->send_recv_start(two.data(), 2, next, short_in.data(), 3, prev, DType::kFP32);
  EXPECT_THROW(bad->wait(), std::runtime_error);
}

// ---- all_to_all: the transpose of the (rank, block) matrix ----

TEST(MpiComm, AllToAllDeliversEveryBlockToItsRank) {
  World w;
  const int64_t n = 5, W = w.size;
  // Block j of rank r's input (to rank j): r·1000 + j·10 + i; bf16 values <= 3·8 + 3 exact.
  std::vector<float> in(n * W), out(n * W, -1.0f);
  std::vector<uint16_t> in_b(3 * W), out_b(3 * W);
  for (int64_t j = 0; j < W; ++j) {
    for (int64_t i = 0; i < n; ++i) in[j * n + i] = float(w.rank * 1000 + j * 10 + i);
    for (int64_t i = 0; i < 3; ++i) in_b[j * 3 + i] = fp32_to_bf16(float(w.rank * 8 + j * 2 + i));
  }
  CommCounters cc;
  MPI_Comm dup;
  MPI_Comm_dup(MPI_COMM_WORLD, &dup);
  MpiComm c("ep", cc, dup);
  c.all_to_all(out.data(), in.data(), n, DType::kFP32);
  c.all_to_all(out_b.data(), in_b.data(), 3, DType::kBF16);
  // Block i of this rank's output is block `rank` of rank i's input.
  for (int64_t i = 0; i < W; ++i) {
    for (int64_t e = 0; e < n; ++e) ASSERT_EQ(out[i * n + e], float(i * 1000 + w.rank * 10 + e)) << i << " " << e;
    for (int64_t e = 0; e < 3; ++e) ASSERT_EQ(bf16_to_fp32(out_b[i * 3 + e]), float(i * 8 + w.rank * 2 + e));
  }
  // Booked as nccl-tests sizes it: the send buffer, n·W elements per call.
  const auto& k = cc.by_key().at("all_to_all@ep");
  EXPECT_EQ(k.calls, 2);
  EXPECT_EQ(k.bytes, n * W * 4 + 3 * W * 2);
  EXPECT_GT(k.seconds, 0.0);
  CommCounters sim_cc;
  SimComm sim("ep", sim_cc, W, w.rank);
  sim.all_to_all(nullptr, nullptr, n, DType::kFP32);
  sim.all_to_all(nullptr, nullptr, 3, DType::kBF16);
  EXPECT_EQ(sim_cc.by_key().at("all_to_all@ep").bytes, k.bytes);
  // Overlapping buffers are refused before MPI sees them.
  EXPECT_THROW(c.all_to_all(in.data() + 1, in.data(), n, DType::kFP32), std::invalid_argument);
}

// ---- counters: the hand figures of test_sim_comm.cpp, and a SimComm's ----

TEST(MpiComm, CountersFollowNcclTestsSizingAndEqualSimComm) {
  World w;
  MPI_Comm dup;
  MPI_Comm_dup(MPI_COMM_WORLD, &dup);
  CommCounters cc, sim_cc;
  MpiComm c("dp", cc, dup);
  SimComm sim("dp", sim_cc, w.size, w.rank);
  std::vector<uint16_t> h(1000 * 4);
  std::vector<float> f(256 * 4);
  std::vector<float> f_out(256 * 4);
  std::vector<uint16_t> h_out(256);
  for (Comm* comm : {static_cast<Comm*>(&c), static_cast<Comm*>(&sim)}) {
    const int64_t partner = comm->rank() ^ 1;  // W is even
    comm->all_reduce(h.data(), 1000, DType::kBF16);
    comm->all_reduce(f.data(), 10, DType::kFP32, ReduceOp::kMax);
    comm->reduce_scatter(h_out.data(), h.data(), 256, DType::kBF16);
    comm->all_gather(f_out.data(), f.data(), 256, DType::kFP32);
    comm->broadcast(h.data(), 3, DType::kFP16, 0);
    if (comm->rank() % 2 == 0) {
      comm->send(h.data(), 100, DType::kBF16, partner);
      comm->recv(h.data(), 100, DType::kBF16, partner);
    } else {
      comm->recv(h.data(), 100, DType::kBF16, partner);
      comm->send(h.data(), 100, DType::kBF16, partner);
    }
    comm->barrier();
  }
  // Hand figures (n per rank; reduce-scatter input and all-gather output are n·W).
  const int64_t W = w.size;
  const std::map<std::string, std::pair<int64_t, int64_t>> want = {{"all_reduce@dp", {2, 1000 * 2 + 10 * 4}},
                                                                   {"reduce_scatter@dp", {1, W == 4 ? 2048 : 1024}},
                                                                   {"all_gather@dp", {1, W == 4 ? 4096 : 2048}},
                                                                   {"broadcast@dp", {1, 6}},
                                                                   {"send@dp", {1, 200}},
                                                                   {"recv@dp", {1, 200}}};
  ASSERT_EQ(cc.by_key().size(), want.size());
  ASSERT_EQ(sim_cc.by_key().size(), want.size());
  for (const auto& [key, cb] : want) {
    EXPECT_EQ(cc.by_key().at(key).calls, cb.first) << key;
    EXPECT_EQ(cc.by_key().at(key).bytes, cb.second) << key;
    EXPECT_GT(cc.by_key().at(key).seconds, 0.0) << key;
    EXPECT_EQ(sim_cc.by_key().at(key).calls, cb.first) << key;
    EXPECT_EQ(sim_cc.by_key().at(key).bytes, cb.second) << key;
    EXPECT_EQ(sim_cc.by_key().at(key).seconds, 0.0) << key;
  }
}

// ---- sub-groups from a Layout ----

TEST(MpiComm, SubGroupsFromALayout) {
  World w;
  // 4 ranks: dp 2 × tp 2, tp groups {0,1} {2,3}, dp groups {0,2} {1,3}.
  // 2 ranks: tp 2 (tp {0,1}, dp {r}) and dp 2 (dp {0,1}, tp {r}).
  struct Case {
    Layout layout;
    std::vector<std::vector<int64_t>> tp, dp;  // group of each world rank
  };
  std::vector<Case> cases;
  if (w.size == 4) {
    Layout l;
    l.dp = 2;
    l.tp = 2;
    cases.push_back({l, {{0, 1}, {0, 1}, {2, 3}, {2, 3}}, {{0, 2}, {1, 3}, {0, 2}, {1, 3}}});
  } else {
    ASSERT_EQ(w.size, 2);
    Layout a;
    a.tp = 2;
    Layout b;
    b.dp = 2;
    cases.push_back({a, {{0, 1}, {0, 1}}, {{0}, {1}}});
    cases.push_back({b, {{0}, {1}}, {{0, 1}, {0, 1}}});
  }
  for (const Case& k : cases) {
    const auto& tp_members = k.tp[w.rank];
    const auto& dp_members = k.dp[w.rank];
    ASSERT_EQ(k.layout.tp_group(w.rank), tp_members);  // the layout agrees with the hand table
    ASSERT_EQ(k.layout.dp_group(w.rank), dp_members);
    CommCounters cc;
    auto tp = split_world_comm("tp", cc, tp_members);
    auto dp = split_world_comm("dp", cc, dp_members);
    ASSERT_EQ(tp->size(), int64_t(tp_members.size()));
    ASSERT_EQ(dp->size(), int64_t(dp_members.size()));
    EXPECT_EQ(tp_members[tp->rank()], w.rank);
    EXPECT_EQ(dp_members[dp->rank()], w.rank);
    // All-reduce of the world rank over each group: the sum of its members.
    float t = float(w.rank), d = float(w.rank);
    tp->all_reduce(&t, 1, DType::kFP32);
    dp->all_reduce(&d, 1, DType::kFP32);
    EXPECT_EQ(t, float(std::accumulate(tp_members.begin(), tp_members.end(), int64_t{0})));
    EXPECT_EQ(d, float(std::accumulate(dp_members.begin(), dp_members.end(), int64_t{0})));
    // All-gather over tp returns the members in group order.
    std::vector<float> got(tp_members.size());
    float me = float(w.rank);
    tp->all_gather(got.data(), &me, 1, DType::kFP32);
    for (size_t i = 0; i < got.size(); ++i) EXPECT_EQ(got[i], float(tp_members[i]));
    EXPECT_EQ(cc.by_key().at("all_reduce@tp").bytes, 4);
    EXPECT_EQ(cc.by_key().at("all_reduce@dp").bytes, 4);
    EXPECT_EQ(cc.by_key().at("all_gather@tp").bytes, int64_t(4 * tp_members.size()));
  }
}

TEST(MpiComm, RankOutsideEveryGroupGetsNoComm) {
  World w;
  CommCounters cc;
  // Only ranks 0 and W−1 form a group (the emb pattern); the others pass nothing.
  std::vector<int64_t> members;
  if (w.rank == 0 || w.rank == w.size - 1) members = {0, w.size - 1};
  auto c = split_world_comm("emb", cc, members);
  if (members.empty()) {
    EXPECT_EQ(c, nullptr);
  } else {
    ASSERT_NE(c, nullptr);
    EXPECT_EQ(c->size(), 2);
    float x = float(w.rank);
    c->all_reduce(&x, 1, DType::kFP32);
    EXPECT_EQ(x, float(w.size - 1));
  }
}

// ---- errors ----

TEST(MpiComm, MpiErrorThrowsCommErrorWithEveryField) {
  MpiRuntime rt;  // already initialised: sets MPI_ERRORS_RETURN and the error origin
  ASSERT_FALSE(rt.initialised_here());
  World w;
  float x = 0;
  try {
    w.comm->send(&x, 1, DType::kFP32, w.size + 5);  // no such rank: MPI_ERR_RANK, local
    FAIL() << "sending to a rank outside the group did not throw";
  } catch (const CommError& e) {
    EXPECT_EQ(e.library(), "MPI");
    EXPECT_EQ(e.world_rank(), w.rank);
    EXPECT_EQ(e.host(), rt.hostname());
    EXPECT_FALSE(e.host().empty());
    EXPECT_NE(e.call().find("MPI_Send(buf, count"), std::string::npos) << e.call();
    EXPECT_NE(e.where().find("mpi_comm.cpp:"), std::string::npos) << e.where();
    EXPECT_NE(e.library_message().find("MPI_ERR_RANK"), std::string::npos) << e.library_message();
    EXPECT_NE(e.context().find("sending 1 fp32 elements over 'world' to peer"), std::string::npos) << e.context();
    const std::string what = e.what();
    EXPECT_NE(what.find("rank " + std::to_string(w.rank)), std::string::npos) << what;
    EXPECT_NE(what.find("while sending"), std::string::npos) << what;
    EXPECT_NE(what.find(rt.hostname()), std::string::npos) << what;
  }
  EXPECT_TRUE(w.counters.by_key().empty());  // a failed call books nothing
}

}  // namespace
}  // namespace gpuledger
