// Groups for the meta simulation and for one rank: which comm each group
// gets (size, rank in the group), the emb group of tied embeddings, and that a
// one-rank group books nothing. Expected groups come from the layout's rank
// formula rank = tp + T·(dp + D·pp), worked out by hand.
#include "kernels/registry/registry.h"
#include "parallel/groups.h"

#include <gtest/gtest.h>

#include "kernels/device.h"
#include "kernels/ledger.h"

namespace gpuledger {
namespace {

struct Rig {
  Ledger ledger;
  std::unique_ptr<Device> dev = make_device("meta", ledger);
  CommCounters counters;
};

TEST(Groups, SimGroupsOfRank5InDp2Tp2Pp2) {
  Rig r;
  Layout l;
  l.dp = 2;
  l.tp = 2;
  l.pp = 2;
  // rank 5 = tp 1 + 2·(dp 0 + 2·pp 1): tp {4,5}, dp {5,7}, pp {1,5}, emb {1,5}.
  Groups g = make_sim_groups(l, 5, r.counters, *r.dev, /*tied_embeddings=*/true);
  EXPECT_EQ(g.tp->size(), 2);
  EXPECT_EQ(g.tp->rank(), 1);
  EXPECT_EQ(g.tp->group(), "tp");
  EXPECT_EQ(g.dp->size(), 2);
  EXPECT_EQ(g.dp->rank(), 0);
  EXPECT_EQ(g.dp->group(), "dp");
  EXPECT_EQ(g.pp->size(), 2);
  EXPECT_EQ(g.pp->rank(), 1);
  EXPECT_EQ(g.pp->group(), "pp");
  ASSERT_NE(g.emb, nullptr);
  EXPECT_EQ(g.emb->size(), 2);
  EXPECT_EQ(g.emb->rank(), 1);
  EXPECT_EQ(g.emb->group(), "emb");

  RankContext c = g.context();
  EXPECT_EQ(c.rank, 5);
  EXPECT_EQ(c.coords, (Coords{0, 1, 1}));
  EXPECT_TRUE(c.last_stage());
  EXPECT_EQ(c.tp, g.tp.get());
  EXPECT_EQ(c.emb, g.emb.get());
  EXPECT_EQ(c.counters, &r.counters);

  c.tp->all_reduce(nullptr, 8, DType::kBF16);
  c.emb->all_reduce(nullptr, 100, DType::kFP32);
  ASSERT_EQ(r.counters.by_key().size(), 2u);
  EXPECT_EQ(r.counters.by_key().at("all_reduce@tp").bytes, 16);
  EXPECT_EQ(r.counters.by_key().at("all_reduce@emb").bytes, 400);
}

TEST(Groups, EmbGroupOnlyWhenTiedAndPipelined) {
  Layout l;
  l.dp = 1;
  l.tp = 2;
  l.pp = 3;
  // tp 1 on stages 0, 1, 2 is rank 1, 3, 5.
  EXPECT_EQ(emb_group(l, 1, true), (std::vector<int64_t>{1, 5}));
  EXPECT_EQ(emb_group(l, 5, true), (std::vector<int64_t>{1, 5}));
  EXPECT_TRUE(emb_group(l, 3, true).empty());   // middle stage
  EXPECT_TRUE(emb_group(l, 1, false).empty());  // untied
  Layout flat;
  flat.dp = 4;
  EXPECT_TRUE(emb_group(flat, 2, true).empty());  // pp = 1: the head is on the same rank

  Rig r;
  Groups middle = make_sim_groups(l, 3, r.counters, *r.dev, true);
  EXPECT_EQ(middle.emb, nullptr);
  EXPECT_EQ(middle.context().emb, nullptr);
  Groups first = make_sim_groups(l, 0, r.counters, *r.dev, true);
  ASSERT_NE(first.emb, nullptr);
  EXPECT_EQ(first.emb->rank(), 0);
  EXPECT_EQ(first.pp->size(), 3);
  EXPECT_EQ(first.pp->rank(), 0);
}

TEST(Groups, OneRankGroupsAreSelfCommsAndBookNothing) {
  Rig r;
  Layout l;
  l.dp = 4;  // tp = pp = 1
  Groups g = make_sim_groups(l, 3, r.counters, *r.dev, true);
  EXPECT_EQ(g.tp->size(), 1);
  EXPECT_EQ(g.pp->size(), 1);
  EXPECT_EQ(g.dp->size(), 4);
  EXPECT_EQ(g.dp->rank(), 3);
  EXPECT_EQ(g.emb, nullptr);
  g.tp->all_reduce(nullptr, 1 << 20, DType::kBF16);
  g.pp->barrier();
  EXPECT_TRUE(r.counters.by_key().empty());
  EXPECT_THROW(g.pp->send(nullptr, 1, DType::kFP32, 0), std::logic_error);
}

// dp 8, ep 4, rank 6: ep group {4, 5, 6, 7} (rank 2 in it), expert-dp group
// {2, 6} (rank 1); with ep 1 the ep group is the rank and expert_dp is dp.
TEST(Groups, ExpertParallelGroups) {
  Rig r;
  Layout l;
  l.dp = 8;
  l.ep = 4;
  Groups g = make_sim_groups(l, 6, r.counters, *r.dev);
  ASSERT_NE(g.ep, nullptr);
  ASSERT_NE(g.expert_dp, nullptr);
  EXPECT_EQ(g.ep->size(), 4);
  EXPECT_EQ(g.ep->rank(), 2);
  EXPECT_EQ(g.expert_dp->size(), 2);
  EXPECT_EQ(g.expert_dp->rank(), 1);
  RankContext c = g.context();
  EXPECT_EQ(c.ep, g.ep.get());
  EXPECT_EQ(c.expert_dp, g.expert_dp.get());
  c.ep->all_to_all(nullptr, nullptr, 100, DType::kBF16);
  c.expert_dp->all_reduce(nullptr, 10, DType::kFP32);
  ASSERT_EQ(r.counters.by_key().size(), 2u);
  EXPECT_EQ(r.counters.by_key().at("all_to_all@ep").bytes, 100 * 4 * 2);
  EXPECT_EQ(r.counters.by_key().at("all_reduce@edp").bytes, 40);

  l.ep = 1;
  Groups one = make_sim_groups(l, 6, r.counters, *r.dev);
  EXPECT_EQ(one.ep->size(), 1);
  EXPECT_EQ(one.expert_dp, nullptr);
  EXPECT_EQ(one.context().expert_dp, one.dp.get());
}

TEST(Groups, SingleGroups) {
  Rig r;
  Groups g = make_single_groups(r.counters, *r.dev);
  RankContext c = g.context();
  EXPECT_EQ(c.layout.world(), 1);
  EXPECT_EQ(c.rank, 0);
  for (Comm* comm : {c.tp, c.dp, c.pp}) {
    ASSERT_NE(comm, nullptr);
    EXPECT_EQ(comm->size(), 1);
    EXPECT_EQ(comm->rank(), 0);
  }
  EXPECT_EQ(c.emb, nullptr);
  EXPECT_TRUE(c.first_stage());
  EXPECT_TRUE(c.last_stage());
}

TEST(Groups, SimRankOutsideTheWorldIsALayoutError) {
  Rig r;
  Layout l;
  l.tp = 2;
  EXPECT_THROW(make_sim_groups(l, 2, r.counters, *r.dev), LayoutError);
}

#if !GPULEDGER_HAVE_MPI
TEST(Groups, MpiGroupsNeedMpi) {
  Rig r;
  EXPECT_THROW(make_mpi_groups(Layout{}, r.counters, *r.dev), std::logic_error);
}
#endif

}  // namespace
}  // namespace gpuledger
