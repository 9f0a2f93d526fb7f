// A model whose layers attend differently (core/attention_pattern.h: window 8,
// full, window 8, full; seq 32) trained on real ranks — dp 2, tp 2, pp 2 at
// np 2; tp 2 × pp 2 and tp 2 × dp 2 at np 4 — against one rank with the same
// global batch (tests/parallel/mpi/layout_check.h: losses, gradient norms and
// weights within its tolerances, the ranks booking what their meta simulation
// books), fp32, dropout 0; and the first step's gradients element by element.
// On one rank, the windows are really applied, layer by layer: the loss differs
// from the same model with full attention and from it with every layer
// windowed, and equals full attention when every window covers the sequence.
// Gemma's post-block norms (post_norms) on the same model: tp 2 with sequence
// parallelism (their γ gradients then partial sums over the token shards) and
// pp 2 at np 2, against one rank. gpt-oss's attention (sinks, split over tp
// with the heads, and the attention-out bias, a partial sum under sp) the
// same way, and with context parallelism (flash: the sinks join the ring's
// merged result).
#include <gtest/gtest.h>

#include "layout_check.h"

namespace gpuledger {
namespace {

using namespace testing;

// tiny-llama's layer shape, 4 layers alternating a window of 8 tokens and full attention.
ModelConfig hybrid(const std::string& pattern) {
  return parse_model_config(R"({"name": "hybrid-tiny", "flavour": "llama", "layers": 4, "hidden": 64, "heads": 4,
                                "kv_heads": 2, "head_dim": 16, "ffn": 176, "vocab": 97, "max_seq": 64,
                                "sliding_window": 8, "attention_pattern": )" +
                                pattern + "}",
                            "hybrid-tiny");
}

RunConfig hybrid_run() {
  RunConfig r = small_run(2, Schedule::k1F1B);
  r.seq = 32;
  r.dropout = 0.0;
  return r;
}

Layout layout(int64_t dp, int64_t tp, int64_t pp, int zero = 0) {
  Layout l;
  l.dp = dp;
  l.tp = tp;
  l.pp = pp;
  l.zero = zero;
  return l;
}

TEST(HybridAttention, WindowChangesTheLossOnOneRank) {
  const RunConfig r = hybrid_run();
  const Trajectory windowed = reference_trajectory(hybrid(R"(["sliding", "full"])"), r, 2);
  ModelConfig full = hybrid(R"(["sliding", "full"])");
  full.attention_pattern = {std::nullopt};
  full.sliding_window.reset();
  const Trajectory dense = reference_trajectory(full, r, 2);
  // Windows of 32 tokens or more cover every earlier token of a 32-token sequence: full attention.
  const Trajectory wide = reference_trajectory(hybrid(R"([32, "full"], "sliding_window": null)"), r, 2);
  // Every layer windowed (sliding_window alone): the full layers of the pattern are full.
  const Trajectory all_windowed = reference_trajectory(hybrid(R"(["sliding"])"), r, 2);
  for (size_t k = 0; k < 2; ++k) {
    EXPECT_GT(std::abs(windowed.losses[k] - dense.losses[k]), 1e-4 * dense.losses[k]) << "step " << k;
    EXPECT_GT(std::abs(windowed.losses[k] - all_windowed.losses[k]), 1e-4 * dense.losses[k]) << "step " << k;
    EXPECT_NEAR(wide.losses[k], dense.losses[k], 1e-12 * dense.losses[k]) << "step " << k;
  }
}

TEST(HybridAttention, DataParallelMatchesOneRank) {
  if (world_size() != 2) GTEST_SKIP() << "np 2 case";
  check_layout(hybrid(R"(["sliding", "full"])"), hybrid_run(), layout(2, 1, 1, 1), 2, Tolerance{});
}

TEST(HybridAttention, TensorParallelMatchesOneRank) {
  if (world_size() != 2) GTEST_SKIP() << "np 2 case";
  check_layout(hybrid(R"(["sliding", "full"])"), hybrid_run(), layout(1, 2, 1), 2, tp_tolerance());
}

// Each stage holds one windowed and one full layer.
TEST(HybridAttention, PipelineMatchesOneRank) {
  if (world_size() != 2) GTEST_SKIP() << "np 2 case";
  check_layout(hybrid(R"(["sliding", "full"])"), hybrid_run(), layout(1, 1, 2), 2, Tolerance{});
}

// Stage 0 holds the windowed layers 0 and 1, stage 1 the full layers 2 and 3.
TEST(HybridAttention, TensorAndPipelineMatchOneRank) {
  if (world_size() != 4) GTEST_SKIP() << "np 4 case";
  check_layout(hybrid(R"(["sliding", "sliding", "full", "full"])"), hybrid_run(), layout(1, 2, 2), 2, tp_tolerance());
}

TEST(HybridAttention, TensorAndDataMatchOneRank) {
  if (world_size() != 4) GTEST_SKIP() << "np 4 case";
  check_layout(hybrid(R"(["sliding", "full"])"), hybrid_run(), layout(2, 2, 1, 1), 2, tp_tolerance());
}

ModelConfig post_normed() {
  ModelConfig m = hybrid(R"(["sliding", "full"])");
  m.post_norms = true;
  return m;
}

TEST(HybridAttention, PostNormsChangeTheLossOnOneRank) {
  const RunConfig r = hybrid_run();
  const Trajectory plain = reference_trajectory(hybrid(R"(["sliding", "full"])"), r, 2);
  const Trajectory post = reference_trajectory(post_normed(), r, 2);
  for (size_t k = 0; k < 2; ++k)
    EXPECT_GT(std::abs(post.losses[k] - plain.losses[k]), 1e-4 * plain.losses[k]) << "step " << k;
}

TEST(HybridAttention, PostNormsUnderSequenceParallelMatchOneRank) {
  if (world_size() != 2) GTEST_SKIP() << "np 2 case";
  Layout l = layout(1, 2, 1);
  l.sp = true;
  check_layout(post_normed(), hybrid_run(), l, 2, tp_tolerance());
}

TEST(HybridAttention, PostNormsUnderPipelineMatchOneRank) {
  if (world_size() != 2) GTEST_SKIP() << "np 2 case";
  check_layout(post_normed(), hybrid_run(), layout(1, 1, 2), 2, Tolerance{});
}

ModelConfig sinked() {
  ModelConfig m = hybrid(R"(["sliding", "full"])");
  m.attention_sinks = m.attn_out_bias = true;
  return m;
}

TEST(HybridAttention, SinksChangeTheLossOnOneRank) {
  const RunConfig r = hybrid_run();
  const Trajectory plain = reference_trajectory(hybrid(R"(["sliding", "full"])"), r, 2);
  const Trajectory sinks = reference_trajectory(sinked(), r, 2);
  for (size_t k = 0; k < 2; ++k)
    EXPECT_GT(std::abs(sinks.losses[k] - plain.losses[k]), 1e-4 * plain.losses[k]) << "step " << k;
}

TEST(HybridAttention, SinksUnderSequenceParallelMatchOneRank) {
  if (world_size() != 2) GTEST_SKIP() << "np 2 case";
  Layout l = layout(1, 2, 1);
  l.sp = true;
  check_layout(sinked(), hybrid_run(), l, 2, tp_tolerance());
}

TEST(HybridAttention, SinksUnderContextParallelMatchOneRank) {
  if (world_size() != 2) GTEST_SKIP() << "np 2 case";
  Layout l = layout(1, 1, 1);
  l.cp = 2;
  RunConfig r = hybrid_run();
  r.attention = AttentionKind::kFlash;
  check_layout(sinked(), r, l, 2, tp_tolerance());
}

// The first step's gradients, every element within 1e-5 + 1e-4·|g| of one rank's.
TEST(HybridAttention, GradientsMatchOneRank) {
  const Layout l = world_size() == 2 ? layout(1, 1, 2) : layout(2, 1, 2);
  EXPECT_GT(check_step_gradients(hybrid(R"(["sliding", "full"])"), hybrid_run(), l, 1e-5, 1e-4), 0);
}

}  // namespace
}  // namespace gpuledger
