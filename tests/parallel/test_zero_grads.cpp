// ZeroGradShards (parallel/zero/grad_shards.h) alone, on one simulated rank of
// dp = 2 under ZeRO 2 with tied embeddings at p = 1: one reduce-scatter per
// unit backward of ⌈P_u/2⌉ elements per rank, and the head's side buffer
// "tied_word.grad" of V·h elements of g booked in comm from the head's
// backward to the embedding's.
#include "parallel/zero/grad_shards.h"

#include <gtest/gtest.h>

#include "part_rig.h"

namespace gpuledger {
namespace {

TEST(ZeroGradShards, ReduceScattersEachUnitAndStagesTheTiedWordGradient) {
  const ModelConfig m = load_model("tiny-gpt");  // tied, V = 97, h = 64
  testing::PartRig rig("meta", m, testing::small_run(), testing::layout_of(2, 1, 1, false, 2), 0,
                       /*shard_grads=*/true);
  const ParamLayout& pl = rig.params->layout();
  ASSERT_TRUE(pl.head_uses_embedding);
  ZeroGradShards part(*rig.dev, *rig.ctx.dp, *rig.ctx.expert_dp, *rig.stage, *rig.params);
  const int64_t comm0 = rig.ledger.live(Account::kComm);
  const int64_t side = 4 * 97 * 64;

  int64_t bytes = 0;
  for (int u = pl.head_unit; u >= 0; --u) {  // the backward's unit order
    part.before_backward(static_cast<size_t>(u));
    if (u == pl.head_unit) {
      EXPECT_EQ(rig.ledger.live(Account::kComm), comm0 + side);
      EXPECT_TRUE(part.word_grad_sink().has_value());
    }
    if (u == pl.embedding_unit) {
      EXPECT_EQ(rig.ledger.live(Account::kComm), comm0);  // copied in, freed
    }
    part.after_backward(static_cast<size_t>(u));
    bytes += 4 * 2 * ((pl.units[static_cast<size_t>(u)].elems + 1) / 2);
  }
  EXPECT_EQ(rig.count("reduce_scatter@dp").calls, static_cast<int64_t>(pl.units.size()));
  EXPECT_EQ(rig.count("reduce_scatter@dp").bytes, bytes);
  EXPECT_EQ(rig.ledger.peak(Account::kComm), comm0 + side);
}

}  // namespace
}  // namespace gpuledger
