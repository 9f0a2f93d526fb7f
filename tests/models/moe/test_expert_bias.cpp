// DeepSeek-V3's expert bias (models/moe/expert_bias.h): zeros at start, booked
// as E fp32 per MoE layer under `weights`, and the update rule of Megatron-LM's
// get_updated_expert_bias (moe_utils.py at d98e8a64ddf34856e74b24714e3bedb2f5a39553),
// b_e += 1e-3·sign(mean − c_e), on counts made by hand.
#include <gtest/gtest.h>

#include <vector>

#include "comm/sim_comm.h"
#include "kernels/ledger.h"
#include "kernels/registry/registry.h"
#include "models/moe/expert_bias.h"

namespace gpuledger {
namespace {

TEST(ExpertBias, UpdateMovesTowardsTheMeanLoad) {
  Ledger ledger;
  auto dev = make_device("cpu", ledger);
  CommCounters counters;
  SimComm one("dp", counters, 1, 0);
  // local layers: dense, MoE, MoE
  ExpertBias b(*dev, 4, {false, true, true});
  EXPECT_EQ(b.layer(0), nullptr);
  EXPECT_EQ(ledger.peak_by_account()[Account::kWeights], 2 * 4 * 4);
  EXPECT_EQ(b.values(1), std::vector<float>(4, 0.0f));
  // layer 1 over two microbatches: 3 + 2, 0 + 1, 1 + 2, 2 + 1 = 5, 1, 3, 3 (mean 3)
  b.count(1, {3, 0, 1, 2});
  b.count(1, {2, 1, 2, 1});
  // layer 2: 2, 2, 2, 2 (balanced: no move)
  b.count(2, {2, 2, 2, 2});
  b.update(one);
  EXPECT_EQ(b.values(1), (std::vector<float>{-1e-3f, 1e-3f, 0.0f, 0.0f}));
  EXPECT_EQ(b.values(2), std::vector<float>(4, 0.0f));
  // the counts restart: one more step of 0, 4, 4, 0 (mean 2) on layer 1
  b.count(1, {0, 4, 4, 0});
  b.count(2, {4, 0, 0, 0});
  b.update(one);
  EXPECT_EQ(b.values(1), (std::vector<float>{-1e-3f + 1e-3f, 1e-3f - 1e-3f, -1e-3f, 1e-3f}));
  EXPECT_EQ(b.values(2), (std::vector<float>{-1e-3f, 1e-3f, 1e-3f, 1e-3f}));
}

}  // namespace
}  // namespace gpuledger
