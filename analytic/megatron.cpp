// Megatron-LM's figures as its code computes them (see megatron.h for the
// files, functions and commit). Each expression below keeps Megatron's own
// order of operations, so a double here equals the float Megatron prints.
#include "analytic/megatron.h"

#include <algorithm>
#include <cmath>

#include "analytic/params.h"
#include "core/int_math.h"

namespace gpuledger::analytic {

int64_t megatron_padded_vocab(int64_t vocab, int64_t tp) {
  // multiple = make_vocab_size_divisible_by * tensor_model_parallel_size;
  // after = int(math.ceil(after / multiple) * multiple)
  const int64_t multiple = 128 * tp;
  return ceil_div(vocab, multiple) * multiple;
}

namespace {

// The per-layer parameter groups of compute_weight_and_optimizer_memory:
// attention_params (self_attn_term), dense_mlp_params, layernorm_params, the
// final norm; for MoE layers shared_expert_params, routed_expert_params and
// router_params; the layer counts num_dense_layers and num_moe_layers.
struct MegatronLayerParams {
  double attention = 0, mlp = 0, layernorm = 0, final_norm = 0, embedding = 0;
  double shared_experts = 0, routed_experts = 0, router = 0;
  double dense_layers = 0, moe_layers = 0;
};

MegatronLayerParams megatron_layer_params(const ModelConfig& m, int64_t tp) {
  const double h = static_cast<double>(m.hidden);
  const double a = static_cast<double>(m.heads), g = static_cast<double>(m.kv_heads);
  const double norm_size = m.is_gpt() ? 2.0 : 1.0;            // RMSNorm 1, LayerNorm 2 (weight + bias)
  const double gated = m.is_gpt() ? 1.0 : 3.0 / 2.0;          // gated_linear_multiplier (swiglu)
  const double q_ratio = static_cast<double>(m.q_dim()) / h;  // query_projection_to_hidden_size_ratio
  MegatronLayerParams p;
  // self_attn_term = 2 * h * h * ((1 + g/a) * q_ratio)
  p.attention = 2.0 * h * h * ((1.0 + g / a) * q_ratio);
  // dense_mlp_params = 2 * h * ffn_hidden_size * gated_linear_multiplier
  p.mlp = 2.0 * h * static_cast<double>(m.ffn) * gated;
  // layernorm_params = 2 * h * norm_size; final_layernorm = norm_size * h
  p.layernorm = 2.0 * h * norm_size;
  p.final_norm = norm_size * h;
  // embedding_size = h * padded_vocab_size
  p.embedding = h * static_cast<double>(megatron_padded_vocab(m.vocab, tp));
  // num_dense_layers = num_layers - sum(moe_layer_pattern), num_moe_layers =
  // sum(moe_layer_pattern): a MoE model's pattern is --moe-layer-freq
  // "([0]*dense_layers+[1]*(L-dense_layers))" (DeepSeek's first_k_dense_replace;
  // 1 for the others, every layer a MoE layer); a dense model's, all 0.
  const double layers = static_cast<double>(m.layers);
  const double dense = m.is_moe() ? static_cast<double>(m.dense_layers) : layers;
  p.dense_layers = dense;
  p.moe_layers = layers - dense;
  if (m.is_moe()) {
    const double experts = static_cast<double>(m.num_experts);
    // shared_expert_params = 2 * h * moe_shared_expert_intermediate_size * gated_linear_multiplier
    p.shared_experts = 2.0 * h * static_cast<double>(m.shared_experts * m.shared_expert_ffn) * gated;
    // routed_expert_params = 2 * h * moe_ffn_hidden_size * num_experts * gated_linear_multiplier
    p.routed_experts = 2.0 * h * static_cast<double>(m.expert_ffn) * experts * gated;
    // router_params = h * num_experts (no add_bias_linear)
    p.router = h * experts;
  }
  return p;
}

}  // namespace

MegatronShardParams megatron_shard_params(const ModelConfig& m, const Layout& l, int64_t stage,
                                          const MegatronExpertLayout& x) {
  const MegatronLayerParams p = megatron_layer_params(m, l.tp);
  const double t = static_cast<double>(l.tp), pp = static_cast<double>(l.pp);
  const double expert_split = static_cast<double>(x.etp_or(l.tp)) * static_cast<double>(x.ep);  // ETP·EP
  // tp_sharded_params_in_transformer_block = (attention + dense_mlp) * num_dense_layers
  //                                          + (attention + shared_expert) * num_moe_layers
  const double tp_block = (p.attention + p.mlp) * p.dense_layers + (p.attention + p.shared_experts) * p.moe_layers;
  // replicated_params_in_transformer_block = layernorm * num_dense_layers
  //                                          + (layernorm + router) * num_moe_layers + final_layernorm
  const double replicated_block = p.layernorm * p.dense_layers + (p.layernorm + p.router) * p.moe_layers + p.final_norm;
  // expert_sharded_params_in_transformer_block = routed_expert * num_moe_layers
  const double expert_block = p.routed_experts * p.moe_layers;
  MegatronShardParams s;
  if (stage == 0) {
    // Most loaded shard: ((tp_block / pp) + embedding) / tp, replicated_block / pp
    // (not divided by tp), (expert_block / pp) / (etp * ep), + embedding / tp
    // when untied and pp == 1.
    s.tp_sharded = (tp_block / pp + p.embedding) / t;
    s.replicated = replicated_block / pp;
    s.expert_sharded = (expert_block / pp) / expert_split;
    if (!m.tied_embeddings && l.pp == 1) s.tp_sharded += p.embedding / t;
  } else {
    // Other shards: tp_block / (pp * tp) + replicated_block / pp + expert_block / (pp * etp * ep).
    s.tp_sharded = tp_block / (pp * t);
    s.replicated = replicated_block / pp;
    s.expert_sharded = expert_block / (pp * expert_split);
  }
  return s;
}

double megatron_weight_and_optimizer_bytes(const ModelConfig& m, const Layout& l, int64_t stage,
                                           bool distributed_optimizer, const MegatronExpertLayout& x) {
  const MegatronShardParams s = megatron_shard_params(m, l, stage, x);
  // expert_data_parallel_size = world_size // (etp * ep * pp)
  const int64_t expert_dp = (l.dp * l.tp * l.pp) / (x.etp_or(l.tp) * x.ep * l.pp);
  return (s.tp_sharded + s.replicated) * megatron_bytes_per_param(distributed_optimizer, l.dp) +
         s.expert_sharded * megatron_bytes_per_param(distributed_optimizer, expert_dp);
}

double megatron_bytes_per_param(bool distributed_optimizer, int64_t dp) {
  // num_bytes_per_parameter: 18 if not use_distributed_optimizer else 6 + (12 / data_parallel_size)
  return distributed_optimizer ? 6.0 + 12.0 / static_cast<double>(dp) : 18.0;
}

MegatronActivationArgs megatron_activation_args(const Layout& l, const RunConfig& r) {
  MegatronActivationArgs a;
  a.sequence_parallel = l.sp && l.tp > 1;
  a.selective_recompute = r.recompute == Recompute::kSelective;
  a.microbatches = r.microbatches;
  if (l.vpp > 1) a.virtual_stages = l.vpp;  // --vpp: Megatron's interleaved schedule and its penalty
  return a;
}

namespace {

// The pipeline part both activation functions share: interleaving penalty
// 1 + (p − 1)/(p·v), or, without interleaving and with p > 1, min(1, m/p).
double megatron_pipeline_factor(int64_t pp, const MegatronActivationArgs& a) {
  const double p = static_cast<double>(pp);
  if (a.virtual_stages) return 1.0 + (p - 1.0) / (p * static_cast<double>(*a.virtual_stages));
  if (pp > 1 && a.microbatches) return std::min(1.0, static_cast<double>(*a.microbatches) / p);
  return 1.0;
}

}  // namespace

double megatron_activation_bytes(const ModelConfig& m, const Layout& l, const RunConfig& r,
                                 const MegatronActivationArgs& a) {
  const double s = static_cast<double>(r.seq), b = static_cast<double>(r.mbs), h = static_cast<double>(m.hidden);
  const double t = static_cast<double>(l.tp), p = static_cast<double>(l.pp), L = static_cast<double>(m.layers);
  const double v_padded = static_cast<double>(megatron_padded_vocab(m.vocab, l.tp));
  const double ffn = static_cast<double>(m.ffn);
  if (a.sequence_parallel && a.selective_recompute) {
    // compute_activation_memory: (s*b*h) * (18 + 4*(ffn/h)) per layer, × num_layers;
    // + 8*s*b*p (embedding input) + s*b*h*p (embedding dropout); × pipeline factor;
    // + s*b*h*4*(1 + V'/h) when p == 1; all / t.
    double act = (s * b * h) * (18.0 + (4.0 * (ffn / h)));
    act *= L;
    act += 8.0 * s * b * p;
    act += s * b * h * p;
    act *= megatron_pipeline_factor(l.pp, a);
    if (l.pp == 1) act += s * b * h * 4.0 * (1.0 + (v_padded / h));
    return act / t;
  }
  // compute_activation_memory_without_sp: s*b*h*(10 + 24/t) per layer, × num_layers;
  // the same embedding terms and pipeline factor; + (s*b*V'/t + s*b*h) * 2 when
  // p == 1; × 1.05 (optimizer and miscellaneous temporaries).
  const double per_layer = s * b * h * (10.0 + (24.0 / t));
  double act = per_layer * L;
  act += 8.0 * s * b * p;
  act += s * b * h * p;
  act *= megatron_pipeline_factor(l.pp, a);
  if (l.pp == 1) {
    const double logits = s * b * v_padded / t;
    const double final_ln_output = s * b * h;
    act += (logits + final_ln_output) * 2.0;
  }
  return act * 1.05;
}

double megatron_step_flops(const ModelConfig& m, const Layout& l, const RunConfig& r) {
  // transformer_flops with BSHD defaults: total_real_tokens = B·s,
  // seqlen_squared_sum = B·s², no MoE/MTP/linear attention.
  const double batch = static_cast<double>(r.global_batch(l.dp));
  const double s = static_cast<double>(r.seq), h = static_cast<double>(m.hidden);
  const double L = static_cast<double>(m.layers), ffn = static_cast<double>(m.ffn);
  const double tokens = batch * s, seqlen_squared_sum = batch * s * s;
  const double fwd_bwd = 3.0, fma = 2.0;                // forward_backward_expansion_factor, fma_expansion_factor
  const double ffn_expansion = m.is_gpt() ? 2.0 : 3.0;  // ffn_expansion_factor: 3 with SwiGLU
  const double query = static_cast<double>(m.head_dim * m.heads);         // kv_channels * num_attention_heads
  const double key_value = static_cast<double>(m.head_dim * m.kv_heads);  // kv_channels * num_query_groups
  // standard_self_attn_term = 3·2·(h·(q + k + v) + q·h); core = 3·2·q / 2 (causal) · 2 (QKᵀ, PV)
  const double self_attn = fwd_bwd * fma * (h * (query + key_value + key_value) + query * h);
  const double self_attn_core = fwd_bwd * fma * query / 2.0 * 2.0;
  const double v_padded = static_cast<double>(megatron_padded_vocab(m.vocab, l.tp));
  const double per_token = fwd_bwd * fma * h * (ffn * ffn_expansion) * L  // MLP
                           + self_attn * L                                // attention projections
                           + fwd_bwd * fma * h * v_padded * 1.0;          // logits (mtp_num_layers + 1 = 1)
  return tokens * per_token + seqlen_squared_sum * (self_attn_core * L);
}

}  // namespace gpuledger::analytic
