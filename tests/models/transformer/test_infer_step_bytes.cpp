// What the serving forward reads and holds, by hand and against the analytic
// side (analytic/inference.h):
//   - a decode step reads every weight once but the input embedding table only
//     in the rows looked up, and the K/V of the tokens each sequence holds;
//   - the activation peak profiled from one prefill chunk (infer_setup.h)
//     equals analytic::prefill_activation_bytes to the byte, for flash and for
//     materialized attention (the s × s scores booked as workspace), on the cpu
//     in fp32 (its 16-bit GEMMs stage fp32 copies of their own) and on meta.
//
// tiny-llama: L = 2, h = 64, a = 4, k = 2, d = 16, f = 176, V = 97, untied;
// 104896 parameters, the word table 97·64 = 6208 of them; a bf16 K/V token
// 2·2·2·16·2 = 256 bytes.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "analytic/inference.h"
#include "models/kv/kv_cache.h"
#include "models/transformer/infer_engine.h"
#include "models/transformer/infer_setup.h"
#include "tests/models/transformer/harness.h"

namespace gpuledger {
namespace {

using testing::Env;

kv::KvGeometry geometry(const ModelConfig& m) {
  return kv::KvGeometry{m.layers, m.kv_heads, m.head_dim, KvFormat::kBF16, KvScales::kPerTokenHead};
}

Layout one() { return Layout{}; }

TEST(InferStepBytes, WeightsReadCountTheEmbeddingRowsLookedUp) {
  Env env;
  const ModelConfig m = load_model("tiny-llama");
  InferenceModel model(*env.dev, *env.tp, m, DType::kFP32, 1);
  ASSERT_EQ(model.weights().bytes(), 104'896 * 4);
  // everything but the table (6208·4 bytes), and three rows of 64·4 bytes
  EXPECT_EQ(model.weight_bytes_read({5, 7, 5}), 104'896 * 4 - 6208 * 4 + 3 * 256);
  EXPECT_EQ(model.weight_bytes_read({5, 7, 5}), analytic::decode_weight_bytes_read(m, one(), DType::kFP32, 3));
}

TEST(InferStepBytes, DecodeStepsReadTheWeightsAndTheHeldKv) {
  Env env;
  const ModelConfig m = load_model("tiny-llama");
  InferenceModel model(*env.dev, *env.tp, m, DType::kFP32, 1);
  kv::PagedKvCache cache(*env.dev, geometry(m), 32, 4);
  InferenceEngine engine(model, cache, {8, 64, false});
  // two requests of 5 prompt tokens and 3 generated: one prefill step (the
  // first tokens), then two decode steps over sequences of 6 and then 7 tokens
  const auto res = engine.run(make_requests(std::vector<RequestShape>(2, RequestShape{5, 3, 0}), m.vocab, 11, 0));
  ASSERT_EQ(res.size(), 2u);
  const EngineStats& st = engine.stats();
  ASSERT_EQ(st.decode_steps, 2);
  const int64_t weights_2 = 104'896 * 4 - 6208 * 4 + 2 * 256;
  EXPECT_EQ(st.decode_bytes_read, 2 * weights_2 + 2 * 6 * 256 + 2 * 7 * 256);
  analytic::KvOptions kv;
  EXPECT_EQ(st.decode_bytes_read, analytic::decode_bytes_per_step(m, one(), DType::kFP32, kv, 2, 6) +
                                      analytic::decode_bytes_per_step(m, one(), DType::kFP32, kv, 2, 7));
}

// tiny-moe: L = 2, h = 32, a = 4, k = 2, d = 8, E = 4 experts of f_e = 24,
// top-2, one shared expert of 16, V = 97, untied. A layer: norms 64, QKV
// 32·(4 + 4)·8 = 2048, attention-out 1024, router 128, experts 4·3·32·24 =
// 9216, shared 3·32·16 = 1536: 14,016; the model 2·14,016 + 2·97·32 + 32 =
// 34,272 parameters; one expert 3·32·24 = 2304.
constexpr int64_t kTinyMoeParams = 34'272, kTinyMoeExpert = 2304;

// With the router's weights zero every token's E logits tie: softmax is
// uniform and top-2 takes experts 0 and 1 (ties to the lower index), so
// each layer routes to 2 of its 4 experts, whatever the batch.
void zero_routers(InferenceModel& model, Device& dev) {
  const ParamLayout& pl = model.weights().layout();
  for (int64_t i = 0; i < pl.layers; ++i) {
    const auto u = static_cast<size_t>(pl.first_layer_unit + i);
    const TensorSlot& router = pl.units[u].at("moe.router.weight");
    const std::vector<float> zeros(static_cast<size_t>(router.elems()), 0.0f);
    dev.copy_from_host(model.weights().weight(u, "moe.router.weight"), zeros.data(), 4 * router.elems());
  }
}

TEST(InferStepBytes, MoeDecodeReadsTheRoutedExpertsOnly) {
  Env env;
  const ModelConfig m = load_model("tiny-moe");
  InferenceModel model(*env.dev, *env.tp, m, DType::kFP32, 1);
  ASSERT_EQ(model.weights().bytes(), kTinyMoeParams * 4);
  zero_routers(model, *env.dev);
  kv::PagedKvCache cache(*env.dev, geometry(m), 32, 4);
  InferenceEngine engine(model, cache, {8, 64, false});
  // three requests of 4 prompt tokens and 3 generated: one prefill step, then
  // two decode steps of 3 tokens over sequences of 5 and then 6 tokens
  const auto res = engine.run(make_requests(std::vector<RequestShape>(3, RequestShape{4, 3, 0}), m.vocab, 5, 0));
  ASSERT_EQ(res.size(), 3u);
  const EngineStats& st = engine.stats();
  ASSERT_EQ(st.decode_steps, 2);
  EXPECT_EQ(st.decode_experts_routed, 2 * 2 * 2);  // 2 steps × 2 layers × experts {0, 1}
  // a step: every weight once, less the word table but 3 rows of 32, less
  // the 2 experts of each layer no token went to
  const int64_t weights_3 = kTinyMoeParams * 4 - 97 * 32 * 4 + 3 * 32 * 4 - 2 * 2 * kTinyMoeExpert * 4;
  ASSERT_EQ(weights_3, 88'192);
  EXPECT_EQ(st.decode_weight_bytes_read, 2 * weights_3);
  EXPECT_EQ(st.decode_weight_bytes_read, 2 * analytic::decode_weight_bytes_read_routed(m, one(), DType::kFP32, 3, 4));
  const int64_t kv_token = 2 * 2 * 2 * 8 * 2;  // bf16 K and V, 2 layers, 2 KV heads of 8
  EXPECT_EQ(st.decode_bytes_read, 2 * weights_3 + 3 * 5 * kv_token + 3 * 6 * kv_token);
  EXPECT_EQ(st.decode_steps_by_batch.at(3), 2);
}

TEST(InferStepBytes, MoeWeightsReadFollowTheRoutingMade) {
  // random weights: whatever the router picks, the bytes are the dense part
  // and the distinct experts the layers routed to
  Env env;
  const ModelConfig m = load_model("tiny-moe");
  InferenceModel model(*env.dev, *env.tp, m, DType::kFP32, 3);
  kv::PagedKvCache cache(*env.dev, geometry(m), 32, 4);
  for (int64_t id = 0; id < 5; ++id) ASSERT_TRUE(cache.add_sequence(id, 1));
  std::vector<kv::SeqStep> batch;
  for (int64_t id = 0; id < 5; ++id) batch.push_back({id, 1});
  const std::vector<int32_t> tokens = {3, 17, 29, 41, 88};
  model.forward(batch, tokens, cache);
  const int64_t routed = model.experts_routed();
  EXPECT_GE(routed, 2 * 2);  // at least k per layer
  EXPECT_LE(routed, 2 * 4);
  EXPECT_EQ(model.weight_bytes_read(tokens),
            kTinyMoeParams * 4 - 97 * 32 * 4 + 5 * 32 * 4 - (2 * 4 - routed) * kTinyMoeExpert * 4);
}

int64_t profiled(const std::string& backend, const std::string& model_name, DType dtype, AttentionKind attention,
                 int64_t chunk) {
  Env env(backend);
  const ModelConfig m = load_model(model_name);
  InferenceModel model(*env.dev, *env.tp, m, dtype, 1, {}, attention);
  return profile_activation_peak(model, geometry(m), chunk);
}

TEST(InferStepBytes, ProfiledPrefillPeakEqualsTheAnalyticFigureFlashAndMaterialized) {
  const ModelConfig m = load_model("tiny-llama");
  // by hand (analytic/inference.h, tests/analytic/test_inference.cpp): fp32,
  // 64 tokens: flash peaks in the MLP, 2·16384 + 3·16384 + 3·4·64·176; the
  // materialized scores and probabilities 8 bytes · 4 heads · 64² more than
  // Q, K, V and the context
  EXPECT_EQ(profiled("cpu", "tiny-llama", DType::kFP32, AttentionKind::kFlash, 64), 217'088);
  EXPECT_EQ(profiled("cpu", "tiny-llama", DType::kFP32, AttentionKind::kMaterialized, 64),
            2 * 16'384 + 256 + 256 * (64 + 128 + 64) + 8 * 4 * 64 * 64);
  for (const auto attention : {AttentionKind::kFlash, AttentionKind::kMaterialized})
    for (int64_t chunk : {1, 7, 64, 200}) {
      SCOPED_TRACE(std::string(attention_name(attention)) + " chunk " + std::to_string(chunk));
      EXPECT_EQ(profiled("cpu", "tiny-llama", DType::kFP32, attention, chunk),
                analytic::prefill_activation_bytes(m, one(), DType::kFP32, chunk, attention));
      EXPECT_EQ(profiled("meta", "tiny-llama", DType::kBF16, attention, chunk),
                analytic::prefill_activation_bytes(m, one(), DType::kBF16, chunk, attention));
    }
}

TEST(InferStepBytes, MoeProfiledPrefillPeakEqualsTheAnalyticFigure) {
  // tiny-moe, fp32, 16 tokens: the MoE block peaks with every row's tensors,
  // 4·16·4 probs + 4·32 row tokens + 2·32·32·4 rows in and out + 3·32·24·4
  // expert inner + 3·16·16·4 shared inner + 16·32·4 shared out = 22,912, on
  // the layer's two hidden buffers and three of its own (5·16·32·4 = 10,240)
  EXPECT_EQ(profiled("cpu", "tiny-moe", DType::kFP32, AttentionKind::kFlash, 16), 33'152);
  for (const auto attention : {AttentionKind::kFlash, AttentionKind::kMaterialized})
    for (int64_t chunk : {1, 5, 16, 64}) {
      SCOPED_TRACE(std::string(attention_name(attention)) + " chunk " + std::to_string(chunk));
      EXPECT_EQ(profiled("cpu", "tiny-moe", DType::kFP32, attention, chunk),
                analytic::prefill_activation_bytes(load_model("tiny-moe"), one(), DType::kFP32, chunk, attention));
    }
  const ModelConfig q = load_model("qwen3-30b-a3b");
  EXPECT_EQ(profiled("meta", "qwen3-30b-a3b", DType::kBF16, AttentionKind::kFlash, 2048),
            analytic::prefill_activation_bytes(q, one(), DType::kBF16, 2048, AttentionKind::kFlash));
}

TEST(InferStepBytes, ProfiledPrefillPeakEqualsTheAnalyticFigureOnMetaForRealShapes) {
  for (const std::string name : {"tiny-gpt", "llama3-8b", "qwen2.5-7b", "gpt2"})
    for (const auto attention : {AttentionKind::kFlash, AttentionKind::kMaterialized}) {
      SCOPED_TRACE(name + " " + std::string(attention_name(attention)));
      const ModelConfig m = load_model(name);
      const int64_t chunk = std::min<int64_t>(m.max_seq, 2048);
      EXPECT_EQ(profiled("meta", name, DType::kBF16, attention, chunk),
                analytic::prefill_activation_bytes(m, one(), DType::kBF16, chunk, attention));
    }
}

}  // namespace
}  // namespace gpuledger
