// The collectives' one home: names, group sizes from the layout and the
// nccl-tests bus-bandwidth factors (core/collective.h).
#include "core/collective.h"

#include <gtest/gtest.h>

#include <stdexcept>

namespace gpuledger {
namespace {

TEST(Collective, BusBandwidthFactorsAreNcclTests) {
  // nccl-tests doc/PERFORMANCE.md, "Summary".
  EXPECT_DOUBLE_EQ(busbw_factor(CommKind::kAllReduce, 4), 1.5);
  EXPECT_DOUBLE_EQ(busbw_factor(CommKind::kAllReduce, 8), 1.75);
  EXPECT_DOUBLE_EQ(busbw_factor(CommKind::kAllGather, 4), 0.75);
  EXPECT_DOUBLE_EQ(busbw_factor(CommKind::kReduceScatter, 8), 0.875);
  EXPECT_DOUBLE_EQ(busbw_factor(CommKind::kAllToAll, 8), 0.875);
  EXPECT_DOUBLE_EQ(busbw_factor(CommKind::kBroadcast, 8), 1.0);
  EXPECT_DOUBLE_EQ(busbw_factor(CommKind::kSend, 2), 1.0);
  EXPECT_DOUBLE_EQ(busbw_factor(CommKind::kRecv, 2), 1.0);
  EXPECT_DOUBLE_EQ(busbw_factor(CommKind::kCopyToHost, 1), 1.0);
  EXPECT_DOUBLE_EQ(busbw_factor(CommKind::kAllReduce, 1), 0.0);
  EXPECT_THROW(busbw_factor(CommKind::kAllReduce, 0), std::invalid_argument);
}

TEST(Collective, GroupSizesFollowTheLayout) {
  Layout l;
  l.dp = 8;
  l.tp = 4;
  l.pp = 2;
  l.cp = 3;
  l.ep = 2;
  EXPECT_EQ(comm_group_size(CommGroup::kTp, l), 4);
  EXPECT_EQ(comm_group_size(CommGroup::kDp, l), 24);  // the data-parallel group with cp: dp·cp
  EXPECT_EQ(comm_group_size(CommGroup::kCp, l), 3);
  EXPECT_EQ(comm_group_size(CommGroup::kPp, l), 2);
  EXPECT_EQ(comm_group_size(CommGroup::kEmb, l), 2);
  EXPECT_EQ(comm_group_size(CommGroup::kEp, l), 2);
  EXPECT_EQ(comm_group_size(CommGroup::kEdp, l), 4);  // dp/ep
  EXPECT_EQ(comm_group_size(CommGroup::kHost, l), 1);
  // The sizes agree with the groups the layout builds for a rank.
  for (int64_t rank : {0, 13, 191}) {
    EXPECT_EQ(static_cast<int64_t>(l.tp_group(rank).size()), comm_group_size(CommGroup::kTp, l));
    EXPECT_EQ(static_cast<int64_t>(l.dp_cp_group(rank).size()), comm_group_size(CommGroup::kDp, l));
    EXPECT_EQ(static_cast<int64_t>(l.cp_group(rank).size()), comm_group_size(CommGroup::kCp, l));
    EXPECT_EQ(static_cast<int64_t>(l.pp_group(rank).size()), comm_group_size(CommGroup::kPp, l));
    EXPECT_EQ(static_cast<int64_t>(l.ep_group(rank).size()), comm_group_size(CommGroup::kEp, l));
    EXPECT_EQ(static_cast<int64_t>(l.expert_dp_group(rank).size()), comm_group_size(CommGroup::kEdp, l));
  }
}

TEST(Collective, KeysRoundTripThroughTheirNames) {
  EXPECT_EQ(comm_key_name({CommKind::kReduceScatter, CommGroup::kEdp}), "reduce_scatter@edp");
  EXPECT_EQ(comm_key_name({CommKind::kCopyToHost, CommGroup::kHost}), "copy_d2h@host");
  for (CommKind k :
       {CommKind::kAllReduce, CommKind::kReduceScatter, CommKind::kAllGather, CommKind::kAllToAll, CommKind::kBroadcast,
        CommKind::kSend, CommKind::kRecv, CommKind::kCopyToHost, CommKind::kCopyToDevice})
    for (CommGroup g : {CommGroup::kTp, CommGroup::kDp, CommGroup::kCp, CommGroup::kPp, CommGroup::kEmb, CommGroup::kEp,
                        CommGroup::kEdp, CommGroup::kHost}) {
      const auto back = parse_comm_key(comm_key_name({k, g}));
      ASSERT_TRUE(back.has_value());
      EXPECT_EQ(*back, (CommKey{k, g}));
    }
  EXPECT_FALSE(parse_comm_key("all_reduce").has_value());
  EXPECT_FALSE(parse_comm_key("gossip@dp").has_value());
  EXPECT_FALSE(parse_comm_key("all_reduce@world").has_value());
}

}  // namespace
}  // namespace gpuledger
