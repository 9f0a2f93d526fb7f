// ZeRO 1, 2 and 3 on real ranks (np 2 and 4): master weights and Adam states
// (and under ZeRO 2 the gradients, reduce-scattered after every unit's
// backward; under ZeRO 3 the weights, gathered per unit) sharded per unit over dp (padded), each rank updating its
// shard and all-gathering the weights; against one rank with the same global batch (tests/parallel/mpi/layout_check.h):
// fp32 within 1e-5; bf16 within a stated tolerance; the ranks book what their meta simulation books (ZeRO shards
// included). Mixed: dp 2 × pp 2 with ZeRO 1 and 2 at np 4. Tied embeddings (tiny-gpt) with ZeRO 2/3 at pp = 1: the
// head's word gradient in a side buffer until the embedding's backward, and under ZeRO 3 the embedding unit gathered
// for the head (--prefetch 0, 1, 2); with pp > 1 (np 4, dp 2 × pp 2) the two stages' word gradients summed over the
// embedding group before their deferred reduce-scatter. SGD, Adagrad and Lion under ZeRO 1, 2, 3.
#include <gtest/gtest.h>

#include <string>

#include "layout_check.h"

namespace gpuledger {
namespace {

using namespace testing;

Layout zero_layout(int64_t dp, int zero) {
  Layout l;
  l.dp = dp;
  l.pp = world_size() / dp;
  l.zero = zero;
  return l;
}

TEST(Zero1, LlamaFp32MatchesOneRank) {
  check_layout(load_model("tiny-llama"), small_run(2, Schedule::k1F1B), zero_layout(world_size(), 1), 3, Tolerance{});
}

TEST(Zero1, GptTiedFp32MatchesOneRank) {
  check_layout(load_model("tiny-gpt"), small_run(1, Schedule::kGPipe), zero_layout(world_size(), 1), 3, Tolerance{});
}

// bf16 with fp32 master shards: as DataParallel.LlamaBf16WithinRounding.
TEST(Zero1, LlamaBf16WithinRounding) {
  check_layout(load_model("tiny-llama"), small_run(2, Schedule::k1F1B, DType::kBF16), zero_layout(world_size(), 1), 3,
               bf16_tolerance());
}

TEST(Zero1, Dp2Pp2MatchesOneRank) {
  if (world_size() != 4) GTEST_SKIP() << "needs 4 ranks";
  ModelConfig m = load_model("tiny-llama");
  m.layers = 4;
  check_layout(m, small_run(2, Schedule::k1F1B), zero_layout(2, 1), 2, Tolerance{});
}

TEST(Zero2, LlamaFp32MatchesOneRank) {
  check_layout(load_model("tiny-llama"), small_run(2, Schedule::k1F1B), zero_layout(world_size(), 2), 3, Tolerance{});
}

TEST(Zero2, LlamaFp32GpipeOneMicrobatchMatchesOneRank) {
  check_layout(load_model("tiny-llama"), small_run(1, Schedule::kGPipe), zero_layout(world_size(), 2), 2, Tolerance{});
}

TEST(Zero2, LlamaBf16WithinRounding) {
  check_layout(load_model("tiny-llama"), small_run(2, Schedule::k1F1B, DType::kBF16), zero_layout(world_size(), 2), 3,
               bf16_tolerance());
}

TEST(Zero2, Dp2Pp2MatchesOneRank) {
  if (world_size() != 4) GTEST_SKIP() << "needs 4 ranks";
  ModelConfig m = load_model("tiny-llama");
  m.layers = 4;
  check_layout(m, small_run(2, Schedule::kGPipe), zero_layout(2, 2), 2, Tolerance{});
}

// ZeRO 3: weights sharded too, each unit gathered before its forward and
// its backward; each rank's shard against the matching slice of one rank.
TEST(Zero3, LlamaFp32MatchesOneRank) {
  check_layout(load_model("tiny-llama"), small_run(2, Schedule::k1F1B), zero_layout(world_size(), 3), 3, Tolerance{});
}

TEST(Zero3, NoPrefetchFullRecomputeMatchesOneRank) {
  RunConfig r = small_run(2, Schedule::kGPipe);
  r.prefetch = 0;
  r.recompute = Recompute::kFull;
  check_layout(load_model("tiny-llama"), r, zero_layout(world_size(), 3), 2, Tolerance{});
}

TEST(Zero3, LlamaBf16WithinRounding) {
  RunConfig r = small_run(2, Schedule::k1F1B, DType::kBF16);
  r.prefetch = 2;
  check_layout(load_model("tiny-llama"), r, zero_layout(world_size(), 3), 3, bf16_tolerance());
}

TEST(Zero3, Dp2Pp2MatchesOneRank) {
  if (world_size() != 4) GTEST_SKIP() << "needs 4 ranks";
  ModelConfig m = load_model("tiny-llama");
  m.layers = 4;
  check_layout(m, small_run(2, Schedule::k1F1B), zero_layout(2, 3), 2, Tolerance{});
}

TEST(Zero2, GptTiedFp32MatchesOneRank) {
  check_layout(load_model("tiny-gpt"), small_run(2, Schedule::k1F1B), zero_layout(world_size(), 2), 3, Tolerance{});
}

TEST(Zero2, GptTiedGpipeMatchesOneRank) {
  check_layout(load_model("tiny-gpt"), small_run(3, Schedule::kGPipe), zero_layout(world_size(), 2), 2, Tolerance{});
}

TEST(Zero3, GptTiedFp32MatchesOneRank) {
  check_layout(load_model("tiny-gpt"), small_run(2, Schedule::k1F1B), zero_layout(world_size(), 3), 3, Tolerance{});
}

TEST(Zero3, GptTiedNoPrefetchMatchesOneRank) {
  RunConfig r = small_run(2, Schedule::kGPipe);
  r.prefetch = 0;
  check_layout(load_model("tiny-gpt"), r, zero_layout(world_size(), 3), 2, Tolerance{});
}

// --prefetch 2 with full recompute; and at L = 1 the head's backward window
// (units 2, 1, 0) reaches the embedding, which the head then leaves gathered.
TEST(Zero3, GptTiedPrefetchTwoMatchesOneRank) {
  RunConfig r = small_run(2, Schedule::k1F1B);
  r.prefetch = 2;
  r.recompute = Recompute::kFull;
  check_layout(load_model("tiny-gpt"), r, zero_layout(world_size(), 3), 2, Tolerance{});
  ModelConfig one = load_model("tiny-gpt");
  one.layers = 1;
  check_layout(one, r, zero_layout(world_size(), 3), 2, Tolerance{});
}

TEST(Zero3, GptTiedBf16WithinRounding) {
  check_layout(load_model("tiny-gpt"), small_run(2, Schedule::k1F1B, DType::kBF16), zero_layout(world_size(), 3), 3,
               bf16_tolerance());
}

// SGD with momentum, Adagrad and Lion (fp32, weight decay on): their one
// state sharded by ZeRO 1, 2 and 3 over dp = 2 ranks against one
// rank. SGD's update is continuous in the gradient: within 1e-5 as AdamW.
// Adagrad's first step is lr·g/(|g| + ε) and Lion's every step lr·sign(·):
// for a gradient near 0 the order of the DP sum decides its sign, a full step
// of ±lr (lr = 1e-3, 3 steps: within 6e-3), so 1% of a tensor's elements may
// pass 1e-5, as bf16_tolerance allows for Adam.
// At dp 2 only (the np 2 run): nine more layouts at np 4 would take the run
// past its time limit on a shared machine; dp 2 shards every state already.
TEST(ZeroOptimizers, SgdAdagradLionMatchOneRank) {
  if (world_size() != 2) GTEST_SKIP() << "dp 2: the np 2 run covers it";
  for (OptimizerKind opt : {OptimizerKind::kSGD, OptimizerKind::kAdagrad, OptimizerKind::kLion})
    for (int zero : {1, 2, 3}) {
      SCOPED_TRACE(std::string(optimizer_name(opt)) + " zero " + std::to_string(zero));
      RunConfig r = small_run(2, Schedule::k1F1B);
      r.optimizer = opt;
      r.weight_decay = 0.01;
      const Tolerance tol = opt == OptimizerKind::kSGD ? Tolerance{} : Tolerance{1e-5, 1e-5, 0.0, 0.01, 3 * 2 * r.lr};
      check_layout(load_model("tiny-llama"), r, zero_layout(world_size(), zero), 3, tol);
    }
}

// Tied embeddings with pp > 1 under ZeRO 2/3 (np 4: dp 2 × pp 2, tiny-gpt
// with 4 layers): the first stage's embedding unit and the last stage's head
// unit (the word copy) keep their whole gradient through the schedule, their
// word slots are summed over the embedding group, then reduce-scattered
// (parallel/zero/grad_shards.h). Losses, norms and weights (ZeRO 3: each
// shard) against one rank, the ledger and comm against the meta simulation;
// then every element of each rank's gradient shard after one step against
// one rank's gradient (the tied word: both stages' contributions summed).
TEST(ZeroTiedPipeline, Dp2Pp2MatchesOneRank) {
  if (world_size() != 4) GTEST_SKIP() << "needs 4 ranks";
  ModelConfig m = load_model("tiny-gpt");
  m.layers = 4;
  for (int zero : {2, 3}) {
    SCOPED_TRACE("zero " + std::to_string(zero));
    check_layout(m, small_run(2, Schedule::k1F1B), zero_layout(2, zero), 2, Tolerance{});
  }
}

TEST(ZeroTiedPipeline, GradientShardsMatchOneRank) {
  if (world_size() != 4) GTEST_SKIP() << "needs 4 ranks";
  ModelConfig m = load_model("tiny-gpt");
  m.layers = 4;
  for (int zero : {2, 3}) {
    SCOPED_TRACE("zero " + std::to_string(zero));
    const Layout l = zero_layout(2, zero);
    const int64_t n = check_step_gradients(m, small_run(2, Schedule::k1F1B), l, 1e-6, 1e-4);
    // tiny-gpt (h 64, ffn 256, V 97), dp 2 × pp 2: a layer holds 2·64 (norm 1)
    // + 64·192 + 192 (QKV) + 64·64 + 64 (out) + 2·64 (norm 2) + 64·256 + 256 +
    // 256·64 + 64 (MLP) = 49 984; stage 0 the embedding 97·64 + 64·64 (word,
    // positions) and 2 layers, stage 1 2 layers and the head 64 + 64 + 97·64
    // (norm, word copy); every unit even, so each DP rank holds half of it.
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    const int64_t layers = 2 * 49984 / 2;
    EXPECT_EQ(n, l.coords(rank).pp == 0 ? (97 * 64 + 64 * 64) / 2 + layers : (128 + 97 * 64) / 2 + layers);
  }
}

}  // namespace
}  // namespace gpuledger
