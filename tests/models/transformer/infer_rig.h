// Helpers for the inference tests (not a test binary): a one-rank serving
// environment and the no-cache reference — the training forward
// (TransformerLayer::forward over the whole sequence, materialized or flash,
// then the final norm and the head) run on the same weights.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "core/model_config.h"
#include "models/transformer/infer_model.h"
#include "tests/models/transformer/harness.h"

namespace gpuledger::testing {

// Logits (V) of the last token of `toks`, computed without a cache by the training layers.
inline std::vector<float> reference_logits(Env& env, InferenceModel& m, const std::vector<int32_t>& toks,
                                           AttentionKind kind) {
  Device& dev = *env.dev;
  const ModelConfig& mc = m.model();
  const InferWeights& w = m.weights();
  const ParamLayout& pl = w.layout();
  LayerConfig lc = m.layer_config();
  const auto T = static_cast<int64_t>(toks.size());
  lc.b = 1;
  lc.s = T;
  lc.attention = kind;
  const int64_t h = lc.h, e = dtype_bytes(lc.e);
  const auto eu = static_cast<size_t>(pl.embedding_unit), hu = static_cast<size_t>(pl.head_unit);
  Buffer ids = dev.alloc(4 * T, Account::kWorkspace);
  dev.copy_from_host(ids.data(), toks.data(), 4 * T);
  Buffer x = dev.alloc(e * T * h, Account::kWorkspace), y = dev.alloc(e * T * h, Account::kWorkspace);
  dev.embedding_forward(x.data(), ids.as<int32_t>(), w.weight(eu, "word.weight"),
                        mc.is_gpt() ? w.weight(eu, "position.weight") : nullptr, lc.e, 1, T, h, 0);
  for (int64_t i = 0; i < pl.layers; ++i) {
    TransformerLayer layer(dev, *env.tp, lc, w.layer_params(static_cast<size_t>(pl.first_layer_unit + i)));
    LayerSaved saved;
    layer.forward(x.data(), y.data(), LayerKeys{}, saved);
    std::swap(x, y);
  }
  Buffer last = dev.alloc(e * h, Account::kWorkspace), normed = dev.alloc(e * h, Account::kWorkspace);
  dev.copy(last.data(), byte_offset(x.data(), e * (T - 1) * h), e * h);
  Buffer st = dev.alloc(8, Account::kWorkspace);
  if (mc.is_gpt())
    dev.layernorm_forward(normed.data(), st.as<float>(), st.as<float>() + 1, last.data(), w.weight(hu, "norm.weight"),
                          w.weight_or_null(hu, "norm.bias"), lc.e, 1, h, lc.norm_eps);
  else
    dev.rmsnorm_forward(normed.data(), st.as<float>(), last.data(), w.weight(hu, "norm.weight"), lc.e, 1, h,
                        lc.norm_eps);
  const void* w_out = pl.head_uses_embedding ? w.weight(eu, "word.weight")
                                             : w.weight(hu, mc.tied_embeddings ? "word_copy.weight" : "output.weight");
  Buffer lg = dev.alloc(4 * pl.vocab_rows, Account::kWorkspace);
  GemmArgs g;
  g.trans_b = true;
  g.m = 1;
  g.n = pl.vocab_rows;
  g.k = h;
  g.a = normed.data();
  g.lda = h;
  g.b = w_out;
  g.ldb = h;
  g.ab_type = lc.e;
  g.c = lg.data();
  g.ldc = pl.vocab_rows;
  g.c_type = DType::kFP32;
  dev.gemm(g);
  std::vector<float> out = to_host(dev, lg.data(), DType::kFP32, pl.vocab_rows);
  out.resize(static_cast<size_t>(mc.vocab));
  return out;
}

inline double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::abs(static_cast<double>(a[i]) - b[i]));
  return m;
}
inline double rms(const std::vector<float>& a) {
  double s = 0;
  for (float x : a) s += static_cast<double>(x) * x;
  return std::sqrt(s / static_cast<double>(a.size()));
}

}  // namespace gpuledger::testing
