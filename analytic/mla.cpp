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

int64_t mla_cache_values_per_token(const ModelConfig& m) { return m.kv_lora_rank + m.qk_rope_head_dim; }

}  // namespace gpuledger::analytic
