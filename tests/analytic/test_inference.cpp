// analytic/inference.h against counts by hand: the weight and K/V bytes one
// decode step reads, and the prefill activation peak phase by phase, flash
// and materialized.
#include <gtest/gtest.h>

#include <bit>
#include <stdexcept>
#include <vector>

#include "analytic/inference.h"
#include "analytic/params.h"
#include "hand_models.h"

namespace gpuledger::analytic {
namespace {

// tiny-llama (models/presets/tiny-llama.json): L = 2, h = 64, a = 4, k = 2,
// d = 16, f = 176, V = 97, untied. Parameters: embedding 97·64 = 6208; a
// layer 64 + 128·64 + 64·64 + 64 + 3·176·64 = 46208; head 64 + 97·64 = 6272;
// total 104896.
ModelConfig tiny_llama() {
  ModelConfig m;
  m.name = "tiny-llama";
  m.flavour = Flavour::kLlama;
  m.layers = 2;
  m.hidden = 64;
  m.heads = 4;
  m.kv_heads = 2;
  m.head_dim = 16;
  m.ffn = 176;
  m.vocab = 97;
  m.max_seq = 64;
  return m;
}

Layout one_rank() { return Layout{}; }

TEST(InferenceBytes, ADecodeStepReadsTheEmbeddingRowsNotTheTable) {
  const ModelConfig m = tiny_llama();
  ASSERT_EQ(rank_params(m, one_rank(), 0), 104'896);
  // fp32: 104896·4 − the table 6208·4 + 3 rows of 64·4
  EXPECT_EQ(decode_weight_bytes_read(m, one_rank(), DType::kFP32, 3), 419'584 - 24'832 + 768);
  // + 3 sequences × 20 kept tokens × 256 bytes (bf16 K/V: 2·2 layers·2 heads·16·2)
  KvOptions kv;
  EXPECT_EQ(decode_bytes_per_step(m, one_rank(), DType::kFP32, kv, 3, 20), 395'520 + 15'360);
  // int8 with per-token-head scales: 2·2·2·16 = 128 value bytes + 2·2·2·4 = 32 scale bytes a token
  kv.dtype = KvFormat::kInt8;
  EXPECT_EQ(decode_bytes_per_step(m, one_rank(), DType::kFP32, kv, 3, 20), 395'520 + 3 * 20 * 160);
}

TEST(InferenceBytes, TiedGptReadsTheTableForItsHeadAndPositionRowsPerToken) {
  // hand_gpt: embedding V·8 + 16·8 positions, 2 layers of 872, head 2h = 16.
  const ModelConfig tied = testing::hand_gpt(10, true, "tied");
  ASSERT_EQ(rank_params(tied, one_rank(), 0), 80 + 128 + 1744 + 16);
  // bf16, 2 tokens: all of it less 14 position rows of 8·2 bytes (the word table is the head's)
  EXPECT_EQ(decode_weight_bytes_read(tied, one_rank(), DType::kBF16, 2), 1968 * 2 - 14 * 16);
  const ModelConfig untied = testing::hand_gpt(10, false, "untied");
  // untied: also the word table less its 2 rows: 8 rows of 16 bytes
  EXPECT_EQ(decode_weight_bytes_read(untied, one_rank(), DType::kBF16, 2), 2048 * 2 - 8 * 16 - 14 * 16);
}

// The uniform-routing model against an independent count: every assignment
// of k-subsets to B tokens enumerated, the distinct experts averaged.
double enumerated_distinct(int64_t E, int64_t k, int64_t B) {
  std::vector<uint32_t> subsets;  // bit masks of the k-subsets of E
  for (uint32_t s = 0; s < (1u << E); ++s)
    if (std::popcount(s) == k) subsets.push_back(s);
  double total = 0, count = 0;
  std::vector<size_t> pick(static_cast<size_t>(B), 0);
  while (true) {
    uint32_t u = 0;
    for (size_t i : pick) u |= subsets[i];
    total += std::popcount(u);
    count += 1;
    size_t j = 0;  // the next assignment (odometer)
    while (j < pick.size() && ++pick[j] == subsets.size()) pick[j++] = 0;
    if (j == pick.size()) break;
  }
  return total / count;
}

TEST(MoeDecode, ExpectedDistinctExpertsEqualsTheEnumeration) {
  const int64_t cases[][3] = {{4, 2, 1}, {4, 2, 2}, {4, 2, 3}, {5, 2, 3}, {6, 3, 2}, {8, 2, 4}};
  for (const auto& c : cases)
    EXPECT_NEAR(expected_distinct_experts(c[0], c[1], c[2]), enumerated_distinct(c[0], c[1], c[2]), 1e-12)
        << "E " << c[0] << " k " << c[1] << " B " << c[2];
  // by hand: two tokens, top-2 of 4: 4·(1 − (1/2)²) = 3; one token reads its k
  EXPECT_DOUBLE_EQ(expected_distinct_experts(4, 2, 2), 3.0);
  EXPECT_DOUBLE_EQ(expected_distinct_experts(128, 8, 1), 8.0);
  // Qwen3-30B-A3B at batch 64: 128·(1 − (15/16)^64) = 125.94235…
  EXPECT_NEAR(expected_distinct_experts(128, 8, 64), 125.94235, 1e-5);
  EXPECT_THROW(expected_distinct_experts(4, 5, 1), std::invalid_argument);
}

TEST(MoeDecode, MixtralReadsTheActiveParametersAtBatchOne) {
  const ModelConfig m = load_model("mixtral-8x7b");
  Layout l;
  // one token: 2 experts of 8 in each layer, so the active parameters
  // 12,879,925,248 (docs/formulas/moe.md) less the word table but one row
  const int64_t expected = (12'879'925'248 - 32'000LL * 4096 + 4096) * 2;
  EXPECT_EQ(expected, 25'497'714'688);
  EXPECT_EQ(decode_weight_bytes_expected(m, l, DType::kBF16, 1), expected);
  EXPECT_EQ(decode_weight_bytes_read_routed(m, l, DType::kBF16, 1, 32 * 2), expected);
  // every expert read once: the whole table of weights (less the embedding table but one row)
  EXPECT_EQ(decode_weight_bytes_read_routed(m, l, DType::kBF16, 1, 32 * 8),
            decode_weight_bytes_read(m, l, DType::kBF16, 1));
  // batch 4: 8·(1 − (3/4)^4) = 5.46875 experts per layer, 2.53125 unread
  EXPECT_EQ(decode_weight_bytes_expected(m, l, DType::kBF16, 4),
            decode_weight_bytes_read(m, l, DType::kBF16, 4) - 32LL * 176'160'768 * 2 * 253'125 / 100'000);
  EXPECT_THROW(decode_weight_bytes_read_routed(m, l, DType::kBF16, 1, 32 * 8 + 1), std::invalid_argument);
}

TEST(PrefillActivation, TinyLlamaFlashPeaksInTheMlp) {
  // fp32, n = 64: hidden buffers e·n·h = 16384 each, norm stats 4·64 = 256.
  // Beside the two hidden buffers: QKV 256 + 256·(64 + 128 + 64 + 64) = 82176;
  // attention 256 + 256·(64 + 128) = 49408; MLP 3·16384 + 3·4·64·176 = 184320.
  const auto p = prefill_activation(tiny_llama(), one_rank(), DType::kFP32, 64, AttentionKind::kFlash);
  EXPECT_EQ(p.embed_bytes, 4 * 64 + 16'384);
  EXPECT_EQ(p.layer_bytes, 2 * 16'384 + 184'320);
  EXPECT_EQ(p.head_bytes, 16'384 + 4 * 64);  // the hidden buffer and the last row
  EXPECT_EQ(p.peak_bytes, 217'088);
  EXPECT_EQ(p.where, "layer: MLP");
}

TEST(PrefillActivation, TinyLlamaMaterializedPeaksOnTheScores) {
  // Q, K, V and the context live, plus fp32 scores and fp32 probabilities of
  // 4 heads · 64²: 256 + 256·(64 + 128 + 64) + 8·4·4096 = 196864.
  const auto p = prefill_activation(tiny_llama(), one_rank(), DType::kFP32, 64, AttentionKind::kMaterialized);
  EXPECT_EQ(p.peak_bytes, 2 * 16'384 + 196'864);
  EXPECT_EQ(p.where, "layer: attention (materialized scores)");
  // bf16: scores fp32 (4) + probabilities bf16 (2) = 6 bytes per element
  const auto b = prefill_activation(tiny_llama(), one_rank(), DType::kBF16, 64, AttentionKind::kMaterialized);
  EXPECT_EQ(b.peak_bytes, 2 * 8192 + 256 + 128 * (64 + 128 + 64) + 6 * 4 * 4096);
}

TEST(PrefillActivation, Llama3_8bAt8192TokensIsAboutOneGibFlash) {
  ModelConfig m;
  m.flavour = Flavour::kLlama;
  m.layers = 32;
  m.hidden = 4096;
  m.heads = 32;
  m.kv_heads = 8;
  m.head_dim = 128;
  m.ffn = 14336;
  m.vocab = 128256;
  m.max_seq = 8192;
  // 2·e·n·h + 3·e·n·h + 3·e·n·f (MLP), bf16, n = 8192: 5·67108864 + 3·234881024 = 1040187392
  EXPECT_EQ(prefill_activation_bytes(m, one_rank(), DType::kBF16, 8192, AttentionKind::kFlash), 1'040'187'392);
  EXPECT_THROW(prefill_activation_bytes(m, one_rank(), DType::kBF16, 0, AttentionKind::kFlash), std::invalid_argument);
}

}  // namespace
}  // namespace gpuledger::analytic
