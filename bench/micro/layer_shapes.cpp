// Layer shapes from a preset (see layer_shapes.h).
#include "bench/micro/layer_shapes.h"

#include "analytic/params.h"
#include "core/attention_pattern.h"
#include "core/model_config.h"

namespace gpuledger::micro {

const char* pass_name(Pass p) {
  switch (p) {
    case Pass::kForward: return "fwd";
    case Pass::kDgrad: return "dgrad";
    case Pass::kWgrad: return "wgrad";
  }
  return "?";
}

LayerShapes layer_shapes(const std::string& preset, int64_t tp, int64_t seq, int64_t mbs) {
  const ModelConfig m = load_model(preset);
  LayerShapes s;
  s.label = tp > 1 ? preset + ":tp" + std::to_string(tp) : preset;
  s.llama = !m.is_gpt();
  s.tokens = mbs * seq;
  s.hidden = m.hidden;
  s.ffn_local = m.ffn / tp;
  s.vocab = m.vocab;
  s.vocab_local = analytic::padded_vocab(m, tp) / tp;
  s.attn.B = mbs;
  s.attn.Hq = m.heads / tp;
  s.attn.Hkv = kv_heads_on_rank(m.kv_heads, tp);
  s.attn.T = seq;
  s.attn.D = m.head_dim;
  s.attn.window = layer_window(m, 0);  // the first layer's attention
  const int64_t q_dim = s.attn.Hq * s.attn.D;
  const int64_t qkv_dim = (s.attn.Hq + 2 * s.attn.Hkv) * s.attn.D;
  s.linears.push_back({"qkv", m.hidden, qkv_dim});
  s.linears.push_back({"o", q_dim, m.hidden});
  if (s.llama) s.linears.push_back({"gate", m.hidden, s.ffn_local});
  s.linears.push_back({"up", m.hidden, s.ffn_local});
  s.linears.push_back({"down", s.ffn_local, m.hidden});
  s.linears.push_back({"lm_head", m.hidden, s.vocab_local});
  return s;
}

GemmArgs linear_gemm(const LinearShape& l, int64_t tokens, Pass p, DType t) {
  GemmArgs g;
  g.ab_type = t;
  g.c_type = t;
  switch (p) {
    case Pass::kForward:
      g.trans_b = true;
      g.m = tokens;
      g.n = l.out;
      g.k = l.in;
      g.lda = l.in;
      g.ldb = l.in;
      g.ldc = l.out;
      break;
    case Pass::kDgrad:
      g.m = tokens;
      g.n = l.in;
      g.k = l.out;
      g.lda = l.out;
      g.ldb = l.in;
      g.ldc = l.in;
      break;
    case Pass::kWgrad:
      g.trans_a = true;
      g.m = l.out;
      g.n = l.in;
      g.k = tokens;
      g.lda = l.out;
      g.ldb = l.in;
      g.ldc = l.in;
      g.beta = 1.0f;
      break;
  }
  return g;
}

namespace {

// Fills the batch geometry shared by the attention GEMMs: one batch entry per
// (sample, KV head).
GemmArgs attn_gemm(const AttnShape& s, DType ab, DType c) {
  GemmArgs g;
  g.ab_type = ab;
  g.c_type = c;
  g.batch = s.B * s.Hkv;
  return g;
}

}  // namespace

std::vector<GemmArgs> attention_forward_gemms(const AttnShape& s, DType t) {
  const int64_t group = s.Hq / s.Hkv, T = s.T, D = s.D;
  GemmArgs qk = attn_gemm(s, t, DType::kFP32);  // S = Q·Kᵀ
  qk.trans_b = true;
  qk.m = group * T;
  qk.n = T;
  qk.k = D;
  qk.lda = D;
  qk.stride_a = group * T * D;
  qk.ldb = D;
  qk.stride_b = T * D;
  qk.ldc = T;
  qk.stride_c = group * T * T;
  GemmArgs pv = attn_gemm(s, t, t);  // ctx = P·V
  pv.m = group * T;
  pv.n = D;
  pv.k = T;
  pv.lda = T;
  pv.stride_a = group * T * T;
  pv.ldb = D;
  pv.stride_b = T * D;
  pv.ldc = D;
  pv.stride_c = group * T * D;
  return {qk, pv};
}

std::vector<GemmArgs> attention_backward_gemms(const AttnShape& s, DType t) {
  const int64_t group = s.Hq / s.Hkv, T = s.T, D = s.D;
  GemmArgs dp = attn_gemm(s, t, DType::kFP32);  // dP = dctx·Vᵀ
  dp.trans_b = true;
  dp.m = group * T;
  dp.n = T;
  dp.k = D;
  dp.lda = D;
  dp.stride_a = group * T * D;
  dp.ldb = D;
  dp.stride_b = T * D;
  dp.ldc = T;
  dp.stride_c = group * T * T;
  GemmArgs dv = attn_gemm(s, t, t);  // dV = Pᵀ·dctx
  dv.trans_a = true;
  dv.m = T;
  dv.n = D;
  dv.k = group * T;
  dv.lda = T;
  dv.stride_a = group * T * T;
  dv.ldb = D;
  dv.stride_b = group * T * D;
  dv.ldc = D;
  dv.stride_c = T * D;
  GemmArgs dq = attn_gemm(s, t, t);  // dQ = dS·K
  dq.m = group * T;
  dq.n = D;
  dq.k = T;
  dq.lda = T;
  dq.stride_a = group * T * T;
  dq.ldb = D;
  dq.stride_b = T * D;
  dq.ldc = D;
  dq.stride_c = group * T * D;
  GemmArgs dk = attn_gemm(s, t, t);  // dK = dSᵀ·Q
  dk.trans_a = true;
  dk.m = T;
  dk.n = D;
  dk.k = group * T;
  dk.lda = T;
  dk.stride_a = group * T * T;
  dk.ldb = D;
  dk.stride_b = group * T * D;
  dk.ldc = D;
  dk.stride_c = T * D;
  return {dp, dv, dq, dk};
}

}  // namespace gpuledger::micro
