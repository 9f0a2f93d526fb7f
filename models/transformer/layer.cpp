// TransformerLayer (see layer.h): configuration, the norms, the residual and
// dropout skeleton of forward and backward, and the three recompute modes.
// The attention block is in attention.cpp, the MLP in mlp.cpp.
#include "models/transformer/layer.h"

#include <stdexcept>
#include <string>

#include "core/attention_pattern.h"

namespace gpuledger {

AttnShape LayerConfig::attn_shape() const {
  AttnShape sh;
  sh.B = b;
  sh.Hq = a_t;
  sh.Hkv = k_t;
  sh.T = s;
  sh.D = d;
  sh.window = window;
  return sh;
}

LayerConfig make_layer_config(const ModelConfig& m, const RunConfig& r, int64_t tp) {
  LayerConfig c;
  c.gpt = m.is_gpt();
  c.qkv_bias = m.is_gpt() || m.qkv_bias;
  c.qk_norm = m.qk_norm;
  c.post_norms = m.post_norms;
  c.out_bias = m.is_gpt() || m.attn_out_bias;
  c.sinks = m.attention_sinks;
  c.b = r.mbs;
  c.s = r.seq;
  c.h = m.hidden;
  c.a_t = m.heads / tp;
  c.k_t = tp <= m.kv_heads ? m.kv_heads / tp : 1;  // replicated KV heads when t > k
  c.d = m.head_dim;
  c.f_t = m.ffn / tp;
  c.window = layer_window(m, 0);  // the first layer's; StageModel gives each layer its own
  c.norm_eps = static_cast<float>(m.norm_eps);
  c.rope_theta = static_cast<float>(m.rope_theta);
  c.e = r.dtype;
  c.g = r.dtype == DType::kFP32 ? DType::kFP32 : r.grad_dtype;  // exact-budget.md: g = 4 under fp32
  c.dropout = static_cast<float>(r.dropout);
  c.attention = r.attention;
  c.recompute = r.recompute;
  c.tp = tp;  // sp is the caller's (a Layout field, not the run's)
  if (m.is_mla()) {
    c.mla = true;
    c.q_lora_rank = m.q_lora_rank;
    c.kv_lora_rank = m.kv_lora_rank;
    c.qk_nope = m.qk_nope_head_dim;
    c.qk_rope = m.qk_rope_head_dim;
    c.v_head = m.v_head_dim;
  }
  if (m.is_moe()) {
    c.moe = true;
    c.routing = {m.num_experts,          m.experts_per_token, m.norm_topk_prob,       m.capacity_factor,
                 m.router_aux_loss_coef, m.router_sigmoid,    m.routed_scaling_factor};
    c.expert_ffn = m.expert_ffn;
    c.shared_ffn = m.shared_experts * m.shared_expert_ffn;
    c.router_logit_bias = m.router_logit_bias;
    c.expert_biases = m.expert_biases;
    if (m.swiglu_limit) c.swiglu_limit = static_cast<float>(*m.swiglu_limit);
  }
  return c;
}

LayerParams layer_params(const Params& p, size_t unit) {
  LayerParams lp;
  auto w = [&](const char* role) -> const void* { return p.weight_or_null(unit, role); };
  auto g = [&](const char* role) -> void* { return p.grad_or_null(unit, role); };
  // A table: one row per tensor, its weight and its gradient.
  // clang-format off
  lp.norm1_w = w("norm1.weight");     lp.d_norm1_w = g("norm1.weight");
  lp.norm1_b = w("norm1.bias");       lp.d_norm1_b = g("norm1.bias");
  lp.qkv_w = w("qkv.weight");         lp.d_qkv_w = g("qkv.weight");
  lp.qkv_b = w("qkv.bias");           lp.d_qkv_b = g("qkv.bias");
  lp.out_w = w("attn_out.weight");    lp.d_out_w = g("attn_out.weight");
  lp.out_b = w("attn_out.bias");      lp.d_out_b = g("attn_out.bias");
  lp.norm2_w = w("norm2.weight");     lp.d_norm2_w = g("norm2.weight");
  lp.norm2_b = w("norm2.bias");       lp.d_norm2_b = g("norm2.bias");
  lp.mlp_in_w = w("mlp_in.weight");   lp.d_mlp_in_w = g("mlp_in.weight");
  lp.mlp_in_b = w("mlp_in.bias");     lp.d_mlp_in_b = g("mlp_in.bias");
  lp.gate_w = w("mlp_gate.weight");   lp.d_gate_w = g("mlp_gate.weight");
  lp.up_w = w("mlp_up.weight");       lp.d_up_w = g("mlp_up.weight");
  lp.mlp_out_w = w("mlp_out.weight"); lp.d_mlp_out_w = g("mlp_out.weight");
  lp.mlp_out_b = w("mlp_out.bias");   lp.d_mlp_out_b = g("mlp_out.bias");
  lp.q_norm_w = w("q_norm.weight");   lp.d_q_norm_w = g("q_norm.weight");
  lp.k_norm_w = w("k_norm.weight");   lp.d_k_norm_w = g("k_norm.weight");
  lp.post_attn_norm_w = w("post_attn_norm.weight"); lp.d_post_attn_norm_w = g("post_attn_norm.weight");
  lp.post_mlp_norm_w = w("post_mlp_norm.weight");   lp.d_post_mlp_norm_w = g("post_mlp_norm.weight");
  lp.sinks = w("attn.sinks");         lp.d_sinks = g("attn.sinks");
  MoeWeights& m = lp.moe;
  m.router = w("moe.router.weight");             m.d_router = g("moe.router.weight");
  m.router_b = w("moe.router.logit_bias");       m.d_router_b = g("moe.router.logit_bias");
  m.gate_b = w("moe.experts.gate.bias");         m.d_gate_b = g("moe.experts.gate.bias");
  m.up_b = w("moe.experts.up.bias");             m.d_up_b = g("moe.experts.up.bias");
  m.down_b = w("moe.experts.down.bias");         m.d_down_b = g("moe.experts.down.bias");
  m.gate = w("moe.experts.gate.weight");         m.d_gate = g("moe.experts.gate.weight");
  m.up = w("moe.experts.up.weight");             m.d_up = g("moe.experts.up.weight");
  m.down = w("moe.experts.down.weight");         m.d_down = g("moe.experts.down.weight");
  m.shared_gate = w("moe.shared.gate.weight");   m.d_shared_gate = g("moe.shared.gate.weight");
  m.shared_up = w("moe.shared.up.weight");       m.d_shared_up = g("moe.shared.up.weight");
  m.shared_down = w("moe.shared.down.weight");   m.d_shared_down = g("moe.shared.down.weight");
  MlaWeights& a = lp.mla;
  const char* q_up = p.weight_or_null(unit, "mla.q.weight") ? "mla.q.weight" : "mla.q_up.weight";  // r_q = 0: q
  a.q_down = w("mla.q_down.weight");    a.d_q_down = g("mla.q_down.weight");
  a.q_norm = w("mla.q_norm.weight");    a.d_q_norm = g("mla.q_norm.weight");
  a.q_up = w(q_up);                     a.d_q_up = g(q_up);
  a.kv_down = w("mla.kv_down.weight");  a.d_kv_down = g("mla.kv_down.weight");
  a.kv_norm = w("mla.kv_norm.weight");  a.d_kv_norm = g("mla.kv_norm.weight");
  a.kv_up = w("mla.kv_up.weight");      a.d_kv_up = g("mla.kv_up.weight");
  a.out = lp.out_w;                     a.d_out = lp.d_out_w;
  // clang-format on
  return lp;
}

// ---- the layer ----

TransformerLayer::TransformerLayer(Device& device, Comm& tp, const LayerConfig& cfg, const LayerParams& params)
    : dev_(device), tp_(tp), cfg_(cfg), p_(params), single_rank_(device, nullptr, cfg.s, cfg.kv_block_bytes()) {
  if (cfg.sp && (cfg.tp < 2 || cfg.tokens() % cfg.tp != 0 || tp.size() != cfg.tp))
    throw std::invalid_argument(
        "TransformerLayer: sequence parallelism needs tp > 1 dividing b·s "
        "and a tp communicator of that size");
  if (cfg.a_t % cfg.k_t != 0)
    throw std::invalid_argument("TransformerLayer: query heads per rank (" + std::to_string(cfg.a_t) +
                                ") must be a multiple of KV heads per rank (" + std::to_string(cfg.k_t) + ")");
  if (cfg.moe && (cfg.tp > 1 || cfg.sp))
    throw std::invalid_argument("TransformerLayer: a MoE layer runs on one tensor-parallel rank only");
  if (cfg.post_norms && cfg.gpt)
    throw std::invalid_argument("TransformerLayer: post-block norms on the llama flavour only");
  if (!cfg.gpt && cfg.d % 2 != 0)
    throw std::invalid_argument("TransformerLayer: RoPE needs an even head dim, got " + std::to_string(cfg.d));
  // The MLA block (mla_attention.h) is a materialized core without dropout
  // over the rank's whole sequence.
  if (cfg.mla && (cfg.attention != AttentionKind::kMaterialized || cfg.dropout > 0 || cfg.ring))
    throw std::invalid_argument(
        "TransformerLayer: multi-head latent attention runs the materialized core, without dropout, on one "
        "context-parallel rank");
  // The γ of the QK norm is shared by all heads: under tp each rank's gradient
  // is a partial sum over its own heads, which no reduction sums yet.
  if (cfg.qk_norm && (cfg.gpt || cfg.tp > 1))
    throw std::invalid_argument("TransformerLayer: QK norm on the llama flavour and one tensor-parallel rank only");
}

Buffer TransformerLayer::ws(int64_t bytes, const char* what) { return dev_.alloc(bytes, Account::kWorkspace, what); }

RngKey token_shard_key(RngKey k, const LayerConfig& c, int64_t tp_rank) {
  // Sites use bits 0-1 of rng_stream_id's 8-bit site field (model.h): bits
  // 2-7 take shard + 1, so up to 63 shards draw distinct masks (past that the
  // shard is taken mod 63: the field stays within the site's bits).
  int64_t shard = 0, shards = 1;
  if (c.sp) {
    shard = tp_rank;
    shards = c.tp;
  }
  if (c.ring && c.ring->size() > 1) {
    shard += shards * c.ring->rank();
    shards *= c.ring->size();
  }
  if (shards > 1) k.stream ^= static_cast<uint64_t>(shard % 63 + 1) << 2;
  return k;
}

RngKey TransformerLayer::hidden_key(RngKey k) const { return token_shard_key(k, cfg_, tp_.rank()); }

void TransformerLayer::norm_forward(void* out, Buffer& stats, const void* x, const void* w, const void* b) {
  const int64_t n = cfg_.tokens_local();
  float* st = stats.as<float>();
  if (cfg_.gpt)  // LayerNorm (Ba et al. 2016): mean then rstd, fp32
    dev_.layernorm_forward(out, st, st ? st + n : nullptr, x, w, b, cfg_.e, n, cfg_.h, cfg_.norm_eps);
  else  // RMSNorm (Zhang & Sennrich 2019): rstd, fp32
    dev_.rmsnorm_forward(out, st, x, w, cfg_.e, n, cfg_.h, cfg_.norm_eps);
}

void TransformerLayer::norm_backward(void* dx, void* dw, void* db, const void* dout, const void* x, const void* w,
                                     const Buffer& stats, bool accumulate_dx) {
  const int64_t n = cfg_.tokens_local();
  const float* st = stats.as<float>();
  if (cfg_.gpt)
    dev_.layernorm_backward(dx, dw, db, cfg_.g, dout, x, w, st, st ? st + n : nullptr, cfg_.e, n, cfg_.h,
                            accumulate_dx);
  else
    dev_.rmsnorm_backward(dx, dw, cfg_.g, dout, x, w, st, cfg_.e, n, cfg_.h, accumulate_dx);
}

Buffer TransformerLayer::block_output(Account acc, const char* what) {
  const int64_t bytes = cfg_.hidden_local_bytes();
  return cfg_.post_norms ? dev_.alloc(bytes, acc, "post_norm.in") : ws(bytes, what);
}

Buffer TransformerLayer::post_norm_forward(Buffer& in, Buffer& stats, const void* w, Account acc) {
  Buffer out = ws(cfg_.hidden_local_bytes(), "post_norm.out");
  stats = dev_.alloc(cfg_.norm_stats_bytes(), acc, "post_norm.stats");
  norm_forward(out.data(), stats, in.data(), w, nullptr);
  done(in);
  done(stats);
  return out;
}

Buffer TransformerLayer::post_norm_backward(const void* dy, void* dw, const void* w, Buffer& in, Buffer& stats) {
  Buffer dblock = ws(cfg_.hidden_local_bytes(), "post_norm.dx");
  norm_backward(dblock.data(), dw, nullptr, dy, in.data(), w, stats, /*accumulate_dx=*/false);
  in.reset();
  stats.reset();
  return dblock;
}

void TransformerLayer::forward(const void* x, void* out, const LayerKeys& keys, LayerSaved& saved) {
  switch (cfg_.recompute) {
    case Recompute::kNone: forward_impl(x, out, keys, saved, Account::kActivations, /*keep_core=*/true); break;
    case Recompute::kSelective: forward_impl(x, out, keys, saved, Account::kActivations, /*keep_core=*/false); break;
    case Recompute::kFull:
      // Nothing kept: the tensors live in workspace only as long as the
      // forward needs them (the caller keeps x, the one saved tensor).
      discard_ = true;
      try {
        forward_impl(x, out, keys, saved, Account::kWorkspace, /*keep_core=*/false);
      } catch (...) {
        discard_ = false;
        throw;
      }
      discard_ = false;
      {
        // A MoE layer's load-balancing loss and dropped choices are the
        // forward's results (the caller adds them to the loss and the
        // counts); the backward's re-run routes again, identically.
        const double aux_loss = saved.moe.plan.aux_loss;
        const int64_t dropped = saved.moe.plan.dropped;
        saved.clear();
        saved.moe.plan.aux_loss = aux_loss;
        saved.moe.plan.dropped = dropped;
      }
      break;
  }
}

void TransformerLayer::forward_impl(const void* x, void* out, const LayerKeys& keys, LayerSaved& s, Account acc,
                                    bool keep_core) {
  // hid: the residual stream's elements on this rank (the token shard under sp)
  const int64_t hid = cfg_.tokens_local() * cfg_.h, e = dtype_bytes(cfg_.e);
  const float p = cfg_.dropout;

  // norm 1
  s.norm1_stats = dev_.alloc(cfg_.norm_stats_bytes(), acc, "norm1.stats");
  s.norm1_out = dev_.alloc(e * hid, acc, "norm1.out");
  norm_forward(s.norm1_out.data(), s.norm1_stats, x, p_.norm1_w, p_.norm1_b);
  done(s.norm1_stats);

  // attention block -> y (row-parallel output, all-reduced, bias added; then its post norm)
  Buffer y = block_output(acc, "attn.y");
  attention_forward(s.norm1_out.data(), y.data(), keys, s, acc, keep_core);
  if (cfg_.post_norms) {
    s.post_attn_in = std::move(y);
    y = post_norm_forward(s.post_attn_in, s.post_attn_stats, p_.post_attn_norm_w, acc);
  }
  if (p > 0) {
    s.out_mask = dev_.alloc(hid, acc, "attn_out.mask");
    dev_.dropout_forward(y.data(), s.out_mask.as<uint8_t>(), y.data(), cfg_.e, hid, p, hidden_key(keys.attn_out));
    done(s.out_mask);
  }
  s.norm2_in = dev_.alloc(e * hid, acc, "norm2.in");
  dev_.add(s.norm2_in.data(), x, y.data(), cfg_.e, hid);  // residual
  y.reset();

  // norm 2
  s.norm2_stats = dev_.alloc(cfg_.norm_stats_bytes(), acc, "norm2.stats");
  s.norm2_out = dev_.alloc(e * hid, acc, "norm2.out");
  norm_forward(s.norm2_out.data(), s.norm2_stats, s.norm2_in.data(), p_.norm2_w, p_.norm2_b);
  done(s.norm2_stats);

  // MLP -> y (then its post norm)
  y = block_output(acc, "mlp.y");
  mlp_forward(s.norm2_out.data(), y.data(), s, acc);
  done(s.norm2_out);
  if (cfg_.post_norms) {
    s.post_mlp_in = std::move(y);
    y = post_norm_forward(s.post_mlp_in, s.post_mlp_stats, p_.post_mlp_norm_w, acc);
  }
  if (p > 0) {
    s.mlp_mask = dev_.alloc(hid, acc, "mlp.mask");
    dev_.dropout_forward(y.data(), s.mlp_mask.as<uint8_t>(), y.data(), cfg_.e, hid, p, hidden_key(keys.mlp_out));
    done(s.mlp_mask);
  }
  dev_.add(out, s.norm2_in.data(), y.data(), cfg_.e, hid);  // residual
  done(s.norm2_in);
}

void TransformerLayer::backward(const void* x, void* dres, const LayerKeys& keys, LayerSaved& saved) {
  const int64_t hid = cfg_.tokens_local() * cfg_.h, e = dtype_bytes(cfg_.e);
  const float p = cfg_.dropout;

  // full: re-run the forward with every tensor in workspace (the core kept,
  // so backward needs no second recompute), then run backward on it.
  LayerSaved rerun;
  LayerSaved& s = cfg_.recompute == Recompute::kFull ? rerun : saved;
  if (cfg_.recompute == Recompute::kFull) {
    // A MoE layer's re-run routes the same tokens through the same weights:
    // the same plan, and under ep > 1 its dispatch and combine all-to-alls
    // again (docs/formulas/moe.md "Full recompute").
    Buffer out = ws(e * hid, "recompute.out");
    forward_impl(x, out.data(), keys, rerun, Account::kWorkspace, /*keep_core=*/true);
    rerun.moe_aux_scale = saved.moe_aux_scale;
  }

  // One hidden-sized buffer per branch holds first the branch's output
  // gradient after dropout (when p > 0; else that is dres itself), then the
  // norm's output gradient: the blocks write dxn only after their last read of dy.
  Buffer tmp = ws(e * hid, "branch.grad");

  // MLP branch: dres = dL/d(out) = dL/d(mlp dropout output)
  const void* dy = dres;
  if (p > 0) {
    dev_.dropout_backward(tmp.data(), cfg_.e, dres, cfg_.e, s.mlp_mask.as<uint8_t>(), hid, p);
    s.mlp_mask.reset();
    dy = tmp.data();
  }
  Buffer dblock;  // post_norms: the gradient of the block's output, before its post norm
  if (cfg_.post_norms) {
    dblock = post_norm_backward(dy, p_.d_post_mlp_norm_w, p_.post_mlp_norm_w, s.post_mlp_in, s.post_mlp_stats);
    dy = dblock.data();
  }
  mlp_backward(dy, tmp.data(), s);
  dblock.reset();
  // dres += norm2ᵀ(dxn): dres becomes dL/d(norm2 input)
  norm_backward(dres, p_.d_norm2_w, p_.d_norm2_b, tmp.data(), s.norm2_in.data(), p_.norm2_w, s.norm2_stats);
  s.norm2_in.reset();
  s.norm2_stats.reset();

  // attention branch
  dy = dres;
  if (p > 0) {
    dev_.dropout_backward(tmp.data(), cfg_.e, dres, cfg_.e, s.out_mask.as<uint8_t>(), hid, p);
    s.out_mask.reset();
    dy = tmp.data();
  }
  if (cfg_.post_norms) {
    dblock = post_norm_backward(dy, p_.d_post_attn_norm_w, p_.post_attn_norm_w, s.post_attn_in, s.post_attn_stats);
    dy = dblock.data();
  }
  attention_backward(dy, tmp.data(), keys, s);
  dblock.reset();
  // dres += norm1ᵀ(dxn): dres becomes dL/dx
  norm_backward(dres, p_.d_norm1_w, p_.d_norm1_b, tmp.data(), x, p_.norm1_w, s.norm1_stats);
  tmp.reset();
  s.clear();
  saved.clear();
}

}  // namespace gpuledger
