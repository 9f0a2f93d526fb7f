// Decode with the KV cache gives the logits of recomputing the whole sequence
// without a cache (the training forward: TransformerLayer over the full
// prefix, materialized or flash attention), for both flavours, a sliding
// window, and every KV dtype; and a decode step gives the logits of a prefill
// of the whole sequence into a fresh cache of the same format.
//
// Tolerances (max |Δlogit| over the vocabulary; the logits' RMS is ≈ 0.15
// here, so every bound is well under it and a wrong position, head or scale fails):
//   same cache format, fp32 model: 1e-5 — the same K/V codes are read; only
//     the GEMM shapes (one row vs a chunk) differ, fp32 rounding (~1e-7);
//   vs the no-cache reference, fp32 model: a bf16 cache stores K and V
//     rounded to 8 significant bits (relative error ≤ 2^-9): 1e-3 (observed
//     2.7e-4); fp8 E4M3 keeps 4 bits, int8 1/254 of the group's amax:
//     per token-head 1e-2 (fp8) and 4e-3 (int8) (observed 3.6e-3, 8e-4);
//     per tensor 2e-2 and 5e-3 (observed 5.5e-3, 1.4e-3); per channel 4e-2
//     (observed 2.0e-2: each channel's scale is calibrated on the 7-token
//     prefill, and later tokens beyond that amax saturate);
//   bf16 model: 1e-2 (activations rounded to bf16 at every op in both paths; observed 2.8e-3).
#include <gtest/gtest.h>

#include <cctype>
#include <cmath>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "models/kv/kv_cache.h"
#include "models/transformer/infer_model.h"
#include "tests/models/transformer/infer_rig.h"

namespace gpuledger {
namespace {

using testing::Env;

struct Case {
  std::string model;
  AttentionKind attention;
  DType dtype;
  KvFormat format;
  KvScales scales;
  double tol;
  std::optional<int64_t> window;
  bool qk_norm = false;     // Qwen3's QK norm switched on in the model
  bool post_norms = false;  // Gemma's post-block norms switched on in the model
};

std::string name(const Case& c) {
  std::string n = c.model + "_" + std::string(attention_name(c.attention)) + "_" + std::string(dtype_name(c.dtype)) +
                  "_kv" + std::string(kv_format_name(c.format)) + "_" + std::string(kv_scales_name(c.scales));
  if (c.window) n += "_w" + std::to_string(*c.window);
  if (c.qk_norm) n += "_qknorm";
  if (c.post_norms) n += "_postnorms";
  for (auto& ch : n)
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return n;
}

class DecodeVsReference : public ::testing::TestWithParam<Case> {};

TEST_P(DecodeVsReference, EveryDecodeStepMatchesTheFullRecompute) {
  const Case c = GetParam();
  Env env;
  ModelConfig m = load_model(c.model);
  m.sliding_window = c.window;
  m.qk_norm = c.qk_norm;
  m.post_norms = c.post_norms;
  InferenceModel model(*env.dev, *env.tp, m, c.dtype, 7);
  kv::KvGeometry g;
  g.layers = m.layers;
  g.kv_heads = m.kv_heads;
  g.head_dim = m.head_dim;
  g.format = c.format;
  g.scales = c.scales;
  kv::PagedKvCache cache(*env.dev, g, 16, 4, c.window);

  std::vector<int32_t> seq;
  for (int i = 0; i < 22; ++i) seq.push_back((i * 37 + 11) % static_cast<int>(m.vocab));
  const int64_t P = c.window ? std::min<int64_t>(7, *c.window) : 7;
  ASSERT_TRUE(cache.add_sequence(0, P));
  std::vector<float> logits;
  model.forward({{0, P}}, std::vector<int32_t>(seq.begin(), seq.begin() + P), cache, &logits);
  double worst =
      testing::max_abs_diff(logits, testing::reference_logits(env, model, {seq.begin(), seq.begin() + P}, c.attention));
  for (int64_t t = P; t < static_cast<int64_t>(seq.size()); ++t) {
    ASSERT_TRUE(cache.append_tokens(0, 1));
    model.forward({{0, 1}}, {seq[static_cast<size_t>(t)]}, cache, &logits);
    const std::vector<float> ref =
        testing::reference_logits(env, model, {seq.begin(), seq.begin() + t + 1}, c.attention);
    const double d = testing::max_abs_diff(logits, ref);
    worst = std::max(worst, d);
    EXPECT_LE(d, c.tol) << "position " << t << ", logits RMS " << testing::rms(ref);
  }
  std::printf("  %s: worst |Δlogit| %.3g\n", name(c).c_str(), worst);
}

std::vector<Case> cases() {
  std::vector<Case> out;
  for (const char* m : {"tiny-llama", "tiny-gpt"})
    for (auto a : {AttentionKind::kMaterialized, AttentionKind::kFlash}) {
      out.push_back({m, a, DType::kFP32, KvFormat::kBF16, KvScales::kPerTokenHead, 1e-3, {}});
      out.push_back({m, a, DType::kBF16, KvFormat::kBF16, KvScales::kPerTokenHead, 1e-2, {}});
    }
  const struct {
    KvScales s;
    double fp8, int8;
  } quant[] = {
      {KvScales::kPerTokenHead, 1e-2, 4e-3}, {KvScales::kPerTensor, 2e-2, 5e-3}, {KvScales::kPerChannel, 4e-2, 4e-2}};
  for (const auto& q : quant) {
    out.push_back({"tiny-llama", AttentionKind::kFlash, DType::kFP32, KvFormat::kFP8E4M3, q.s, q.fp8, {}});
    out.push_back({"tiny-llama", AttentionKind::kFlash, DType::kFP32, KvFormat::kInt8, q.s, q.int8, {}});
  }
  // sliding window: decode past the window through the rolling buffer
  out.push_back(
      {"tiny-llama", AttentionKind::kMaterialized, DType::kFP32, KvFormat::kBF16, KvScales::kPerTokenHead, 1e-3, 8});
  out.push_back({"tiny-gpt", AttentionKind::kFlash, DType::kFP32, KvFormat::kBF16, KvScales::kPerTokenHead, 1e-3, 5});
  // mixture of experts (every routed token computed) and Qwen3's QK norm
  for (auto a : {AttentionKind::kMaterialized, AttentionKind::kFlash})
    out.push_back({"tiny-moe", a, DType::kFP32, KvFormat::kBF16, KvScales::kPerTokenHead, 1e-3, {}, true});
  out.push_back({"tiny-moe", AttentionKind::kFlash, DType::kBF16, KvFormat::kBF16, KvScales::kPerTokenHead, 1e-2, {}});
  out.push_back(
      {"tiny-llama", AttentionKind::kFlash, DType::kFP32, KvFormat::kBF16, KvScales::kPerTokenHead, 1e-3, {}, true});
  // Gemma's post-block norms, with and without the QK norm. In bf16 the cache
  // holds what the reference computes (exact, as the bf16 cases above); in
  // fp32 the bf16 cache's rounding (2^-9 relative) reaches the residual stream
  // at unit RMS through the post norm instead of damped by a small block
  // output, hence 4e-3 (measured: 1.2e-3, 2.6e-3).
  for (bool qk : {false, true}) {
    out.push_back({"tiny-llama",
                   AttentionKind::kMaterialized,
                   DType::kFP32,
                   KvFormat::kBF16,
                   KvScales::kPerTokenHead,
                   4e-3,
                   {},
                   qk,
                   true});
    out.push_back({"tiny-llama",
                   AttentionKind::kFlash,
                   DType::kBF16,
                   KvFormat::kBF16,
                   KvScales::kPerTokenHead,
                   1e-6,
                   {},
                   qk,
                   true});
  }
  return out;
}

INSTANTIATE_TEST_SUITE_P(Infer, DecodeVsReference, ::testing::ValuesIn(cases()),
                         [](const auto& info) { return name(info.param); });

// Decode one token at a time == prefill the whole sequence into a fresh cache
// of the same format: the same codes are read (fp32 model).
TEST(InferDecode, DecodeEqualsPrefillOfTheWholeSequenceInTheSameFormat) {
  for (KvFormat f : {KvFormat::kBF16, KvFormat::kFP8E4M3, KvFormat::kInt8}) {
    Env env;
    const ModelConfig m = load_model("tiny-llama");
    InferenceModel model(*env.dev, *env.tp, m, DType::kFP32, 3);
    kv::KvGeometry g{m.layers, m.kv_heads, m.head_dim, f, KvScales::kPerTokenHead};
    kv::PagedKvCache a(*env.dev, g, 16, 4), b(*env.dev, g, 16, 4);
    std::vector<int32_t> seq;
    for (int i = 0; i < 13; ++i) seq.push_back((i * 29 + 5) % 97);
    ASSERT_TRUE(a.add_sequence(0, 5));
    model.forward({{0, 5}}, {seq.begin(), seq.begin() + 5}, a);
    std::vector<float> la, lb;
    for (int t = 5; t < 13; ++t) {
      ASSERT_TRUE(a.append_tokens(0, 1));
      model.forward({{0, 1}}, {seq[static_cast<size_t>(t)]}, a, &la);
    }
    ASSERT_TRUE(b.add_sequence(0, 13));
    model.forward({{0, 13}}, seq, b, &lb);
    EXPECT_LE(testing::max_abs_diff(la, lb), 1e-5) << kv_format_name(f);
  }
}

// A mixed batch (one prefill chunk beside decode tokens of other sequences)
// gives each sequence the logits it gets alone.
TEST(InferDecode, BatchedSequencesDoNotSeeEachOther) {
  Env env;
  const ModelConfig m = load_model("tiny-gpt");
  InferenceModel model(*env.dev, *env.tp, m, DType::kFP32, 5);
  kv::KvGeometry g{m.layers, m.kv_heads, m.head_dim, KvFormat::kBF16, KvScales::kPerTokenHead};
  kv::PagedKvCache cache(*env.dev, g, 32, 4);
  std::vector<int32_t> s1{1, 2, 3, 4, 5, 6}, s2{9, 8, 7};
  ASSERT_TRUE(cache.add_sequence(1, 5));
  model.forward({{1, 5}}, {s1.begin(), s1.begin() + 5}, cache);
  ASSERT_TRUE(cache.append_tokens(1, 1));
  ASSERT_TRUE(cache.add_sequence(2, 3));
  std::vector<float> both;
  const auto next = model.forward({{1, 1}, {2, 3}}, {6, 9, 8, 7}, cache, &both);
  ASSERT_EQ(next.size(), 2u);
  const std::vector<float> r1 = testing::reference_logits(env, model, s1, AttentionKind::kMaterialized);
  const std::vector<float> r2 = testing::reference_logits(env, model, s2, AttentionKind::kMaterialized);
  const auto V = static_cast<size_t>(m.vocab);
  EXPECT_LE(testing::max_abs_diff({both.begin(), both.begin() + V}, r1), 2e-3);
  EXPECT_LE(testing::max_abs_diff({both.begin() + V, both.end()}, r2), 2e-3);
  EXPECT_EQ(next[0], argmax(both.data(), m.vocab));
  EXPECT_EQ(next[1], argmax(both.data() + V, m.vocab));
}

// Nothing outlives a step but the weights and the cache: the workspace is empty after it.
TEST(InferDecode, AStepLeavesOnlyWeightsAndKv) {
  Env env;
  const ModelConfig m = load_model("tiny-llama");
  InferenceModel model(*env.dev, *env.tp, m, DType::kBF16, 5);
  kv::KvGeometry g{m.layers, m.kv_heads, m.head_dim, KvFormat::kBF16, KvScales::kPerTokenHead};
  kv::PagedKvCache cache(*env.dev, g, 8, 16);
  ASSERT_TRUE(cache.add_sequence(0, 9));
  model.forward({{0, 9}}, std::vector<int32_t>(9, 3), cache);
  EXPECT_EQ(env.ledger.live(Account::kWorkspace), 0);
  EXPECT_EQ(env.ledger.live(Account::kActivations), 0);
  EXPECT_EQ(env.ledger.live(Account::kGrads), 0);
  EXPECT_GT(env.ledger.peak(Account::kWorkspace), 0);
  EXPECT_EQ(env.ledger.live(Account::kWeights), model.weights().bytes());
  EXPECT_EQ(env.ledger.live(Account::kKv), 8 * 16 * 2 * 2 * 2 * 16 * 2);  // blocks·B·(2·L·k·d·2 bytes)
}

}  // namespace
}  // namespace gpuledger
