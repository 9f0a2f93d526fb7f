// Multi-head latent attention's tensors and cache size (see mla.h).
//
// Shapes: DeepSeek-V2 (arXiv 2405.04434) §2.1.2 eq. 9-13 (keys and values
// from the latent c^KV = W^DKV h, of d_c values), §2.1.3 (queries from
// c^Q = W^DQ h, of d_c' values) and §2.1.3 eq. 14-19 (the decoupled RoPE
// query per head and one RoPE key shared by the heads); the tensor names and
// the RMSNorms on both latents are Hugging Face transformers'
// models/deepseek_v3/modeling_deepseek_v3.py DeepseekV3Attention (q_a_proj,
// q_a_layernorm, q_b_proj or q_proj; kv_a_proj_with_mqa, kv_a_layernorm,
// kv_b_proj; o_proj; none with a bias, attention_bias false in both presets).
//
// Tensor parallelism: Megatron-LM megatron/core/transformer/multi_latent_attention.py
// (MLASelfAttention.__init__) builds linear_q_down_proj and linear_kv_down_proj
// with parallel_mode "duplicated" (whole on every rank), linear_q_up_proj and
// linear_kv_up_proj column-parallel (heads split), linear_proj row-parallel;
// the q/kv layernorms act on the whole latents, so they are replicated too.
#include "analytic/mla.h"

#include <initializer_list>

#include "core/checked_math.h"

namespace gpuledger::analytic {
namespace {

void add(std::vector<ParamTensor>& ts, std::string name, int64_t elems) {
  if (elems > 0) ts.push_back({std::move(name), elems});
}

}  // namespace

void append_mla_attention_tensors(std::vector<ParamTensor>& ts, const ModelConfig& m, int64_t tp,
                                  const std::string& p) {
  const int64_t h = m.hidden, a_t = m.heads / tp;
  const int64_t qk_d = m.qk_nope_head_dim + m.qk_rope_head_dim;
  if (m.q_lora_rank > 0) {
    add(ts, p + "mla.q_down.weight", h * m.q_lora_rank);
    add(ts, p + "mla.q_norm.weight", m.q_lora_rank);
    add(ts, p + "mla.q_up.weight", m.q_lora_rank * a_t * qk_d);
  } else {
    add(ts, p + "mla.q.weight", h * a_t * qk_d);
  }
  add(ts, p + "mla.kv_down.weight", h * (m.kv_lora_rank + m.qk_rope_head_dim));
  add(ts, p + "mla.kv_norm.weight", m.kv_lora_rank);
  add(ts, p + "mla.kv_up.weight", m.kv_lora_rank * a_t * (m.qk_nope_head_dim + m.v_head_dim));
  add(ts, p + "attn_out.weight", a_t * m.v_head_dim * h);
}

int64_t mla_attention_activation_bytes(const ModelConfig& m, int64_t b, int64_t s, int64_t tp, int64_t e,
                                       bool keep_probs) {
  constexpr std::string_view what = "MLA activation bytes per layer";
  const int64_t n = checked_mul(b, s, what), a_t = m.heads / tp;
  const int64_t dn = m.qk_nope_head_dim, dr = m.qk_rope_head_dim, dv = m.v_head_dim;
  int64_t bytes = 0;
  const auto add_bytes = [&](std::initializer_list<int64_t> f) {
    bytes = checked_add(bytes, checked_product(f, what), what);
  };
  if (m.q_lora_rank > 0) {
    add_bytes({2, n, m.q_lora_rank, e});  // query latent, normalised
    add_bytes({4, n});                    // its rstd (fp32)
  }
  add_bytes({2, n, m.kv_lora_rank, e});          // KV latent, normalised
  add_bytes({4, n});                             // its rstd (fp32)
  add_bytes({n, a_t, 2 * dn + dr, e});           // q_nope, k_nope, q_rope
  add_bytes({n, dr, e});                         // the shared RoPE key
  add_bytes({n, a_t, 2 * dv, e});                // v, the context
  if (keep_probs) add_bytes({b, a_t, s, s, e});  // softmax probabilities
  return bytes;
}

MlaForwardFlops mla_attention_forward_flops(const ModelConfig& m, int64_t b, int64_t s, int64_t tp) {
  constexpr std::string_view what = "MLA FLOP count";
  const int64_t n = checked_mul(b, s, what), h = m.hidden, a_t = m.heads / tp;
  const int64_t dn = m.qk_nope_head_dim, dr = m.qk_rope_head_dim, dv = m.v_head_dim;
  const int64_t rq = m.q_lora_rank, rkv = m.kv_lora_rank;
  MlaForwardFlops f;
  f.replicated = checked_product({2, n, h, rq + rkv + dr}, what);
  f.sharded = checked_add(
      checked_product({2, n, rq > 0 ? rq : h, a_t, dn + dr}, what),
      checked_add(checked_product({2, n, rkv, a_t, dn + dv}, what), checked_product({2, n, a_t, dv, h}, what), what),
      what);
  f.core = checked_product({2, b, a_t, s, s, dn + dr + dv}, what);
  return f;
}

std::vector<int64_t> mla_tp_partial_grad_elems(const ModelConfig& m) {
  std::vector<int64_t> elems;
  if (m.q_lora_rank > 0) elems = {m.hidden * m.q_lora_rank, m.q_lora_rank};
  elems.push_back(m.hidden * (m.kv_lora_rank + m.qk_rope_head_dim));
  elems.push_back(m.kv_lora_rank);
  return elems;
}

int64_t mla_cache_values_per_token(const ModelConfig& m) { return m.kv_lora_rank + m.qk_rope_head_dim; }

}  // namespace gpuledger::analytic
