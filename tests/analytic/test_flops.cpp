// FLOPs per step (analytic/flops.h): hand-computed GEMM counts of tiny
// configs, the published forms they must reduce to (24bsh² + 4bs²h per layer,
// Megatron's 72 and 96 formulas), TP/PP splits that sum to the one-rank
// total, and the model-vs-hardware conventions of docs/exact-budget.md.
#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "analytic/flops.h"
#include "tests/analytic/hand_models.h"

namespace gpuledger::analytic {
namespace {

// gpt, L = 2, h = 8, a = k = 2, d = 4, f = 4h = 32, V = 10: the shape the
// published per-layer forms assume (f = 4h, k = a, a·d = h).
ModelConfig tiny_gpt() { return testing::hand_gpt(10, /*tied=*/false, "tiny-gpt"); }

// llama, L = 2, h = 16, a = 4, k = 2 (GQA), d = 4, f = 24, V = 16.
ModelConfig tiny_llama() {
  ModelConfig m;
  m.name = "tiny-llama";
  m.flavour = Flavour::kLlama;
  m.layers = 2;
  m.hidden = 16;
  m.heads = 4;
  m.kv_heads = 2;
  m.head_dim = 4;
  m.ffn = 24;
  m.vocab = 16;
  m.max_seq = 64;
  return m;
}

RunConfig run(int64_t seq, int64_t mbs, int64_t microbatches) {
  RunConfig r;
  r.seq = seq;
  r.mbs = mbs;
  r.microbatches = microbatches;
  return r;
}

Layout layout(int64_t dp, int64_t tp, int64_t pp) {
  Layout l;
  l.dp = dp;
  l.tp = tp;
  l.pp = pp;
  return l;
}

std::map<std::string, double> published(const ModelConfig& m, const Layout& l, const RunConfig& r) {
  std::map<std::string, double> out;
  for (const auto& p : published_step_flops(m, l, r)) {
    EXPECT_FALSE(p.source.empty()) << p.name;
    out[p.name] = p.value;
  }
  return out;
}

// ---- one layer's forward ----

TEST(Flops, GptLayerForwardByHand) {
  // b = 1, s = 4: QKV 2·4·8·(8 + 2·8) = 1536; QKᵀ 2·2·16·4 = 256; P·V 256;
  // attention-out 2·4·8·8 = 512; MLP 2 · 2·4·8·32 = 4096. Σ = 6656.
  EXPECT_EQ(layer_forward_flops(tiny_gpt(), layout(1, 1, 1), run(4, 1, 1)), 6656);
  // The same number as Korthikanti et al.'s 24bsh² + 4bs²h = 6144 + 512.
  EXPECT_EQ(24 * 1 * 4 * 8 * 8 + 4 * 1 * 4 * 4 * 8, 6656);
  // b = 3, s = 16: 24·3·16·64 + 4·3·256·8 = 73728 + 24576.
  EXPECT_EQ(layer_forward_flops(tiny_gpt(), layout(1, 1, 1), run(16, 3, 1)), 73728 + 24576);
}

TEST(Flops, LlamaLayerForwardByHandWithGqa) {
  // b = 2, s = 8, h = 16, a = 4, k = 2, d = 4, f = 24:
  // QKV 2·2·8·16·(16 + 2·8) = 16384; QKᵀ + P·V 2·2·2·4·64·4 = 8192;
  // attention-out 2·2·8·16·16 = 8192; MLP (gate, up, down) 3·2·2·8·16·24 = 36864.
  EXPECT_EQ(layer_forward_flops(tiny_llama(), layout(1, 1, 1), run(8, 2, 1)), 16384 + 8192 + 8192 + 36864);
}

TEST(Flops, TensorParallelSplitsTheLayer) {
  // t = 2 on tiny_gpt: a_t = k_t = 1, f/t = 16: QKV 2·4·8·12 = 768,
  // core 4·1·16·4 = 256, attention-out 2·4·4·8 = 256, MLP 2·2·4·8·16 = 2048.
  EXPECT_EQ(layer_forward_flops(tiny_gpt(), layout(1, 2, 1), run(4, 1, 1)), 3328);
  EXPECT_EQ(2 * 3328, 6656);  // the t = 1 layer, split exactly in two
}

// ---- a rank's step ----

TEST(Flops, OneRankStepByHand) {
  const auto m = tiny_gpt();
  const auto l = layout(1, 1, 1);
  RunConfig r = run(4, 1, 1);
  // Forward: 2 layers × 6656 + head 2·4·8·10 = 640. Step = 3 × forward.
  StepFlops f = rank_step_flops(m, l, r, 0);
  EXPECT_EQ(f.hardware, 3 * (2 * 6656 + 640));  // 41856
  EXPECT_EQ(f.model, 41856);
  // Causal: the two s² GEMMs (256 each per layer) at half: 3 · 2 layers · 256 less.
  EXPECT_EQ(f.model_causal, 41856 - 3 * 2 * 256);

  r.microbatches = 5;  // m microbatches: 5 × the above
  f = rank_step_flops(m, l, r, 0);
  EXPECT_EQ(f.hardware, 5 * 41856);
  EXPECT_EQ(f.model, 5 * 41856);
}

TEST(Flops, RecomputeAndFlashAddToHardwareOnly) {
  const auto m = tiny_gpt();
  const auto l = layout(1, 1, 1);
  RunConfig r = run(4, 1, 1);
  const int64_t base = 41856;
  // Flash backward recomputes QKᵀ: +256 per layer.
  r.attention = AttentionKind::kFlash;
  EXPECT_EQ(rank_step_flops(m, l, r, 0).hardware, base + 2 * 256);
  // Selective (materialized): the attention core's forward again, +512 per layer.
  r.attention = AttentionKind::kMaterialized;
  r.recompute = Recompute::kSelective;
  EXPECT_EQ(rank_step_flops(m, l, r, 0).hardware, base + 2 * 512);
  // Full: the whole layer's forward again, +6656 per layer; the head is not recomputed.
  r.recompute = Recompute::kFull;
  EXPECT_EQ(rank_step_flops(m, l, r, 0).hardware, base + 2 * 6656);
  // Full + flash: both (the recomputed forward, then flash's QKᵀ in backward).
  r.attention = AttentionKind::kFlash;
  EXPECT_EQ(rank_step_flops(m, l, r, 0).hardware, base + 2 * 6656 + 2 * 256);
  // Model FLOPs never change: 3 × forward.
  EXPECT_EQ(rank_step_flops(m, l, r, 0).model, base);
}

TEST(Flops, TensorParallelRanksSumToOneRank) {
  const auto m = tiny_gpt();
  const auto r = run(4, 1, 1);
  const auto l = layout(1, 2, 1);
  // V' = ⌈10 / 256⌉·256 = 256, V'/t = 128 rows per rank; hardware counts them all.
  const StepFlops r0 = rank_step_flops(m, l, r, 0), r1 = rank_step_flops(m, l, r, 1);
  EXPECT_EQ(r0.hardware, 3 * (2 * 3328 + 2 * 4 * 8 * 128));  // 44544
  EXPECT_EQ(r1.hardware, r0.hardware);
  // Model: rank 0 holds the 10 real rows, rank 1 only padding.
  EXPECT_EQ(r0.model, 3 * (2 * 3328 + 2 * 4 * 8 * 10));
  EXPECT_EQ(r1.model, 3 * (2 * 3328));
  EXPECT_EQ(r0.model + r1.model, 41856);  // the t = 1 total
  EXPECT_EQ(r0.model_causal + r1.model_causal, 41856 - 3 * 2 * 256);
}

TEST(Flops, ReplicatedKvHeadsAreHardwareNotModel) {
  // tiny_llama has k = 2; t = 4 > k replicates each KV head twice.
  const auto m = tiny_llama();
  const auto r = run(8, 1, 1);
  const JobFlops one = job_step_flops(m, layout(1, 1, 1), r);
  const JobFlops four = job_step_flops(m, layout(1, 4, 1), r);
  EXPECT_EQ(four.model, one.model);
  // Hardware per layer: 4 ranks × 2·b·s·h·2·d (one K and one V head each)
  // against 2·b·s·h·2·k·d at t = 1: 3 × 2 layers × 2·8·16·8·(4 − 2) extra;
  // the head: V' = ⌈16/512⌉·512 = 512 rows against 16: 3·2·8·16·(512 − 16).
  EXPECT_EQ(four.hardware - one.hardware, 3 * 2 * (2 * 8 * 16 * 2 * 4) * (4 - 2) + 3 * 2 * 8 * 16 * (512 - 16));
}

TEST(Flops, PipelineStagesAndTheJob) {
  const auto m = tiny_gpt();
  const auto r = run(4, 1, 3);
  // p = 2: one layer per stage, the head on the last.
  const auto l = layout(1, 1, 2);
  EXPECT_EQ(rank_step_flops(m, l, r, 0).hardware, 3 * 3 * 6656);
  EXPECT_EQ(rank_step_flops(m, l, r, 1).hardware, 3 * 3 * (6656 + 640));
  // dp 2 × tp 2 × pp 2, m = 2: model = n·m·(one-rank model per microbatch).
  const auto big = layout(2, 2, 2);
  RunConfig r2 = run(4, 1, 2);
  const JobFlops job = job_step_flops(m, big, r2);
  EXPECT_EQ(job.model, 2 * 2 * 41856);
  // Hardware per microbatch: stage 0 ranks 3·3328 each; stage 1 ranks
  // 3·3328 + 3·2·4·8·128; × 2 ranks per stage, × m, × n.
  EXPECT_EQ(job.hardware, 2 * 2 * (2 * 3 * 3328 + 2 * (3 * 3328 + 3 * 2 * 4 * 8 * 128)));
  // The job equals the sum over all 8 ranks.
  int64_t sum = 0;
  for (int64_t rank = 0; rank < big.world(); ++rank) sum += rank_step_flops(m, big, r2, rank).hardware;
  EXPECT_EQ(sum, job.hardware);
}

// ---- published forms ----

TEST(Flops, PublishedFormsByHand) {
  const auto m = tiny_gpt();
  const auto p = published(m, layout(1, 1, 1), run(4, 1, 1));
  ASSERT_EQ(p.size(), 5u);
  // N (non-embedding): per layer 2h + h·3h + 3h + h² + h + 2h + 4h² + 4h + 4h² + h
  // = 16 + 192 + 24 + 64 + 8 + 16 + 256 + 32 + 256 + 8 = 872; 2 layers + final
  // norm 16 = 1760. 4 tokens: 6·1760·4.
  EXPECT_DOUBLE_EQ(p.at("kaplan_6n"), 6.0 * 1760 * 4);
  // Ψ = 1760 + word 80 + positions 128 + output 80 = 2048;
  // (6Ψ + 12·L·a·d·s)·tokens = (12288 + 12·2·8·4)·4.
  EXPECT_DOUBLE_EQ(p.at("palm_6n_12lhs"), (6.0 * 2048 + 12.0 * 2 * 8 * 4) * 4);
  // 72·B·s·L·h²·(1 + s/6h + V/12Lh) = 36864 + 3072 + 1920.
  EXPECT_DOUBLE_EQ(p.at("megatron_72"), 41856.0);
  EXPECT_DOUBLE_EQ(p.at("korthikanti_per_layer"), 41856.0);
  // The 96 formula counts the recompute forward: printed with full recompute only.
  EXPECT_EQ(p.count("megatron_2021_96"), 0u);
  RunConfig full = run(4, 1, 1);
  full.recompute = Recompute::kFull;
  // 96·B·s·L·h²·(1 + s/6h + V/16Lh) = 49152 + 4096 + 1920.
  EXPECT_DOUBLE_EQ(published(m, layout(1, 1, 1), full).at("megatron_2021_96"), 55168.0);
}

TEST(Flops, ExactCountMeetsMegatronForGptShape) {
  // gpt with f = 4h, k = a, a·d = h, t = 1: the model count is Korthikanti's
  // 72 formula exactly, and the hardware count under full recompute with the
  // materialized attention is Narayanan's 96 formula exactly (4 × the layers'
  // forward, 3 × the logits').
  auto m = tiny_gpt();
  m.layers = 4;
  m.hidden = 16;
  m.heads = 4;
  m.kv_heads = 4;
  m.ffn = 64;
  m.vocab = 50;
  m.max_seq = 32;
  RunConfig r = run(32, 2, 3);
  const Layout l = layout(2, 1, 1);
  auto p = published(m, l, r);
  EXPECT_DOUBLE_EQ(static_cast<double>(job_step_flops(m, l, r).model), p.at("megatron_72"));
  EXPECT_DOUBLE_EQ(p.at("korthikanti_per_layer"), p.at("megatron_72"));
  r.recompute = Recompute::kFull;
  p = published(m, l, r);
  EXPECT_DOUBLE_EQ(static_cast<double>(job_step_flops(m, l, r).hardware), p.at("megatron_2021_96"));
  // With flash, the executed count exceeds the 96 formula by flash's QKᵀ
  // recompute: 2·b·a·s²·d per layer per microbatch, over n·m microbatches.
  r.attention = AttentionKind::kFlash;
  EXPECT_DOUBLE_EQ(static_cast<double>(job_step_flops(m, l, r).hardware) - p.at("megatron_2021_96"),
                   2.0 * 3 * 4 * (2.0 * 2 * 4 * 32 * 32 * 4));
}

TEST(Flops, OverflowIsAnError) {
  // 2⁶³ is about 9.2e18: a Llama-405B-sized job of 16M tokens is 4e19.
  ModelConfig m = tiny_llama();
  m.layers = 126;
  m.hidden = 16384;
  m.heads = 128;
  m.kv_heads = 8;
  m.head_dim = 128;
  m.ffn = 53248;
  m.vocab = 128256;
  m.max_seq = 8192;
  RunConfig r = run(8192, 1, 2048);
  // One rank's step overflows int64 and says so; the job total is a double.
  EXPECT_THROW(rank_step_flops(m, layout(1, 1, 1), r, 0), std::overflow_error);
  Layout big = layout(1, 8, 16);
  RunConfig r16 = run(8192, 1, 128);
  const JobFlops job = job_step_flops(m, big, r16);
  // ~6·N·tokens: 6 · 4.05e11 · 128·8192 ≈ 2.5e18 per replica at least.
  EXPECT_GT(job.model, 2.0e18);
  EXPECT_TRUE(std::isfinite(job.hardware));
}

// Context parallelism: each rank runs s/cp tokens through every GEMM and its
// s/cp queries against all s keys, so a rank does exactly 1/cp of the
// single-rank step (load-balanced: the same on every rank) and the job the same.
TEST(Flops, ContextParallelSharesTheStep) {
  const ModelConfig m = load_model("llama3-8b");
  RunConfig r;
  r.seq = 8192;
  r.mbs = 1;
  r.microbatches = 2;
  r.attention = AttentionKind::kFlash;
  const Layout one;
  Layout cp;
  cp.cp = 4;
  const StepFlops whole = rank_step_flops(m, one, r, 0);
  for (int64_t rank = 0; rank < 4; ++rank) {
    const StepFlops part = rank_step_flops(m, cp, r, rank);
    EXPECT_EQ(4 * part.hardware, whole.hardware) << rank;
    EXPECT_EQ(4 * part.model, whole.model) << rank;
    EXPECT_EQ(4 * part.model_causal, whole.model_causal) << rank;
  }
  EXPECT_EQ(job_step_flops(m, cp, r).hardware, job_step_flops(m, one, r).hardware);
}

}  // namespace
}  // namespace gpuledger::analytic
