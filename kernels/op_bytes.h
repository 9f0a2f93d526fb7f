// Bytes each op of the op table moves — the microbenchmarks' bytes_per_s and
// pct_of_bandwidth, and what the step program prices a memory-bound op by
// (kernels/device_ops.cpp reports them, core/step_program.h): every
// tensor operand counted once per direction it flows — read once if the op
// reads it, written once if it writes it (read and written if updated in
// place or accumulated into). This is the minimum traffic the op's contract
// (kernels/device.h) implies, as STREAM counts its arrays; caches and
// recomputation can make a kernel move more, never less. Index tensors and
// scalars are left out when they are a vanishing share (per-row targets are
// counted; per-column weights are counted). The FLOPs of compute ops are
// kernels/flop_counts.h's; nothing here is a FLOP count.
#pragma once
#include <cstdint>

#include "kernels/device.h"

namespace gpuledger {

constexpr int64_t kFp32Bytes = 4;

// LayerNorm forward: x read, out written (N·C each, t), w and bias read (C, t),
// mean and rstd written (N, fp32).
constexpr int64_t layernorm_forward_bytes(int64_t N, int64_t C, DType t) {
  return 2 * N * C * dtype_bytes(t) + 2 * C * dtype_bytes(t) + 2 * N * kFp32Bytes;
}
// LayerNorm backward: dout and x read, dx written (N·C, t; no accumulate);
// w read (C, t); mean, rstd read (N, fp32); dw and dbias accumulated (C, grad_t, read + write).
constexpr int64_t layernorm_backward_bytes(int64_t N, int64_t C, DType t, DType grad_t) {
  return 3 * N * C * dtype_bytes(t) + C * dtype_bytes(t) + 2 * N * kFp32Bytes + 2 * 2 * C * dtype_bytes(grad_t);
}
// RMSNorm forward: x read, out written, w read, rstd written.
constexpr int64_t rmsnorm_forward_bytes(int64_t N, int64_t C, DType t) {
  return 2 * N * C * dtype_bytes(t) + C * dtype_bytes(t) + N * kFp32Bytes;
}
// RMSNorm backward: dout, x read, dx written, w read, rstd read, dw accumulated.
constexpr int64_t rmsnorm_backward_bytes(int64_t N, int64_t C, DType t, DType grad_t) {
  return 3 * N * C * dtype_bytes(t) + C * dtype_bytes(t) + N * kFp32Bytes + 2 * C * dtype_bytes(grad_t);
}
// RoPE, forward or backward: x (B, H, T, D) rotated in place (read + write);
// the angles are computed, not loaded.
constexpr int64_t rope_bytes(int64_t B, int64_t H, int64_t T, int64_t D, DType t) {
  return 2 * B * H * T * D * dtype_bytes(t);
}
// Attention softmax forward: scores (B, Hq, T, T) fp32 read, probs written in
// t — the full T×T rectangle, masked half included (the convention of
// flash_forward_flops: a kernel may skip it, the count does not).
inline int64_t softmax_forward_bytes(const AttnShape& s, DType t) {
  return s.B * s.Hq * s.T * s.T * (kFp32Bytes + dtype_bytes(t));
}
// With attention sinks: also the Hq sinks (t) read and the lse (B, Hq, T, fp32) written.
inline int64_t softmax_sinks_forward_bytes(const AttnShape& s, DType t) {
  return softmax_forward_bytes(s, t) + s.Hq * dtype_bytes(t) + s.B * s.Hq * s.T * kFp32Bytes;
}
// Attention sinks forward: out (B, Hq, T, D) t read and written, lse read and
// written (fp32), the Hq sinks read.
inline int64_t attention_sinks_forward_bytes(const AttnShape& s, DType t) {
  return 2 * s.B * s.Hq * s.T * s.D * dtype_bytes(t) + 2 * s.B * s.Hq * s.T * kFp32Bytes + s.Hq * dtype_bytes(t);
}
// Attention sinks backward: dout and out read (B, Hq, T, D) t, lse read, the
// sinks read and their gradient read and written.
inline int64_t attention_sinks_backward_bytes(const AttnShape& s, DType t, DType grad_t) {
  return 2 * s.B * s.Hq * s.T * s.D * dtype_bytes(t) + s.B * s.Hq * s.T * kFp32Bytes +
         s.Hq * (dtype_bytes(t) + 2 * dtype_bytes(grad_t));
}
// Softmax backward: dprobs fp32 and probs (t) read, dscores fp32 written.
inline int64_t softmax_backward_bytes(const AttnShape& s, DType t) {
  return s.B * s.Hq * s.T * s.T * (2 * kFp32Bytes + dtype_bytes(t));
}
// Cross-entropy forward: logits (N, Vp) fp32 read, targets (N, int32) read, losses (N) written.
constexpr int64_t cross_entropy_forward_bytes(int64_t N, int64_t Vp) {
  return N * Vp * kFp32Bytes + 2 * N * kFp32Bytes;
}
// Cross-entropy backward: logits read, dlogits written (N, Vp, fp32), targets read.
constexpr int64_t cross_entropy_backward_bytes(int64_t N, int64_t Vp) {
  return 2 * N * Vp * kFp32Bytes + N * kFp32Bytes;
}
// AdamW on n elements: m and v updated (fp32, read + write); grads read (grad_t);
// with a master copy: master updated (fp32) and the w_t weights written;
// without: the fp32 weights updated.
// Any optimizer update: its `states` fp32 states (AdamW 2, SGD/Adagrad/Lion 1) updated likewise.
constexpr int64_t optimizer_update_bytes(int64_t n, DType w_t, DType grad_t, bool master, int states) {
  const int64_t moments = states * 2 * kFp32Bytes;
  const int64_t params = master ? 2 * kFp32Bytes + dtype_bytes(w_t) : 2 * kFp32Bytes;
  return n * (moments + params + dtype_bytes(grad_t));
}
constexpr int64_t adamw_bytes(int64_t n, DType w_t, DType grad_t, bool master) {
  return optimizer_update_bytes(n, w_t, grad_t, master, 2);
}
// convert: n elements read in src_t, written in dst_t.
constexpr int64_t convert_bytes(int64_t n, DType src_t, DType dst_t) {
  return n * (dtype_bytes(src_t) + dtype_bytes(dst_t));
}
// fp8_quantize_dequantize: the amax pass, then the cast: n elements read twice
// in t, written once in fp32.
constexpr int64_t fp8_cast_bytes(int64_t n, DType t) { return convert_bytes(n, t, DType::kFP32) + n * dtype_bytes(t); }
// kv_cache_write: the new tokens' K and V read in t (2·Hkv·n_new·D values),
// and written to the cache in its format with their per-token-head scales
// (layer_token_bytes per token).
inline int64_t kv_cache_write_bytes(const KvCacheView& c, DType t) {
  const int64_t n_new = c.new_tokens();
  return 2 * c.Hkv * n_new * c.D * dtype_bytes(t) + n_new * c.layer_token_bytes();
}
// cached_attention: every kept K and V of every sequence read once (with its
// scales), q read and out written (Hq·n_new·D each, t). Decode is bound by
// the cache read (FLOPs per cached byte ≈ Hq/Hkv).
inline int64_t cached_attention_bytes(int64_t Hq, const KvCacheView& c, DType t) {
  int64_t b = 2 * Hq * c.new_tokens() * c.D * dtype_bytes(t);
  for (const auto& s : c.seqs) b += c.kept(s.len) * c.layer_token_bytes();
  return b;
}

// Element-wise ops on n elements of t: add (a, b read, out written);
// SwiGLU forward (gate, up read, out written) and backward (dout, gate, up
// read, dgate, dup written); GELU forward (x read, out written) and backward
// (dout, x read, dx written).
constexpr int64_t add_bytes(int64_t n, DType t) { return 3 * n * dtype_bytes(t); }
constexpr int64_t swiglu_forward_bytes(int64_t n, DType t) { return 3 * n * dtype_bytes(t); }
constexpr int64_t swiglu_backward_bytes(int64_t n, DType t) { return 5 * n * dtype_bytes(t); }
constexpr int64_t gelu_forward_bytes(int64_t n, DType t) { return 2 * n * dtype_bytes(t); }
constexpr int64_t gelu_backward_bytes(int64_t n, DType t) { return 3 * n * dtype_bytes(t); }
// Layout copies (split_qkv, merge_qkv_grad, merge_heads, split_heads): every
// element read once and written once.
constexpr int64_t layout_copy_bytes(int64_t n, DType t) { return 2 * n * dtype_bytes(t); }
// Embedding forward: N rows of C gathered from the table (read) and written,
// ids read; backward: N rows of dout read and added into the table's rows
// (read + write, grad_t).
constexpr int64_t embedding_forward_bytes(int64_t N, int64_t C, DType t) {
  return 2 * N * C * dtype_bytes(t) + N * kFp32Bytes;
}
constexpr int64_t embedding_backward_bytes(int64_t N, int64_t C, DType t, DType grad_t) {
  return N * C * dtype_bytes(t) + 2 * N * C * dtype_bytes(grad_t) + N * kFp32Bytes;
}

// accumulate: src read (src_t), dst read and written (dst_t).
constexpr int64_t accumulate_bytes(int64_t n, DType dst_t, DType src_t) {
  return n * (dtype_bytes(src_t) + 2 * dtype_bytes(dst_t));
}
// scale: x read and written in place.
constexpr int64_t scale_bytes(int64_t n, DType t) { return 2 * n * dtype_bytes(t); }
// bias_add: out (rows, cols) read and written, bias (cols) read.
constexpr int64_t bias_add_bytes(int64_t rows, int64_t cols, DType t) {
  return (2 * rows * cols + cols) * dtype_bytes(t);
}
// bias_backward: dout (rows, cols) read; dbias (cols) written, or read and
// written when accumulated.
constexpr int64_t bias_backward_bytes(int64_t rows, int64_t cols, DType t, DType grad_t, bool accumulate) {
  return rows * cols * dtype_bytes(t) + (accumulate ? 2 : 1) * cols * dtype_bytes(grad_t);
}
// Dropout forward: x read, out written (t), the uint8 mask written when kept.
constexpr int64_t dropout_forward_bytes(int64_t n, DType t, bool mask) {
  return 2 * n * dtype_bytes(t) + (mask ? n : 0);
}
// Dropout backward: dout read (dout_t), the mask read, dx written (dx_t).
constexpr int64_t dropout_backward_bytes(int64_t n, DType dx_t, DType dout_t) {
  return n * (dtype_bytes(dout_t) + dtype_bytes(dx_t) + 1);
}
// Flash attention forward of T queries against Tk keys (Dao et al. 2022: the
// scores never leave the chip): q read and out written (B·Hq·T·D each), k and
// v read (B·Hkv·Tk·D each), lse written (B·Hq·T, fp32).
inline int64_t flash_forward_bytes(const AttnShape& s, int64_t Tk, DType t) {
  return (2 * s.B * s.Hq * s.T * s.D + 2 * s.B * s.Hkv * Tk * s.D) * dtype_bytes(t) + s.B * s.Hq * s.T * kFp32Bytes;
}
// Flash backward: q, out, dout read and dq written (B·Hq·T·D each); k, v read
// and dk, dv written (B·Hkv·Tk·D each); lse read.
inline int64_t flash_backward_bytes(const AttnShape& s, int64_t Tk, DType t) {
  return (4 * s.B * s.Hq * s.T * s.D + 4 * s.B * s.Hkv * Tk * s.D) * dtype_bytes(t) + s.B * s.Hq * s.T * kFp32Bytes;
}
// Σ x²: x read once.
constexpr int64_t sum_squares_bytes(int64_t n, DType t) { return n * dtype_bytes(t); }
// The vocabulary-parallel cross-entropy's passes over the local logits (N, Vl) fp32:
// stats reads them (and the targets) and writes two per-row values; exp reads and
// writes them and writes the row sums; normalize reads and writes them (and reads
// the sums); backward reads the probabilities and writes the gradient (in place or not).
constexpr int64_t vocab_ce_stats_bytes(int64_t N, int64_t Vl) { return N * Vl * kFp32Bytes + 3 * N * kFp32Bytes; }
constexpr int64_t vocab_ce_exp_bytes(int64_t N, int64_t Vl) { return 2 * N * Vl * kFp32Bytes + 2 * N * kFp32Bytes; }
constexpr int64_t vocab_ce_normalize_bytes(int64_t N, int64_t Vl) { return 2 * N * Vl * kFp32Bytes + N * kFp32Bytes; }
constexpr int64_t vocab_ce_backward_bytes(int64_t N, int64_t Vl) { return 2 * N * Vl * kFp32Bytes + N * kFp32Bytes; }
// A device-to-device copy of `bytes`: read once, written once; a fill writes once.
constexpr int64_t device_copy_bytes(int64_t bytes) { return 2 * bytes; }

}  // namespace gpuledger
