// The KV cache layer by layer (analytic/kv_layers.h, analytic/kv_cache.h):
// each layer keeps min(context, its window) tokens; vLLM's KV cache groups of
// a hybrid model (the examples in its own docstring); the reservations and the
// capacity that follow, counted here by hand; a model whose layers all share
// one window sizes exactly as sliding_window did.
#include <gtest/gtest.h>

#include "analytic/kv_cache.h"
#include "analytic/kv_layers.h"
#include "analytic/serving_plan.h"
#include "core/attention_pattern.h"

namespace gpuledger::analytic {
namespace {

using W = std::optional<int64_t>;

// A llama shape of `layers` layers with 2 KV heads of 16 values: one layer's
// K and V of one token are 2 · 2 · 16 · 2 = 128 bytes in bf16.
ModelConfig hybrid(int64_t layers, std::vector<W> pattern, W sliding = {}) {
  ModelConfig m;
  m.name = "hybrid";
  m.flavour = Flavour::kLlama;
  m.layers = layers;
  m.hidden = 64;
  m.heads = 4;
  m.kv_heads = 2;
  m.head_dim = 16;
  m.ffn = 128;
  m.vocab = 256;
  m.max_seq = 4096;
  m.sliding_window = sliding;
  m.attention_pattern = std::move(pattern);
  return m;
}
constexpr int64_t kLayerTokenBytes = 128;

Layout pp(int64_t p) {
  Layout l;
  l.pp = p;
  return l;
}

KvOptions opts(KvLayout kind, int64_t stage = 0) {
  KvOptions o;
  o.layout = kind;
  o.stage = stage;
  return o;
}

TEST(KvLayers, EachLayerKeepsItsWindow) {
  // 4 layers: window 8, full, window 8, full.
  const auto m = hybrid(4, {W(8), W()});
  EXPECT_EQ(kv_layer_slots(m, pp(1), 0, {}, 32), 8 + 32 + 8 + 32);
  EXPECT_EQ(kv_layer_slots(m, pp(1), 0, {}, 5), 4 * 5);  // shorter than every window
  EXPECT_EQ(kv_sequence_bytes(m, pp(1), opts(KvLayout::kPaged), 32), 80 * kLayerTokenBytes);
  EXPECT_EQ(kv_tokens_kept(m, opts(KvLayout::kPaged), 32), 32);  // the full layers keep all 32
  // Two stages: each holds one sliding and one full layer.
  EXPECT_EQ(kv_layer_slots(m, pp(2), 1, {}, 32), 8 + 32);
  // A KV budget caps the full layers too (the smaller cap wins on the sliding ones).
  KvEviction budget{KvPolicy::kWindow, 4};
  EXPECT_EQ(kv_layer_slots(m, pp(1), 0, budget, 32), 4 * 4);
}

// vLLM's docstring: 10 full + 20 sliding layers are 3 groups of 10; gpt-oss-20b
// with an EAGLE drafter, 12 sliding + 13 full, pads to groups of 13 (13 < 1.5 × 12).
TEST(KvLayers, GroupsAsVllmFormsThem) {
  const auto a = kv_groups(hybrid(30, {W(), W(64), W(64)}), pp(1), 0, {});
  EXPECT_EQ(a.group_size, 10);
  ASSERT_EQ(a.groups.size(), 3u);
  for (const auto& g : a.groups) EXPECT_EQ(g.layers, 10);
  std::vector<W> p25;
  for (int i = 0; i < 25; ++i) p25.push_back(i % 2 == 0 && i < 24 ? W(128) : W());
  const auto b = kv_groups(hybrid(25, p25), pp(1), 0, {});
  EXPECT_EQ(b.group_size, 13);
  ASSERT_EQ(b.groups.size(), 2u);
  // Gemma 3 27B: 52 sliding and 10 full layers — 1 full group and ⌈52/10⌉ = 6
  // sliding groups of 10 slots (60 for 52 layers: vLLM gives group i layers i, i + 6, …: 9,9,9,9,8,8).
  std::vector<W> gemma(6, W(1024));
  gemma[5] = W();
  const auto g = kv_groups(hybrid(62, gemma), pp(1), 0, {});
  EXPECT_EQ(g.group_size, 10);
  ASSERT_EQ(g.groups.size(), 7u);
  int64_t sliding = 0, full = 0;
  for (const auto& grp : g.groups) (grp.cap ? sliding : full) += grp.layers;
  EXPECT_EQ(sliding, 52);
  EXPECT_EQ(full, 10);
  EXPECT_EQ(g.groups.back().layers, 8);
  // One window for every layer: one group of all of them.
  const auto one = kv_groups(hybrid(6, {}, W(64)), pp(1), 0, {});
  EXPECT_EQ(one.group_size, 6);
  EXPECT_EQ(one.groups.size(), 1u);
}

TEST(KvLayers, PagedReservationFollowsTheGroups) {
  const auto m = hybrid(4, {W(8), W()});  // 2 groups of 2 layers
  const auto o = opts(KvLayout::kPaged);  // block 16
  const int64_t block = 16 * 2 * kLayerTokenBytes;
  EXPECT_EQ(kv_block_bytes(m, pp(1), o), block);
  // context 40: the window group ⌈8/16⌉ = 1 block, the full group ⌈40/16⌉ = 3; + the null block.
  EXPECT_EQ(kv_reserved_bytes(m, pp(1), o, 1, 40), (1 + 3 + 1) * block);
  EXPECT_EQ(kv_reserved_bytes(m, pp(1), o, 3, 40), (3 * 4 + 1) * block);
  // Capacity: 100 blocks' bytes hold 99 after the null block, 4 per sequence → 24 sequences.
  const auto cap = kv_capacity(m, pp(1), o, 100 * block, 1.0, 0, 0, 0, 40);
  EXPECT_EQ(cap.sequences, 24);
}

TEST(KvLayers, ContiguousReservationLayerByLayer) {
  const auto m = hybrid(4, {W(8), W()});
  auto o = opts(KvLayout::kContiguous);
  o.max_model_len = 64;
  // Each sequence reserves 8 + 64 + 8 + 64 layer-token slots.
  EXPECT_EQ(kv_reserved_bytes(m, pp(1), o, 2, 10), 2 * 144 * kLayerTokenBytes);
  const auto cap = kv_capacity(m, pp(1), o, 10 * 144 * kLayerTokenBytes + 100, 1.0, 0, 0, 0, 10);
  EXPECT_EQ(cap.sequences, 10);
  EXPECT_EQ(cap.tokens, 10 * 64);
}

// A pattern of one window everywhere is the old sliding_window model, byte for byte.
TEST(KvLayers, OneWindowEverywhereIsSlidingWindow) {
  const auto old_form = hybrid(4, {}, W(24));
  const auto new_form = hybrid(4, {W(24)});
  for (auto kind : {KvLayout::kPaged, KvLayout::kContiguous}) {
    auto o = opts(kind);
    o.max_model_len = 100;
    for (int64_t ctx : {1, 23, 24, 25, 100}) {
      EXPECT_EQ(kv_reserved_bytes(old_form, pp(1), o, 3, ctx), kv_reserved_bytes(new_form, pp(1), o, 3, ctx));
      EXPECT_EQ(kv_sequence_bytes(old_form, pp(1), o, ctx), std::min<int64_t>(ctx, 24) * 4 * kLayerTokenBytes);
    }
    EXPECT_EQ(kv_capacity(old_form, pp(1), o, 1 << 20, 0.9, 0, 0, 0, 50).sequences,
              kv_capacity(new_form, pp(1), o, 1 << 20, 0.9, 0, 0, 0, 50).sequences);
  }
}

// serve-plan sizes a sequence's KV by the same rule: (1/L) Σ_l min(tokens, window_l).
TEST(KvLayers, ServingPlanKeepsEachLayersWindow) {
  ServingModel s;
  EXPECT_DOUBLE_EQ(kv_kept_tokens(s, 1000), 1000);
  s.layer_windows = {W(100), W(), W(100), W()};
  EXPECT_DOUBLE_EQ(kv_kept_tokens(s, 1000), (100 + 1000 + 100 + 1000) / 4.0);
  EXPECT_DOUBLE_EQ(kv_kept_tokens(s, 50), 50);
}

}  // namespace
}  // namespace gpuledger::analytic
