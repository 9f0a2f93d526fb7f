// Qwen3's QK norm in TransformerLayer (see layer.h): an RMSNorm over head_dim
// on each head's query and key, before RoPE, one γ (d) for Q and one for K
// shared by every head (transformers 5.24.0, models/qwen3/modeling_qwen3.py
// Qwen3Attention.forward and models/qwen3_moe/modeling_qwen3_moe.py
// Qwen3MoeAttention: q_norm / k_norm, Qwen3RMSNorm(head_dim, rms_norm_eps) on
// q_proj / k_proj's output viewed as (…, heads, head_dim), then
// apply_rotary_pos_emb). On the head layout (B, heads, T, d) each (token,
// head) row of d is one norm row. Ours multiplies by γ in fp32 before
// rounding to e; Qwen3RMSNorm rounds the normalised row to the input dtype
// first. Saved for the backward (docs/formulas/moe.md "QK norm"): Q and K
// before the norm, e·b·s·(a_t + k_t)·d, and the rstd of every row, fp32.
#include "models/transformer/layer.h"

namespace gpuledger {

void TransformerLayer::qk_norm_forward(void* q, void* k, float* rstd, const void* q_in, const void* k_in,
                                       int64_t rows_q, int64_t rows_k) {
  dev_.rmsnorm_forward(q, rstd, q_in, p_.q_norm_w, cfg_.e, rows_q, cfg_.d, cfg_.norm_eps);
  dev_.rmsnorm_forward(k, rstd ? rstd + rows_q : nullptr, k_in, p_.k_norm_w, cfg_.e, rows_k, cfg_.d, cfg_.norm_eps);
}

void TransformerLayer::qk_norm_split(void* q, void* k, void* v, const void* qkv_rows, LayerSaved& s, Account acc) {
  const LayerConfig& c = cfg_;
  const int64_t n = c.tokens(), e = dtype_bytes(c.e);
  // Q and K as projected are the norm's saved input; the normed ones go on in s.qkv
  s.qk_norm_in = dev_.alloc(e * n * (c.q_dim() + c.kv_dim()), acc, "qk_norm.in");
  s.qk_norm_rstd = dev_.alloc(4 * c.b * (c.a_t + c.k_t) * c.s, acc, "qk_norm.rstd");
  void* q_in = s.qk_norm_in.data();
  void* k_in = byte_offset(q_in, e * n * c.q_dim());
  dev_.split_qkv(q_in, k_in, v, qkv_rows, c.e, c.attn_shape());
  qk_norm_forward(q, k, s.qk_norm_rstd.as<float>(), q_in, k_in, c.b * c.a_t * c.s, c.b * c.k_t * c.s);
  done(s.qk_norm_in);
  done(s.qk_norm_rstd);
}

Buffer TransformerLayer::qk_norm_backward(void*& dq, void*& dk, LayerSaved& s) {
  const LayerConfig& c = cfg_;
  const int64_t n = c.tokens(), e = dtype_bytes(c.e);
  const int64_t rows_q = c.b * c.a_t * c.s, rows_k = c.b * c.k_t * c.s;
  Buffer d_in = ws(e * n * (c.q_dim() + c.kv_dim()), "dqk_norm.in");
  const void* q_in = s.qk_norm_in.data();
  const void* k_in = byte_offset(q_in, e * n * c.q_dim());
  const float* rstd = s.qk_norm_rstd.as<float>();
  void* dq_in = d_in.data();
  void* dk_in = byte_offset(dq_in, e * n * c.q_dim());
  // RMSNorm's backward; the γ gradients accumulate like every weight's
  dev_.rmsnorm_backward(dq_in, p_.d_q_norm_w, c.g, dq, q_in, p_.q_norm_w, rstd, c.e, rows_q, c.d, false);
  dev_.rmsnorm_backward(dk_in, p_.d_k_norm_w, c.g, dk, k_in, p_.k_norm_w, rstd + rows_q, c.e, rows_k, c.d, false);
  s.qk_norm_in.reset();
  s.qk_norm_rstd.reset();
  dq = dq_in;
  dk = dk_in;
  return d_in;
}

}  // namespace gpuledger
