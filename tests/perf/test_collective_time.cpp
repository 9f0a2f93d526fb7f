// Collective time against hand-computed cases: α·steps + bytes·busbw_factor/β,
// the ring's step counts, the tree's α term, and a placed group's link rule.
#include <gtest/gtest.h>

#include <stdexcept>

#include "perf/collective_time.h"

using namespace gpuledger;
using namespace gpuledger::perf;

namespace {

constexpr int64_t kGiB = int64_t{1} << 30;

NetworkProfile two_class_net() {
  NetworkProfile n;
  n.name = "test";
  n.provenance = {kPublished, "", ""};
  n.ranks_per_node = {8, "test"};
  n.intra_node = LinkFigures{"nvlink", {10e-6, "test"}, {100e9, "test"}};
  n.inter_node = LinkFigures{"ib", {20e-6, "test"}, {40e9, "test"}};
  return n;
}

}  // namespace

TEST(CollectiveTime, AllReduceOneGibOverEightRanks) {
  const double t = collective_seconds(two_class_net(), CommKind::kAllReduce, kGiB, 8, LinkClass::kIntraNode);
  // 2·7 steps of 10 µs, and 1 GiB · 2·7/8 = 1.75 GiB over 100 GB/s.
  EXPECT_DOUBLE_EQ(t, 2 * 7 * 10e-6 + 1073741824.0 * 1.75 / 100e9);
  EXPECT_NEAR(t, 0.018930, 1e-6);
}

TEST(CollectiveTime, ReduceScatterAllGatherSendAndBroadcast) {
  const NetworkProfile n = two_class_net();
  // Booked as the input (reduce-scatter) / output (all-gather): 7 steps, factor 7/8.
  EXPECT_DOUBLE_EQ(collective_seconds(n, CommKind::kReduceScatter, 8 << 20, 8, LinkClass::kInterNode),
                   7 * 20e-6 + (8 << 20) * 0.875 / 40e9);
  EXPECT_DOUBLE_EQ(collective_seconds(n, CommKind::kAllGather, 8 << 20, 8, LinkClass::kIntraNode),
                   7 * 10e-6 + (8 << 20) * 0.875 / 100e9);
  EXPECT_DOUBLE_EQ(collective_seconds(n, CommKind::kSend, 1 << 20, 2, LinkClass::kInterNode), 20e-6 + (1 << 20) / 40e9);
  EXPECT_DOUBLE_EQ(collective_seconds(n, CommKind::kBroadcast, 1 << 20, 4, LinkClass::kIntraNode),
                   3 * 10e-6 + (1 << 20) / 100e9);
}

TEST(CollectiveTime, ReproducesNcclTestsBusbw) {
  // bytes · factor / t with α = 0 is exactly β: nccl-tests' busbw definition.
  NetworkProfile n = two_class_net();
  n.intra_node->latency_seconds.value = 0;
  for (CommKind k : {CommKind::kAllReduce, CommKind::kReduceScatter, CommKind::kAllGather, CommKind::kAllToAll}) {
    const double t = collective_seconds(n, k, kGiB, 8, LinkClass::kIntraNode);
    EXPECT_DOUBLE_EQ(kGiB * busbw_factor(k, 8) / t, 100e9) << comm_kind_name(k);
  }
}

TEST(CollectiveTime, OneRankMovesNothingAndCopiesAreNotCollectives) {
  const NetworkProfile n = two_class_net();
  EXPECT_EQ(collective_seconds(n, CommKind::kAllReduce, kGiB, 1, LinkClass::kIntraNode), 0.0);
  EXPECT_THROW(collective_seconds(n, CommKind::kCopyToHost, 1024, 1, LinkClass::kIntraNode), std::invalid_argument);
  EXPECT_THROW(collective_seconds(n, CommKind::kAllReduce, -1, 8, LinkClass::kIntraNode), std::invalid_argument);
}

TEST(CollectiveTime, MissingLinkClassIsNamed) {
  NetworkProfile n = two_class_net();
  n.inter_node.reset();
  try {
    collective_seconds(n, CommKind::kAllReduce, 1024, 2, LinkClass::kInterNode);
    FAIL() << "expected a throw";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("inter_node"), std::string::npos) << e.what();
  }
}

TEST(GroupCollectiveTime, OneMemberPerNodeRunsOnTheNic) {
  // dp 2 of tp 8 × dp 2, 8 per node: every step inter-node, β the NIC's.
  const GroupPlacement g{2, 2, 1, LinkClass::kInterNode};
  EXPECT_DOUBLE_EQ(group_busbw_bytes_per_s(two_class_net(), g), 40e9);
  EXPECT_DOUBLE_EQ(group_collective_seconds(two_class_net(), CommKind::kAllReduce, kGiB, g),
                   2 * 20e-6 + kGiB * 1.0 / 40e9);
}

TEST(GroupCollectiveTime, SeveralMembersPerNodeDriveSeveralNics) {
  // 16 ranks on 2 nodes, 8 on each: min(β_intra, 8·β_nic) = min(100, 320) GB/s;
  // of 2·15 = 30 steps, 2·(2−1) = 2 cross nodes.
  const GroupPlacement g{16, 2, 8, LinkClass::kInterNode};
  EXPECT_DOUBLE_EQ(group_busbw_bytes_per_s(two_class_net(), g), 100e9);
  EXPECT_DOUBLE_EQ(group_collective_seconds(two_class_net(), CommKind::kAllReduce, kGiB, g),
                   28 * 10e-6 + 2 * 20e-6 + kGiB * (2.0 * 15 / 16) / 100e9);
  // 2 per node: 2·40 = 80 GB/s < 100.
  EXPECT_DOUBLE_EQ(group_busbw_bytes_per_s(two_class_net(), GroupPlacement{4, 2, 2, LinkClass::kInterNode}), 80e9);
}

TEST(GroupCollectiveTime, TreeLatencyIsLogarithmicInNodes) {
  // 64 ranks, 8 nodes of 8: ring α = 126 steps (14 of them inter-node); tree
  // α = 2·((8−1)·10 µs + log2(8)·20 µs) = 260 µs.
  const GroupPlacement g{64, 8, 8, LinkClass::kInterNode};
  const NetworkProfile n = two_class_net();
  const double bw = 4096.0 * (2.0 * 63 / 64) / 100e9;
  EXPECT_DOUBLE_EQ(group_collective_seconds(n, CommKind::kAllReduce, 4096, g, AllReduceAlgo::kRing),
                   112 * 10e-6 + 14 * 20e-6 + bw);
  EXPECT_DOUBLE_EQ(group_collective_seconds(n, CommKind::kAllReduce, 4096, g, AllReduceAlgo::kTree),
                   2 * (7 * 10e-6 + 3 * 20e-6) + bw);
  EXPECT_THROW(group_collective_seconds(n, CommKind::kAllGather, 4096, g, AllReduceAlgo::kTree), std::invalid_argument);
}

TEST(GroupCollectiveTime, IntraNodeGroupEqualsTheOneClassFormula) {
  const NetworkProfile n = two_class_net();
  const GroupPlacement g{8, 1, 8, LinkClass::kIntraNode};
  EXPECT_DOUBLE_EQ(group_collective_seconds(n, CommKind::kAllGather, 1 << 24, g),
                   collective_seconds(n, CommKind::kAllGather, 1 << 24, 8, LinkClass::kIntraNode));
}

TEST(GroupCollectiveTime, AMeasuredOneNodeProfilePricesByItsSamples) {
  NetworkProfile n = two_class_net();
  n.inter_node.reset();  // one node measured
  n.samples = {{CommKind::kAllReduce, 2, 1000, 10e-6},
               {CommKind::kAllReduce, 2, 3000, 50e-6},
               {CommKind::kAllReduce, 2, 5000, 60e-6},
               {CommKind::kSend, 2, 1000, 4e-6},
               {CommKind::kSend, 2, 2000, 6e-6}};
  const GroupPlacement two{2, 1, 2, LinkClass::kIntraNode};
  // Linear in bytes between neighbours: 2000 B is half-way from 10 to 50 µs.
  EXPECT_DOUBLE_EQ(group_collective_seconds(n, CommKind::kAllReduce, 2000, two), 30e-6);
  EXPECT_DOUBLE_EQ(group_collective_seconds(n, CommKind::kAllReduce, 3000, two), 50e-6);
  // Below the samples the smallest one's time; beyond them the last two's slope (5 ns per byte).
  EXPECT_DOUBLE_EQ(group_collective_seconds(n, CommKind::kAllReduce, 10, two), 10e-6);
  EXPECT_DOUBLE_EQ(group_collective_seconds(n, CommKind::kAllReduce, 7000, two), 70e-6);
  // A recv is priced as its send.
  EXPECT_DOUBLE_EQ(group_collective_seconds(n, CommKind::kRecv, 1500, two), 5e-6);
  // A kind without samples, or a group of another size, keeps α and β.
  const GroupPlacement four{4, 1, 4, LinkClass::kIntraNode};
  EXPECT_DOUBLE_EQ(group_collective_seconds(n, CommKind::kAllReduce, 4096, four),
                   collective_seconds(n, CommKind::kAllReduce, 4096, 4, LinkClass::kIntraNode));
  EXPECT_DOUBLE_EQ(group_collective_seconds(n, CommKind::kAllGather, 4096, two),
                   collective_seconds(n, CommKind::kAllGather, 4096, 2, LinkClass::kIntraNode));
  // A profile that also has an inter-node link measured across hosts: its samples are not one node's.
  n.inter_node = two_class_net().inter_node;
  EXPECT_DOUBLE_EQ(group_collective_seconds(n, CommKind::kAllReduce, 2000, two),
                   collective_seconds(n, CommKind::kAllReduce, 2000, 2, LinkClass::kIntraNode));
}
