// Where a layout's groups fall on nodes (rank r on node ⌊r / ranks_per_node⌋,
// Megatron rank order): intra-node iff one node holds every member.
#include <gtest/gtest.h>

#include "core/layout.h"
#include "perf/network_profile.h"

using namespace gpuledger;
using namespace gpuledger::perf;

TEST(NodeMapping, Tp8Dp2With8PerNode) {
  Layout l;
  l.tp = 8;
  l.dp = 2;
  for (int64_t r = 0; r < l.world(); ++r) {
    const GroupPlacement tp = place_group(CommGroup::kTp, l, r, 8);
    EXPECT_EQ(tp, (GroupPlacement{8, 1, 8, LinkClass::kIntraNode})) << "rank " << r;
    const GroupPlacement dp = place_group(CommGroup::kDp, l, r, 8);
    EXPECT_EQ(dp, (GroupPlacement{2, 2, 1, LinkClass::kInterNode})) << "rank " << r;
  }
  // Rank 3's dp group is {3, 11}: nodes 0 and 1.
  EXPECT_EQ(group_members(CommGroup::kDp, l, 3), (std::vector<int64_t>{3, 11}));
  EXPECT_EQ(node_of(11, 8), 1);
}

TEST(NodeMapping, Tp4Cp2Dp2With4PerNode) {
  Layout l;
  l.tp = 4;
  l.cp = 2;
  l.dp = 2;
  // Rank order tp fastest, then cp, then dp: rank = tp + 4·(cp + 2·dp).
  EXPECT_EQ(group_members(CommGroup::kCp, l, 1), (std::vector<int64_t>{1, 5}));
  EXPECT_EQ(group_members(CommGroup::kDp, l, 1), (std::vector<int64_t>{1, 5, 9, 13}));
  for (int64_t r = 0; r < l.world(); ++r) {
    EXPECT_EQ(place_group(CommGroup::kTp, l, r, 4).link, LinkClass::kIntraNode) << "rank " << r;
    // The cp pair spans nodes 2d and 2d + 1: inter-node, one member on each.
    EXPECT_EQ(place_group(CommGroup::kCp, l, r, 4), (GroupPlacement{2, 2, 1, LinkClass::kInterNode}));
    // dp·cp: 4 members on 4 nodes.
    EXPECT_EQ(place_group(CommGroup::kDp, l, r, 4), (GroupPlacement{4, 4, 1, LinkClass::kInterNode}));
  }
  // With 8 ranks per node the cp ring is inside a node and the dp·cp group spans two, two members on each.
  EXPECT_EQ(place_group(CommGroup::kCp, l, 6, 8).link, LinkClass::kIntraNode);
  EXPECT_EQ(place_group(CommGroup::kDp, l, 6, 8), (GroupPlacement{4, 2, 2, LinkClass::kInterNode}));
}

TEST(NodeMapping, PipelineEmbeddingAndHost) {
  Layout l;
  l.tp = 2;
  l.pp = 4;
  EXPECT_EQ(group_members(CommGroup::kPp, l, 1), (std::vector<int64_t>{1, 3, 5, 7}));
  EXPECT_EQ(group_members(CommGroup::kEmb, l, 3), (std::vector<int64_t>{1, 7}));
  EXPECT_EQ(place_group(CommGroup::kPp, l, 1, 4), (GroupPlacement{4, 2, 2, LinkClass::kInterNode}));
  EXPECT_EQ(place_group(CommGroup::kHost, l, 5, 4), (GroupPlacement{1, 1, 1, LinkClass::kIntraNode}));
}

TEST(NodeMapping, ExpertGroups) {
  Layout l;
  l.dp = 4;
  l.ep = 2;
  EXPECT_EQ(place_group(CommGroup::kEp, l, 2, 2).link, LinkClass::kIntraNode);   // {2, 3}
  EXPECT_EQ(place_group(CommGroup::kEdp, l, 2, 2).link, LinkClass::kInterNode);  // {0, 2}
}
