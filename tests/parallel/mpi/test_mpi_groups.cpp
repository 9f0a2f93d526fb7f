// make_mpi_groups on 2 and 4 real ranks: the world size must match the layout
// (a LayoutError on every rank, no hang), one-rank groups are self comms that
// book nothing, the tp/dp/pp groups hold the ranks the layout's formula gives
// (worked out by hand below), and the emb group joins the first and last
// pipeline stage when embeddings are tied.
#include "kernels/registry/registry.h"
#include "parallel/groups.h"

#include <gtest/gtest.h>
#include <mpi.h>

#include "comm/mpi_runtime.h"
#include "kernels/device.h"
#include "kernels/ledger.h"

namespace gpuledger {
namespace {

struct Rig {
  Ledger ledger;
  std::unique_ptr<Device> dev = make_device("cpu", ledger);
  CommCounters counters;
  int64_t rank = 0, size = 1;
  Rig() {
    int r = 0, s = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &r);
    MPI_Comm_size(MPI_COMM_WORLD, &s);
    rank = r;
    size = s;
  }
};

float sum_over(Comm& c, float x) {
  c.all_reduce(&x, 1, DType::kFP32);
  return x;
}

TEST(MpiGroups, WorldSizeMustMatchTheLayout) {
  MpiRuntime rt;
  Rig r;
  Layout l;
  l.dp = 3;
  l.tp = 2;  // 6 ranks; the job has 2 or 4
  try {
    make_mpi_groups(l, r.counters, *r.dev);
    FAIL() << "no LayoutError";
  } catch (const LayoutError& e) {
    EXPECT_EQ(std::string(e.what()),
              "mpirun -np " + std::to_string(r.size) + " but the layout needs dp·tp·pp = 3·2·1 = 6");
  }
  // Every rank threw, none is stuck: the next collective completes.
  AgreedStatus s = agree_status(true, "");
  EXPECT_TRUE(s.all_ok);
}

TEST(MpiGroups, PureDataParallel) {
  Rig r;
  Layout l;
  l.dp = r.size;
  Groups g = make_mpi_groups(l, r.counters, *r.dev);
  EXPECT_EQ(g.rank, r.rank);
  EXPECT_EQ(g.tp->size(), 1);
  EXPECT_EQ(g.pp->size(), 1);
  EXPECT_EQ(g.dp->size(), r.size);
  EXPECT_EQ(g.dp->rank(), r.rank);
  EXPECT_EQ(g.emb, nullptr);
  EXPECT_EQ(sum_over(*g.tp, 5.0f), 5.0f);  // one rank: unchanged, not booked
  EXPECT_EQ(sum_over(*g.dp, 1.0f), float(r.size));
  ASSERT_EQ(r.counters.by_key().size(), 1u);
  EXPECT_EQ(r.counters.by_key().at("all_reduce@dp").bytes, 4);
}

TEST(MpiGroups, TensorAndPipelineWithTiedEmbeddings) {
  Rig r;
  // 4 ranks: tp 2 × pp 2. rank = tp + 2·pp: tp {0,1} {2,3}; pp {0,2} {1,3}; emb = pp groups.
  // 2 ranks: pp 2. pp {0,1}; emb {0,1}; tp and dp of one rank.
  Layout l;
  l.pp = 2;
  l.tp = r.size / 2;
  Groups g = make_mpi_groups(l, r.counters, *r.dev, /*tied_embeddings=*/true);
  RankContext c = g.context();
  const std::vector<std::vector<int64_t>> pp4 = {{0, 2}, {1, 3}, {0, 2}, {1, 3}};
  const std::vector<std::vector<int64_t>> tp4 = {{0, 1}, {0, 1}, {2, 3}, {2, 3}};
  std::vector<int64_t> pp_members = r.size == 4 ? pp4[r.rank] : std::vector<int64_t>{0, 1};
  std::vector<int64_t> tp_members = r.size == 4 ? tp4[r.rank] : std::vector<int64_t>{r.rank};
  ASSERT_EQ(c.pp->size(), 2);
  EXPECT_EQ(pp_members[c.pp->rank()], r.rank);
  EXPECT_EQ(c.tp->size(), int64_t(tp_members.size()));
  EXPECT_EQ(c.dp->size(), 1);
  ASSERT_NE(c.emb, nullptr);
  EXPECT_EQ(c.emb->size(), 2);
  EXPECT_EQ(c.emb->rank(), c.coords.pp == 0 ? 0 : 1);
  EXPECT_EQ(sum_over(*c.pp, float(r.rank)), float(pp_members[0] + pp_members[1]));
  EXPECT_EQ(sum_over(*c.emb, float(r.rank)), float(pp_members[0] + pp_members[1]));
  if (r.size == 4) {
    EXPECT_EQ(sum_over(*c.tp, float(r.rank)), float(tp_members[0] + tp_members[1]));
  }
  // Stage 0 sends its activations to stage 1 over pp.
  float act = float(100 + r.rank);
  if (c.first_stage())
    c.pp->send(&act, 1, DType::kFP32, 1);
  else
    c.pp->recv(&act, 1, DType::kFP32, 0);
  EXPECT_EQ(act, float(100 + pp_members[0]));
  EXPECT_EQ(r.counters.by_key().count(c.first_stage() ? "send@pp" : "recv@pp"), 1u);
  EXPECT_EQ(r.counters.by_key().count("all_reduce@dp"), 0u);
}

TEST(MpiGroups, EmbSkipsMiddleStages) {
  Rig r;
  Layout l;
  l.pp = r.size;  // 2 stages, or 4 with two middle ones
  Groups g = make_mpi_groups(l, r.counters, *r.dev, true);
  const bool end = r.rank == 0 || r.rank == r.size - 1;
  ASSERT_EQ(g.emb != nullptr, end);
  if (end) {
    EXPECT_EQ(sum_over(*g.emb, float(r.rank)), float(r.size - 1));
  }
  Groups untied = make_mpi_groups(l, r.counters, *r.dev, false);
  EXPECT_EQ(untied.emb, nullptr);
}

}  // namespace
}  // namespace gpuledger
