// Device's op table entry points (device.h): each checks its arguments once
// for every backend (op_checks.h), calls the backend's <op>_impl, and counts the
// op's FLOPs from the one definition (flop_counts.h) after it has run. Only the
// GEMM, flash attention and cached attention count FLOPs (flop_counts.h says why).
// With a step-program sink attached each also reports its cost — FLOPs,
// bytes (op_bytes.h) and how it is priced (core/step_program.h) — so the op
// table says once, here, what every op costs.
#include "kernels/device.h"
#include "kernels/flop_counts.h"
#include "kernels/op_bytes.h"
#include "kernels/op_checks.h"

namespace gpuledger {
namespace {

// A GEMM's least traffic: A and B read and C written (read too when beta ≠ 0), per batch.
OpCost gemm_op(const GemmArgs& g) {
  OpCost o;
  o.name = "gemm";
  o.kind = OpCostKind::kGemm;
  o.dtype = g.ab_type;
  o.m = g.m;
  o.n = g.n;
  o.k = g.k;
  o.batch = g.batch;
  o.trans_a = g.trans_a;
  o.trans_b = g.trans_b;
  o.c_dtype = g.c_type;
  o.accumulate = g.beta != 0.0f;
  o.fp8 = g.fp8;
  o.flops = gemm_flops(g);
  const int64_t c_passes = g.beta != 0.0f ? 2 : 1;
  o.bytes = g.batch * ((g.m * g.k + g.k * g.n) * dtype_bytes(g.ab_type) + c_passes * g.m * g.n * dtype_bytes(g.c_type));
  return o;
}

// Attention work priced at its shape: the batch folded into the heads (the
// same work as B·Hq heads of one sequence).
OpCost attention_op(std::string_view name, int64_t B, int64_t Hq, int64_t T, int64_t D, DType t, int64_t flops,
                    int64_t bytes) {
  OpCost o;
  o.name = name;
  o.kind = OpCostKind::kFlashAttention;
  o.dtype = t;
  o.seq = T;
  o.heads = B * Hq;
  o.head_dim = D;
  o.flops = flops;
  o.bytes = bytes;
  return o;
}

}  // namespace

void Device::gemm(const GemmArgs& g) {
  check_gemm_args(g);
  if (g.m == 0 || g.n == 0 || g.batch == 0) return;  // nothing to compute
  gemm_impl(g);
  count_flops(gemm_flops(g));
  if (auto* sink = program_sink()) sink->on_op(gemm_op(g));
}

void Device::convert(void* dst, DType dst_t, const void* src, DType src_t, int64_t n) {
  convert_impl(dst, dst_t, src, src_t, n);
  if (auto* sink = program_sink())
    sink->on_op(memory_bound_op("convert", OpClass::kCopy, convert_bytes(n, src_t, dst_t)));
}

void Device::fp8_quantize_dequantize(float* dst, const void* src, DType t, int64_t n, Fp8Format f) {
  if (n <= 0) return;
  fp8_quantize_dequantize_impl(dst, src, t, n, f);
  if (auto* sink = program_sink()) sink->on_op(memory_bound_op("fp8_cast", OpClass::kCopy, fp8_cast_bytes(n, t)));
}

void Device::fp8_quantize_dequantize_impl(float*, const void*, DType, int64_t, Fp8Format) {
  throw std::logic_error("fp8_quantize_dequantize: no FP8 cast on this backend (FP8 GEMMs are emulated on cpu only)");
}

void Device::fp8_quantize_dequantize_blocks(float* dst, const void* src, DType t, int64_t rows, int64_t cols,
                                            int64_t block_rows, int64_t block_cols, Fp8Format f) {
  if (rows <= 0 || cols <= 0) return;
  check_fp8_blocks(block_rows, block_cols, "fp8_quantize_dequantize_blocks");
  fp8_quantize_dequantize_blocks_impl(dst, src, t, rows, cols, block_rows, block_cols, f);
  if (auto* sink = program_sink())
    sink->on_op(memory_bound_op("fp8_cast", OpClass::kCopy, fp8_cast_bytes(rows * cols, t)));
}

void Device::fp8_quantize_dequantize_blocks_impl(float*, const void*, DType, int64_t, int64_t, int64_t, int64_t,
                                                 Fp8Format) {
  throw std::logic_error(
      "fp8_quantize_dequantize_blocks: no FP8 cast on this backend (FP8 GEMMs are emulated on cpu only)");
}

void Device::add(void* out, const void* a, const void* b, DType t, int64_t n) {
  add_impl(out, a, b, t, n);
  if (auto* sink = program_sink()) sink->on_op(memory_bound_op("add", OpClass::kActivation, add_bytes(n, t)));
}

void Device::accumulate(void* dst, DType dst_t, const void* src, DType src_t, int64_t n) {
  accumulate_impl(dst, dst_t, src, src_t, n);
  if (auto* sink = program_sink())
    sink->on_op(memory_bound_op("accumulate", OpClass::kActivation, accumulate_bytes(n, dst_t, src_t)));
}

void Device::scale(void* x, DType t, float alpha, int64_t n) {
  scale_impl(x, t, alpha, n);
  if (auto* sink = program_sink()) sink->on_op(memory_bound_op("scale", OpClass::kActivation, scale_bytes(n, t)));
}

void Device::bias_add(void* out, const void* bias, DType t, int64_t rows, int64_t cols) {
  bias_add_impl(out, bias, t, rows, cols);
  if (auto* sink = program_sink())
    sink->on_op(memory_bound_op("bias_add", OpClass::kActivation, bias_add_bytes(rows, cols, t)));
}

void Device::bias_backward(void* dbias, DType grad_t, const void* dout, DType t, int64_t rows, int64_t cols,
                           bool accumulate) {
  bias_backward_impl(dbias, grad_t, dout, t, rows, cols, accumulate);
  if (auto* sink = program_sink())
    sink->on_op(
        memory_bound_op("bias_backward", OpClass::kActivation, bias_backward_bytes(rows, cols, t, grad_t, accumulate)));
}

void Device::embedding_forward(void* out, const int32_t* ids, const void* wte, const void* wpe, DType t, int64_t B,
                               int64_t T, int64_t C, const TokenSpans& positions) {
  check_token_spans(positions, T, "embedding_forward");
  embedding_forward_impl(out, ids, wte, wpe, t, B, T, C, positions);
  if (auto* sink = program_sink())
    sink->on_op(memory_bound_op("embedding_forward", OpClass::kCopy, embedding_forward_bytes(B * T, C, t)));
}

void Device::embedding_backward(void* dwte, void* dwpe, DType grad_t, const void* dout, DType t, const int32_t* ids,
                                int64_t B, int64_t T, int64_t C, const TokenSpans& positions) {
  check_token_spans(positions, T, "embedding_backward");
  embedding_backward_impl(dwte, dwpe, grad_t, dout, t, ids, B, T, C, positions);
  if (auto* sink = program_sink())
    sink->on_op(memory_bound_op("embedding_backward", OpClass::kCopy, embedding_backward_bytes(B * T, C, t, grad_t)));
}

void Device::layernorm_forward(void* out, float* mean, float* rstd, const void* x, const void* w, const void* bias,
                               DType t, int64_t N, int64_t C, float eps) {
  layernorm_forward_impl(out, mean, rstd, x, w, bias, t, N, C, eps);
  if (auto* sink = program_sink())
    sink->on_op(memory_bound_op("layernorm_forward", OpClass::kNorm, layernorm_forward_bytes(N, C, t)));
}

void Device::layernorm_backward(void* dx, void* dw, void* dbias, DType grad_t, const void* dout, const void* x,
                                const void* w, const float* mean, const float* rstd, DType t, int64_t N, int64_t C,
                                bool accumulate_dx) {
  layernorm_backward_impl(dx, dw, dbias, grad_t, dout, x, w, mean, rstd, t, N, C, accumulate_dx);
  if (auto* sink = program_sink())
    sink->on_op(memory_bound_op("layernorm_backward", OpClass::kNorm, layernorm_backward_bytes(N, C, t, grad_t)));
}

void Device::rmsnorm_forward(void* out, float* rstd, const void* x, const void* w, DType t, int64_t N, int64_t C,
                             float eps) {
  rmsnorm_forward_impl(out, rstd, x, w, t, N, C, eps);
  if (auto* sink = program_sink())
    sink->on_op(memory_bound_op("rmsnorm_forward", OpClass::kNorm, rmsnorm_forward_bytes(N, C, t)));
}

void Device::rmsnorm_backward(void* dx, void* dw, DType grad_t, const void* dout, const void* x, const void* w,
                              const float* rstd, DType t, int64_t N, int64_t C, bool accumulate_dx) {
  rmsnorm_backward_impl(dx, dw, grad_t, dout, x, w, rstd, t, N, C, accumulate_dx);
  if (auto* sink = program_sink())
    sink->on_op(memory_bound_op("rmsnorm_backward", OpClass::kNorm, rmsnorm_backward_bytes(N, C, t, grad_t)));
}

void Device::split_qkv(void* q, void* k, void* v, const void* qkv, DType t, const AttnShape& s) {
  check_attn_shape(s, "split_qkv");
  split_qkv_impl(q, k, v, qkv, t, s);
  if (auto* sink = program_sink())
    sink->on_op(
        memory_bound_op("split_qkv", OpClass::kCopy, layout_copy_bytes(s.B * s.T * (s.Hq + 2 * s.Hkv) * s.D, t)));
}

void Device::merge_qkv_grad(void* dqkv, const void* dq, const void* dk, const void* dv, DType t, const AttnShape& s) {
  check_attn_shape(s, "merge_qkv_grad");
  merge_qkv_grad_impl(dqkv, dq, dk, dv, t, s);
  if (auto* sink = program_sink())
    sink->on_op(
        memory_bound_op("merge_qkv_grad", OpClass::kCopy, layout_copy_bytes(s.B * s.T * (s.Hq + 2 * s.Hkv) * s.D, t)));
}

void Device::merge_heads(void* out, const void* ctx, DType t, const AttnShape& s) {
  check_attn_shape(s, "merge_heads");
  merge_heads_impl(out, ctx, t, s);
  if (auto* sink = program_sink())
    sink->on_op(memory_bound_op("merge_heads", OpClass::kCopy, layout_copy_bytes(s.B * s.Hq * s.T * s.D, t)));
}

void Device::split_heads(void* ctx, const void* in, DType t, const AttnShape& s) {
  check_attn_shape(s, "split_heads");
  split_heads_impl(ctx, in, t, s);
  if (auto* sink = program_sink())
    sink->on_op(memory_bound_op("split_heads", OpClass::kCopy, layout_copy_bytes(s.B * s.Hq * s.T * s.D, t)));
}

void Device::rope_forward(void* x, DType t, int64_t B, int64_t H, int64_t T, int64_t D, const TokenSpans& positions,
                          float theta) {
  check_rope_args(D, theta, "rope_forward");
  check_token_spans(positions, T, "rope_forward");
  rope_forward_impl(x, t, B, H, T, D, positions, theta);
  if (auto* sink = program_sink())
    sink->on_op(memory_bound_op("rope_forward", OpClass::kActivation, rope_bytes(B, H, T, D, t)));
}

void Device::rope_backward(void* dx, DType t, int64_t B, int64_t H, int64_t T, int64_t D, const TokenSpans& positions,
                           float theta) {
  check_rope_args(D, theta, "rope_backward");
  check_token_spans(positions, T, "rope_backward");
  rope_backward_impl(dx, t, B, H, T, D, positions, theta);
  if (auto* sink = program_sink())
    sink->on_op(memory_bound_op("rope_backward", OpClass::kActivation, rope_bytes(B, H, T, D, t)));
}

void Device::softmax_forward(void* probs, const float* scores, DType t, const AttnShape& s) {
  check_attn_shape(s, "softmax_forward");
  softmax_forward_impl(probs, scores, t, s);
  if (auto* sink = program_sink())
    sink->on_op(memory_bound_op("softmax_forward", OpClass::kSoftmax, softmax_forward_bytes(s, t)));
}

void Device::softmax_sinks_forward(void* probs, float* lse, const float* scores, const void* sinks, DType t,
                                   const AttnShape& s) {
  check_attn_shape(s, "softmax_sinks_forward");
  softmax_sinks_forward_impl(probs, lse, scores, sinks, t, s);
  if (auto* sink = program_sink())
    sink->on_op(memory_bound_op("softmax_sinks_forward", OpClass::kSoftmax, softmax_sinks_forward_bytes(s, t)));
}

void Device::attention_sinks_forward(void* out, float* lse, const void* sinks, DType t, const AttnShape& s) {
  check_attn_shape(s, "attention_sinks_forward");
  attention_sinks_forward_impl(out, lse, sinks, t, s);
  if (auto* sink = program_sink())
    sink->on_op(memory_bound_op("attention_sinks_forward", OpClass::kSoftmax, attention_sinks_forward_bytes(s, t)));
}

void Device::attention_sinks_backward(void* dsinks, DType grad_t, const void* dout, const void* out, const float* lse,
                                      const void* sinks, DType t, const AttnShape& s) {
  check_attn_shape(s, "attention_sinks_backward");
  attention_sinks_backward_impl(dsinks, grad_t, dout, out, lse, sinks, t, s);
  if (auto* sink = program_sink())
    sink->on_op(
        memory_bound_op("attention_sinks_backward", OpClass::kSoftmax, attention_sinks_backward_bytes(s, t, grad_t)));
}

void Device::softmax_backward(float* dscores, const float* dprobs, const void* probs, DType t, const AttnShape& s) {
  check_attn_shape(s, "softmax_backward");
  softmax_backward_impl(dscores, dprobs, probs, t, s);
  if (auto* sink = program_sink())
    sink->on_op(memory_bound_op("softmax_backward", OpClass::kSoftmax, softmax_backward_bytes(s, t)));
}

void Device::dropout_forward(void* out, uint8_t* mask, const void* x, DType t, int64_t n, float p, RngKey key) {
  check_dropout_p(p, "dropout_forward");
  dropout_forward_impl(out, mask, x, t, n, p, key);
  if (auto* sink = program_sink())
    sink->on_op(memory_bound_op("dropout_forward", OpClass::kActivation, dropout_forward_bytes(n, t, /*mask=*/true)));
}

void Device::dropout_backward(void* dx, DType dx_t, const void* dout, DType dout_t, const uint8_t* mask, int64_t n,
                              float p) {
  check_dropout_p(p, "dropout_backward");
  dropout_backward_impl(dx, dx_t, dout, dout_t, mask, n, p);
  if (auto* sink = program_sink())
    sink->on_op(memory_bound_op("dropout_backward", OpClass::kActivation, dropout_backward_bytes(n, dx_t, dout_t)));
}

void Device::flash_attention_forward(void* out, float* lse, const void* q, const void* k, const void* v, DType t,
                                     const AttnShape& s, float p, RngKey key, const AttnBlock& blk) {
  check_attn_shape(s, "flash_attention_forward");
  check_dropout_p(p, "flash_attention_forward");
  const AttnBlock b = checked_attn_block(s, blk, "flash_attention_forward");
  flash_attention_forward_impl(out, lse, q, k, v, t, s, p, key, b);
  count_flops(flash_forward_flops(s, b.Tk));
  if (auto* sink = program_sink())
    sink->on_op(attention_op("flash_attention_forward", s.B, s.Hq, s.T, s.D, t, flash_forward_flops(s, b.Tk),
                             flash_forward_bytes(s, b.Tk, t)));
}

void Device::flash_attention_backward(void* dq, void* dk, void* dv, const void* dout, const void* q, const void* k,
                                      const void* v, const void* out, const float* lse, DType t, const AttnShape& s,
                                      float p, RngKey key, const AttnBlock& blk) {
  check_attn_shape(s, "flash_attention_backward");
  check_dropout_p(p, "flash_attention_backward");
  const AttnBlock b = checked_attn_block(s, blk, "flash_attention_backward");
  flash_attention_backward_impl(dq, dk, dv, dout, q, k, v, out, lse, t, s, p, key, b);
  count_flops(flash_backward_flops(s, b.Tk));
  if (auto* sink = program_sink())
    sink->on_op(attention_op("flash_attention_backward", s.B, s.Hq, s.T, s.D, t, flash_backward_flops(s, b.Tk),
                             flash_backward_bytes(s, b.Tk, t)));
}

void Device::gelu_forward(void* out, const void* x, DType t, int64_t n) {
  gelu_forward_impl(out, x, t, n);
  if (auto* sink = program_sink())
    sink->on_op(memory_bound_op("gelu_forward", OpClass::kActivation, gelu_forward_bytes(n, t)));
}

void Device::gelu_backward(void* dx, const void* dout, const void* x, DType t, int64_t n) {
  gelu_backward_impl(dx, dout, x, t, n);
  if (auto* sink = program_sink())
    sink->on_op(memory_bound_op("gelu_backward", OpClass::kActivation, gelu_backward_bytes(n, t)));
}

void Device::swiglu_forward(void* out, const void* gate, const void* up, DType t, int64_t n) {
  swiglu_forward_impl(out, gate, up, t, n);
  if (auto* sink = program_sink())
    sink->on_op(memory_bound_op("swiglu_forward", OpClass::kActivation, swiglu_forward_bytes(n, t)));
}

void Device::swiglu_backward(void* dgate, void* dup, const void* dout, const void* gate, const void* up, DType t,
                             int64_t n) {
  swiglu_backward_impl(dgate, dup, dout, gate, up, t, n);
  if (auto* sink = program_sink())
    sink->on_op(memory_bound_op("swiglu_backward", OpClass::kActivation, swiglu_backward_bytes(n, t)));
}

void Device::swiglu_clamped_forward(void* out, const void* gate, const void* up, DType t, int64_t n, float alpha,
                                    float limit) {
  check_glu_clamp(alpha, limit, "swiglu_clamped_forward");
  swiglu_clamped_forward_impl(out, gate, up, t, n, alpha, limit);
  if (auto* sink = program_sink())
    sink->on_op(memory_bound_op("swiglu_clamped_forward", OpClass::kActivation, swiglu_forward_bytes(n, t)));
}

void Device::swiglu_clamped_backward(void* dgate, void* dup, const void* dout, const void* gate, const void* up,
                                     DType t, int64_t n, float alpha, float limit) {
  check_glu_clamp(alpha, limit, "swiglu_clamped_backward");
  swiglu_clamped_backward_impl(dgate, dup, dout, gate, up, t, n, alpha, limit);
  if (auto* sink = program_sink())
    sink->on_op(memory_bound_op("swiglu_clamped_backward", OpClass::kActivation, swiglu_backward_bytes(n, t)));
}

void Device::cross_entropy_forward(float* losses, const float* logits, const int32_t* targets, int64_t N, int64_t Vp,
                                   int64_t V) {
  if (N <= 0) return;
  check_cross_entropy_args(*this, targets, N, Vp, V);
  cross_entropy_forward_impl(losses, logits, targets, N, Vp, V);
  if (auto* sink = program_sink())
    sink->on_op(memory_bound_op("cross_entropy_forward", OpClass::kSoftmax, cross_entropy_forward_bytes(N, Vp)));
}

void Device::cross_entropy_backward(float* dlogits, const float* logits, const int32_t* targets, int64_t N, int64_t Vp,
                                    int64_t V, float scale) {
  if (N <= 0) return;
  check_cross_entropy_args(*this, targets, N, Vp, V);
  cross_entropy_backward_impl(dlogits, logits, targets, N, Vp, V, scale);
  if (auto* sink = program_sink())
    sink->on_op(memory_bound_op("cross_entropy_backward", OpClass::kSoftmax, cross_entropy_backward_bytes(N, Vp)));
}

void Device::optimizer_update(float* master, void* weights, DType w_t, const void* grads, DType grad_t, float* state1,
                              float* state2, int64_t n, const OptimizerHyper& hyper, int64_t step, float grad_scale) {
  if (n <= 0) return;
  const OptimizerStep update = optimizer_step(hyper, step, grad_scale);
  if (touches_memory()) check_optimizer_buffers(hyper, master, weights, w_t, state1, state2);
  optimizer_update_impl(master, weights, w_t, grads, grad_t, state1, state2, n, update);
  if (auto* sink = program_sink())
    sink->on_op(memory_bound_op(
        "optimizer_update", OpClass::kOptimizer,
        optimizer_update_bytes(n, w_t, grad_t, /*master=*/w_t != DType::kFP32, optimizer_state_count(hyper))));
}

void Device::adamw(float* master, void* weights, DType w_t, const void* grads, DType grad_t, float* m, float* v,
                   int64_t n, float lr, float beta1, float beta2, float eps, float weight_decay, int64_t step,
                   float grad_scale) {
  OptimizerHyper h;
  h.kind = OptimizerKind::kAdamW;
  h.lr = lr;
  h.beta1 = beta1;
  h.beta2 = beta2;
  h.eps = eps;
  h.weight_decay = weight_decay;
  optimizer_update(master, weights, w_t, grads, grad_t, m, v, n, h, step, grad_scale);
}

double Device::sum_squares(const void* x, DType t, int64_t n) {
  const double r = sum_squares_impl(x, t, n);
  if (auto* sink = program_sink())
    sink->on_op(memory_bound_op("sum_squares", OpClass::kOptimizer, sum_squares_bytes(n, t)));
  return r;
}

void Device::kv_cache_write(const KvCacheView& cache, const void* k, const void* v, DType t, bool calibrate) {
  check_kv_cache_write_args(cache, touches_memory());
  kv_cache_write_impl(cache, k, v, t, calibrate);
  if (auto* sink = program_sink())
    sink->on_op(memory_bound_op("kv_cache_write", OpClass::kCopy, kv_cache_write_bytes(cache, t)));
}

void Device::cached_attention(void* out, const void* q, DType t, int64_t Hq, const KvCacheView& cache) {
  check_cached_attention_args(Hq, cache, touches_memory());
  cached_attention_impl(out, q, t, Hq, cache);
  count_flops(cached_attention_flops(Hq, cache));
  if (auto* sink = program_sink())
    sink->on_op(attention_op("cached_attention", 1, Hq, cache.seqs.empty() ? 0 : cache.seqs.front().n_new, cache.D, t,
                             cached_attention_flops(Hq, cache), cached_attention_bytes(Hq, cache, t)));
}

void Device::vocab_embedding_forward(void* out, const int32_t* ids, const void* wte, DType t, int64_t N, int64_t C,
                                     int64_t row_begin, int64_t rows) {
  vocab_embedding_forward_impl(out, ids, wte, t, N, C, row_begin, rows);
  if (auto* sink = program_sink())
    sink->on_op(memory_bound_op("vocab_embedding_forward", OpClass::kCopy, embedding_forward_bytes(N, C, t)));
}

void Device::vocab_embedding_backward(void* dwte, DType grad_t, const void* dout, DType t, const int32_t* ids,
                                      int64_t N, int64_t C, int64_t row_begin, int64_t rows) {
  vocab_embedding_backward_impl(dwte, grad_t, dout, t, ids, N, C, row_begin, rows);
  if (auto* sink = program_sink())
    sink->on_op(memory_bound_op("vocab_embedding_backward", OpClass::kCopy, embedding_backward_bytes(N, C, t, grad_t)));
}

void Device::vocab_ce_stats(float* row_max, float* target_logit, const float* logits, const int32_t* targets, int64_t N,
                            int64_t Vl, int64_t col_begin, int64_t V) {
  vocab_ce_stats_impl(row_max, target_logit, logits, targets, N, Vl, col_begin, V);
  if (auto* sink = program_sink())
    sink->on_op(memory_bound_op("vocab_ce_stats", OpClass::kSoftmax, vocab_ce_stats_bytes(N, Vl)));
}

void Device::vocab_ce_exp(float* logits, float* sum_exp, const float* row_max, int64_t N, int64_t Vl, int64_t col_begin,
                          int64_t V) {
  vocab_ce_exp_impl(logits, sum_exp, row_max, N, Vl, col_begin, V);
  if (auto* sink = program_sink())
    sink->on_op(memory_bound_op("vocab_ce_exp", OpClass::kSoftmax, vocab_ce_exp_bytes(N, Vl)));
}

void Device::vocab_ce_normalize(float* probs, const float* sum_exp, int64_t N, int64_t Vl) {
  vocab_ce_normalize_impl(probs, sum_exp, N, Vl);
  if (auto* sink = program_sink())
    sink->on_op(memory_bound_op("vocab_ce_normalize", OpClass::kSoftmax, vocab_ce_normalize_bytes(N, Vl)));
}

void Device::vocab_ce_backward(float* dlogits, const float* probs, const int32_t* targets, int64_t N, int64_t Vl,
                               int64_t col_begin, float scale) {
  vocab_ce_backward_impl(dlogits, probs, targets, N, Vl, col_begin, scale);
  if (auto* sink = program_sink())
    sink->on_op(memory_bound_op("vocab_ce_backward", OpClass::kSoftmax, vocab_ce_backward_bytes(N, Vl)));
}

}  // namespace gpuledger
