// A rank's whole budget: role ranks, and a pp 2 × dp 2 × tp 2 budget whose
// accounts are counted by hand on both roles (model states, activations with
// microbatches in flight, communication staging, the workspace bound).
#include <gtest/gtest.h>

#include <set>

#include "analytic/budget.h"
#include "core/layout.h"
#include "core/model_config.h"
#include "tests/analytic/hand_models.h"

namespace gpuledger::analytic {
namespace {

TEST(Budget, RoleRanksOnePerStage) {
  Layout l;
  l.dp = 2;
  l.tp = 2;
  l.pp = 2;
  // rank = tp + T·(dp + D·pp): stage 0 → 0, stage 1 → 4.
  EXPECT_EQ(role_ranks(l), (std::vector<int64_t>{0, 4}));
  l.dp = 3;
  l.pp = 4;
  EXPECT_EQ(role_ranks(l), (std::vector<int64_t>{0, 6, 12, 18}));
  EXPECT_EQ(role_ranks(Layout{}), (std::vector<int64_t>{0}));
}

// tiny-llama (h 64, a 4, k 2, d 16, f 176, V 97 → V' 256), dp 2, tp 2, pp 2,
// ZeRO 1, bf16, seq 16, mbs 1, 4 microbatches, 1F1B, no recompute,
// materialized attention, no dropout, no SP, 25 MiB buckets.
struct Case {
  ModelConfig m = load_model("tiny-llama");
  Layout l;
  RunConfig r;
  Case() {
    l.dp = 2;
    l.tp = 2;
    l.pp = 2;
    l.zero = 1;
    r.seq = 16;
    r.mbs = 1;
    r.microbatches = 4;
  }
};

// One layer at t = 2: norms 128 + QKV 64·64 + out 32·64 + gate/up 2·64·88 +
// down 88·64 = 23,168 parameters.
constexpr int64_t kLayer = 23168;
// One layer's activations, one microbatch, t = 2 (a_t 2, k_t 1):
// layer input, norm-1 out, QKV (2·16·64), norm-2 in, norm-2 out: 5 × 2048;
// rstd 2 × 64; probabilities 2·2·16² = 1024; context 2·16·32 = 1024;
// gate, up, SwiGLU 3·2·16·88 = 8448.
constexpr int64_t kLayerAct = 5 * 2048 + 128 + 1024 + 1024 + 8448;  // 20,864

TEST(Budget, LastStageByHand) {
  Case c;
  const int64_t rank = 4;  // tp 0, dp 0, pp 1
  const RankBudget b = rank_budget(c.m, c.l, c.r, rank);
  EXPECT_EQ(b.rank, 4);
  EXPECT_EQ(b.coords, (Coords{0, 0, 1}));

  // Units: layer.1 (23,168) + head (norm 64 + 128·64 = 8256): P_r = 31,424;
  // ZeRO-1 shard over dp 2: 11,584 + 4,128 = 15,712.
  EXPECT_EQ(b.exact[Account::kWeights], 2 * 31424);
  EXPECT_EQ(b.exact[Account::kGrads], 2 * 31424);
  EXPECT_EQ(b.exact[Account::kMaster], 4 * 15712);
  EXPECT_EQ(b.exact[Account::kOptim], 8 * 15712);

  // Last of 2 stages, 1F1B: min(2 − 1, 4) = 1 microbatch in flight.
  // Extras: final-norm in/out 2 × 2048, rstd 64, logits 4·16·128, targets 64.
  EXPECT_EQ(b.in_flight, 1);
  EXPECT_EQ(b.exact[Account::kActivations], kLayerAct + 2048 + 64 + 2048 + 8192 + 64);

  // Comm: ZeRO-1 reduce-scatter staging, fp32, 2 slots (overlap) of n pieces
  // of min(⌊25·2²⁰/2 / 2⌋, largest shard 11,584) + PP recv-act and send-grad
  // buffers 2 × 2·16·64.
  EXPECT_EQ(b.exact[Account::kComm], 4 * 2 * 2 * 11584 + 2 * 2048);

  // Workspace: the sum of (a) the layer without recompute 20,864, (b) logits
  // gradient 4·16·128 + 2·2·16·64 = 12,288, (c) the largest GEMM's fp32 A, B, C:
  // fused gate/up 4·(16·64 + 64·176 + 16·176) = 60,416 (head: 4·(1024 + 8192 +
  // 2048) = 45,056), and (d) one hidden-sized buffer 2·16·64 = 2,048.
  EXPECT_EQ(b.exact[Account::kWorkspace], 20864 + 12288 + 60416 + 2048);
  EXPECT_EQ(workspace_bound_bytes(c.m, c.l, c.r, rank), 20864 + 12288 + 60416 + 2048);
  EXPECT_EQ(b.exact[Account::kKv], 0);

  std::set<std::string> names;
  for (const auto& p : b.published) names.insert(p.name);
  for (const char* n : {"mixed_precision_16psi", "zero1", "megatron_distributed_optimizer", "korthikanti_per_layer",
                        "korthikanti_stage"})
    EXPECT_TRUE(names.count(n)) << n;

  // Pass-through of the other budgets.
  const auto comm = rank_comm_per_step(c.m, c.l, c.r, rank);
  EXPECT_EQ(b.comm.size(), comm.size());
  EXPECT_EQ(b.flops.hardware, rank_step_flops(c.m, c.l, c.r, rank).hardware);
}

TEST(Budget, FirstStageByHand) {
  Case c;
  const RankBudget b = rank_budget(c.m, c.l, c.r, 0);
  // Units: embedding 128·64 = 8192 + layer.0: P_r = 31,360; shard 4096 + 11,584.
  EXPECT_EQ(b.exact[Account::kWeights], 2 * 31360);
  EXPECT_EQ(b.exact[Account::kMaster], 4 * 15680);
  EXPECT_EQ(b.exact[Account::kOptim], 8 * 15680);
  // min(2, 4) = 2 in flight × (layer + token ids 4·16).
  EXPECT_EQ(b.in_flight, 2);
  EXPECT_EQ(b.exact[Account::kActivations], 2 * (kLayerAct + 64));
  EXPECT_EQ(b.exact[Account::kComm], 4 * 2 * 2 * 11584 + 2 * 2048);
  // No head GEMM or logits gradient on the first stage; the fused gate/up GEMM
  // is still the largest: 20,864 + 2·2·16·64 + 60,416 + 2,048.
  EXPECT_EQ(b.exact[Account::kWorkspace], 20864 + 4096 + 60416 + 2048);
}

TEST(Budget, CommStagingByZeroStageAndBucket) {
  Case c;
  c.l.zero = 0;            // all-reduce buckets over the units laid back to back
  c.r.bucket_mb = 0.0625;  // 65,536 bytes / 2 = 32,768 elements > P_r: whole P_r
  EXPECT_EQ(rank_budget(c.m, c.l, c.r, 4).exact[Account::kComm], 4 * 31424 + 4096);
  c.r.bucket_mb = 0.03125;  // 16,384 elements < P_r
  // overlapped with backward (the default): two slots, min(2·16,384, 31,424) = P_r
  EXPECT_EQ(rank_budget(c.m, c.l, c.r, 4).exact[Account::kComm], 4 * 31424 + 4096);
  c.r.overlap_grad_reduce = false;  // one slot: one bucket
  EXPECT_EQ(rank_budget(c.m, c.l, c.r, 4).exact[Account::kComm], 4 * 16384 + 4096);
  c.r.grad_dtype = DType::kFP32;  // bucket elements = bytes / 4 = 8192
  EXPECT_EQ(rank_budget(c.m, c.l, c.r, 4).exact[Account::kComm], 4 * 8192 + 4096);
  c.r.overlap_grad_reduce = true;  // two slots of 8192 < P_r
  EXPECT_EQ(rank_budget(c.m, c.l, c.r, 4).exact[Account::kComm], 4 * 2 * 8192 + 4096);
  // ZeRO 1: reduce-scatter pieces of ⌊bucket/n⌋ = 4096 shard elements of one
  // unit (shards 11,584 and 4,128), n of them per slot, two slots.
  c.l.zero = 1;
  EXPECT_EQ(rank_budget(c.m, c.l, c.r, 4).exact[Account::kComm], 4 * 2 * 2 * 4096 + 4096);
  c.r.overlap_grad_reduce = false;
  EXPECT_EQ(rank_budget(c.m, c.l, c.r, 4).exact[Account::kComm], 4 * 1 * 2 * 4096 + 4096);
  c.r.bucket_mb = 1.0;  // pieces larger than the largest shard: n · 11,584 per slot
  EXPECT_EQ(rank_budget(c.m, c.l, c.r, 4).exact[Account::kComm], 4 * 1 * 2 * 11584 + 4096);
  // ZeRO 2: the largest unit's full gradient, g·n·⌈P_u/n⌉ = 2·2·11,584.
  c.r.grad_dtype = DType::kBF16;
  c.l.zero = 2;
  EXPECT_EQ(rank_budget(c.m, c.l, c.r, 4).exact[Account::kComm], 2 * 2 * 11584 + 4096);
  // A middle stage holds all four PP buffers; SP shards them (s_l = 8).
  c.m = with_layers(c.m, 3);
  c.l.pp = 3;
  c.l.dp = 1;
  c.l.sp = true;
  EXPECT_EQ(rank_budget(c.m, c.l, c.r, 2).exact[Account::kComm], 4 * 2 * 8 * 64);
}

// Tied embeddings under ZeRO 2/3 with dp > 1 and pp = 1 (docs/exact-budget.md
// "Model states" and "Communication staging"): gpt, L = 2, h 8, a = k = 2,
// d 4, f 32, V 200, max_seq 16, tied, bf16 (e = g = 2), dp 2. Units (t = 1):
// embedding 200·8 + 16·8 = 1728; layer 2h + (8·24 + 24) + (64 + 8) + 2h +
// (256 + 32) + (256 + 8) = 872 (twice); head, the final norm only, 2h = 16.
// P_r = 3488; shards over 2 (all even): S_r = 864 + 436 + 436 + 8 = 1744.
ModelConfig tied_gpt() { return testing::hand_gpt(200, /*tied=*/true, "tied-gpt"); }

Layout dp2(int zero) {
  Layout l;
  l.dp = 2;
  l.zero = zero;
  return l;
}

RunConfig tied_run(int64_t prefetch) {
  RunConfig r;
  r.seq = 4;
  r.mbs = 1;
  r.prefetch = prefetch;
  return r;
}

TEST(Budget, TiedZero2ByHand) {
  const RankBudget b = rank_budget(tied_gpt(), dp2(2), tied_run(1), 1);
  EXPECT_EQ(b.exact[Account::kWeights], 2 * 3488);
  EXPECT_EQ(b.exact[Account::kGrads], 2 * 1744);
  EXPECT_EQ(b.exact[Account::kMaster], 4 * 1744);
  EXPECT_EQ(b.exact[Account::kOptim], 8 * 1744);
  // The unit gradient buffer g·n·max⌈P_u/n⌉ = 2·2·864, and the head's
  // word-embedding gradient held until the embedding's backward, g·V'·h = 2·200·8.
  EXPECT_EQ(b.exact[Account::kComm], 3456 + 3200);
  // untied (the head then holds its own 200·8 output: no side buffer; the
  // largest unit is still the embedding)
  ModelConfig untied = tied_gpt();
  untied.tied_embeddings = false;
  EXPECT_EQ(rank_budget(untied, dp2(2), tied_run(1), 1).exact[Account::kComm], 3456);
  // dp 1: ZeRO is plain DP (no staging); pp 2 with dp 2 is refused by the layout
  Layout one = dp2(2);
  one.dp = 1;
  EXPECT_EQ(rank_budget(tied_gpt(), one, tied_run(1), 0).exact[Account::kComm], 0);
}

TEST(Budget, TiedZero3GathersTheEmbeddingForTheHead) {
  // Weights e·S_r = 3488 plus the gathered copies' peak (e·n·⌈P_u/n⌉ = 2·P_u here).
  // --prefetch 1: windows of 2 units in forward order: 1728 + 872 = 2600, 1744,
  // 888; the head adds forward {head, embedding} = 1744 and backward its window
  // {layer 1, head} plus the embedding = 872 + 16 + 1728 = 2616 > 2600.
  const RankBudget b1 = rank_budget(tied_gpt(), dp2(3), tied_run(1), 0);
  EXPECT_EQ(b1.exact[Account::kWeights], 2 * 1744 + 2 * 2616);
  EXPECT_EQ(b1.exact[Account::kGrads], 2 * 1744);
  EXPECT_EQ(b1.exact[Account::kMaster], 4 * 1744);
  EXPECT_EQ(b1.exact[Account::kOptim], 8 * 1744);
  EXPECT_EQ(b1.exact[Account::kComm], 3456 + 3200);
  // --prefetch 0: one unit at a time (largest 1728), the head with the
  // embedding 16 + 1728 = 1744, forward and backward.
  EXPECT_EQ(rank_budget(tied_gpt(), dp2(3), tied_run(0), 0).exact[Account::kWeights], 2 * 1744 + 2 * 1744);
  // --prefetch 3: the window is all 4 units (3488), and the head's backward
  // window reaches the embedding: nothing added.
  EXPECT_EQ(rank_budget(tied_gpt(), dp2(3), tied_run(3), 0).exact[Account::kWeights], 2 * 1744 + 2 * 3488);
  // untied: the windows alone (the head 16 + 1600 output: 872 + 1616 < 2600)
  ModelConfig untied = tied_gpt();
  untied.tied_embeddings = false;
  EXPECT_EQ(rank_budget(untied, dp2(3), tied_run(1), 0).exact[Account::kWeights], 2 * 2544 + 2 * 2600);
}

// Context parallelism, the tied gpt above (P_r = 3488, k 2, d 4), cp 2, dp 1,
// ZeRO 0, seq 8, bf16, flash: the gradients are all-reduced over dp·cp = 2
// ranks (two fp32 slots covering all 3488 elements, 4·3488 B), and the ring
// holds two K/V blocks and two dK/dV blocks of B_kv = 2·1·4·2·4·2 = 128 B.
// The activations are those of the rank's 4 tokens: one rank at seq 4.
TEST(Budget, ContextParallelRingBuffersAndLocalTokens) {
  const ModelConfig m = tied_gpt();
  RunConfig r = tied_run(1);
  r.seq = 8;
  r.attention = AttentionKind::kFlash;
  Layout l;
  l.cp = 2;
  EXPECT_EQ(rank_budget(m, l, r, 1).exact[Account::kComm], 4 * 3488 + 4 * 128);
  RunConfig half = r;
  half.seq = 4;
  EXPECT_EQ(rank_budget(m, l, r, 1).exact[Account::kActivations],
            rank_budget(m, Layout{}, half, 0).exact[Account::kActivations]);
}

}  // namespace
}  // namespace gpuledger::analytic
