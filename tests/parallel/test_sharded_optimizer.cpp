// ShardedOptimizer with AdamW (parallel/zero/sharded_optimizer.h, adamw.h)
// alone: under ZeRO 1 on a simulated rank of dp = 2 (bf16, fp32 master) the
// master and the Adam moments hold ⌈P_u/2⌉ elements per unit and the step
// all-gathers each unit's updated weights; on the cpu device without ZeRO the
// first AdamW step moves every fp32 weight by lr against its gradient's sign.
#include "parallel/zero/sharded_optimizer.h"

#include <gtest/gtest.h>

#include <vector>

#include "parallel/zero/elementwise_rule.h"
#include "part_rig.h"

namespace gpuledger {
namespace {

TEST(ShardedOptimizer, Zero1StatesHoldTheShardAndTheStepGathersTheWeights) {
  const ModelConfig m = load_model("tiny-llama");
  RunConfig r = testing::small_run();
  r.dtype = DType::kBF16;
  testing::PartRig rig("meta", m, r, testing::layout_of(2, 1, 1, false, 1), 1);
  const int64_t master0 = rig.ledger.live(Account::kMaster), optim0 = rig.ledger.live(Account::kOptim);
  ShardedOptimizer opt(*rig.dev, *rig.ctx.dp, *rig.params, r, /*zero=*/1, ShardGroups{2, 1},
                       std::make_unique<AdamW>(*rig.dev, r.lr, r.weight_decay));
  int64_t shard_elems = 0, gathered_bytes = 0;
  for (const UnitLayout& u : rig.params->layout().units) {
    shard_elems += (u.elems + 1) / 2;
    gathered_bytes += 2 * 2 * ((u.elems + 1) / 2);
  }
  EXPECT_EQ(rig.ledger.live(Account::kMaster) - master0, 4 * shard_elems);
  EXPECT_EQ(rig.ledger.live(Account::kOptim) - optim0, 2 * 4 * shard_elems);
  opt.step(1, 1.0f);
  EXPECT_EQ(rig.count("all_gather@dp").calls, static_cast<int64_t>(rig.params->units()));
  EXPECT_EQ(rig.count("all_gather@dp").bytes, gathered_bytes);
  EXPECT_EQ(opt.whole_master(0), nullptr);  // sharded
}

TEST(ShardedOptimizer, FirstAdamWStepMovesEachWeightByTheLearningRate) {
  const ModelConfig m = load_model("tiny-llama");
  RunConfig r = testing::small_run();
  r.lr = 1e-2;
  testing::PartRig rig("cpu", m, r, testing::layout_of(1, 1, 1), 0);
  ShardedOptimizer opt(*rig.dev, *rig.ctx.dp, *rig.params, r, /*zero=*/0, ShardGroups{},
                       std::make_unique<AdamW>(*rig.dev, r.lr, /*weight_decay=*/0.0));
  const size_t u = 1;  // layer.0
  const int64_t n = rig.params->layout().units[u].elems;
  std::vector<float> before(static_cast<size_t>(n)), after(static_cast<size_t>(n));
  rig.dev->copy_to_host(before.data(), rig.params->weights(u).data(), 4 * n);
  for (size_t k = 0; k < rig.params->units(); ++k) {
    const int64_t e = rig.params->layout().units[k].elems;
    std::vector<float> g(static_cast<size_t>(e));
    for (int64_t i = 0; i < e; ++i) g[static_cast<size_t>(i)] = i % 2 == 0 ? 0.25f : -0.5f;
    rig.dev->copy_from_host(rig.params->grads(k).data(), g.data(), 4 * e);
  }
  opt.step(1, 1.0f);
  rig.dev->copy_to_host(after.data(), rig.params->weights(u).data(), 4 * n);
  // step 1: m̂ = g, v̂ = g², so Δw = −lr·g/(|g| + ε)
  for (int64_t i = 0; i < n; i += 97) {
    const float want = before[static_cast<size_t>(i)] - (i % 2 == 0 ? 1.0f : -1.0f) * static_cast<float>(r.lr);
    EXPECT_NEAR(after[static_cast<size_t>(i)], want, 1e-6f) << i;
  }
  EXPECT_EQ(rig.count("all_gather@dp").calls, 0);
}

}  // namespace
}  // namespace gpuledger
