// FinalizeGrads (parallel/finalize_grads.h) alone, on one simulated rank:
// the TP-partial sums are one tp all-reduce per replicated tensor under sp,
// the tied word embedding one emb all-reduce of V'/t·h fp32, the clipped norm
// one 4-byte all-reduce per model-parallel group; on the cpu device the norm
// of known gradients and the clipping coefficient.
#include "parallel/finalize_grads.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "part_rig.h"

namespace gpuledger {
namespace {

using testing::PartRig;

TEST(FinalizeGrads, BooksTheTpPartialAndEmbeddingGroupSums) {
  const ModelConfig m = load_model("tiny-gpt");  // tied, 2 layers, V = 97, h = 64
  PartRig rig("meta", m, testing::small_run(), testing::layout_of(1, 2, 2, /*sp=*/true), /*rank=*/0);
  ASSERT_TRUE(rig.ctx.first_stage());
  FinalizeGrads fin(*rig.dev, rig.ctx, m, *rig.stage, *rig.params, std::vector<bool>(rig.params->units(), true));
  EXPECT_TRUE(fin.syncs_embedding());
  fin.reduce_model_parallel();
  // first stage: the positions, and per layer norm1 γ β, attn_out.bias, norm2 γ β, mlp_out.bias
  const int64_t h = 64;
  EXPECT_EQ(rig.count("all_reduce@tp").calls, 1 + 6);
  EXPECT_EQ(rig.count("all_reduce@tp").bytes, 4 * (64 * h + 6 * h));
  // V' = ⌈97 / 256⌉·256 = 256 rows, 128 on each TP rank
  EXPECT_EQ(rig.count("all_reduce@emb").calls, 1);
  EXPECT_EQ(rig.count("all_reduce@emb").bytes, 4 * 128 * h);

  fin.grad_norm(/*reduce=*/true);
  EXPECT_EQ(rig.count("all_reduce@tp").calls, 1 + 6 + 1);
  EXPECT_EQ(rig.count("all_reduce@pp").calls, 1);
  EXPECT_EQ(rig.count("all_reduce@pp").bytes, 4);
  EXPECT_EQ(rig.count("all_reduce@dp").calls, 0);
}

TEST(FinalizeGrads, NormOfKnownGradientsAndTheClipCoefficient) {
  const ModelConfig m = load_model("tiny-gpt");
  PartRig rig("cpu", m, testing::small_run(), testing::layout_of(1, 1, 1), 0);
  int64_t total = 0;
  for (size_t u = 0; u < rig.params->units(); ++u) {
    const int64_t n = rig.params->layout().units[u].elems;
    const std::vector<float> half(static_cast<size_t>(n), 0.5f);
    rig.dev->copy_from_host(rig.params->grads(u).data(), half.data(), 4 * n);
    total += n;
  }
  FinalizeGrads fin(*rig.dev, rig.ctx, m, *rig.stage, *rig.params, std::vector<bool>(rig.params->units(), true));
  EXPECT_FALSE(fin.syncs_embedding());
  const double norm = fin.grad_norm(/*reduce=*/true);
  EXPECT_NEAR(norm, 0.5 * std::sqrt(static_cast<double>(total)), 1e-9 * norm);
  EXPECT_FLOAT_EQ(FinalizeGrads::clip_coefficient(4.0, 1.0), static_cast<float>(1.0 / (4.0 + 1e-6)));
  EXPECT_EQ(FinalizeGrads::clip_coefficient(0.5, 1.0), 1.0f);
  EXPECT_EQ(FinalizeGrads::clip_coefficient(4.0, 0.0), 1.0f);  // clipping off
}

}  // namespace
}  // namespace gpuledger
