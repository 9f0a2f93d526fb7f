// The MLP block of TransformerLayer (see layer.h).
//   gpt:   y = GELU(x·W_inᵀ + b_in)·W_outᵀ (+ b_out)          (Radford et al. 2019)
//   llama: y = (silu(x·W_gateᵀ) ⊙ x·W_upᵀ)·W_outᵀ              (SwiGLU, Shazeer 2020)
// MLP-in (gate, up) column-parallel, MLP-out row-parallel with the forward
// all-reduce; the backward all-reduces the input gradient (Megatron §3).
// Sequence parallelism (cfg.sp): xn and y are token shards; all-gather before
// MLP-in, reduce-scatter after MLP-out; backward all-gathers dy and the saved
// norm output, reduce-scatters dxn (Korthikanti et al. 2022 §4.2.2).
#include "models/linear/linear.h"
#include "models/transformer/layer.h"

namespace gpuledger {

MoeShape TransformerLayer::moe_shape() const {
  MoeShape m;
  m.tokens = cfg_.tokens();
  m.hidden = cfg_.h;
  m.expert_ffn = cfg_.expert_ffn;
  m.shared_ffn = cfg_.shared_ffn;
  m.routing = cfg_.routing;
  m.ep = cfg_.ep;
  // With a capacity factor the experts work on the E·C capacity slots on one
  // rank too: the bytes and FLOPs do not depend on the routing (moe_block.h).
  m.pad_to_capacity = cfg_.routing.capacity_factor.has_value();
  m.router_logit_bias = cfg_.router_logit_bias;
  m.expert_biases = cfg_.expert_biases;
  m.swiglu_limit = cfg_.swiglu_limit;
  m.e = cfg_.e;
  m.g = cfg_.g;
  return m;
}

void TransformerLayer::mlp_forward(const void* xn, void* y, LayerSaved& s, Account acc) {
  const LayerConfig& c = cfg_;
  if (c.moe) {  // no tp (the constructor refused it); E/ep experts under expert parallelism
    MoeBlock(dev_, moe_shape(), p_.moe, c.ep_comm, c.cp_comm).forward(xn, y, s.moe, acc);
    return;
  }
  const int64_t n = c.tokens(), e = dtype_bytes(c.e), inner = n * c.f_t;
  AllTokens xg(tp_region(), xn, "norm2.out.gathered");
  xn = xg.data();
  if (c.gpt) {
    s.mlp_a = dev_.alloc(e * inner, acc, "mlp.gelu_in");
    linear_forward(dev_, s.mlp_a.data(), xn, p_.mlp_in_w, c.e, n, c.h, c.f_t);
    dev_.bias_add(s.mlp_a.data(), p_.mlp_in_b, c.e, n, c.f_t);
    s.mlp_act = dev_.alloc(e * inner, acc, "mlp.gelu_out");
    dev_.gelu_forward(s.mlp_act.data(), s.mlp_a.data(), c.e, inner);
    done(s.mlp_a);
  } else {
    s.mlp_a = dev_.alloc(e * inner, acc, "mlp.gate");
    s.mlp_b = dev_.alloc(e * inner, acc, "mlp.up");
    linear_forward(dev_, s.mlp_a.data(), xn, p_.gate_w, c.e, n, c.h, c.f_t);
    linear_forward(dev_, s.mlp_b.data(), xn, p_.up_w, c.e, n, c.h, c.f_t);
    s.mlp_act = dev_.alloc(e * inner, acc, "mlp.swiglu_out");
    dev_.swiglu_forward(s.mlp_act.data(), s.mlp_a.data(), s.mlp_b.data(), c.e, inner);
    done(s.mlp_a);
    done(s.mlp_b);
  }
  xg.reset();
  {  // row-parallel output, summed over tp (sp: into the token shard)
    PartialSums yf(tp_region(), y, "mlp_out.partial");
    linear_forward(dev_, yf.data(), s.mlp_act.data(), p_.mlp_out_w, c.e, n, c.f_t, c.h);
    done(s.mlp_act);
    yf.reduce();
  }
  if (c.gpt) dev_.bias_add(y, p_.mlp_out_b, c.e, c.tokens_local(), c.h);
}

void TransformerLayer::mlp_backward(const void* dy, void* dxn, LayerSaved& s) {
  const LayerConfig& c = cfg_;
  if (c.moe) {
    MoeBlock(dev_, moe_shape(), p_.moe, c.ep_comm).backward(s.norm2_out.data(), dy, dxn, s.moe, s.moe_aux_scale);
    s.norm2_out.reset();
    return;
  }
  const int64_t n = c.tokens(), e = dtype_bytes(c.e), inner = n * c.f_t;
  // sp: the bias gradient is the shard's partial sum; dy is then gathered
  if (c.gpt) dev_.bias_backward(p_.d_mlp_out_b, c.g, dy, c.e, c.tokens_local(), c.h, /*accumulate=*/true);
  AllTokens dyg(tp_region(), dy, "mlp_out.dy.gathered");
  dy = dyg.data();
  linear_backward_weight(dev_, p_.d_mlp_out_w, c.g, dy, s.mlp_act.data(), c.e, n, c.f_t, c.h);
  Buffer dact = ws(e * inner, "mlp.dact");
  linear_backward_data(dev_, dact.data(), dy, p_.mlp_out_w, c.e, n, c.f_t, c.h);
  s.mlp_act.reset();
  dyg.reset();
  AllTokens xg2(tp_region(), s.norm2_out.data(), "norm2.out.regathered");  // sp: the saved shard again
  const void* xn = xg2.data();
  // every token's partial input gradient, summed over tp at the end (column-parallel input)
  PartialSums dxf(tp_region(), dxn, "norm2.dout.partial");
  void* dx = dxf.data();

  if (c.gpt) {
    dev_.gelu_backward(dact.data(), dact.data(), s.mlp_a.data(), c.e, inner);  // in place
    s.mlp_a.reset();
    dev_.bias_backward(p_.d_mlp_in_b, c.g, dact.data(), c.e, n, c.f_t, /*accumulate=*/true);
    linear_backward_weight(dev_, p_.d_mlp_in_w, c.g, dact.data(), xn, c.e, n, c.h, c.f_t);
    xg2.reset();
    s.norm2_out.reset();
    linear_backward_data(dev_, dx, dact.data(), p_.mlp_in_w, c.e, n, c.h, c.f_t);
  } else {
    Buffer dup = ws(e * inner, "mlp.dup");
    // dgate written over dact (the op reads each chunk before writing it)
    dev_.swiglu_backward(dact.data(), dup.data(), dact.data(), s.mlp_a.data(), s.mlp_b.data(), c.e, inner);
    s.mlp_a.reset();
    s.mlp_b.reset();
    linear_backward_weight(dev_, p_.d_gate_w, c.g, dact.data(), xn, c.e, n, c.h, c.f_t);
    linear_backward_weight(dev_, p_.d_up_w, c.g, dup.data(), xn, c.e, n, c.h, c.f_t);
    xg2.reset();
    s.norm2_out.reset();
    linear_backward_data(dev_, dx, dact.data(), p_.gate_w, c.e, n, c.h, c.f_t);
    linear_backward_data(dev_, dx, dup.data(), p_.up_w, c.e, n, c.h, c.f_t, /*beta=*/1.0f);
  }
  dxf.reduce();
}

}  // namespace gpuledger
