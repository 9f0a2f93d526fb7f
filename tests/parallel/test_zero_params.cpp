// ZeroParamGather (parallel/zero/param_gather.h) alone, on one simulated rank
// of dp = 2 under ZeRO 3 with --prefetch 1 and tied embeddings at p = 1: the
// forward gathers each unit and the next once, frees each at its end, and
// gathers the embedding again for the head; the gathered copies are booked in
// weights (2·⌈P_u/2⌉ elements each) and all freed after the pass.
#include "parallel/zero/param_gather.h"

#include <gtest/gtest.h>

#include "part_rig.h"

namespace gpuledger {
namespace {

TEST(ZeroParamGather, ForwardWindowAndTheEmbeddingForTheTiedHead) {
  const ModelConfig m = load_model("tiny-gpt");  // units: embedding, layer.0, layer.1, head
  testing::PartRig rig("meta", m, testing::small_run(), testing::layout_of(2, 1, 1, false, 3), 0,
                       /*shard_grads=*/true, /*shard_weights=*/true);
  const ParamLayout& pl = rig.params->layout();
  ASSERT_EQ(pl.units.size(), 4u);
  auto padded = [&](size_t u) { return 4 * 2 * ((pl.units[u].elems + 1) / 2); };
  ZeroParamGather part(*rig.dev, *rig.ctx.dp, *rig.ctx.expert_dp, *rig.stage, *rig.params, /*prefetch=*/1);
  const int64_t w0 = rig.ledger.live(Account::kWeights);

  part.before_forward(0);  // 0 and 1
  EXPECT_EQ(rig.ledger.live(Account::kWeights), w0 + padded(0) + padded(1));
  part.after_forward(0);
  part.before_forward(1);  // 2 (1 already gathered)
  part.after_forward(1);
  part.before_forward(2);  // 3
  part.after_forward(2);
  part.before_forward(3);  // the embedding again, for the tied head
  EXPECT_EQ(rig.ledger.live(Account::kWeights), w0 + padded(3) + padded(0));
  part.after_forward(3);
  EXPECT_EQ(rig.ledger.live(Account::kWeights), w0);
  EXPECT_EQ(rig.count("all_gather@dp").calls, 5);
  EXPECT_EQ(rig.count("all_gather@dp").bytes, 2 * padded(0) + padded(1) + padded(2) + padded(3));

  part.before_backward(3);  // the head and unit 2; unit 1 not (prefetch 1), so the embedding too
  EXPECT_EQ(rig.ledger.live(Account::kWeights), w0 + padded(3) + padded(2) + padded(0));
  part.release_all();
  EXPECT_EQ(rig.ledger.live(Account::kWeights), w0);
}

}  // namespace
}  // namespace gpuledger
