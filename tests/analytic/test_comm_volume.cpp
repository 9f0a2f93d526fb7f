// Communication per rank per step (analytic/comm_volume.h), counted by
// hand for a tiny gpt under every parallelism of docs/formulas/comm.md, and
// the nccl-tests bus-bandwidth factors.
#include <gtest/gtest.h>

#include <map>
#include <optional>
#include <string>

#include "analytic/comm_volume.h"
#include "analytic/pipeline.h"
#include "core/collective.h"
#include "core/model_config.h"
#include "tests/analytic/hand_models.h"

namespace gpuledger::analytic {
namespace {

using Counts = std::map<std::string, CommCount>;

// gpt, L = 2, h = 8, a = k = 2, d = 4, f = 32, V = 10, max_seq 16, untied.
// Units at t = 1 (docs/exact-budget.md): embedding 10·8 + 16·8 = 208;
// layer 2h + (8·24 + 24) + (64 + 8) + 2h + (256 + 32) + (256 + 8) = 872;
// head 2h + 10·8 = 96. P_r (one rank holds all) = 208 + 2·872 + 96 = 2048.
ModelConfig tiny_gpt() { return testing::hand_gpt(10, /*tied=*/false, "tiny-gpt"); }

RunConfig run(int64_t microbatches) {
  RunConfig r;
  r.seq = 4;
  r.mbs = 1;
  r.microbatches = microbatches;
  return r;  // bf16: e = g = 2; grad_clip 1.0; bucket 25 MiB
}

Layout layout(int64_t dp, int64_t tp, int64_t pp, int zero = 0, bool sp = false) {
  Layout l;
  l.dp = dp;
  l.tp = tp;
  l.pp = pp;
  l.zero = zero;
  l.sp = sp;
  return l;
}

void expect_counts(const Counts& got, const std::map<std::string, std::pair<int64_t, int64_t>>& want) {
  EXPECT_EQ(got.size(), want.size());
  for (const auto& [key, cb] : want) {
    auto it = got.find(key);
    if (it == got.end()) {
      ADD_FAILURE() << "missing " << key;
      continue;
    }
    EXPECT_EQ(it->second.calls, cb.first) << key << " calls";
    EXPECT_EQ(it->second.bytes, cb.second) << key << " bytes";
  }
  for (const auto& [key, c] : got)
    if (!want.count(key)) ADD_FAILURE() << "unexpected " << key << " (" << c.calls << " calls, " << c.bytes << " B)";
}

TEST(CommVolume, SingleRankHasNone) {
  EXPECT_TRUE(rank_comm_per_step(tiny_gpt(), layout(1, 1, 1, 3), run(4), 0).empty());
}

TEST(CommVolume, DataParallelZero0Buckets) {
  const auto m = tiny_gpt();
  RunConfig r = run(3);
  // One 25 MiB bucket holds all 2048 bf16 gradients: one all-reduce of 4096 B,
  // once per step whatever m. No norm reduction: the gradients are whole on every rank.
  // Every dp/pp entry below adds the step's loss: one all-reduce of one fp32.
  expect_counts(rank_comm_per_step(m, layout(2, 1, 1, 0), r, 1), {{"all_reduce@dp", {1 + 1, 4096 + 4}}});
  // Buckets of ⌊(1000/2²⁰)·2²⁰ / 2⌋ = 500 elements: ⌈2048/500⌉ = 5 calls, same bytes.
  r.bucket_mb = 1000.0 / 1048576.0;
  expect_counts(rank_comm_per_step(m, layout(2, 1, 1, 0), r, 0), {{"all_reduce@dp", {5 + 1, 4096 + 4}}});
  // fp32 gradients: 4 bytes each, 250 per bucket: 9 calls of 8192 B in all.
  r.grad_dtype = DType::kFP32;
  expect_counts(rank_comm_per_step(m, layout(2, 1, 1, 0), r, 0), {{"all_reduce@dp", {9 + 1, 8192 + 4}}});
}

TEST(CommVolume, DataParallelZero1) {
  // ZeRO 1: each unit's gradient reduce-scattered into its shard once per step
  // (one piece each: a 25 MiB bucket covers every shard), then one all-gather
  // of updated bf16 weights per unit (4 units, each even: 2048·2 B in all).
  // The dp all-reduces left: the gradient norm of the shards, and the loss.
  expect_counts(rank_comm_per_step(tiny_gpt(), layout(2, 1, 1, 1), run(3), 0),
                {{"reduce_scatter@dp", {4, 4096}}, {"all_gather@dp", {4, 4096}}, {"all_reduce@dp", {1 + 1, 4 + 4}}});
  // n = 3 pads each unit to a multiple of 3: 210 + 873 + 873 + 96 = 2052 elements.
  expect_counts(
      rank_comm_per_step(tiny_gpt(), layout(3, 1, 1, 1), run(1), 2),
      {{"reduce_scatter@dp", {4, 2 * 2052}}, {"all_gather@dp", {4, 2 * 2052}}, {"all_reduce@dp", {1 + 1, 4 + 4}}});
  // Buckets of 500 elements: pieces of ⌊500/2⌋ = 250 shard elements. Shards
  // 104, 436, 436, 48: 1 + 2 + 2 + 1 calls, the same bytes.
  RunConfig r = run(1);
  r.bucket_mb = 1000.0 / 1048576.0;
  expect_counts(rank_comm_per_step(tiny_gpt(), layout(2, 1, 1, 1), r, 0),
                {{"reduce_scatter@dp", {6, 4096}}, {"all_gather@dp", {4, 4096}}, {"all_reduce@dp", {1 + 1, 4 + 4}}});
}

// Bus traffic over dp (bytes × the nccl-tests factor of each collective),
// without the loss's 4-byte all-reduce.
double dp_bus_bytes(const Counts& c, int64_t n) {
  double bus = 0;
  for (const auto& [key, count] : c) {
    const auto at = key.find("@dp");
    if (at == std::string::npos) continue;
    const std::string kind = key.substr(0, at);
    const int64_t bytes = kind == "all_reduce" ? count.bytes - 4 : count.bytes;
    bus += static_cast<double>(bytes) * busbw_factor(*parse_comm_kind(kind), n);
  }
  return bus;
}

TEST(CommVolume, ZeroStagesKeepDataParallelVolume) {
  // Rajbhandari et al. 2020 §7: P_os and P_os+g move what DP moves (a
  // reduce-scatter and an all-gather are one all-reduce); P_os+g+p 1.5× (at
  // m = 1, bf16 weights and gradients, units that divide n).
  for (int64_t n : {2, 4}) {
    RunConfig r = run(1);
    r.grad_clip = 0;  // no norm reduction: only the gradients' and weights' traffic (and the loss's)
    const double dp = dp_bus_bytes(rank_comm_per_step(tiny_gpt(), layout(n, 1, 1, 0), r, 0), n);
    EXPECT_DOUBLE_EQ(dp_bus_bytes(rank_comm_per_step(tiny_gpt(), layout(n, 1, 1, 1), r, 0), n), dp) << n;
    EXPECT_DOUBLE_EQ(dp_bus_bytes(rank_comm_per_step(tiny_gpt(), layout(n, 1, 1, 2), r, 0), n), dp) << n;
    EXPECT_DOUBLE_EQ(dp_bus_bytes(rank_comm_per_step(tiny_gpt(), layout(n, 1, 1, 3), r, 0), n), 1.5 * dp) << n;
  }
}

TEST(CommVolume, DataParallelZero2) {
  // ZeRO 2, m = 3: each unit's gradient reduce-scattered after every
  // microbatch (4 units × 3, input 2048·2 B per microbatch), the weights
  // all-gathered once after the step, and the gradient norm summed over dp.
  expect_counts(
      rank_comm_per_step(tiny_gpt(), layout(2, 1, 1, 2), run(3), 0),
      {{"reduce_scatter@dp", {12, 3 * 4096}}, {"all_gather@dp", {4, 4096}}, {"all_reduce@dp", {1 + 1, 4 + 4}}});
}

TEST(CommVolume, DataParallelZero3) {
  // ZeRO 3, m = 3: every unit gathered before forward and before backward
  // (2·3·4 calls, 6 × 4096 B) and reduce-scattered after every backward.
  expect_counts(
      rank_comm_per_step(tiny_gpt(), layout(2, 1, 1, 3), run(3), 1),
      {{"reduce_scatter@dp", {12, 3 * 4096}}, {"all_gather@dp", {24, 6 * 4096}}, {"all_reduce@dp", {1 + 1, 4 + 4}}});
  // The published ZeRO-3 ratio: 1.5× the DP all-reduce volume at m = 1
  // (gather fwd + gather bwd + reduce-scatter = 3 buffers vs 2 for all-reduce
  // in bus traffic) — here in buffer bytes: 3 × 4096 against 4096.
  const Counts c = rank_comm_per_step(tiny_gpt(), layout(2, 1, 1, 3), run(1), 0);
  EXPECT_EQ(c.at("all_gather@dp").bytes + c.at("reduce_scatter@dp").bytes, 3 * 4096);
}

TEST(CommVolume, TensorParallel) {
  // t = 2, b·s·h·e = 1·4·8·2 = 64 B per activation collective.
  // Per layer 2 forward + 2 backward all-reduces (× 2 layers = 8), the
  // vocab-parallel embedding's forward (1) and the head input's backward (1):
  // 10 × 64; the cross-entropy's max, target logit, sum-exp: 3 × 4·1·4 B;
  // the gradient norm: 1 × 4 B.
  expect_counts(rank_comm_per_step(tiny_gpt(), layout(1, 2, 1), run(1), 1), {{"all_reduce@tp", {14, 640 + 48 + 4}}});
  // Full recompute reruns each layer's 2 forward all-reduces: +4 × 64.
  RunConfig r = run(1);
  r.recompute = Recompute::kFull;
  expect_counts(rank_comm_per_step(tiny_gpt(), layout(1, 2, 1), r, 0), {{"all_reduce@tp", {18, 896 + 48 + 4}}});
  // Selective recompute has no collective; m = 2 doubles the per-microbatch part.
  r.recompute = Recompute::kSelective;
  r.microbatches = 2;
  expect_counts(rank_comm_per_step(tiny_gpt(), layout(1, 2, 1), r, 0), {{"all_reduce@tp", {27, 2 * (640 + 48) + 4}}});
}

TEST(CommVolume, TensorParallelSequenceParallel) {
  // t = 2 with SP, 64 B per activation collective (all-gather output and
  // reduce-scatter input are the full b·s·h·e).
  // all-gather: per layer 2 fwd + 2 bwd (output grads) + 2 bwd (re-gathered
  // norm outputs) = 12; embedding backward 1; head forward 1 + backward 1: 15.
  // reduce-scatter: per layer 2 fwd + 2 bwd = 8; embedding forward 1; head
  // backward 1: 10.
  // all-reduce: cross-entropy 3 × 16 B; norm 4 B; the sequence-partial
  // gradients, once per step: per layer 6 tensors of h (norm γ β ×2, two
  // row-parallel biases) × 2 layers = 12 × 16 B, positions 16·8·2 = 256 B,
  // final norm γ β 2 × 16 B.
  expect_counts(rank_comm_per_step(tiny_gpt(), layout(1, 2, 1, 0, true), run(1), 0),
                {{"all_gather@tp", {15, 15 * 64}},
                 {"reduce_scatter@tp", {10, 10 * 64}},
                 {"all_reduce@tp", {3 + 1 + 12 + 1 + 2, 48 + 4 + 192 + 256 + 32}}});
}

TEST(CommVolume, SequencePartialGradientsUnderZero2EveryMicrobatch) {
  // dp 2, tp 2, SP, ZeRO 2, m = 2: the sequence-partial all-reduces run on the
  // staging gradient every microbatch: 2 × (12 + 1 + 2) calls.
  const Counts c = rank_comm_per_step(tiny_gpt(), layout(2, 2, 1, 2, true), run(2), 0);
  // cross-entropy 3 per microbatch, norm 1, partial grads 15 per microbatch.
  EXPECT_EQ(c.at("all_reduce@tp").calls, 2 * 3 + 1 + 2 * 15);
  EXPECT_EQ(c.at("all_reduce@tp").bytes, 2 * 48 + 4 + 2 * (192 + 256 + 32));
}

TEST(CommVolume, ReplicatedKvHeadGradientsAllReducedOverTp) {
  // tiny_gpt with k = 1 at t = 2: the one KV head lives on both ranks. Per
  // layer one all-reduce of its K and V gradients, weight and bias:
  // 1·2·4·(8 + 1) = 72 elements · 2 B = 144 B, × 2 layers, once per step.
  // Everything else as in TensorParallel at t = 2 (k_t changes no activation):
  // 10 × 64 B, cross-entropy 3 × 16 B, norm 4 B.
  ModelConfig m = tiny_gpt();
  m.kv_heads = 1;
  expect_counts(rank_comm_per_step(m, layout(1, 2, 1), run(1), 0),
                {{"all_reduce@tp", {14 + 2, 640 + 48 + 4 + 2 * 144}}});
  // No replication at t = k: nothing added.
  m.kv_heads = 2;
  expect_counts(rank_comm_per_step(m, layout(1, 2, 1), run(1), 0), {{"all_reduce@tp", {14, 640 + 48 + 4}}});
}

TEST(CommVolume, PipelineParallel) {
  // p = 2, m = 3: each stage sends 3 and receives 3 messages of b·s·h·e = 64 B
  // (activations one way, gradients the other); the norm's sum over pp.
  for (int64_t rank : {0, 1})
    expect_counts(rank_comm_per_step(tiny_gpt(), layout(1, 1, 2), run(3), rank),
                  {{"send@pp", {3, 192}}, {"recv@pp", {3, 192}}, {"all_reduce@pp", {1 + 1, 4 + 4}}});
  // A middle stage talks both ways: p = 4 needs 4 layers.
  auto m = tiny_gpt();
  m.layers = 4;
  expect_counts(rank_comm_per_step(m, layout(1, 1, 4), run(3), 1),
                {{"send@pp", {6, 384}}, {"recv@pp", {6, 384}}, {"all_reduce@pp", {1 + 1, 4 + 4}}});
  // Under SP the message is the sequence shard: s_l = s/t = 2, 32 B.
  const Counts c = rank_comm_per_step(tiny_gpt(), layout(1, 2, 2, 0, true), run(3), 0);
  EXPECT_EQ(c.at("send@pp").bytes, 3 * 32);
  EXPECT_EQ(c.at("recv@pp").bytes, 3 * 32);
}

TEST(CommVolume, TiedEmbeddingsAcrossStages) {
  auto m = tiny_gpt();
  m.tied_embeddings = true;
  // p = 2: the first stage's word embedding and the last stage's copy
  // all-reduce their gradient once per step: V'/t·h·g = 10·8·2 B.
  for (int64_t rank : {0, 1})
    expect_counts(rank_comm_per_step(m, layout(1, 1, 2), run(2), rank), {{"send@pp", {2, 128}},
                                                                         {"recv@pp", {2, 128}},
                                                                         {"all_reduce@pp", {1 + 1, 4 + 4}},
                                                                         {"all_reduce@emb", {1, 160}}});
  // t = 2: V' = 256, 128 rows per rank: 128·8·2 B.
  const Counts c = rank_comm_per_step(m, layout(1, 2, 2), run(1), 3);
  EXPECT_EQ(c.at("all_reduce@emb").calls, 1);
  EXPECT_EQ(c.at("all_reduce@emb").bytes, 2048);
  // p = 1: one matrix serves both, nothing to sum.
  EXPECT_EQ(rank_comm_per_step(m, layout(2, 1, 1), run(1), 0).count("all_reduce@emb"), 0u);
  EXPECT_NO_THROW(rank_comm_per_step(m, layout(1, 1, 2, 2), run(1), 0));  // n = 1: ZeRO is a no-op
}

TEST(CommVolume, TiedAcrossStagesUnderZero2And3) {
  auto m = tiny_gpt();
  m.tied_embeddings = true;
  // dp 2 × pp 2, m = 3. Stage 0: embedding 208 and layer 0 (872); stage 1:
  // layer 1 (872) and the head, 2h + 10·8 = 96 (norm, word copy); all even
  // over dp 2. The layer is reduce-scattered after each microbatch's backward
  // (3 × 872·2 B); the word's unit once per step, after the emb all-reduce of
  // 10·8·2 = 160 B (3 + 1 calls). PP: 3 sends and receives of 1·4·8·2 = 64 B.
  const Layout z2 = layout(2, 1, 2, 2);
  expect_counts(rank_comm_per_step(m, z2, run(3), z2.rank({0, 0, 0})),
                {{"reduce_scatter@dp", {3 + 1, 3 * 1744 + 416}},
                 {"all_gather@dp", {2, 416 + 1744}},  // ZeRO 2: the updated weights
                 {"all_reduce@dp", {1 + 1, 4 + 4}},
                 {"all_reduce@pp", {1 + 1, 4 + 4}},
                 {"send@pp", {3, 192}},
                 {"recv@pp", {3, 192}},
                 {"all_reduce@emb", {1, 160}}});
  // ZeRO 3, stage 1: the head (96·2 = 192 B) once; each unit gathered before
  // every forward and backward: 2·3·2 gathers of 1744 and 192 B.
  const Layout z3 = layout(2, 1, 2, 3);
  expect_counts(rank_comm_per_step(m, z3, run(3), z3.rank({1, 0, 1})), {{"reduce_scatter@dp", {3 + 1, 3 * 1744 + 192}},
                                                                        {"all_gather@dp", {12, 6 * (1744 + 192)}},
                                                                        {"all_reduce@dp", {1 + 1, 4 + 4}},
                                                                        {"all_reduce@pp", {1 + 1, 4 + 4}},
                                                                        {"send@pp", {3, 192}},
                                                                        {"recv@pp", {3, 192}},
                                                                        {"all_reduce@emb", {1, 160}}});
}

TEST(CommVolume, TiedZero2And3OneStage) {
  auto m = tiny_gpt();
  m.tied_embeddings = true;
  // Tied, p = 1: units embedding 208, layers 872, head (final norm) 16;
  // P_r = 1968, all even over dp 2. ZeRO 2, m = 3: as untied (the head's word
  // gradient joins the embedding unit's reduce-scatter): 4 units × 3
  // reduce-scatters of 1968·2 B per microbatch, one all-gather of the weights.
  expect_counts(
      rank_comm_per_step(m, layout(2, 1, 1, 2), run(3), 0),
      {{"reduce_scatter@dp", {12, 3 * 3936}}, {"all_gather@dp", {4, 3936}}, {"all_reduce@dp", {1 + 1, 4 + 4}}});
  // ZeRO 3, m = 3, --prefetch 1: 2·3·4 unit gathers (6 × 3936 B) plus the
  // embedding unit (208·2 = 416 B) gathered for the head's forward and, its
  // backward window {head, layer 1} not reaching unit 0, its backward: + 2·3.
  expect_counts(rank_comm_per_step(m, layout(2, 1, 1, 3), run(3), 1), {{"reduce_scatter@dp", {12, 3 * 3936}},
                                                                       {"all_gather@dp", {24 + 6, 6 * 3936 + 6 * 416}},
                                                                       {"all_reduce@dp", {1 + 1, 4 + 4}}});
  // --prefetch 3: the head's backward window is units 0-3: the forward's only.
  RunConfig r = run(3);
  r.prefetch = 3;
  EXPECT_EQ(rank_comm_per_step(m, layout(2, 1, 1, 3), r, 0).at("all_gather@dp").calls, 24 + 3);
  EXPECT_EQ(rank_comm_per_step(m, layout(2, 1, 1, 3), r, 0).at("all_gather@dp").bytes, 6 * 3936 + 3 * 416);
  // --prefetch 0 (2 = head − 0 > 0): both, as with 1.
  r.prefetch = 0;
  EXPECT_EQ(rank_comm_per_step(m, layout(2, 1, 1, 3), r, 0).at("all_gather@dp").calls, 24 + 6);
}

TEST(CommVolume, NoGradientClippingNoNormReduction) {
  RunConfig r = run(1);
  r.grad_clip = 0;
  // only the loss's all-reduce is left on pp
  const Counts c = rank_comm_per_step(tiny_gpt(), layout(1, 1, 2), r, 0);
  EXPECT_EQ(c.at("all_reduce@pp").calls, 1);
  EXPECT_EQ(c.at("all_reduce@pp").bytes, 4);
}

// Expert parallelism: Mixtral-8x7B (E 8, k 2, h 4096, L 32), dp 64, ep 8, b 1,
// s 4096, m 2, bf16. Dropless: C = N = 4096, E·C = 32,768 slots, one
// all-to-all 32,768·4096·2 = 268,435,456 B; 4 per layer per microbatch:
// 4·2·32 = 256 calls. c = 1.25: C = ⌈1.25·4096·2/8⌉ = 1280, 83,886,080 B per call
// (docs/formulas/moe.md, worked example).
TEST(CommVolume, ExpertParallelAllToAlls) {
  ModelConfig m = load_model("mixtral-8x7b");
  Layout l = layout(64, 1, 1);
  l.ep = 8;
  RunConfig r;
  r.seq = 4096;
  r.mbs = 1;
  r.microbatches = 2;
  for (std::optional<double> c : {std::optional<double>{}, std::optional<double>{1.25}}) {
    m.capacity_factor = c;
    const Counts got = rank_comm_per_step(m, l, r, 17);
    const CommCount& a2a = got.at("all_to_all@ep");
    EXPECT_EQ(a2a.calls, 256);
    EXPECT_EQ(a2a.bytes, 256 * (c ? int64_t{83'886'080} : int64_t{268'435'456}));
  }
  l.ep = 1;
  EXPECT_EQ(rank_comm_per_step(m, l, r, 17).count("all_to_all@ep"), 0u);
}

// The gradient sums under ep (ZeRO 0), Mixtral-8x7B at dp 64, ep 8, bf16
// gradients, 25 MiB buckets of 13,107,200 elements: the rank holds
// P_r = 7,242,780,672 parameters of which P_x = 5,637,144,576 are its experts
// (tests/analytic/test_params_moe.cpp). Over dp the dense 1,605,636,096:
// ⌈/bucket⌉ = 123 calls, 3,211,272,192 B, plus the loss's fp32; over the
// expert-data-parallel group (8 ranks) the experts': 431 calls,
// 11,274,289,152 B; the clipping norm's expert share, one fp32 over ep.
// At dp = ep the expert group is one rank: no edp call.
TEST(CommVolume, ExpertParallelGradientSums) {
  const ModelConfig m = load_model("mixtral-8x7b");
  Layout l = layout(64, 1, 1);
  l.ep = 8;
  RunConfig r;
  r.seq = 4096;
  r.mbs = 1;
  r.microbatches = 2;
  r.grad_clip = 1.0;
  const Counts got = rank_comm_per_step(m, l, r, 17);
  EXPECT_EQ(got.at("all_reduce@dp").calls, 123 + 1);
  EXPECT_EQ(got.at("all_reduce@dp").bytes, int64_t{3'211'272'192} + 4);
  EXPECT_EQ(got.at("all_reduce@edp").calls, 431);
  EXPECT_EQ(got.at("all_reduce@edp").bytes, int64_t{11'274'289'152});
  EXPECT_EQ(got.at("all_reduce@ep").calls, 1);
  EXPECT_EQ(got.at("all_reduce@ep").bytes, 4);
  l.dp = 8;
  EXPECT_EQ(rank_comm_per_step(m, l, r, 3).count("all_reduce@edp"), 0u);
}

// ZeRO 2 with experts, Mixtral-8x7B at dp 16, ep 8 (docs/formulas/moe.md
// "ZeRO with experts"), 2 microbatches, bf16: each of the 34 units' dense part
// (embedding 131,072,000, layers 41,984,000, head 131,076,096: divisible by
// 16, no padding) is reduce-scattered over dp after each microbatch's
// backward and all-gathered once after the step, 2·1,605,636,096 =
// 3,211,272,192 bytes per pass over all units; each layer's expert part
// (176,160,768) over the 2 ranks of edp the same way, 32·352,321,536 =
// 11,274,289,152 bytes; the norm's sum over dp only (no all-reduce over ep).
// With --recompute full every block's all-to-alls are 6 per microbatch.
TEST(CommVolume, ZeroWithExpertsShardsOverDpAndTheExpertDataParallelGroup) {
  const ModelConfig m = load_model("mixtral-8x7b");
  Layout l = layout(16, 1, 1);
  l.ep = 8;
  l.zero = 2;
  RunConfig r;
  r.seq = 4096;
  r.mbs = 1;
  r.microbatches = 2;
  r.grad_clip = 1.0;
  const Counts got = rank_comm_per_step(m, l, r, 5);
  EXPECT_EQ(got.at("reduce_scatter@dp").calls, 2 * 34);
  EXPECT_EQ(got.at("reduce_scatter@dp").bytes, 2 * int64_t{3'211'272'192});
  EXPECT_EQ(got.at("all_gather@dp").calls, 34);
  EXPECT_EQ(got.at("all_gather@dp").bytes, int64_t{3'211'272'192});
  EXPECT_EQ(got.at("reduce_scatter@edp").calls, 2 * 32);
  EXPECT_EQ(got.at("reduce_scatter@edp").bytes, 2 * int64_t{11'274'289'152});
  EXPECT_EQ(got.at("all_gather@edp").calls, 32);
  EXPECT_EQ(got.at("all_gather@edp").bytes, int64_t{11'274'289'152});
  EXPECT_EQ(got.at("all_reduce@dp").calls, 2);  // the norm and the loss
  EXPECT_EQ(got.count("all_reduce@ep"), 0u);
  EXPECT_EQ(got.at("all_to_all@ep").calls, 4 * 2 * 32);
  r.recompute = Recompute::kFull;
  EXPECT_EQ(rank_comm_per_step(m, l, r, 5).at("all_to_all@ep").calls, 6 * 2 * 32);
}

// Context parallelism, tiny gpt (L 2, k 2, d 4), bf16, flash, 3 microbatches:
// one K/V block of the rank's s/cp tokens is B_kv = 2·b·(s/cp)·k·d·e bytes;
// per layer per microbatch the forward sends cp − 1 blocks, the backward cp
// messages of 2·(cp − 1)·B_kv bytes in all (TransformerEngine's
// AttnFuncWithCPAndKVP2P); the gradients are averaged over dp·cp ranks.
TEST(CommVolume, ContextParallelRing) {
  const auto m = tiny_gpt();
  RunConfig r = run(3);
  r.attention = AttentionKind::kFlash;
  Layout l = layout(1, 1, 1);
  l.cp = 2;
  // B_kv = 2·1·2·2·4·2 = 64. 3·2 = 6 layer passes. Forward 6·1 sends of 64 B;
  // backward 6·2 sends of 2·1·64 B each pass: 18 calls, 384 + 768 = 1152 B.
  // DP over dp·cp = 2: the 4096 B gradient all-reduce and the loss.
  expect_counts(rank_comm_per_step(m, l, r, 1),
                {{"send@cp", {18, 1152}}, {"recv@cp", {18, 1152}}, {"all_reduce@dp", {2, 4100}}});
  // cp 4, seq 8: B_kv = 2·1·2·2·4·2 = 64; forward 6·3 = 18 sends (1152 B),
  // backward 6·4 = 24 sends of 6·2·3·64 = 2304 B: 42 calls, 3456 B.
  l.cp = 4;
  r.seq = 8;
  expect_counts(rank_comm_per_step(m, l, r, 3),
                {{"send@cp", {42, 3456}}, {"recv@cp", {42, 3456}}, {"all_reduce@dp", {2, 4100}}});
  // A full or selective recompute runs the forward ring twice: 18 more sends of 64 B.
  for (const Recompute rc : {Recompute::kFull, Recompute::kSelective}) {
    r.recompute = rc;
    expect_counts(rank_comm_per_step(m, l, r, 0),
                  {{"send@cp", {60, 4608}}, {"recv@cp", {60, 4608}}, {"all_reduce@dp", {2, 4100}}});
  }
}

// Context parallelism with pipeline stages (cp 2 × pp 2, the same tiny gpt):
// the stages' messages carry the rank's s/cp = 2 tokens, e·b·(s/cp)·h =
// 2·1·2·8 = 32 B (64 B at cp 1), and each stage's ring runs over its one layer:
// 3 passes, forward 3 sends of B_kv = 64 B, backward 3·2 sends of 3·2·64 B.
// With --sp (tp 2) a message is the TP shard of the s/cp tokens: 16 B.
TEST(CommVolume, ContextParallelWithPipelineStages) {
  const auto m = tiny_gpt();
  RunConfig r = run(3);
  r.attention = AttentionKind::kFlash;
  Layout l = layout(1, 1, 2);
  const auto plain = rank_comm_per_step(m, l, r, 0);
  EXPECT_EQ(plain.at("send@pp").calls, 3);
  EXPECT_EQ(plain.at("send@pp").bytes, 3 * 64);
  l.cp = 2;
  for (int64_t rank : {0, 1, 2, 3}) {  // stage 0: ranks 0, 1 (cp 0, 1); stage 1: 2, 3
    const auto c = rank_comm_per_step(m, l, r, rank);
    EXPECT_EQ(c.at("send@pp").calls, 3) << rank;
    EXPECT_EQ(c.at("send@pp").bytes, 3 * 32) << rank;
    EXPECT_EQ(c.at("recv@pp").bytes, 3 * 32) << rank;
    EXPECT_EQ(c.at("send@cp").calls, 9) << rank;
    EXPECT_EQ(c.at("send@cp").bytes, 192 + 384) << rank;
    EXPECT_EQ(c.at("recv@cp").bytes, 192 + 384) << rank;
  }
  EXPECT_EQ(pipeline_message_bytes(m, l, r), 32);
  l.vpp = 2;  // interleaved: every rank sends both ways, each message s/cp tokens
  EXPECT_EQ(pipeline_message_bytes(m, l, r), 32);
  l.vpp = 1;
  l.tp = 2;
  l.sp = true;
  EXPECT_EQ(pipeline_message_bytes(m, l, r), 16);
}

}  // namespace
}  // namespace gpuledger::analytic
