// NcclComm on real GPUs, one rank per GPU (label gpu), under mpiexec at 1 rank
// and at 2 (tests/gpu/CMakeLists.txt). Every collective, blocking and started,
// against values computed here from the rank formulas (small integers, exact
// in bf16 and fp16, so NCCL's 16-bit accumulation cannot blur them), each
// aliasing form of all_gather and reduce_scatter, and the counters against
// comm_call_bytes. Without a GPU, or with fewer GPUs than ranks (NCCL refuses
// two ranks of one communicator on one GPU), every rank prints why and exits
// 77, which ctest reports as skipped. Nothing touches the GPU before main.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>
#include <mpi.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <numeric>
#include <stdexcept>
#include <vector>

#include "comm/comm_bytes.h"
#include "comm/make_nccl_comm.h"
#include "comm/mpi_comm.h"
#include "kernels/device.h"
#include "kernels/ledger.h"
#include "kernels/registry/registry.h"
#include "parallel/groups.h"

namespace gpuledger {
namespace {

// The rank's device and its world NCCL comm, made in main once the GPU check passed.
struct World {
  int rank = 0, size = 1;
  Ledger ledger;
  std::unique_ptr<Device> dev;
  CommCounters counters;
  std::unique_ptr<Comm> comm;
};
World* g = nullptr;

constexpr DType kDtypes[] = {DType::kFP32, DType::kBF16, DType::kFP16};

Buffer upload(const std::vector<float>& v, DType t, int64_t extra_elems = 0) {
  const int64_t n = static_cast<int64_t>(v.size());
  Buffer b = g->dev->alloc((n + extra_elems) * dtype_bytes(t), Account::kComm, "test");
  std::vector<unsigned char> host(static_cast<size_t>(n * dtype_bytes(t)));
  convert_from_fp32(v.data(), host.data(), t, n);
  g->dev->copy_from_host(b.data(), host.data(), n * dtype_bytes(t));
  return b;
}

std::vector<float> download(const void* p, int64_t n, DType t) {
  std::vector<unsigned char> host(static_cast<size_t>(n * dtype_bytes(t)));
  g->dev->copy_to_host(host.data(), p, n * dtype_bytes(t));
  std::vector<float> out(static_cast<size_t>(n));
  convert_to_fp32(host.data(), t, out.data(), n);
  return out;
}

const CommCount& count(const std::string& key) { return g->counters.by_key().at(key); }

char* at(const Buffer& b, int64_t elems, DType t) { return b.as<char>() + elems * dtype_bytes(t); }

// P(P + 1) / 2: the sum of (r + 1) over the ranks.
int64_t tri(int64_t p) { return p * (p + 1) / 2; }

class NcclComm : public ::testing::Test {
 protected:
  void SetUp() override { g->counters.reset(); }
  int64_t r() const { return g->rank; }
  int64_t P() const { return g->size; }
  Comm& comm() { return *g->comm; }
};

TEST_F(NcclComm, OverlapsComputeAndGroupShape) {
  EXPECT_TRUE(comm().overlaps_compute());
  EXPECT_EQ(comm().size(), P());
  EXPECT_EQ(comm().rank(), r());
  EXPECT_EQ(comm().group(), "world");
}

TEST_F(NcclComm, AllReduceSumEveryDtype) {
  const int64_t n = 1000;
  for (DType t : kDtypes) {
    std::vector<float> x(n);
    for (int64_t i = 0; i < n; ++i) x[i] = static_cast<float>(r() + 1 + i % 7);
    Buffer b = upload(x, t);
    comm().all_reduce(b.data(), n, t);
    const auto got = download(b.data(), n, t);
    for (int64_t i = 0; i < n; ++i)
      ASSERT_EQ(got[i], static_cast<float>(tri(P()) + P() * (i % 7))) << dtype_name(t) << " i=" << i;
  }
  EXPECT_EQ(count("all_reduce@world").calls, 3);
  EXPECT_EQ(count("all_reduce@world").bytes, n * 4 + n * 2 + n * 2);
  EXPECT_GT(count("all_reduce@world").seconds, 0.0);
}

TEST_F(NcclComm, AllReduceLargeFp32) {
  const int64_t n = int64_t{1} << 22;  // 16 MiB: several NCCL chunks per rank
  std::vector<float> x(n);
  for (int64_t i = 0; i < n; ++i) x[i] = static_cast<float>(r() + i % 97);
  Buffer b = upload(x, DType::kFP32);
  comm().all_reduce(b.data(), n, DType::kFP32);
  const auto got = download(b.data(), n, DType::kFP32);
  const int64_t rank_sum = P() * (P() - 1) / 2;
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(got[i], static_cast<float>(rank_sum + P() * (i % 97))) << i;
  EXPECT_EQ(count("all_reduce@world").bytes, comm_call_bytes(CommKind::kAllReduce, n, DType::kFP32, P()));
}

TEST_F(NcclComm, AllReduceMax) {
  const int64_t n = 64;
  for (DType t : kDtypes) {
    std::vector<float> x(n);
    for (int64_t i = 0; i < n; ++i) x[i] = static_cast<float>(r() * 10 + i % 5);
    Buffer b = upload(x, t);
    comm().all_reduce(b.data(), n, t, ReduceOp::kMax);
    const auto got = download(b.data(), n, t);
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(got[i], static_cast<float>((P() - 1) * 10 + i % 5)) << i;
  }
}

// Rank j's all_gather input: j·100 + i.
std::vector<float> gather_input(int64_t rank, int64_t n) {
  std::vector<float> x(n);
  for (int64_t i = 0; i < n; ++i) x[i] = static_cast<float>(rank * 100 + i);
  return x;
}

void expect_gathered(const void* out, int64_t n, int64_t size, DType t, const char* form) {
  const auto got = download(out, n * size, t);
  for (int64_t j = 0; j < size; ++j)
    for (int64_t i = 0; i < n; ++i)
      ASSERT_EQ(got[j * n + i], static_cast<float>(j * 100 + i)) << form << " " << dtype_name(t) << " slice " << j;
}

TEST_F(NcclComm, AllGatherDistinctInPlaceAndStaged) {
  const int64_t n = 50;
  for (DType t : kDtypes) {
    const int64_t nb = n * dtype_bytes(t);
    {  // distinct buffers
      Buffer in = upload(gather_input(r(), n), t);
      Buffer out = g->dev->alloc(nb * P(), Account::kComm);
      comm().all_gather(out.data(), in.data(), n, t);
      expect_gathered(out.data(), n, P(), t, "distinct");
    }
    {  // in place: the input is this rank's slice of the output (NCCL's in-place form)
      Buffer out = g->dev->alloc(nb * P(), Account::kComm);
      Buffer mine = upload(gather_input(r(), n), t);
      g->dev->copy(at(out, r() * n, t), mine.data(), nb);
      comm().all_gather(out.data(), at(out, r() * n, t), n, t);
      expect_gathered(out.data(), n, P(), t, "in place");
    }
    {  // staged: the input starts one element into the output, on every rank
      std::vector<float> padded = gather_input(r(), n);
      padded.insert(padded.begin(), -1.0f);
      padded.resize(static_cast<size_t>(n * P() + 1), -2.0f);
      Buffer out = upload(padded, t);
      const int64_t ws_live = g->ledger.live(Account::kWorkspace), ws_peak = g->ledger.peak(Account::kWorkspace);
      comm().all_gather(out.data(), at(out, 1, t), n, t);
      expect_gathered(out.data(), n, P(), t, "staged");
      // The staging copy of the input was booked as workspace while it lived.
      EXPECT_EQ(g->ledger.live(Account::kWorkspace), ws_live);
      EXPECT_EQ(g->ledger.peak(Account::kWorkspace), std::max(ws_peak, ws_live + nb));
    }
  }
  EXPECT_EQ(count("all_gather@world").calls, 9);
  EXPECT_EQ(count("all_gather@world").bytes, 3 * (comm_call_bytes(CommKind::kAllGather, n, DType::kFP32, P()) +
                                                  2 * comm_call_bytes(CommKind::kAllGather, n, DType::kBF16, P())));
}

// Rank r's reduce_scatter input element j: (r + 1)·(j % 5 + 1); summed: tri(P)·(j % 5 + 1).
std::vector<float> scatter_input(int64_t rank, int64_t total) {
  std::vector<float> x(total);
  for (int64_t j = 0; j < total; ++j) x[j] = static_cast<float>((rank + 1) * (j % 5 + 1));
  return x;
}

void expect_slice(const void* out, int64_t n, int64_t rank, int64_t size, DType t, const char* form) {
  const auto got = download(out, n, t);
  for (int64_t i = 0; i < n; ++i)
    ASSERT_EQ(got[i], static_cast<float>(tri(size) * ((rank * n + i) % 5 + 1)))
        << form << " " << dtype_name(t) << " i=" << i;
}

TEST_F(NcclComm, ReduceScatterDistinctInEqualsOutAndNcclInPlace) {
  const int64_t n = 48;
  for (DType t : kDtypes) {
    const int64_t nb = n * dtype_bytes(t);
    {  // distinct buffers
      Buffer in = upload(scatter_input(r(), n * P()), t);
      Buffer out = g->dev->alloc(nb, Account::kComm);
      comm().reduce_scatter(out.data(), in.data(), n, t);
      expect_slice(out.data(), n, r(), P(), t, "distinct");
    }
    {  // in == out (the Comm contract's in-place form): the slice lands at the start;
       // NCCL's own form on rank 0, staged through a workspace buffer on the others
      Buffer buf = upload(scatter_input(r(), n * P()), t);
      const int64_t ws_live = g->ledger.live(Account::kWorkspace), ws_peak = g->ledger.peak(Account::kWorkspace);
      comm().reduce_scatter(buf.data(), buf.data(), n, t);
      expect_slice(buf.data(), n, r(), P(), t, "in == out");
      EXPECT_EQ(g->ledger.live(Account::kWorkspace), ws_live);
      EXPECT_EQ(g->ledger.peak(Account::kWorkspace), r() == 0 ? ws_peak : std::max(ws_peak, ws_live + nb));
    }
    {  // NCCL's in-place form: out = in + r·n
      Buffer buf = upload(scatter_input(r(), n * P()), t);
      comm().reduce_scatter(at(buf, r() * n, t), buf.data(), n, t);
      expect_slice(at(buf, r() * n, t), n, r(), P(), t, "nccl in place");
    }
  }
  EXPECT_EQ(count("reduce_scatter@world").calls, 9);
  EXPECT_EQ(count("reduce_scatter@world").bytes,
            3 * (comm_call_bytes(CommKind::kReduceScatter, n, DType::kFP32, P()) +
                 2 * comm_call_bytes(CommKind::kReduceScatter, n, DType::kBF16, P())));
}

// all_to_all: block i of rank r's output is block r of rank i's input
// (rank i's block j holds i·20 + j·4 + e, e < 3: at most 4·20 + 3, exact in
// every dtype); booked as its send buffer, n·P elements.
TEST_F(NcclComm, AllToAllTransposesTheBlocks) {
  const int64_t n = 3;
  for (DType t : kDtypes) {
    std::vector<float> x(static_cast<size_t>(n * P()));
    for (int64_t j = 0; j < P(); ++j)
      for (int64_t e = 0; e < n; ++e) x[j * n + e] = static_cast<float>(r() * 20 + j * 4 + e);
    Buffer in = upload(x, t);
    Buffer out = g->dev->alloc(n * P() * dtype_bytes(t), Account::kComm, "test");
    comm().all_to_all(out.data(), in.data(), n, t);
    const auto got = download(out.data(), n * P(), t);
    for (int64_t i = 0; i < P(); ++i)
      for (int64_t e = 0; e < n; ++e)
        ASSERT_EQ(got[i * n + e], static_cast<float>(i * 20 + r() * 4 + e)) << dtype_name(t) << " block " << i;
    EXPECT_THROW(comm().all_to_all(in.data(), in.data(), n, t), std::invalid_argument);
  }
  EXPECT_EQ(count("all_to_all@world").calls, 3);
  EXPECT_EQ(count("all_to_all@world").bytes, comm_call_bytes(CommKind::kAllToAll, n, DType::kFP32, P()) +
                                                 2 * comm_call_bytes(CommKind::kAllToAll, n, DType::kBF16, P()));
}

TEST_F(NcclComm, BroadcastFromTheLastRank) {
  const int64_t n = 33, root = P() - 1;
  for (DType t : kDtypes) {
    std::vector<float> x(n, -1.0f);
    if (r() == root)
      for (int64_t i = 0; i < n; ++i) x[i] = static_cast<float>(i + 3);
    Buffer b = upload(x, t);
    comm().broadcast(b.data(), n, t, root);
    const auto got = download(b.data(), n, t);
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(got[i], static_cast<float>(i + 3)) << i;
  }
  EXPECT_EQ(count("broadcast@world").bytes, n * 4 + 2 * n * 2);
}

TEST_F(NcclComm, SendRecvRing) {
  if (P() < 2) GTEST_SKIP() << "send/recv needs two ranks";
  const int64_t n = 100, next = (r() + 1) % P(), prev = (r() + P() - 1) % P();
  std::vector<float> x(n);
  for (int64_t i = 0; i < n; ++i) x[i] = static_cast<float>(r() * 1000 + i);
  Buffer out = upload(x, DType::kBF16);
  Buffer in = g->dev->alloc(n * 2, Account::kComm);
  if (r() % 2 == 0) {  // blocking and rendezvous: even ranks send first, odd ranks receive first
    comm().send(out.data(), n, DType::kBF16, next);
    comm().recv(in.data(), n, DType::kBF16, prev);
  } else {
    comm().recv(in.data(), n, DType::kBF16, prev);
    comm().send(out.data(), n, DType::kBF16, next);
  }
  const auto got = download(in.data(), n, DType::kBF16);
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(got[i], static_cast<float>(prev * 1000 + i)) << i;
  EXPECT_EQ(count("send@world").bytes, n * 2);
  EXPECT_EQ(count("recv@world").bytes, n * 2);
}

TEST_F(NcclComm, StartedCollectivesMatchTheBlockingOnesAndBookOnce) {
  const int64_t n = 256;
  const DType t = DType::kBF16;
  std::vector<float> x(n);
  for (int64_t i = 0; i < n; ++i) x[i] = static_cast<float>(r() + 1 + i % 7);
  Buffer ar = upload(x, t);
  Buffer ag_in = upload(gather_input(r(), n), t);
  Buffer ag_out = g->dev->alloc(n * 2 * P(), Account::kComm);
  Buffer rs = upload(scatter_input(r(), n * P()), t);  // in == out: staged on rank > 0
  auto h1 = comm().all_reduce_start(ar.data(), n, t);
  auto h2 = comm().all_gather_start(ag_out.data(), ag_in.data(), n, t);
  auto h3 = comm().reduce_scatter_start(rs.data(), rs.data(), n, t);
  EXPECT_TRUE(g->counters.by_key().empty());  // booked when complete, not at start
  // test() until the reduce-scatter is done (bounded: a hang fails, not blocks).
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!h3->test()) ASSERT_LT(std::chrono::steady_clock::now(), deadline) << "reduce_scatter_start never completed";
  h3->wait();  // idempotent after test() said done
  h2->wait();
  h1->wait();
  h1->wait();
  // Device-stream work queued after wait() sees the result: double it on the GPU.
  g->dev->scale(ar.data(), t, 2.0f, n);
  const auto got = download(ar.data(), n, t);
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(got[i], 2.0f * static_cast<float>(tri(P()) + P() * (i % 7))) << i;
  expect_gathered(ag_out.data(), n, P(), t, "started");
  expect_slice(rs.data(), n, r(), P(), t, "started in == out");
  for (auto [key, kind] :
       {std::pair{"all_reduce@world", CommKind::kAllReduce}, std::pair{"all_gather@world", CommKind::kAllGather},
        std::pair{"reduce_scatter@world", CommKind::kReduceScatter}}) {
    EXPECT_EQ(count(key).calls, 1) << key;
    EXPECT_EQ(count(key).bytes, comm_call_bytes(kind, n, t, P())) << key;
    EXPECT_GT(count(key).seconds, 0.0) << key;
  }
}

TEST_F(NcclComm, BlockingCallAfterAStartedOneKeepsIssueOrder) {
  const int64_t n = 128;
  std::vector<float> x(n, static_cast<float>(r() + 1));
  Buffer a = upload(x, DType::kFP32), b = upload(x, DType::kFP32);
  auto h = comm().all_reduce_start(a.data(), n, DType::kFP32);
  comm().all_reduce(b.data(), n, DType::kFP32);
  h->wait();
  for (const Buffer* buf : {&a, &b}) {
    const auto got = download(buf->data(), n, DType::kFP32);
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(got[i], static_cast<float>(tri(P()))) << i;
  }
  EXPECT_EQ(count("all_reduce@world").calls, 2);
}

TEST_F(NcclComm, DestroyingAnUnwaitedRequestWaitsAndBooks) {
  const int64_t n = 64;
  std::vector<float> x(n, static_cast<float>(r() + 1));
  Buffer a = upload(x, DType::kFP32);
  { auto h = comm().all_reduce_start(a.data(), n, DType::kFP32); }
  const auto got = download(a.data(), n, DType::kFP32);
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(got[i], static_cast<float>(tri(P()))) << i;
  EXPECT_EQ(count("all_reduce@world").calls, 1);
  EXPECT_EQ(count("all_reduce@world").bytes, n * 4);
}

TEST_F(NcclComm, BarrierBooksNothingAndBadArgumentsThrow) {
  comm().barrier();
  EXPECT_TRUE(g->counters.by_key().empty());
  Buffer b = g->dev->alloc(16, Account::kComm);
  EXPECT_THROW(comm().all_reduce(b.data(), -1, DType::kFP32), std::invalid_argument);
  EXPECT_THROW(comm().broadcast(b.data(), 4, DType::kFP32, P()), std::invalid_argument);
  EXPECT_THROW(comm().send(b.data(), 4, DType::kFP32, P()), std::invalid_argument);
  EXPECT_TRUE(g->counters.by_key().empty());
}

TEST_F(NcclComm, MpiGroupsOnTheCudaBackendUseNccl) {
  Layout l;
  l.dp = P();
  CommCounters counters;
  Groups groups = make_mpi_groups(l, counters, *g->dev, false, comm_backend_for("cuda"));
  EXPECT_EQ(groups.dp->overlaps_compute(), P() > 1);  // NcclComm; a one-rank group is a self comm
  EXPECT_FALSE(groups.tp->overlaps_compute());
  std::vector<float> x(8, static_cast<float>(r() + 1));
  Buffer b = upload(x, DType::kFP32);
  groups.dp->all_reduce(b.data(), 8, DType::kFP32);
  EXPECT_EQ(download(b.data(), 8, DType::kFP32)[7], static_cast<float>(tri(P())));
  if (P() > 1) {
    EXPECT_EQ(counters.by_key().at("all_reduce@dp").bytes, 32);
  }
}

}  // namespace
}  // namespace gpuledger

int main(int argc, char** argv) {
  using namespace gpuledger;
  MPI_Init(&argc, &argv);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  ::testing::InitGoogleTest(&argc, argv);
  // Skip together: every rank needs a GPU of its own.
  int gpus = 0;
  if (cudaGetDeviceCount(&gpus) != cudaSuccess) {
    cudaGetLastError();
    gpus = 0;
  }
  int fewest = 0;
  MPI_Allreduce(&gpus, &fewest, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (fewest < size) {
    if (rank == 0)
      std::printf("SKIPPED: %d rank(s) need as many GPUs, %d visible (NCCL: one rank per GPU)\n", size, fewest);
    MPI_Finalize();
    return 77;
  }
  int failed = 0;
  {
    World world;
    world.rank = rank;
    world.size = size;
    try {
      world.dev = make_device("cuda", world.ledger, rank);
      if (rank == 0) std::printf("device: %s, %d rank(s)\n", world.dev->description().c_str(), size);
      std::vector<int64_t> all(static_cast<size_t>(size));
      std::iota(all.begin(), all.end(), int64_t{0});
      world.comm = make_nccl_comm(split_world_comm("world", world.counters, all), world.counters, *world.dev);
    } catch (const std::exception& e) {  // e.g. ncclCommInitRank failing on every rank
      std::fprintf(stderr, "[rank %d] setup failed: %s\n", rank, e.what());
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
    g = &world;
    if (rank != 0) {
      auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
      delete listeners.Release(listeners.default_result_printer());
    }
    failed = RUN_ALL_TESTS() != 0 ? 1 : 0;
    g = nullptr;
  }
  int any_failed = 0;
  MPI_Allreduce(&failed, &any_failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (any_failed && !failed) std::fprintf(stderr, "[rank %d] a test failed on another rank\n", rank);
  MPI_Finalize();
  return any_failed ? 1 : 0;
}
