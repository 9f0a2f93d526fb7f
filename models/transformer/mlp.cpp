// The MLP block of TransformerLayer (see layer.h).
//   gpt:   y = GELU(x·W_inᵀ + b_in)·W_outᵀ (+ b_out)          (Radford et al. 2019)
//   llama: y = (silu(x·W_gateᵀ) ⊙ x·W_upᵀ)·W_outᵀ              (SwiGLU, Shazeer 2020)
// MLP-in (gate, up) column-parallel, MLP-out row-parallel with the forward
// all-reduce; the backward all-reduces the input gradient (Megatron §3).
#include "models/transformer/layer.h"

namespace gpuledger {

void TransformerLayer::mlp_forward(const void* xn, void* y, LayerSaved& s, Account acc) {
  const LayerConfig& c = cfg_;
  const int64_t n = c.tokens(), e = dtype_bytes(c.e), inner = n * c.f_t;
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
  linear_forward(dev_, y, s.mlp_act.data(), p_.mlp_out_w, c.e, n, c.f_t, c.h);
  done(s.mlp_act);
  tp_.all_reduce(y, n * c.h, c.e);  // row-parallel output; SP: reduce-scatter
  if (c.gpt) dev_.bias_add(y, p_.mlp_out_b, c.e, n, c.h);
}

void TransformerLayer::mlp_backward(const void* dy, void* dxn, LayerSaved& s) {
  const LayerConfig& c = cfg_;
  const int64_t n = c.tokens(), e = dtype_bytes(c.e), inner = n * c.f_t;
  const void* xn = s.norm2_out.data();

  if (c.gpt) dev_.bias_backward(p_.d_mlp_out_b, c.g, dy, c.e, n, c.h, /*accumulate=*/true);
  linear_backward_weight(dev_, p_.d_mlp_out_w, c.g, dy, s.mlp_act.data(), c.e, n, c.f_t, c.h);
  Buffer dact = ws(e * inner, "mlp.dact");
  linear_backward_data(dev_, dact.data(), dy, p_.mlp_out_w, c.e, n, c.f_t, c.h);
  s.mlp_act.reset();

  if (c.gpt) {
    dev_.gelu_backward(dact.data(), dact.data(), s.mlp_a.data(), c.e, inner);  // in place
    s.mlp_a.reset();
    dev_.bias_backward(p_.d_mlp_in_b, c.g, dact.data(), c.e, n, c.f_t, /*accumulate=*/true);
    linear_backward_weight(dev_, p_.d_mlp_in_w, c.g, dact.data(), xn, c.e, n, c.h, c.f_t);
    s.norm2_out.reset();
    linear_backward_data(dev_, dxn, dact.data(), p_.mlp_in_w, c.e, n, c.h, c.f_t);
  } else {
    Buffer dup = ws(e * inner, "mlp.dup");
    // dgate written over dact (the op reads each chunk before writing it)
    dev_.swiglu_backward(dact.data(), dup.data(), dact.data(), s.mlp_a.data(), s.mlp_b.data(), c.e,
                         inner);
    s.mlp_a.reset();
    s.mlp_b.reset();
    linear_backward_weight(dev_, p_.d_gate_w, c.g, dact.data(), xn, c.e, n, c.h, c.f_t);
    linear_backward_weight(dev_, p_.d_up_w, c.g, dup.data(), xn, c.e, n, c.h, c.f_t);
    s.norm2_out.reset();
    linear_backward_data(dev_, dxn, dact.data(), p_.gate_w, c.e, n, c.h, c.f_t);
    linear_backward_data(dev_, dxn, dup.data(), p_.up_w, c.e, n, c.h, c.f_t, /*beta=*/1.0f);
  }
  tp_.all_reduce(dxn, n * c.h, c.e);  // column-parallel input gradient; SP: reduce-scatter
}

}  // namespace gpuledger
