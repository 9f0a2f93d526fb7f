// The attention of a TransformerLayer of a multi-head latent attention model
// (layer.h, cfg.mla): mla_attention.h's block between the tensor-parallel
// mappings of every column-parallel input and row-parallel output
// (tp_mappings.h). Forward: the norm output (gathered under sp) into the
// block, o_proj's partial sums summed over tp (reduce-scattered under sp).
// Backward: the output gradient gathered (sp), the saved norm output gathered
// again, and the block's dxn — a partial sum over the ranks' heads, through
// the up projections and the replicated down projections alike — summed over
// tp (reduce-scattered under sp), as Megatron's f does for QKV's input.
#include "models/transformer/layer.h"

namespace gpuledger {

MlaShape TransformerLayer::mla_shape() const {
  const LayerConfig& c = cfg_;
  MlaShape sh;
  sh.b = c.b;
  sh.s = c.s;
  sh.h = c.h;
  sh.a_t = c.a_t;
  sh.r_q = c.q_lora_rank;
  sh.r_kv = c.kv_lora_rank;
  sh.d_n = c.qk_nope;
  sh.d_r = c.qk_rope;
  sh.d_v = c.v_head;
  sh.norm_eps = c.norm_eps;
  sh.rope_theta = c.rope_theta;
  sh.e = c.e;
  sh.g = c.g;
  return sh;
}

void TransformerLayer::mla_attention_forward(const void* xn, void* y, LayerSaved& s, Account acc, bool keep_core) {
  AllTokens xg(tp_region(), xn, "norm1.out.gathered");  // sp: the full norm output
  {
    // Megatron's g: o_proj's partial sums of every token, summed over tp
    PartialSums yf(tp_region(), y, "attn_out.partial");
    mla_forward(dev_, mla_shape(), p_.mla, xg.data(), yf.data(), s.mla, acc, keep_core);
    // Under `full`'s first forward nothing is kept.
    if (discard_) s.mla = MlaSaved{};
    xg.reset();
    done(s.norm1_out);
    yf.reduce();
  }
}

void TransformerLayer::mla_attention_backward(const void* dy, void* dxn, LayerSaved& s) {
  const MlaShape sh = mla_shape();
  AllTokens dyg(tp_region(), dy, "attn_out.dy.gathered");
  // selective: the core's probabilities again (workspace) from the saved heads
  if (cfg_.recompute == Recompute::kSelective) mla_recompute_core(dev_, sh, s.mla);
  AllTokens xg(tp_region(), s.norm1_out.data(), "norm1.out.regathered");  // sp: the saved shard again
  // Megatron's f (backward): every token's partial input gradient, summed over tp
  PartialSums dxf(tp_region(), dxn, "norm1.dout.partial");
  mla_backward(dev_, sh, p_.mla, xg.data(), dyg.data(), dxf.data(), s.mla);
  dyg.reset();
  xg.reset();
  s.norm1_out.reset();
  dxf.reduce();
}

}  // namespace gpuledger
