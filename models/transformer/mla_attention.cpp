// Multi-head latent attention, forward and backward (see mla_attention.h).
// The products are Vaswani et al.'s, differentiated as attention.cpp's
// materialized core is: dP = dctx·vᵀ (fp32), dv = Pᵀ·dctx, dS =
// softmaxᵀ(dP) (rounded to e for the products, as that core and
// FlashAttention do), then each of the two score products' operands:
// dq_nope = dS·k_nope, dk_nope = dSᵀ·q_nope, dq_rope = dS·k_rope and the
// shared key's dk_rope = Σ_heads dS_hᵀ·q_rope_h.
#include "models/transformer/mla_attention.h"

#include "models/linear/linear.h"
#include "models/transformer/params.h"

namespace gpuledger {
namespace {

// The head layout of H heads of D values for split_heads / merge_heads (and
// the softmax's causal mask: its D only sets the scale).
AttnShape heads(const MlaShape& sh, int64_t H, int64_t D) { return AttnShape{sh.b, H, H, sh.s, D, std::nullopt}; }

// c (batch × m × n) = alpha·op(a)·op(b) + beta·c over `batch` (b, head) pairs, each operand row-major and
// packed: strides m·k (or k·m), k·n (or n·k), m·n unless given.
struct Product {
  bool ta = false, tb = false;
  int64_t m = 0, n = 0, k = 0, batch = 1;
  const void* a = nullptr;
  const void* b = nullptr;
  void* c = nullptr;
  DType ab = DType::kFP32, ct = DType::kFP32;
  int64_t stride_a = -1, stride_b = -1, stride_c = -1;
  float beta = 0.0f;
};

void product(Device& dev, const Product& p) {
  GemmArgs g;
  g.trans_a = p.ta;
  g.trans_b = p.tb;
  g.m = p.m;
  g.n = p.n;
  g.k = p.k;
  g.a = p.a;
  g.lda = p.ta ? p.m : p.k;
  g.stride_a = p.stride_a >= 0 ? p.stride_a : p.m * p.k;
  g.b = p.b;
  g.ldb = p.tb ? p.k : p.n;
  g.stride_b = p.stride_b >= 0 ? p.stride_b : p.k * p.n;
  g.ab_type = p.ab;
  g.c = p.c;
  g.ldc = p.n;
  g.stride_c = p.stride_c >= 0 ? p.stride_c : p.m * p.n;
  g.c_type = p.ct;
  g.batch = p.batch;
  g.beta = p.beta;
  dev.gemm(g);
}

// Rows (n × H·D) through the GEMM with `w`'s H·D rows starting at row `first`, into heads (B, H, T, D).
Buffer project_heads(Device& dev, const MlaShape& sh, const void* x, int64_t in, const void* w, int64_t first,
                     int64_t H, int64_t D, Account acc, const char* what) {
  const int64_t n = sh.tokens(), eb = dtype_bytes(sh.e);
  Buffer rows = dev.alloc(eb * n * H * D, Account::kWorkspace, "mla.rows");
  linear_forward(dev, rows.data(), x, byte_offset(w, eb * first * in), sh.e, n, in, H * D);
  Buffer out = dev.alloc(eb * n * H * D, acc, what);
  dev.split_heads(out.data(), rows.data(), sh.e, heads(sh, H, D));
  return out;
}

}  // namespace

void mla_core_forward(Device& dev, const MlaShape& sh, MlaSaved& s, void* ctx, Account probs_acc) {
  const int64_t eb = dtype_bytes(sh.e), a = sh.a_t, B = sh.b, T = sh.s;
  const int64_t dn = sh.d_n, dr = sh.d_r, dv = sh.d_v;
  // Scores (fp32): q_nope·k_nopeᵀ per (sample, head), then + q_rope·k_ropeᵀ with the one RoPE key of each sample.
  const int64_t tt = T * T;
  Buffer scores = dev.alloc(4 * B * a * tt, Account::kWorkspace, "mla.scores");
  product(dev, {.tb = true,
                .m = T,
                .n = T,
                .k = dn,
                .batch = B * a,
                .a = s.q_nope.data(),
                .b = s.k_nope.data(),
                .c = scores.data(),
                .ab = sh.e});
  for (int64_t i = 0; i < B; ++i)
    product(dev, {.tb = true,
                  .m = T,
                  .n = T,
                  .k = dr,
                  .batch = a,
                  .a = byte_offset(s.q_rope.data(), eb * i * a * T * dr),
                  .b = byte_offset(s.k_rope.data(), eb * i * T * dr),
                  .c = byte_offset(scores.data(), 4 * i * a * tt),
                  .ab = sh.e,
                  .stride_b = 0,
                  .beta = 1.0f});
  s.probs = dev.alloc(eb * B * a * tt, probs_acc, "mla.probs");
  dev.softmax_forward(s.probs.data(), scores.as<float>(), sh.e, heads(sh, a, dn + dr));  // scale (d_n + d_r)^(−1/2)
  scores.reset();
  product(dev, {.m = T,
                .n = dv,
                .k = T,
                .batch = B * a,
                .a = s.probs.data(),
                .b = s.v.data(),
                .c = ctx,
                .ab = sh.e,
                .ct = sh.e});
}

void mla_recompute_core(Device& dev, const MlaShape& sh, MlaSaved& s) {
  Buffer ctx = dev.alloc(dtype_bytes(sh.e) * sh.tokens() * sh.a_t * sh.d_v, Account::kWorkspace, "mla.recompute.ctx");
  mla_core_forward(dev, sh, s, ctx.data(), Account::kWorkspace);
}

void mla_forward(Device& dev, const MlaShape& sh, const MlaWeights& w, const void* xn, void* y, MlaSaved& s,
                 Account acc, bool keep_probs) {
  const int64_t n = sh.tokens(), eb = dtype_bytes(sh.e), a = sh.a_t, B = sh.b, T = sh.s;
  const int64_t dn = sh.d_n, dr = sh.d_r, dv = sh.d_v;
  // The query latent and its norm (DeepSeek-V2 eq. 12), or the hidden state itself.
  const void* q_in = xn;
  int64_t q_in_dim = sh.h;
  if (sh.r_q > 0) {
    s.cq = dev.alloc(eb * n * sh.r_q, acc, "mla.cq");
    linear_forward(dev, s.cq.data(), xn, w.q_down, sh.e, n, sh.h, sh.r_q);
    s.cq_rstd = dev.alloc(4 * n, acc, "mla.cq_rstd");
    s.cqn = dev.alloc(eb * n * sh.r_q, acc, "mla.cqn");
    dev.rmsnorm_forward(s.cqn.data(), s.cq_rstd.as<float>(), s.cq.data(), w.q_norm, sh.e, n, sh.r_q, sh.norm_eps);
    q_in = s.cqn.data();
    q_in_dim = sh.r_q;
  }
  s.q_nope = project_heads(dev, sh, q_in, q_in_dim, w.q_up, 0, a, dn, acc, "mla.q_nope");
  s.q_rope = project_heads(dev, sh, q_in, q_in_dim, w.q_up, a * dn, a, dr, acc, "mla.q_rope");
  dev.rope_forward(s.q_rope.data(), sh.e, B, a, T, dr, TokenSpans{}, sh.rope_theta);

  // The KV latent (eq. 9) and the shared RoPE key (eq. 17): rows (B, T, ·), the key already one head (B, 1, T, d_r).
  s.ckv = dev.alloc(eb * n * sh.r_kv, acc, "mla.ckv");
  linear_forward(dev, s.ckv.data(), xn, w.kv_down, sh.e, n, sh.h, sh.r_kv);
  s.k_rope = dev.alloc(eb * n * dr, acc, "mla.k_rope");
  linear_forward(dev, s.k_rope.data(), xn, byte_offset(w.kv_down, eb * sh.r_kv * sh.h), sh.e, n, sh.h, dr);
  dev.rope_forward(s.k_rope.data(), sh.e, B, 1, T, dr, TokenSpans{}, sh.rope_theta);
  s.ckv_rstd = dev.alloc(4 * n, acc, "mla.ckv_rstd");
  s.ckvn = dev.alloc(eb * n * sh.r_kv, acc, "mla.ckvn");
  dev.rmsnorm_forward(s.ckvn.data(), s.ckv_rstd.as<float>(), s.ckv.data(), w.kv_norm, sh.e, n, sh.r_kv, sh.norm_eps);
  // Keys and values up-projected from the normalised latent (eq. 10, 11).
  s.k_nope = project_heads(dev, sh, s.ckvn.data(), sh.r_kv, w.kv_up, 0, a, dn, acc, "mla.k_nope");
  s.v = project_heads(dev, sh, s.ckvn.data(), sh.r_kv, w.kv_up, a * dn, a, dv, acc, "mla.v");

  s.ctx = dev.alloc(eb * n * a * dv, acc, "mla.ctx");
  mla_core_forward(dev, sh, s, s.ctx.data(), keep_probs ? acc : Account::kWorkspace);
  if (!keep_probs) s.probs.reset();

  // o_proj over the merged heads (B, T, a·d_v).
  Buffer rows = dev.alloc(eb * n * a * dv, Account::kWorkspace, "mla.ctx.rows");
  dev.merge_heads(rows.data(), s.ctx.data(), sh.e, heads(sh, a, dv));
  linear_forward(dev, y, rows.data(), w.out, sh.e, n, a * dv, sh.h);
}

namespace {

// The gradients the core hands to the projections: the heads' dq_nope, dk_nope, dq_rope (RoPE undone), dv and
// the shared key's dk_rope. Runs o_proj's backward first (its weight gradient accumulated) and frees the core's
// saved tensors.
struct CoreGrads {
  Buffer dq_nope, dk_nope, dq_rope, dk_rope, dv;
};

// The two score products' operands from dS (e): dq_nope = dS·k_nope, dk_nope = dSᵀ·q_nope, dq_rope = dS·k_rope
// and the shared key's dk_rope, RoPE undone; frees the saved heads.
void score_operand_grads(Device& dev, const MlaShape& sh, const Buffer& ds, MlaSaved& s, CoreGrads& g) {
  const int64_t n = sh.tokens(), eb = dtype_bytes(sh.e), a = sh.a_t, B = sh.b, T = sh.s;
  const int64_t dn = sh.d_n, dr = sh.d_r, tt = T * T;
  const auto ws = [&](int64_t bytes, const char* what) { return dev.alloc(bytes, Account::kWorkspace, what); };
  g.dq_nope = ws(eb * n * a * dn, "mla.dq_nope");
  g.dk_nope = ws(eb * n * a * dn, "mla.dk_nope");
  g.dq_rope = ws(eb * n * a * dr, "mla.dq_rope");
  g.dk_rope = ws(eb * n * dr, "mla.dk_rope");
  product(dev, {.m = T,
                .n = dn,
                .k = T,
                .batch = B * a,
                .a = ds.data(),
                .b = s.k_nope.data(),
                .c = g.dq_nope.data(),
                .ab = sh.e,
                .ct = sh.e});
  product(dev, {.ta = true,
                .m = T,
                .n = dn,
                .k = T,
                .batch = B * a,
                .a = ds.data(),
                .b = s.q_nope.data(),
                .c = g.dk_nope.data(),
                .ab = sh.e,
                .ct = sh.e});
  for (int64_t i = 0; i < B; ++i)
    product(dev, {.m = T,
                  .n = dr,
                  .k = T,
                  .batch = a,
                  .a = byte_offset(ds.data(), eb * i * a * tt),
                  .b = byte_offset(s.k_rope.data(), eb * i * T * dr),
                  .c = byte_offset(g.dq_rope.data(), eb * i * a * T * dr),
                  .ab = sh.e,
                  .ct = sh.e,
                  .stride_b = 0});
  // dk_rope of sample i: its a score blocks side by side, (a·T × T)ᵀ·(a·T × d_r), summing over the heads.
  product(dev, {.ta = true,
                .m = T,
                .n = dr,
                .k = a * T,
                .batch = B,
                .a = ds.data(),
                .b = s.q_rope.data(),
                .c = g.dk_rope.data(),
                .ab = sh.e,
                .ct = sh.e,
                .stride_a = a * tt,
                .stride_b = a * T * dr,
                .stride_c = T * dr});
  s.q_nope.reset();
  s.k_nope.reset();
  s.q_rope.reset();
  s.k_rope.reset();
  dev.rope_backward(g.dq_rope.data(), sh.e, B, a, T, dr, TokenSpans{}, sh.rope_theta);
  dev.rope_backward(g.dk_rope.data(), sh.e, B, 1, T, dr, TokenSpans{}, sh.rope_theta);
}

CoreGrads core_backward(Device& dev, const MlaShape& sh, const MlaWeights& w, const void* dy, MlaSaved& s) {
  const int64_t n = sh.tokens(), eb = dtype_bytes(sh.e), a = sh.a_t, B = sh.b, T = sh.s;
  const int64_t dn = sh.d_n, dr = sh.d_r, dv = sh.d_v, tt = T * T;
  const auto ws = [&](int64_t bytes, const char* what) { return dev.alloc(bytes, Account::kWorkspace, what); };
  // o_proj
  Buffer dctx;
  {
    Buffer ctx_rows = ws(eb * n * a * dv, "mla.ctx.rows");
    dev.merge_heads(ctx_rows.data(), s.ctx.data(), sh.e, heads(sh, a, dv));
    s.ctx.reset();
    linear_backward_weight(dev, w.d_out, sh.g, dy, ctx_rows.data(), sh.e, n, a * dv, sh.h);
    Buffer dctx_rows = ws(eb * n * a * dv, "mla.dctx.rows");
    linear_backward_data(dev, dctx_rows.data(), dy, w.out, sh.e, n, a * dv, sh.h);
    dctx = ws(eb * n * a * dv, "mla.dctx");
    dev.split_heads(dctx.data(), dctx_rows.data(), sh.e, heads(sh, a, dv));
  }
  // dP (fp32) = dctx·vᵀ, dv = Pᵀ·dctx, dS = softmaxᵀ(dP) in e.
  CoreGrads g;
  g.dv = ws(eb * n * a * dv, "mla.dv");
  Buffer ds;
  {
    Buffer dprobs = ws(4 * B * a * tt, "mla.dprobs");
    product(dev, {.tb = true,
                  .m = T,
                  .n = T,
                  .k = dv,
                  .batch = B * a,
                  .a = dctx.data(),
                  .b = s.v.data(),
                  .c = dprobs.data(),
                  .ab = sh.e});
    product(dev, {.ta = true,
                  .m = T,
                  .n = dv,
                  .k = T,
                  .batch = B * a,
                  .a = s.probs.data(),
                  .b = dctx.data(),
                  .c = g.dv.data(),
                  .ab = sh.e,
                  .ct = sh.e});
    dctx.reset();
    s.v.reset();
    // in place, as the layer's materialized core does: the fewest score-sized buffers alive at once
    dev.softmax_backward(dprobs.as<float>(), dprobs.as<float>(), s.probs.data(), sh.e, heads(sh, a, dn + dr));
    s.probs.reset();
    ds = ws(eb * B * a * tt, "mla.ds");
    dev.convert(ds.data(), sh.e, dprobs.data(), DType::kFP32, B * a * tt);
  }
  score_operand_grads(dev, sh, ds, s, g);
  return g;
}

}  // namespace

void mla_backward(Device& dev, const MlaShape& sh, const MlaWeights& w, const void* xn, const void* dy, void* dxn,
                  MlaSaved& s) {
  const int64_t n = sh.tokens(), eb = dtype_bytes(sh.e), gb = dtype_bytes(sh.g), a = sh.a_t;
  const int64_t dn = sh.d_n, dr = sh.d_r, dv = sh.d_v;
  const auto ws = [&](int64_t bytes, const char* what) { return dev.alloc(bytes, Account::kWorkspace, what); };
  const auto rows_of = [&](Buffer& hd, int64_t H, int64_t D, const char* what) {
    Buffer r = ws(eb * n * H * D, what);
    dev.merge_heads(r.data(), hd.data(), sh.e, heads(sh, H, D));
    hd.reset();
    return r;
  };
  CoreGrads g = core_backward(dev, sh, w, dy, s);
  Buffer& dk_rope = g.dk_rope;

  // kv_up, kv_norm, kv_down: dxn is written here first.
  {
    Buffer dkn_rows = rows_of(g.dk_nope, a, dn, "mla.dk_nope.rows"), dv_rows = rows_of(g.dv, a, dv, "mla.dv.rows");
    const void* w_v = byte_offset(w.kv_up, eb * a * dn * sh.r_kv);
    linear_backward_weight(dev, w.d_kv_up, sh.g, dkn_rows.data(), s.ckvn.data(), sh.e, n, sh.r_kv, a * dn);
    linear_backward_weight(dev, byte_offset(w.d_kv_up, gb * a * dn * sh.r_kv), sh.g, dv_rows.data(), s.ckvn.data(),
                           sh.e, n, sh.r_kv, a * dv);
    s.ckvn.reset();
    Buffer dckvn = ws(eb * n * sh.r_kv, "mla.dckvn"), dckv = ws(eb * n * sh.r_kv, "mla.dckv");
    linear_backward_data(dev, dckvn.data(), dkn_rows.data(), w.kv_up, sh.e, n, sh.r_kv, a * dn);
    linear_backward_data(dev, dckvn.data(), dv_rows.data(), w_v, sh.e, n, sh.r_kv, a * dv, 1.0f);
    dev.rmsnorm_backward(dckv.data(), w.d_kv_norm, sh.g, dckvn.data(), s.ckv.data(), w.kv_norm, s.ckv_rstd.as<float>(),
                         sh.e, n, sh.r_kv, false);
    s.ckv.reset();
    s.ckv_rstd.reset();
    const void* w_kr = byte_offset(w.kv_down, eb * sh.r_kv * sh.h);
    linear_backward_weight(dev, w.d_kv_down, sh.g, dckv.data(), xn, sh.e, n, sh.h, sh.r_kv);
    linear_backward_weight(dev, byte_offset(w.d_kv_down, gb * sh.r_kv * sh.h), sh.g, dk_rope.data(), xn, sh.e, n, sh.h,
                           dr);
    linear_backward_data(dev, dxn, dckv.data(), w.kv_down, sh.e, n, sh.h, sh.r_kv);
    linear_backward_data(dev, dxn, dk_rope.data(), w_kr, sh.e, n, sh.h, dr, 1.0f);
  }

  // q_up (and q_norm, q_down): added into dxn.
  Buffer dqn_rows = rows_of(g.dq_nope, a, dn, "mla.dq_nope.rows");
  Buffer dqr_rows = rows_of(g.dq_rope, a, dr, "mla.dq_rope.rows");
  const bool latent = sh.r_q > 0;
  const void* q_in = latent ? s.cqn.data() : xn;
  const int64_t in = latent ? sh.r_q : sh.h;
  const void* w_qr = byte_offset(w.q_up, eb * a * dn * in);
  linear_backward_weight(dev, w.d_q_up, sh.g, dqn_rows.data(), q_in, sh.e, n, in, a * dn);
  linear_backward_weight(dev, byte_offset(w.d_q_up, gb * a * dn * in), sh.g, dqr_rows.data(), q_in, sh.e, n, in,
                         a * dr);
  if (!latent) {
    linear_backward_data(dev, dxn, dqn_rows.data(), w.q_up, sh.e, n, in, a * dn, 1.0f);
    linear_backward_data(dev, dxn, dqr_rows.data(), w_qr, sh.e, n, in, a * dr, 1.0f);
    return;
  }
  s.cqn.reset();
  Buffer dcqn = ws(eb * n * sh.r_q, "mla.dcqn"), dcq = ws(eb * n * sh.r_q, "mla.dcq");
  linear_backward_data(dev, dcqn.data(), dqn_rows.data(), w.q_up, sh.e, n, in, a * dn);
  linear_backward_data(dev, dcqn.data(), dqr_rows.data(), w_qr, sh.e, n, in, a * dr, 1.0f);
  dev.rmsnorm_backward(dcq.data(), w.d_q_norm, sh.g, dcqn.data(), s.cq.data(), w.q_norm, s.cq_rstd.as<float>(), sh.e, n,
                       sh.r_q, false);
  s.cq.reset();
  s.cq_rstd.reset();
  linear_backward_weight(dev, w.d_q_down, sh.g, dcq.data(), xn, sh.e, n, sh.h, sh.r_q);
  linear_backward_data(dev, dxn, dcq.data(), w.q_down, sh.e, n, sh.h, sh.r_q, 1.0f);
}

}  // namespace gpuledger
