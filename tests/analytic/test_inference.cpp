// analytic/inference.h against counts by hand: the weight and K/V bytes one
// decode step reads, and the prefill activation peak phase by phase, flash
// and materialized.
#include <gtest/gtest.h>

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
