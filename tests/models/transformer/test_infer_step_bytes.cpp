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
