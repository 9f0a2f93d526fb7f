// ZeRO 1, 2 and 3 over a mixture-of-experts model (tiny-moe: E 4, k 2, one
// shared expert) on real ranks (np 2 and 4): each unit's dense part sharded
// over dp and, under expert parallelism, a MoE layer's routed experts over the
// expert-data-parallel group of dp/ep ranks (models/transformer/unit_shard.h;
// none to shard at dp = ep) — the master and optimizer state (ZeRO 1), the
// gradients reduce-scattered after every unit's backward (ZeRO 2), the
// weights gathered per unit (ZeRO 3); and with --offload optimizer the host
// copies of those shards. Against one rank with the same global
// batch (tests/parallel/mpi/layout_check.h): losses, the global gradient
// norm and every parameter (under ZeRO 3 each rank's shards) after the steps
// within 1e-5 (fp32), every first-step gradient element (ZeRO 2: each rank's
// shards) within 1e-6 + 1e-5·|g|, as the MoE tests of test_dp_train.cpp; and
// every rank books what its meta simulation books. The same against one rank
// under --recompute full (the backward re-runs each layer's forward, the
// router and the dispatch/combine all-to-alls included: the same routing),
// with interleaved stages (--vpp 2), and with gpt-oss's biases and sinks.
#include <gtest/gtest.h>

#include "layout_check.h"

namespace gpuledger {
namespace {

using namespace testing;

Layout moe_zero(int64_t ep, int zero) {
  Layout l;
  l.dp = world_size();
  l.ep = ep;
  l.zero = zero;
  return l;
}

// ep = dp (np 2: ep 2 of dp 2; np 4: ep 4 of dp 4): each rank's experts are
// its own, the dense parts sharded over dp.
TEST(MoeZero, Zero1EpEqualsDpMatchesOneRank) {
  check_layout(load_model("tiny-moe"), small_run(2, Schedule::k1F1B), moe_zero(world_size(), 1), 3, Tolerance{});
}

// ep 1: every unit one part over dp, the experts with it.
TEST(MoeZero, Zero2WithoutExpertParallelMatchesOneRank) {
  const ModelConfig m = load_model("tiny-moe");
  check_layout(m, small_run(2, Schedule::k1F1B), moe_zero(1, 2), 3, Tolerance{});
  EXPECT_GT(check_step_gradients(m, small_run(2, Schedule::k1F1B), moe_zero(1, 2), 1e-6, 1e-5), 0);
}

TEST(MoeZero, Zero3EpTwoMatchesOneRank) {
  check_layout(load_model("tiny-moe"), small_run(2, Schedule::k1F1B), moe_zero(2, 3), 3, Tolerance{});
}

// ep 2 of dp 4: the experts' parts over expert-data-parallel groups of 2.
TEST(MoeZero, Zero1EpTwoOfDpFourMatchesOneRank) {
  if (world_size() != 4) GTEST_SKIP() << "needs 4 ranks";
  check_layout(load_model("tiny-moe"), small_run(2, Schedule::k1F1B), moe_zero(2, 1), 3, Tolerance{});
}

TEST(MoeZero, Zero2EpTwoOfDpFourGradientShardsMatchOneRank) {
  if (world_size() != 4) GTEST_SKIP() << "needs 4 ranks";
  const ModelConfig m = load_model("tiny-moe");
  check_layout(m, small_run(2, Schedule::kGPipe), moe_zero(2, 2), 2, Tolerance{});
  EXPECT_GT(check_step_gradients(m, small_run(2, Schedule::k1F1B), moe_zero(2, 2), 1e-6, 1e-5), 0);
}

TEST(MoeZero, Zero3EpTwoOfDpFourMatchesOneRank) {
  if (world_size() != 4) GTEST_SKIP() << "needs 4 ranks";
  RunConfig r = small_run(2, Schedule::k1F1B);
  r.prefetch = 2;
  check_layout(load_model("tiny-moe"), r, moe_zero(2, 3), 3, Tolerance{});
}

// --offload optimizer: the master and Adam states of each part's shard (the
// experts' over the expert-data-parallel group) in host memory, the update on
// the CPU between the gradient shard's copy to the host and the weights' back.
TEST(MoeZero, OffloadEpTwoMatchesOneRank) {
  RunConfig r = small_run(2, Schedule::k1F1B);
  r.offload_optimizer = true;
  check_layout(load_model("tiny-moe"), r, moe_zero(2, 2), 3, Tolerance{});
  check_layout(load_model("tiny-moe"), r, moe_zero(2, 3), 2, Tolerance{});
}

// --recompute full: each MoE layer's backward re-runs its forward (the
// routing identical: the same tokens through the same weights), with ep 2 and
// with ZeRO 3 (the backward's gathered copy serves the re-run).
TEST(MoeRecompute, FullEpTwoMatchesOneRank) {
  RunConfig r = small_run(2, Schedule::k1F1B);
  r.recompute = Recompute::kFull;
  const ModelConfig m = load_model("tiny-moe");
  check_layout(m, r, moe_zero(2, 0), 3, Tolerance{});
  EXPECT_GT(check_step_gradients(m, r, moe_zero(2, 0), 1e-6, 1e-5), 0);
  check_layout(m, r, moe_zero(2, 3), 2, Tolerance{});
}

// Interleaved stages: 4 MoE layers in 2 stages of 2 chunks (np 2: dp 1; np 4:
// dp 2 with ep 2 in each stage).
TEST(MoeInterleaved, Vpp2MatchesOneRank) {
  ModelConfig m = load_model("tiny-moe");
  m.layers = 4;
  Layout l;
  l.pp = 2;
  l.vpp = 2;
  l.dp = world_size() / 2;
  l.ep = l.dp;
  check_layout(m, small_run(2, Schedule::k1F1B), l, 2, Tolerance{});
}

// DeepSeek's first dense layers (dense_layers: HF first_k_dense_replace):
// tiny-moe with 3 layers, the first a dense SwiGLU MLP of ffn 48, under
// ZeRO 1 with ep = dp (the dense layer's unit has no expert part); then 4
// layers, the first dense, over 2 pipeline stages (stage 0 holds the dense
// layer beside a MoE layer), ep = dp in each stage. Against one rank.
TEST(MoeDenseLayers, FirstDenseLayersMatchOneRank) {
  ModelConfig m = load_model("tiny-moe");
  m.layers = 3;
  m.dense_layers = 1;
  check_layout(m, small_run(2, Schedule::k1F1B), moe_zero(world_size(), 1), 3, Tolerance{});
  m.layers = 4;
  Layout pp;
  pp.pp = 2;
  pp.dp = world_size() / 2;
  pp.ep = pp.dp;
  check_layout(m, small_run(2, Schedule::k1F1B), pp, 3, Tolerance{});
}

// DeepSeek-V3's router: sigmoid scores, routed_scaling_factor 2.5 and the
// expert bias (aux-loss-free balancing), updated after every step from the
// load counts summed over dp (models/moe/expert_bias.h): over 3 steps the
// bias of step 1 already moves the routing of steps 2 and 3, so equal losses
// and parameters mean the ranks' summed counts equal one rank's. ep = dp,
// ZeRO 1, the first layer dense; then ep 2 of dp 4 at np 4.
TEST(MoeDenseLayers, SigmoidRouterWithExpertBiasMatchesOneRank) {
  ModelConfig m = load_model("tiny-moe");
  m.layers = 3;
  m.dense_layers = 1;
  m.router_bias = m.router_sigmoid = true;
  m.routed_scaling_factor = 2.5;
  check_layout(m, small_run(2, Schedule::k1F1B), moe_zero(world_size(), 1), 3, Tolerance{});
  if (world_size() == 4) check_layout(m, small_run(2, Schedule::k1F1B), moe_zero(2, 0), 3, Tolerance{});
}

// gpt-oss's biases (the router's on its logits, each expert's on gate, up and
// down) with its attention (sinks, the attention-out bias): the expert biases
// sit in the expert-sharded prefix after the experts' matrices, so a unit is
// matrices, vectors, matrices, vectors, and weight decay (0.1 here) must fall
// on the matrices of both runs only. ep = dp with ZeRO 1 (the prefix sharded
// over the expert-data-parallel group), then ZeRO 3 at ep 2.
TEST(MoeBiases, GptOssBiasesAndSinksMatchOneRank) {
  ModelConfig m = load_model("tiny-moe");
  m.router_logit_bias = m.expert_biases = true;
  m.attention_sinks = m.attn_out_bias = true;
  RunConfig r = small_run(2, Schedule::k1F1B);
  r.weight_decay = 0.1;
  check_layout(m, r, moe_zero(world_size(), 1), 3, Tolerance{});
  check_layout(m, r, moe_zero(2, 3), 2, Tolerance{});
}

}  // namespace
}  // namespace gpuledger
