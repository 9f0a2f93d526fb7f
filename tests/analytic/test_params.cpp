// Parameter counts: the published totals of real models (model cards), and
// per-rank units under TP/PP/DP checked against hand counts.
#include <gtest/gtest.h>

#include <algorithm>

#include "analytic/params.h"
#include "core/layout.h"
#include "core/model_config.h"

namespace gpuledger::analytic {
namespace {

int64_t units_sum(const std::vector<ParamUnit>& us) {
  int64_t n = 0;
  for (const auto& u : us) n += u.elems();
  return n;
}

const ParamTensor* find_tensor(const std::vector<ParamUnit>& us, const std::string& name) {
  for (const auto& u : us)
    for (const auto& t : u.tensors)
      if (t.name == name) return &t;
  return nullptr;
}

// Published totals (Hugging Face model cards / safetensors metadata; GPT-2
// from its config: 124,439,808).
TEST(Params, PublishedTotals) {
  EXPECT_EQ(model_params(load_model("llama2-7b")), 6'738'415'616);
  EXPECT_EQ(model_params(load_model("llama2-13b")), 13'015'864'320);
  EXPECT_EQ(model_params(load_model("llama2-70b")), 68'976'648'192);
  EXPECT_EQ(model_params(load_model("llama3-8b")), 8'030'261'248);
  EXPECT_EQ(model_params(load_model("llama3-70b")), 70'553'706'496);
  EXPECT_EQ(model_params(load_model("mistral-7b")), 7'241'732'096);
  EXPECT_EQ(model_params(load_model("qwen2.5-7b")), 7'615'616'512);
  EXPECT_EQ(model_params(load_model("gpt2")), 124'439'808);
  EXPECT_EQ(model_params(load_model("gpt2-xl")), 1'557'611'200);
}

TEST(Params, NonEmbedding) {
  // GPT-2: 124,439,808 − 50257·768 (wte) − 1024·768 (wpe) = 85,056,000.
  EXPECT_EQ(non_embedding_params(load_model("gpt2")), 85'056'000);
  // Llama-2-7B: Ψ − 2·32000·4096 (untied embedding and head).
  EXPECT_EQ(non_embedding_params(load_model("llama2-7b")), 6'738'415'616 - 262'144'000);
}

TEST(Params, LayerByHand) {
  // Llama-2-7B layer at t = 1: 2h norms + 4h² attention + 3hf MLP
  // = 8192 + 67,108,864 + 135,266,304.
  EXPECT_EQ(layer_params(load_model("llama2-7b"), 1), 202'383'360);
  // GPT-2 layer: 12h² + 13h = 7,077,888 + 9,984.
  EXPECT_EQ(layer_params(load_model("gpt2"), 1), 7'087'872);

  // tiny-llama: h 64, a 4, k 2, d 16, f 176.
  const auto m = load_model("tiny-llama");
  // t = 1: norms 128 + QKV 64·128 + out 64·64 + MLP 3·64·176.
  EXPECT_EQ(layer_params(m, 1), 128 + 8192 + 4096 + 33792);
  // t = 2: a_t 2, k_t 1 → QKV out 64; 128 + 64·64 + 32·64 + 2·64·88 + 88·64.
  EXPECT_EQ(layer_params(m, 2), 128 + 4096 + 2048 + 11264 + 5632);
  // t = 4 > k = 2: one KV head per rank (replicated) → QKV out 16 + 32 = 48.
  EXPECT_EQ(layer_params(m, 4), 128 + 64 * 48 + 16 * 64 + 2 * 64 * 44 + 44 * 64);
  // Across the TP group: the t = 1 layer plus the replicated norms (and at
  // t = 4 the replicated KV heads: 4 ranks × 2·16·64 against 2·32·64).
  EXPECT_EQ(2 * layer_params(m, 2), layer_params(m, 1) + 128);
  EXPECT_EQ(4 * layer_params(m, 4), layer_params(m, 1) + 3 * 128 + (4 * 2048 - 4096));
}

TEST(Params, PaddedVocabAndKvHeads) {
  const auto tiny = load_model("tiny-gpt");  // V = 97, prime
  EXPECT_EQ(padded_vocab(tiny, 1), 97);
  EXPECT_EQ(padded_vocab(tiny, 2), 256);
  EXPECT_EQ(padded_vocab(tiny, 4), 512);
  const auto l3 = load_model("llama3-8b");  // V = 128256 = 125.25 · 1024
  EXPECT_EQ(padded_vocab(l3, 8), 126 * 1024);
  EXPECT_EQ(padded_vocab(l3, 2), 128256);  // already a multiple of 256
  EXPECT_EQ(kv_heads_on_rank(l3.kv_heads, 1), 8);
  EXPECT_EQ(kv_heads_on_rank(l3.kv_heads, 2), 4);
  EXPECT_EQ(kv_heads_on_rank(l3.kv_heads, 8), 1);
  EXPECT_EQ(kv_heads_on_rank(l3.kv_heads, 16), 1);  // replicated twice
}

TEST(Params, LargestLayerIsLargestModule) {
  // DeepSpeed's rule: the largest module's own parameters.
  EXPECT_EQ(largest_layer_params(load_model("llama2-7b")), 32000LL * 4096);  // embedding
  EXPECT_EQ(largest_layer_params(load_model("gpt2")), 50257LL * 768);        // wte
  // tiny-llama: embedding 97·64 = 6208 < one SwiGLU projection 64·176 = 11264.
  EXPECT_EQ(largest_layer_params(load_model("tiny-llama")), 11264);
  // tiny-gpt: QKV 64·192 + 192 = 12480 < MLP-in 64·256 + 256 = 16640.
  EXPECT_EQ(largest_layer_params(load_model("tiny-gpt")), 16640);
}

TEST(Params, SingleRankUnitsSumToPsi) {
  for (const char* name : {"gpt2", "llama2-7b", "llama3-8b", "qwen2.5-7b", "tiny-gpt", "tiny-llama", "mistral-7b"}) {
    const auto m = load_model(name);
    Layout one;
    const auto us = rank_param_units(m, one, 0);
    EXPECT_EQ(units_sum(us), model_params(m)) << name;
    EXPECT_EQ(rank_params(m, one, 0), model_params(m)) << name;
    EXPECT_EQ(rank_shard_params(m, one, 0), model_params(m)) << name;
    // Forward order: embedding, layer.0 .. layer.L−1, head.
    ASSERT_EQ(static_cast<int64_t>(us.size()), m.layers + 2) << name;
    EXPECT_EQ(us.front().name, "embedding");
    EXPECT_EQ(us[1].name, "layer.0");
    EXPECT_EQ(us.back().name, "head");
  }
}

TEST(Params, TensorNames) {
  const auto g = load_model("gpt2");
  const auto us = rank_param_units(g, Layout{}, 0);
  ASSERT_NE(find_tensor(us, "embedding.word.weight"), nullptr);
  EXPECT_EQ(find_tensor(us, "embedding.word.weight")->elems, 50257 * 768);
  EXPECT_EQ(find_tensor(us, "embedding.position.weight")->elems, 1024 * 768);
  EXPECT_EQ(find_tensor(us, "layers.3.qkv.weight")->elems, 768 * 2304);
  EXPECT_EQ(find_tensor(us, "layers.3.qkv.bias")->elems, 2304);
  EXPECT_EQ(find_tensor(us, "layers.11.mlp_out.bias")->elems, 768);
  EXPECT_EQ(find_tensor(us, "head.norm.bias")->elems, 768);
  EXPECT_EQ(find_tensor(us, "head.output.weight"), nullptr);  // tied, p = 1
  EXPECT_EQ(find_tensor(us, "head.word_copy.weight"), nullptr);

  const auto l = load_model("llama2-7b");
  const auto lu = rank_param_units(l, Layout{}, 0);
  EXPECT_EQ(find_tensor(lu, "layers.0.qkv.bias"), nullptr);    // no biases
  EXPECT_EQ(find_tensor(lu, "layers.0.norm1.bias"), nullptr);  // RMSNorm: γ only
  EXPECT_EQ(find_tensor(lu, "layers.0.mlp_gate.weight")->elems, 4096 * 11008);
  EXPECT_EQ(find_tensor(lu, "head.output.weight")->elems, 32000 * 4096);

  const auto q = load_model("qwen2.5-7b");  // qkv_bias: a·d + 2·k·d = 3584 + 1024
  EXPECT_EQ(find_tensor(rank_param_units(q, Layout{}, 0), "layers.0.qkv.bias")->elems, 4608);
}

TEST(Params, TensorAndPipelineUnitsTiedGpt) {
  // tiny-gpt (tied, V = 97 → V' = 256 at t = 2), dp 1, tp 2, pp 2.
  const auto m = load_model("tiny-gpt");
  Layout l;
  l.tp = 2;
  l.pp = 2;
  // gpt layer at t = 2: norm1 128 + QKV 64·96 + 96 + out 32·64 + 64 + norm2 128
  //                     + MLP-in 64·128 + 128 + MLP-out 128·64 + 64 = 25,184.
  const int64_t layer_t2 = 128 + 6144 + 96 + 2048 + 64 + 128 + 8192 + 128 + 8192 + 64;
  EXPECT_EQ(layer_params(m, 2), layer_t2);
  // Stage 0 (ranks 0, 1): word embedding 256/2·64 + positions 64·64 + layer 0.
  for (int64_t rank : {0, 1}) {
    const auto us = rank_param_units(m, l, rank);
    ASSERT_EQ(us.size(), 2u);
    EXPECT_EQ(us[0].name, "embedding");
    EXPECT_EQ(us[1].name, "layer.0");
    EXPECT_EQ(rank_params(m, l, rank), 8192 + 4096 + layer_t2);
  }
  // Stage 1 (ranks 2, 3): layer 1 + head (final norm 128 + its own copy of the
  // tied word embedding, 128·64).
  for (int64_t rank : {2, 3}) {
    const auto us = rank_param_units(m, l, rank);
    ASSERT_EQ(us.size(), 2u);
    EXPECT_EQ(us[0].name, "layer.1");
    EXPECT_EQ(us[1].name, "head");
    EXPECT_EQ(find_tensor(us, "head.word_copy.weight")->elems, 8192);
    EXPECT_EQ(rank_params(m, l, rank), layer_t2 + 128 + 8192);
  }
  // Summed over all four ranks: Ψ + vocab padding (2·(256 − 97)·64) + the
  // second copy of the tied matrix (256·64) + replicated tensors (positions
  // 4096, per layer norms 256 and row-parallel biases 128, final norm 128).
  int64_t total = 0;
  for (int64_t r = 0; r < l.world(); ++r) total += rank_params(m, l, r);
  const int64_t psi = model_params(m);
  EXPECT_EQ(psi, 97 * 64 + 64 * 64 + 2 * 49984 + 128);
  EXPECT_EQ(total, psi + (256 - 97) * 64 + 256 * 64 + 4096 + 2 * (256 + 128) + 128);
}

TEST(Params, TensorUnitsUntiedLlama) {
  // tiny-llama, tp 4 (> k = 2), pp 1: every rank holds the same shapes.
  const auto m = load_model("tiny-llama");
  Layout l;
  l.tp = 4;
  const int64_t layer_t4 = 128 + 64 * 48 + 16 * 64 + 2 * 64 * 44 + 44 * 64;  // 12,672
  for (int64_t r = 0; r < 4; ++r) {
    // V' = 512, 128 rows per rank in the embedding and in the head.
    EXPECT_EQ(rank_params(m, l, r), 128 * 64 + 2 * layer_t4 + 64 + 128 * 64);
  }
}

TEST(Params, ZeroShardPadsEachUnit) {
  // tiny-llama over dp 3: units 6208, 46208, 46208, 6272 (P_r = 104,896);
  // ⌈·/3⌉ = 2070, 15403, 15403, 2091.
  const auto m = load_model("tiny-llama");
  Layout l;
  l.dp = 3;
  EXPECT_EQ(rank_params(m, l, 0), 104'896);
  EXPECT_EQ(rank_shard_params(m, l, 0), 2070 + 15403 + 15403 + 2091);
  EXPECT_EQ(rank_shard_params(m, l, 2), 2070 + 15403 + 15403 + 2091);
}

}  // namespace
}  // namespace gpuledger::analytic
