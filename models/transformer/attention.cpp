// The attention block of TransformerLayer (see layer.h): QKV projection
// (column-parallel), RoPE (llama), the core — materialized or flash — and the
// attention-out projection (row-parallel, all-reduced over the TP group).
//
// Materialized core, per (sample, KV head) as one batched GEMM each, so
// grouped-query heads need no copy of K or V: the g = a_t/k_t query heads that
// read KV head j are contiguous in Q (B, a_t, T, d), a (g·T × d) block.
//   S  = Q·Kᵀ (fp32)           P = softmax(scale·S) (causal / window)   [e]
//   P' = dropout(P) (if p)     ctx = P'·V                               [e]
// Backward (Vaswani et al. 2017 products, differentiated):
//   dP' = dctx·Vᵀ (fp32)   dV = P'ᵀ·dctx   dP = dropoutᵀ(dP')   dS = softmaxᵀ(dP)
//   dQ = dS·K   dK = dSᵀ·Q     (dS rounded to e for the two GEMMs, as
//   FlashAttention does for its dS tile).
// Flash: the Device's kernel (Dao et al. 2022) saves only the log-sum-exp; it
// runs over the context-parallel ring (context_ring.h), one block of the
// whole sequence when the rank holds it all.
// Attention sinks (cfg.sinks, gpt-oss; kernels/device.h): one logit per query
// head in every row's denominator. Materialized: the softmax takes them and
// saves the rows' log-denominator (fp32 (B, a_t, T)); flash: they join the
// merged result (out rescaled, lse with them), so flash's backward needs no
// change. Both: attention_sinks_backward gives their gradient from the context.
// Sequence parallelism (cfg.sp): xn and y are token shards; the block
// all-gathers xn before QKV and reduce-scatters attention-out's output, and in
// backward all-gathers dy and the saved norm output, and reduce-scatters dxn.
#include <string>

#include "models/linear/linear.h"
#include "models/transformer/layer.h"

namespace gpuledger {

void TransformerLayer::attention_forward(const void* xn, void* y, const LayerKeys& keys, LayerSaved& s, Account acc,
                                         bool keep_core) {
  if (cfg_.mla) return mla_attention_forward(xn, y, s, acc, keep_core);  // mla_layer.cpp
  const LayerConfig& c = cfg_;
  const int64_t n = c.tokens(), e = dtype_bytes(c.e);
  const AttnShape sh = c.attn_shape();

  // QKV (column-parallel): rows (B, T, (a_t + 2k_t)·d), then the head layout.
  AllTokens xg(tp_region(), xn, "norm1.out.gathered");  // sp: the full norm output
  Buffer qkv_rows = ws(e * n * c.qkv_dim(), "qkv.rows");
  linear_forward(dev_, qkv_rows.data(), xg.data(), p_.qkv_w, c.e, n, c.h, c.qkv_dim());
  xg.reset();
  done(s.norm1_out);
  if (c.qkv_bias) dev_.bias_add(qkv_rows.data(), p_.qkv_b, c.e, n, c.qkv_dim());
  s.qkv = dev_.alloc(e * n * c.qkv_dim(), acc, "qkv");
  void* q = s.qkv.data();
  void* k = byte_offset(q, e * n * c.q_dim());
  void* v = byte_offset(k, e * n * c.kv_dim());
  if (c.qk_norm)  // Qwen3 (qk_norm.cpp)
    qk_norm_split(q, k, v, qkv_rows.data(), s, acc);
  else
    dev_.split_qkv(q, k, v, qkv_rows.data(), c.e, sh);
  qkv_rows.reset();
  if (!c.gpt) {  // RoPE on Q and K (Su et al. 2021) at the tokens' positions (0 … T − 1 on one rank)
    dev_.rope_forward(q, c.e, c.b, c.a_t, c.s, c.d, c.positions(), c.rope_theta);
    dev_.rope_forward(k, c.e, c.b, c.k_t, c.s, c.d, c.positions(), c.rope_theta);
  }

  // core -> context (B, a_t, T, d)
  s.ctx = dev_.alloc(e * n * c.q_dim(), acc, "ctx");
  core_forward(s, keys, acc, keep_core, s.ctx.data());
  done(s.qkv);

  // attention-out (row-parallel): rows (B, T, a_t·d) · Woᵀ, summed over the TP group
  Buffer ctx_rows = ws(e * n * c.q_dim(), "ctx.rows");
  dev_.merge_heads(ctx_rows.data(), s.ctx.data(), c.e, sh);
  done(s.ctx);
  {  // Megatron's g: partial sums of every token, summed over tp (sp: into the token shard)
    PartialSums yf(tp_region(), y, "attn_out.partial");
    linear_forward(dev_, yf.data(), ctx_rows.data(), p_.out_w, c.e, n, c.q_dim(), c.h);
    ctx_rows.reset();
    yf.reduce();
  }
  // replicated bias, after the reduction (on the shard under sp)
  if (c.out_bias) dev_.bias_add(y, p_.out_b, c.e, c.tokens_local(), c.h);
}

void TransformerLayer::core_forward(LayerSaved& s, const LayerKeys& keys, Account acc, bool keep, void* ctx) {
  const LayerConfig& c = cfg_;
  const int64_t n = c.tokens(), e = dtype_bytes(c.e);
  const AttnShape sh = c.attn_shape();
  const float p = c.dropout;
  // What the core saves is only an activation when it is kept for backward.
  const Account core_acc = keep ? acc : Account::kWorkspace;
  const void* q = s.qkv.data();
  void* kv = byte_offset(s.qkv.data(), e * n * c.q_dim());  // K, then V
  const void* k = kv;
  const void* v = byte_offset(k, e * n * c.kv_dim());

  if (c.attention == AttentionKind::kFlash) {  // over the context-parallel ring (one block on one rank)
    s.lse = dev_.alloc(4 * c.b * c.a_t * c.s, core_acc, "lse");
    ring().forward(ctx, s.lse.as<float>(), q, kv, c.e, sh, p, keys.attn_probs, /*keep_last=*/keep);
    // the sinks join the merged result (ctx and lse now those of the softmax with them)
    if (c.sinks) dev_.attention_sinks_forward(ctx, s.lse.as<float>(), p_.sinks, c.e, sh);
    if (!keep) s.lse.reset();
    return;
  }

  materialized_core(q, k, v, ctx, s, keys, core_acc);
  if (!keep) {
    s.lse.reset();
    s.probs.reset();
    s.attn_mask.reset();
    s.dropped.reset();
  }
}

void TransformerLayer::materialized_core(const void* q, const void* k, const void* v, void* ctx, LayerSaved& s,
                                         const LayerKeys& keys, Account core_acc) {
  const LayerConfig& c = cfg_;
  const int64_t e = dtype_bytes(c.e);
  const AttnShape sh = c.attn_shape();
  const float p = c.dropout;
  const int64_t group = c.a_t / c.k_t, T = c.s, D = c.d;
  const int64_t scores_elems = c.b * c.a_t * T * T;
  Buffer scores = ws(4 * scores_elems, "attn.scores");
  GemmArgs g;  // S = Q·Kᵀ per (sample, KV head): (g·T × d)·(d × T)
  g.trans_b = true;
  g.m = group * T;
  g.n = T;
  g.k = D;
  g.a = q;
  g.lda = D;
  g.stride_a = group * T * D;
  g.b = k;
  g.ldb = D;
  g.stride_b = T * D;
  g.ab_type = c.e;
  g.c = scores.data();
  g.ldc = T;
  g.stride_c = group * T * T;
  g.c_type = DType::kFP32;
  g.batch = c.b * c.k_t;
  dev_.gemm(g);

  s.probs = dev_.alloc(e * scores_elems, core_acc, "attn.probs");
  if (c.sinks) {  // the sinks' backward reads the log-denominator: one fp32 per row
    s.lse = dev_.alloc(4 * c.b * c.a_t * c.s, core_acc, "lse");
    dev_.softmax_sinks_forward(s.probs.data(), s.lse.as<float>(), scores.as<float>(), p_.sinks, c.e, sh);
  } else {
    dev_.softmax_forward(s.probs.data(), scores.as<float>(), c.e, sh);
  }
  scores.reset();
  const void* pv = s.probs.data();
  if (p > 0) {
    s.attn_mask = dev_.alloc(scores_elems, core_acc, "attn.mask");
    s.dropped = dev_.alloc(e * scores_elems, core_acc, "attn.dropped");
    dev_.dropout_forward(s.dropped.data(), s.attn_mask.as<uint8_t>(), s.probs.data(), c.e, scores_elems, p,
                         keys.attn_probs);
    pv = s.dropped.data();
  }
  GemmArgs o;  // ctx = P'·V per (sample, KV head): (g·T × T)·(T × d)
  o.m = group * T;
  o.n = D;
  o.k = T;
  o.a = pv;
  o.lda = T;
  o.stride_a = group * T * T;
  o.b = v;
  o.ldb = D;
  o.stride_b = T * D;
  o.ab_type = c.e;
  o.c = ctx;
  o.ldc = D;
  o.stride_c = group * T * D;
  o.c_type = c.e;
  o.batch = c.b * c.k_t;
  dev_.gemm(o);
}

void TransformerLayer::core_backward(const void* dctx, void* dq, void* dk, void* dv, LayerSaved& s,
                                     const LayerKeys& keys) {
  const LayerConfig& c = cfg_;
  const int64_t n = c.tokens(), e = dtype_bytes(c.e);
  const AttnShape sh = c.attn_shape();
  const float p = c.dropout;
  const void* q = s.qkv.data();
  const void* k = byte_offset(q, e * n * c.q_dim());
  const void* v = byte_offset(k, e * n * c.kv_dim());
  // The sinks' gradient, from the context, its gradient and the rows' lse
  // with the sinks (either core); the core's backward then needs nothing more.
  if (c.sinks) dev_.attention_sinks_backward(p_.d_sinks, c.g, dctx, s.ctx.data(), s.lse.as<float>(), p_.sinks, c.e, sh);

  if (c.attention == AttentionKind::kFlash) {  // dk, dv contiguous: the ring's dK/dV block
    ring().backward(dq, dk, dctx, q, k, s.ctx.data(), s.lse.as<float>(), c.e, sh, p, keys.attn_probs);
    s.lse.reset();
    return;
  }

  const int64_t group = c.a_t / c.k_t, T = c.s, D = c.d, batch = c.b * c.k_t;
  const int64_t scores_elems = c.b * c.a_t * T * T;
  const void* pv = p > 0 ? s.dropped.data() : s.probs.data();

  Buffer dp = ws(4 * scores_elems, "attn.dP");
  // dP' = dctx·Vᵀ: (g·T × d)·(d × T), fp32
  dev_.gemm({.trans_b = true,
             .m = group * T,
             .n = T,
             .k = D,
             .a = dctx,
             .lda = D,
             .stride_a = group * T * D,
             .b = v,
             .ldb = D,
             .stride_b = T * D,
             .ab_type = c.e,
             .c = dp.data(),
             .ldc = T,
             .stride_c = group * T * T,
             .c_type = DType::kFP32,
             .batch = batch});

  // dV = P'ᵀ·dctx: (T × g·T)·(g·T × d), summed over the group by the GEMM
  dev_.gemm({.trans_a = true,
             .m = T,
             .n = D,
             .k = group * T,
             .a = pv,
             .lda = T,
             .stride_a = group * T * T,
             .b = dctx,
             .ldb = D,
             .stride_b = group * T * D,
             .ab_type = c.e,
             .c = dv,
             .ldc = D,
             .stride_c = T * D,
             .c_type = c.e,
             .batch = batch});
  s.dropped.reset();

  if (p > 0) {  // in place, fp32
    dev_.dropout_backward(dp.data(), DType::kFP32, dp.data(), DType::kFP32, s.attn_mask.as<uint8_t>(), scores_elems, p);
    s.attn_mask.reset();
  }
  dev_.softmax_backward(dp.as<float>(), dp.as<float>(), s.probs.data(), c.e, sh);  // in place: dS
  s.probs.reset();
  s.lse.reset();

  const void* ds = dp.data();
  Buffer ds_e;
  if (c.e != DType::kFP32) {
    ds_e = ws(e * scores_elems, "attn.dS");
    dev_.convert(ds_e.data(), c.e, dp.data(), DType::kFP32, scores_elems);
    dp.reset();
    ds = ds_e.data();
  }
  qk_grads_from_scores(ds, q, k, dq, dk);
}

// dQ = dS·K and dK = dSᵀ·Q of the materialized core, per (batch, KV head):
// dS [b·k_t, g·T, T], q [b·k_t, g·T, d], k [b·k_t, T, d], all in e.
void TransformerLayer::qk_grads_from_scores(const void* ds, const void* q, const void* k, void* dq, void* dk) {
  const LayerConfig& c = cfg_;
  const int64_t group = c.a_t / c.k_t, T = c.s, D = c.d, batch = c.b * c.k_t;
  // dQ = dS·K: (g·T × T)·(T × d)
  dev_.gemm({.m = group * T,
             .n = D,
             .k = T,
             .a = ds,
             .lda = T,
             .stride_a = group * T * T,
             .b = k,
             .ldb = D,
             .stride_b = T * D,
             .ab_type = c.e,
             .c = dq,
             .ldc = D,
             .stride_c = group * T * D,
             .c_type = c.e,
             .batch = batch});
  // dK = dSᵀ·Q: (T × g·T)·(g·T × d)
  dev_.gemm({.trans_a = true,
             .m = T,
             .n = D,
             .k = group * T,
             .a = ds,
             .lda = T,
             .stride_a = group * T * T,
             .b = q,
             .ldb = D,
             .stride_b = group * T * D,
             .ab_type = c.e,
             .c = dk,
             .ldc = D,
             .stride_c = T * D,
             .c_type = c.e,
             .batch = batch});
}

void TransformerLayer::attention_backward(const void* dy, void* dxn, const LayerKeys& keys, LayerSaved& s) {
  if (cfg_.mla) return mla_attention_backward(dy, dxn, s);  // mla_layer.cpp
  const LayerConfig& c = cfg_;
  const int64_t n = c.tokens(), e = dtype_bytes(c.e);
  const AttnShape sh = c.attn_shape();

  // attention-out: bias, weight and input gradients. Under sp the bias
  // gradient is the shard's partial sum (all-reduced once a step, as Megatron
  // does for sequence-parallel parameters); dy is then gathered.
  if (c.out_bias) dev_.bias_backward(p_.d_out_b, c.g, dy, c.e, c.tokens_local(), c.h, /*accumulate=*/true);
  AllTokens dyg(tp_region(), dy, "attn_out.dy.gathered");
  dy = dyg.data();
  Buffer rows = ws(e * n * c.q_dim(), "ctx.rows");
  dev_.merge_heads(rows.data(), s.ctx.data(), c.e, sh);
  linear_backward_weight(dev_, p_.d_out_w, c.g, dy, rows.data(), c.e, n, c.q_dim(), c.h);
  linear_backward_data(dev_, rows.data(), dy, p_.out_w, c.e, n, c.q_dim(), c.h);  // now d(ctx rows)
  Buffer dctx = ws(e * n * c.q_dim(), "dctx");
  dev_.split_heads(dctx.data(), rows.data(), c.e, sh);
  rows.reset();
  dyg.reset();

  // selective: rebuild the core's saved tensors (workspace) from Q, K, V —
  // the same Philox keys give the same dropout mask.
  if (c.recompute == Recompute::kSelective) {
    Buffer ctx_again = ws(e * n * c.q_dim(), "recompute.ctx");
    core_forward(s, keys, Account::kWorkspace, /*keep=*/true, ctx_again.data());
  }

  Buffer dqkv = ws(e * n * c.qkv_dim(), "dqkv.heads");
  void* dq = dqkv.data();
  void* dk = byte_offset(dq, e * n * c.q_dim());
  void* dv = byte_offset(dk, e * n * c.kv_dim());
  core_backward(dctx.data(), dq, dk, dv, s, keys);
  dctx.reset();
  s.ctx.reset();
  s.qkv.reset();
  if (!c.gpt) {  // RoPE is a rotation: its transpose rotates back
    dev_.rope_backward(dq, c.e, c.b, c.a_t, c.s, c.d, c.positions(), c.rope_theta);
    dev_.rope_backward(dk, c.e, c.b, c.k_t, c.s, c.d, c.positions(), c.rope_theta);
  }
  Buffer dqk_in;  // Qwen3 (qk_norm.cpp): dq, dk now point to the gradients before the norm
  if (c.qk_norm) dqk_in = qk_norm_backward(dq, dk, s);
  Buffer dqkv_rows = ws(e * n * c.qkv_dim(), "dqkv.rows");
  dev_.merge_qkv_grad(dqkv_rows.data(), dq, dk, dv, c.e, sh);
  dqk_in.reset();
  dqkv.reset();

  if (c.qkv_bias) dev_.bias_backward(p_.d_qkv_b, c.g, dqkv_rows.data(), c.e, n, c.qkv_dim(), true);
  {
    AllTokens xg(tp_region(), s.norm1_out.data(), "norm1.out.regathered");  // sp: the saved shard again
    linear_backward_weight(dev_, p_.d_qkv_w, c.g, dqkv_rows.data(), xg.data(), c.e, n, c.h, c.qkv_dim());
  }
  s.norm1_out.reset();
  // Megatron's f (backward): every token's partial input gradient, summed over tp
  PartialSums dxf(tp_region(), dxn, "norm1.dout.partial");
  linear_backward_data(dev_, dxf.data(), dqkv_rows.data(), p_.qkv_w, c.e, n, c.h, c.qkv_dim());
  dqkv_rows.reset();
  dxf.reduce();
}

}  // namespace gpuledger
