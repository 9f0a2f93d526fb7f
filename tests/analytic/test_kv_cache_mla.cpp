// The latent cache of multi-head latent attention (docs/formulas/mla.md):
// bytes per token, whole on every tensor-parallel rank, divided by pipeline
// stages; reservations; the bf16-only refusal; and the prefill activation
// estimate of an MLA layer, worked by hand on a small model.
#include <gtest/gtest.h>

#include <stdexcept>

#include "analytic/inference.h"
#include "analytic/kv_cache.h"
#include "core/model_config.h"

namespace gpuledger::analytic {
namespace {

Layout layout(int64_t tp, int64_t pp) {
  Layout l;
  l.tp = tp;
  l.pp = pp;
  return l;
}

// DeepSeek-V3: (512 + 64) values · 2 B · 61 layers = 70,272 B per token, at any tp.
TEST(MlaKv, DeepSeekV3BytesPerTokenWholeOnEveryTpRank) {
  const ModelConfig m = load_model("deepseek-v3");
  EXPECT_EQ(kv_bytes_per_token(m, layout(1, 1), KvFormat::kBF16), 61 * 576 * 2);
  EXPECT_EQ(kv_bytes_per_token(m, layout(1, 1), KvFormat::kBF16), 70'272);
  EXPECT_EQ(kv_bytes_per_token(m, layout(8, 1), KvFormat::kBF16), 70'272);
  EXPECT_EQ(kv_bytes_per_token(m, layout(128, 1), KvFormat::kBF16), 70'272);
  EXPECT_EQ(kv_scale_bytes_per_token(m, layout(8, 1), KvOptions{}), 0);
}

// DeepSeek-V2-Lite over 3 pipeline stages: 9 layers · 576 · 2 = 10,368 B per token.
TEST(MlaKv, PipelineStagesDivideTheLayers) {
  const ModelConfig m = load_model("deepseek-v2-lite");
  EXPECT_EQ(kv_bytes_per_token(m, layout(1, 1), KvFormat::kBF16), 27 * 576 * 2);
  EXPECT_EQ(kv_bytes_per_token(m, layout(2, 3), KvFormat::kBF16), 10'368);
}

// 4 sequences of 4,096 tokens, paged in blocks of 16: (4·256 + 1 null block) · 16 · 70,272 B.
TEST(MlaKv, PagedReservation) {
  const ModelConfig m = load_model("deepseek-v3");
  KvOptions o;
  EXPECT_EQ(kv_reserved_bytes(m, layout(8, 1), o, 4, 4096), 1'152'460'800);
  o.layout = KvLayout::kContiguous;
  o.max_model_len = 4096;
  EXPECT_EQ(kv_reserved_bytes(m, layout(8, 1), o, 4, 4096), 4LL * 4096 * 70'272);
}

TEST(MlaKv, OnlyTheBf16CacheIsSized) {
  const ModelConfig m = load_model("deepseek-v3");
  for (KvFormat f : {KvFormat::kFP8E4M3, KvFormat::kInt8, KvFormat::kInt4})
    EXPECT_THROW(kv_bytes_per_token(m, layout(1, 1), f), std::invalid_argument);
}

// A small MLA model (h 32, a 4, r_q 16, r_kv 12, d_n 8, d_r 4, d_v 6, dense MLP 48,
// V 97), 5 tokens in bf16, flash, one rank. The attention phase holds
//   h 32 + q latent and its norm 2·16 + queries 4·12 + latent 12 + 4 + normalised 12
//   + up-projected 4·14 + keys 4·12 + values and context 2·4·6 = 292 values per token,
// 2·5·292 = 2,920 B, plus three norms' fp32 statistics 3·4·5 = 60 B: 2,980 B; beside
// the two hidden buffers 2·(2·5·32) = 640 B the layer peaks at 3,620 B — above its
// attention-out (20 + 2·5·(64 + 24) = 900), residual (20 + 960) and MLP (960 + 3·2·5·48
// = 2,400) phases, the embedding (4·5 + 320 = 340) and the head (64 + 4·97 = 452).
TEST(MlaKv, PrefillActivationWorkedByHand) {
  const ModelConfig m = parse_model_config(
      R"({"name": "m", "flavour": "llama", "layers": 3, "hidden": 32, "heads": 4, "kv_heads": 4, "head_dim": 12,
          "ffn": 48, "vocab": 97, "max_seq": 64, "q_lora_rank": 16, "kv_lora_rank": 12,
          "qk_nope_head_dim": 8, "qk_rope_head_dim": 4, "v_head_dim": 6})",
      "m.json");
  const PrefillActivation p = prefill_activation(m, layout(1, 1), DType::kBF16, 5, AttentionKind::kFlash);
  EXPECT_EQ(p.layer_bytes, 3'620);
  EXPECT_EQ(p.embed_bytes, 340);
  EXPECT_EQ(p.head_bytes, 452);
  EXPECT_EQ(p.peak_bytes, 3'620);
  EXPECT_EQ(p.where, "layer: attention (MLA)");
  // Materialized attention adds the fp32 scores and bf16 probabilities of 4 heads × 5²: 6·4·25 = 600 B.
  EXPECT_EQ(prefill_activation(m, layout(1, 1), DType::kBF16, 5, AttentionKind::kMaterialized).layer_bytes, 4'220);
}

}  // namespace
}  // namespace gpuledger::analytic
