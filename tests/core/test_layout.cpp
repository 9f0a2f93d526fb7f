// Layout: rank <-> coordinates in Megatron's order (tp fastest, then dp, then
// pp), the three groups, stage layer ranges, and every validate_layout error.
// Expected ranks are worked out by hand from rank = tp + T·(dp + D·pp).
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "core/layout.h"
#include "core/model_config.h"
#include "core/run_config.h"

namespace gpuledger {
namespace {

using Ranks = std::vector<int64_t>;

Layout make(int64_t dp, int64_t tp, int64_t pp, int zero = 0, bool sp = false) {
  Layout l;
  l.dp = dp;
  l.tp = tp;
  l.pp = pp;
  l.zero = zero;
  l.sp = sp;
  return l;
}

// ---- coordinates ----

TEST(LayoutCoords, MegatronOrderWorld16Tp2Dp2Pp4) {
  const Layout l = make(/*dp=*/2, /*tp=*/2, /*pp=*/4);
  ASSERT_EQ(l.world(), 16);
  // 5 = 1 + 2·(0 + 2·1): tp 1, dp 0, pp 1.
  EXPECT_EQ(l.coords(5), (Coords{.dp = 0, .tp = 1, .pp = 1}));
  // 6 = 0 + 2·(1 + 2·1): tp 0, dp 1, pp 1.
  EXPECT_EQ(l.coords(6), (Coords{.dp = 1, .tp = 0, .pp = 1}));
  // 15 = 1 + 2·(1 + 2·3).
  EXPECT_EQ(l.coords(15), (Coords{.dp = 1, .tp = 1, .pp = 3}));
  EXPECT_EQ(l.coords(0), (Coords{}));
  EXPECT_EQ(l.rank(Coords{.dp = 1, .tp = 0, .pp = 2}), 10);  // 0 + 2·(1 + 2·2)

  // Megatron's initialize_model_parallel example (16 GPUs, tp 2, pp 4):
  // TP groups [0,1] [2,3] ...; PP groups [0,4,8,12] [1,5,9,13] ...; DP groups [0,2] [1,3] [4,6] ...
  EXPECT_EQ(l.tp_group(5), (Ranks{4, 5}));
  EXPECT_EQ(l.dp_group(5), (Ranks{5, 7}));
  EXPECT_EQ(l.pp_group(5), (Ranks{1, 5, 9, 13}));
  EXPECT_EQ(l.tp_group(0), (Ranks{0, 1}));
  EXPECT_EQ(l.dp_group(0), (Ranks{0, 2}));
  EXPECT_EQ(l.dp_group(12), (Ranks{12, 14}));
  EXPECT_EQ(l.pp_group(2), (Ranks{2, 6, 10, 14}));

  EXPECT_TRUE(l.is_first_stage(3));
  EXPECT_FALSE(l.is_first_stage(4));
  EXPECT_TRUE(l.is_last_stage(12));
  EXPECT_FALSE(l.is_last_stage(11));
}

TEST(LayoutCoords, RoundTripAndGroupsPartitionTheWorld) {
  for (const Layout& l :
       {make(1, 1, 1), make(4, 1, 1), make(1, 8, 1), make(1, 1, 4), make(3, 2, 2), make(2, 4, 3), make(5, 3, 2)}) {
    SCOPED_TRACE(testing::Message() << "dp " << l.dp << " tp " << l.tp << " pp " << l.pp);
    std::set<Ranks> tp_groups, dp_groups, pp_groups;
    for (int64_t r = 0; r < l.world(); ++r) {
      const Coords c = l.coords(r);
      EXPECT_EQ(l.rank(c), r);
      EXPECT_EQ(r, c.tp + l.tp * (c.dp + l.dp * c.pp));
      const Ranks tg = l.tp_group(r), dg = l.dp_group(r), pg = l.pp_group(r);
      ASSERT_EQ(static_cast<int64_t>(tg.size()), l.tp);
      ASSERT_EQ(static_cast<int64_t>(dg.size()), l.dp);
      ASSERT_EQ(static_cast<int64_t>(pg.size()), l.pp);
      // Group order: the group's own coordinate 0, 1, 2, ...; r sits at its own index.
      EXPECT_EQ(tg[c.tp], r);
      EXPECT_EQ(dg[c.dp], r);
      EXPECT_EQ(pg[c.pp], r);
      // TP ranks are consecutive (tp fastest).
      for (int64_t i = 1; i < l.tp; ++i) EXPECT_EQ(tg[i], tg[0] + i);
      for (int64_t i = 1; i < l.dp; ++i) EXPECT_EQ(dg[i] - dg[i - 1], l.tp);
      for (int64_t i = 1; i < l.pp; ++i) EXPECT_EQ(pg[i] - pg[i - 1], l.tp * l.dp);
      tp_groups.insert(tg);
      dp_groups.insert(dg);
      pp_groups.insert(pg);
    }
    // Each kind of group partitions the world: world / size distinct groups.
    EXPECT_EQ(static_cast<int64_t>(tp_groups.size()), l.dp * l.pp);
    EXPECT_EQ(static_cast<int64_t>(dp_groups.size()), l.tp * l.pp);
    EXPECT_EQ(static_cast<int64_t>(pp_groups.size()), l.tp * l.dp);
  }
}

TEST(LayoutCoords, OutOfRangeThrows) {
  const Layout l = make(2, 2, 2);
  EXPECT_THROW(l.coords(8), LayoutError);
  EXPECT_THROW(l.coords(-1), LayoutError);
  EXPECT_THROW(l.rank(Coords{.dp = 0, .tp = 2, .pp = 0}), LayoutError);
  EXPECT_THROW(l.rank(Coords{.dp = 0, .tp = 0, .pp = 2}), LayoutError);
  EXPECT_THROW(l.tp_group(8), LayoutError);
}

// ---- stages ----

TEST(LayoutStages, ContiguousEqualStages) {
  const ModelConfig m = load_model("llama3-8b");  // 32 layers
  const Layout l = make(1, 1, 4);
  for (int64_t s = 0; s < 4; ++s) {
    EXPECT_EQ(layers_on_stage(m, l, s), 8);
    EXPECT_EQ(first_layer_of_stage(m, l, s), 8 * s);
  }
  EXPECT_EQ(layers_on_stage(m, make(1, 1, 1), 0), 32);
  EXPECT_EQ(first_layer_of_stage(m, make(1, 1, 32), 31), 31);
  EXPECT_THROW(layers_on_stage(m, l, 4), LayoutError);
  EXPECT_THROW(layers_on_stage(m, make(1, 1, 33), 0), LayoutError);  // 33 stages > 32 layers
  // 32 layers on 3 stages: the ends hold one fewer (10, 11... no: 32 = 3·10 + 2,
  // one stage of 10 — the first — and two of 11).
  EXPECT_EQ(layers_on_stage(m, make(1, 1, 3), 0), 10);
  EXPECT_EQ(layers_on_stage(m, make(1, 1, 3), 1), 11);
  EXPECT_EQ(layers_on_stage(m, make(1, 1, 3), 2), 11);
  EXPECT_EQ(first_layer_of_stage(m, make(1, 1, 3), 2), 21);
}

// Virtual stages (Megatron's interleaved assignment): chunk c of stage r holds
// virtual stage c·p + r, L/(p·v) layers from (c·p + r)·L/(p·v).
TEST(LayoutStages, VirtualStageChunks) {
  const ModelConfig m = load_model("llama3-8b");  // 32 layers
  Layout l = make(1, 1, 4);
  l.vpp = 2;
  EXPECT_EQ(layers_per_chunk(m, l, 0), 4);
  EXPECT_EQ(layers_on_stage(m, l, 3), 8);
  EXPECT_EQ(first_layer_of_chunk(m, l, 0, 0), 0);
  EXPECT_EQ(first_layer_of_chunk(m, l, 3, 0), 12);
  EXPECT_EQ(first_layer_of_chunk(m, l, 0, 1), 16);
  EXPECT_EQ(first_layer_of_chunk(m, l, 3, 1), 28);
  EXPECT_THROW(first_layer_of_chunk(m, l, 0, 2), LayoutError);
  l.vpp = 1;
  EXPECT_EQ(first_layer_of_chunk(m, l, 2, 0), 16);
}

// ---- validation ----

// Expects a LayoutError whose message contains every string in `parts`.
void expect_layout_error(const Layout& l, const ModelConfig& m, const RunConfig& r,
                         std::initializer_list<std::string> parts) {
  try {
    validate_layout(l, m, r);
    ADD_FAILURE() << "no LayoutError";
  } catch (const LayoutError& e) {
    for (const auto& p : parts)
      EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what() << " lacks " << p;
  }
}

RunConfig run(int64_t seq = 1024) {
  RunConfig r;
  r.seq = seq;
  return r;
}

TEST(ValidateLayout, AcceptsGoodLayouts) {
  const ModelConfig l3 = load_model("llama3-8b");  // a 32, k 8, f 14336, L 32
  EXPECT_NO_THROW(validate_layout(make(2, 8, 4, 1, true), l3, run(8192)));
  // tp 16 > kv_heads 8: each KV head replicated twice; 32 % 16, 14336 % 16 fine.
  EXPECT_NO_THROW(validate_layout(make(1, 16, 1), l3, run()));
  // llama: seq beyond max_seq is allowed (RoPE has no table of positions).
  EXPECT_NO_THROW(validate_layout(make(1, 1, 1), l3, run(16384)));
  const ModelConfig g = load_model("gpt2");
  EXPECT_NO_THROW(validate_layout(make(1, 4, 2, 3), g, run(1024)));
  // gpt2 is tied: ZeRO 2/3 with dp > 1 at pp 1 (the head's word gradient waits
  // in a side buffer, parallel/train_step.cpp); ZeRO 1 with pipelines.
  EXPECT_NO_THROW(validate_layout(make(4, 2, 1, 2), g, run(1024)));
  EXPECT_NO_THROW(validate_layout(make(4, 2, 1, 3), g, run(1024)));
  EXPECT_NO_THROW(validate_layout(make(4, 2, 2, 1), g, run(1024)));
  // sp with tp 1 puts no condition on seq.
  EXPECT_NO_THROW(validate_layout(make(1, 1, 1, 0, true), g, run(1023)));
}

TEST(ValidateLayout, VirtualStageErrors) {
  const ModelConfig l3 = load_model("llama3-8b");  // 32 layers
  RunConfig r = run();
  r.microbatches = 8;
  Layout l = make(1, 1, 4);
  l.vpp = 2;
  EXPECT_NO_THROW(validate_layout(l, l3, r));
  l.vpp = 0;
  expect_layout_error(l, l3, r, {"--vpp must be >= 1, got 0"});
  l.vpp = 3;
  expect_layout_error(l, l3, r, {"--pp 4 · --vpp 3 does not divide layers 32 (llama3-8b)"});
  l.vpp = 2;
  r.microbatches = 6;
  expect_layout_error(l, l3, r, {"--microbatches a multiple of --pp 4, got 6"});
  r.microbatches = 8;
  r.schedule = Schedule::kGPipe;
  expect_layout_error(l, l3, r, {"--schedule 1f1b"});
  r.schedule = Schedule::k1F1B;
  Layout one = make(1, 1, 1);
  one.vpp = 2;
  expect_layout_error(one, l3, r, {"--vpp 2 needs --pp > 1"});
  for (int zero : {2, 3}) {  // interleaving with ZeRO 2/3 is accepted
    Layout z = make(2, 1, 4, zero);
    z.vpp = 2;
    EXPECT_NO_THROW(validate_layout(z, l3, r));
  }
}

TEST(ValidateLayout, EachError) {
  const ModelConfig l3 = load_model("llama3-8b");
  const ModelConfig g = load_model("gpt2");  // a 12, f 3072, L 12, max_seq 1024
  expect_layout_error(make(0, 1, 1), l3, run(), {"--dp", "0"});
  expect_layout_error(make(1, 0, 1), l3, run(), {"--tp", "0"});
  expect_layout_error(make(1, 1, -2), l3, run(), {"--pp", "-2"});
  expect_layout_error(make(1, 1, 1, 4), l3, run(), {"--zero", "4"});
  expect_layout_error(make(1, 1, 1, -1), l3, run(), {"--zero", "-1"});
  expect_layout_error(make(1, 3, 1), l3, run(), {"--tp 3 does not divide heads 32 (llama3-8b)"});
  // gpt2-xl has 25 heads: tp 5 divides heads, kv_heads (25) and ffn 6400 -> fine; tp 2 does not.
  expect_layout_error(make(1, 2, 1), load_model("gpt2-xl"), run(), {"--tp 2", "heads 25"});
  // tiny-llama: heads 4, kv_heads 2, ffn 176. A hand-made config with kv 4 of 12 heads and
  // tp 6 (6 ∤ 4, 4 ∤ 6) trips the KV rule only.
  ModelConfig kv = load_model("tiny-llama");
  kv.heads = 12;
  kv.kv_heads = 4;
  kv.head_dim = 16;
  kv.ffn = 192;
  expect_layout_error(make(1, 6, 1), kv, run(64), {"--tp 6", "kv_heads 4"});
  ModelConfig f = load_model("tiny-llama");
  f.ffn = 170;  // 4 ∤ 170
  expect_layout_error(make(1, 4, 1), f, run(64), {"--tp 4 does not divide ffn 170"});
  expect_layout_error(make(1, 1, 33), l3, run(), {"--pp 33 exceeds layers 32 (llama3-8b)"});
  expect_layout_error(make(1, 4, 1, 0, true), l3, run(1026), {"--tp 4", "--seq 1026", "--sp"});
  expect_layout_error(make(1, 1, 1), g, run(1025), {"--seq 1025", "max_seq 1024", "gpt2"});
  // tied + ZeRO 2/3 + dp > 1 + pp > 1 is accepted (parallel/zero/grad_shards.h)
  EXPECT_NO_THROW(validate_layout(make(2, 1, 2, 2), g, run(1024)));
  EXPECT_NO_THROW(validate_layout(make(2, 1, 2, 3), g, run(1024)));

  RunConfig r = run();
  r.mbs = 0;
  expect_layout_error(make(1, 1, 1), l3, r, {"--mbs"});
  r = run(0);
  expect_layout_error(make(1, 1, 1), l3, r, {"--seq"});
  r = run();
  r.microbatches = 0;
  expect_layout_error(make(1, 1, 1), l3, r, {"--microbatches"});
  r = run();
  r.dropout = 1.0;
  expect_layout_error(make(1, 1, 1), l3, r, {"--dropout"});
}

// ---- expert parallelism (--ep) ----

// dp 8 × tp 1 × pp 1, ep 4: ep groups {0..3} {4..7}; expert-dp groups {0,4} {1,5} {2,6} {3,7}.
// dp 4 × tp 2, ep 2: the groups step over dp coordinates, tp held (ranks = tp + 2·dp).
TEST(LayoutExpertParallel, EpGroupsAreConsecutiveDpRanksAndExpertDpTheRest) {
  Layout l = make(8, 1, 1);
  l.ep = 4;
  EXPECT_EQ(l.ep_group(0), (Ranks{0, 1, 2, 3}));
  EXPECT_EQ(l.ep_group(6), (Ranks{4, 5, 6, 7}));
  EXPECT_EQ(l.expert_dp_group(1), (Ranks{1, 5}));
  EXPECT_EQ(l.expert_dp_group(7), (Ranks{3, 7}));
  Layout t = make(4, 2, 1);
  t.ep = 2;
  EXPECT_EQ(t.ep_group(5), (Ranks{5, 7}));  // rank 5: tp 1, dp 2
  EXPECT_EQ(t.expert_dp_group(5), (Ranks{1, 5}));
  Layout one = make(4, 1, 1);  // ep 1: the ep group is the rank, the expert-dp group the dp group
  EXPECT_EQ(one.ep_group(2), (Ranks{2}));
  EXPECT_EQ(one.expert_dp_group(2), one.dp_group(2));
}

TEST(ValidateLayout, ExpertParallelErrors) {
  const ModelConfig moe = load_model("mixtral-8x7b");  // E 8
  const ModelConfig dense = load_model("llama3-8b");
  auto with_ep = [](Layout l, int64_t ep) {
    l.ep = ep;
    return l;
  };
  EXPECT_NO_THROW(validate_layout(with_ep(make(64, 1, 1), 8), moe, run()));
  EXPECT_NO_THROW(validate_layout(with_ep(make(4, 1, 1), 2), moe, run()));
  expect_layout_error(with_ep(make(4, 1, 1), 0), moe, run(), {"--ep must be >= 1, got 0"});
  expect_layout_error(with_ep(make(6, 1, 1), 4), moe, run(), {"--ep 4 does not divide --dp 6"});
  expect_layout_error(with_ep(make(6, 1, 1), 3), moe, run(), {"--ep 3 does not divide the 8 experts"});
  expect_layout_error(with_ep(make(2, 1, 1), 2), dense, run(), {"--ep 2 needs a mixture-of-experts model"});
  expect_layout_error(with_ep(make(2, 2, 1), 2), moe, run(),
                      {"--ep 2 with --tp 2: expert parallelism is built with tp = 1"});
  EXPECT_NO_THROW(validate_layout(with_ep(make(32, 1, 2), 8), moe, run()));  // each stage its own ep groups
  Layout chunks = with_ep(make(32, 1, 2), 8);  // interleaved stages: each chunk's layers in the stage's ep groups
  chunks.vpp = 2;
  RunConfig two = run();
  two.microbatches = 2;
  EXPECT_NO_THROW(validate_layout(chunks, moe, two));
}

// ---- run-option names (core/run_config.h) ----

TEST(RunConfigNames, RoundTrip) {
  for (Schedule s : {Schedule::k1F1B, Schedule::kGPipe}) EXPECT_EQ(schedule_from_name(schedule_name(s)), s);
  for (Recompute x : {Recompute::kNone, Recompute::kSelective, Recompute::kFull})
    EXPECT_EQ(recompute_from_name(recompute_name(x)), x);
  for (AttentionKind a : {AttentionKind::kMaterialized, AttentionKind::kFlash})
    EXPECT_EQ(attention_from_name(attention_name(a)), a);
  EXPECT_EQ(schedule_name(Schedule::k1F1B), "1f1b");
  EXPECT_EQ(recompute_name(Recompute::kSelective), "selective");
  EXPECT_EQ(attention_name(AttentionKind::kFlash), "flash");
  EXPECT_FALSE(schedule_from_name("1F1B").has_value());
  EXPECT_FALSE(recompute_from_name("").has_value());
  EXPECT_FALSE(attention_from_name("sdpa").has_value());
}

TEST(RunConfigNames, BatchArithmetic) {
  RunConfig r;
  r.seq = 2048;
  r.mbs = 2;
  r.microbatches = 8;
  EXPECT_EQ(r.global_batch(4), 64);         // 8·2·4
  EXPECT_EQ(r.tokens_per_step(4), 131072);  // 64·2048
  r.dtype = DType::kFP32;
  EXPECT_FALSE(r.has_master());
}

// ---- context parallelism ----

Layout make_cp(int64_t dp, int64_t cp) {
  Layout l = make(dp, 1, 1);
  l.cp = cp;
  return l;
}

TEST(LayoutContextParallel, MegatronOrderTpCpDpPp) {
  // tp 2, cp 2, dp 2, pp 2: rank = tp + 2·(cp + 2·(dp + 2·pp)).
  Layout l = make(/*dp=*/2, /*tp=*/2, /*pp=*/2);
  l.cp = 2;
  ASSERT_EQ(l.world(), 16);
  // 13 = 1 + 2·(0 + 2·(1 + 2·1)): tp 1, cp 0, dp 1, pp 1.
  EXPECT_EQ(l.coords(13), (Coords{.dp = 1, .tp = 1, .pp = 1, .cp = 0}));
  // 6 = 0 + 2·(1 + 2·(1 + 2·0)): tp 0, cp 1, dp 1, pp 0.
  EXPECT_EQ(l.coords(6), (Coords{.dp = 1, .tp = 0, .pp = 0, .cp = 1}));
  EXPECT_EQ(l.rank(Coords{.dp = 0, .tp = 1, .pp = 1, .cp = 1}), 11);  // 1 + 2·(1 + 2·(0 + 2·1))
  // Megatron's groups for this layout (RankGenerator "tp-cp-dp-pp"): CP [0,2] [1,3] …,
  // DP [0,4] [1,5] …, DP-with-CP [0,2,4,6] [1,3,5,7] …, TP [0,1] …, PP [0,8] ….
  EXPECT_EQ(l.cp_group(0), (Ranks{0, 2}));
  EXPECT_EQ(l.cp_group(13), (Ranks{13, 15}));  // 15 = 1 + 2·(1 + 2·(1 + 2·1))
  EXPECT_EQ(l.dp_group(0), (Ranks{0, 4}));
  EXPECT_EQ(l.dp_group(6), (Ranks{2, 6}));
  EXPECT_EQ(l.dp_cp_group(0), (Ranks{0, 2, 4, 6}));
  EXPECT_EQ(l.dp_cp_group(13), (Ranks{9, 11, 13, 15}));
  EXPECT_EQ(l.tp_group(6), (Ranks{6, 7}));
  EXPECT_EQ(l.pp_group(6), (Ranks{6, 14}));
  EXPECT_THROW(l.rank(Coords{.cp = 2}), LayoutError);
  // cp 1 keeps the tp-dp-pp order: every rank's coordinates as before, cp 0.
  const Layout plain = make(2, 2, 4);
  EXPECT_EQ(plain.coords(5), (Coords{.dp = 0, .tp = 1, .pp = 1}));
  EXPECT_EQ(plain.cp_group(5), (Ranks{5}));
  EXPECT_EQ(plain.dp_cp_group(5), plain.dp_group(5));
}

TEST(LayoutContextParallel, GroupsPartitionTheWorld) {
  for (const Layout& l : {make_cp(1, 2), make_cp(2, 2), make_cp(1, 4), make_cp(3, 4)}) {
    SCOPED_TRACE(testing::Message() << "dp " << l.dp << " cp " << l.cp);
    std::set<int64_t> seen;
    for (int64_t r = 0; r < l.world(); ++r) {
      const Coords c = l.coords(r);
      EXPECT_EQ(l.rank(c), r);
      EXPECT_EQ(r, c.cp + l.cp * c.dp);  // tp = pp = 1
      const Ranks cg = l.cp_group(r), dcg = l.dp_cp_group(r);
      ASSERT_EQ(static_cast<int64_t>(cg.size()), l.cp);
      ASSERT_EQ(static_cast<int64_t>(dcg.size()), l.cp * l.dp);
      EXPECT_EQ(cg[c.cp], r);
      EXPECT_EQ(dcg[c.dp * l.cp + c.cp], r);
      for (int64_t i = 1; i < l.cp; ++i) EXPECT_EQ(cg[i], cg[0] + i);  // a CP ring is consecutive ranks at tp 1
      if (c.cp == 0) seen.insert(cg.begin(), cg.end());
    }
    EXPECT_EQ(static_cast<int64_t>(seen.size()), l.world());  // the rings cover every rank once
  }
}

TEST(LayoutContextParallel, LoadBalancedChunks) {
  // seq 16, cp 4: 8 chunks of 2 tokens; rank r holds chunks r and 7 − r.
  const CpChunks c0 = cp_token_chunks(16, 4, 0), c2 = cp_token_chunks(16, 4, 2);
  EXPECT_EQ(c0.first, 0);
  EXPECT_EQ(c0.second, 7);
  EXPECT_EQ(c0.chunk_tokens, 2);
  EXPECT_EQ(c2.first, 2);
  EXPECT_EQ(c2.second, 5);
  Ranks pos0, pos2;
  for (int64_t i = 0; i < 4; ++i) {
    pos0.push_back(cp_global_position(c0, i));
    pos2.push_back(cp_global_position(c2, i));
  }
  EXPECT_EQ(pos0, (Ranks{0, 1, 14, 15}));
  EXPECT_EQ(pos2, (Ranks{4, 5, 10, 11}));
  EXPECT_THROW(cp_global_position(c0, 4), LayoutError);
  // Every rank does the same causal work: its queries see Σ (position + 1)
  // keys, the same on every rank; the ranks together hold every position once.
  for (int64_t cp : {1, 2, 4, 8}) {
    const int64_t seq = 2 * cp * 3;
    std::set<int64_t> all;
    int64_t first_rank_keys = -1;
    for (int64_t r = 0; r < cp; ++r) {
      const CpChunks c = cp_token_chunks(seq, cp, r);
      int64_t keys = 0;
      for (int64_t i = 0; i < seq / cp; ++i) {
        const int64_t p = cp_global_position(c, i);
        all.insert(p);
        keys += p + 1;
      }
      if (r == 0) first_rank_keys = keys;
      EXPECT_EQ(keys, first_rank_keys) << "cp " << cp << " rank " << r;
    }
    EXPECT_EQ(static_cast<int64_t>(all.size()), seq);
  }
  EXPECT_THROW(cp_token_chunks(12, 4, 0), LayoutError);  // 8 ∤ 12
  EXPECT_THROW(cp_token_chunks(16, 4, 4), LayoutError);
}

TEST(ValidateLayout, ContextParallelErrors) {
  const ModelConfig l3 = load_model("llama3-8b");
  RunConfig flash = run(8192);
  flash.attention = AttentionKind::kFlash;
  EXPECT_NO_THROW(validate_layout(make_cp(2, 4), l3, flash));
  expect_layout_error(make_cp(2, 4), l3, run(8192), {"--cp 4 needs --attention flash"});
  // ZeRO shards over the dp·cp ranks
  for (int z : {1, 2, 3}) {
    Layout zero = make_cp(2, 4);
    zero.zero = z;
    EXPECT_NO_THROW(validate_layout(zero, l3, flash));
    EXPECT_EQ(zero.dp_cp(), 8);
    EXPECT_EQ(zero.dp_cp_rank(zero.coords(6)), 6);  // tp 1: rank = cp + 4·dp, its place in dp_cp_group
  }
  expect_layout_error(make_cp(1, 0), l3, run(), {"--cp must be >= 1", "0"});
  // refused before it enters the world's product (which would overflow)
  expect_layout_error(make_cp(4, -(int64_t{1} << 62)), l3, run(), {"--cp must be >= 1"});
  expect_layout_error(make_cp(1, 4), l3, run(1028), {"--cp 4", "2·cp = 8", "--seq 1028"});
  // tensor parallelism beside the ring; sp shards the rank's s/cp tokens
  Layout tp = make_cp(1, 2);
  tp.tp = 2;
  EXPECT_NO_THROW(validate_layout(tp, l3, flash));
  tp.sp = true;
  tp.tp = 8;
  tp.cp = 4;
  EXPECT_NO_THROW(validate_layout(tp, l3, flash));  // 8192 / 4 = 2048 tokens over 8
  tp.cp = 1024;                                     // 8 tokens a rank over 8: fine; 2048 cp ranks would leave 4
  EXPECT_NO_THROW(validate_layout(tp, l3, flash));
  tp.cp = 2048;
  expect_layout_error(tp, l3, flash, {"--tp 8", "--seq 8192 / --cp 2048 = 4 tokens", "--sp"});
  // every pipeline stage (and virtual stage) runs its own ring
  Layout pp = make_cp(1, 2);
  pp.pp = 2;
  EXPECT_NO_THROW(validate_layout(pp, l3, flash));
  pp.vpp = 2;
  RunConfig four = flash;
  four.microbatches = 4;
  EXPECT_NO_THROW(validate_layout(pp, l3, four));
  expect_layout_error(make_cp(1, int64_t{1} << 21), l3, run(), {"--cp", "above the limit"});
}

}  // namespace
}  // namespace gpuledger

// Llama 3 405B: 126 layers on 16 stages, the first and last holding one fewer
// (Llama 3 paper §3.3.2): 7 + 14·8 + 7.
TEST(LayoutStages, UnevenStagesAsMetaBalancedLlama3) {
  gpuledger::ModelConfig m = gpuledger::load_model("llama3.1-405b");
  gpuledger::Layout l;
  l.pp = 16;
  int64_t total = 0;
  for (int64_t s = 0; s < 16; ++s) {
    const int64_t n = gpuledger::layers_on_stage(m, l, s);
    EXPECT_EQ(n, (s == 0 || s == 15) ? 7 : 8) << s;
    EXPECT_EQ(gpuledger::first_layer_of_stage(m, l, s), total) << s;
    total += n;
  }
  EXPECT_EQ(total, 126);
}
