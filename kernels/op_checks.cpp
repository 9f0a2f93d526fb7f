// The op table's argument checks (op_checks.h); the messages are the ones the
// backends' tests expect.
#include "kernels/op_checks.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

namespace gpuledger {

void check_gemm_args(const GemmArgs& g) {
  auto fail = [](const std::string& what) { throw std::invalid_argument("gemm: " + what); };
  if (g.m < 0 || g.n < 0 || g.k < 0 || g.batch < 0) fail("negative dimension");
  if (g.c_type != DType::kFP32 && g.c_type != g.ab_type) fail("C must be fp32 or the dtype of A and B");
  const int64_t a_cols = g.trans_a ? g.m : g.k;  // A as stored is (rows × a_cols)
  const int64_t b_cols = g.trans_b ? g.k : g.n;
  if (g.lda < std::max<int64_t>(1, a_cols)) fail("lda " + std::to_string(g.lda) + " < " + std::to_string(a_cols));
  if (g.ldb < std::max<int64_t>(1, b_cols)) fail("ldb " + std::to_string(g.ldb) + " < " + std::to_string(b_cols));
  if (g.ldc < std::max<int64_t>(1, g.n)) fail("ldc " + std::to_string(g.ldc) + " < " + std::to_string(g.n));
}

void check_attn_shape(const AttnShape& s, const char* op) {
  if (s.B <= 0 || s.Hq <= 0 || s.Hkv <= 0 || s.T <= 0 || s.D <= 0 || s.Hq % s.Hkv != 0)
    throw std::invalid_argument(std::string(op) + ": bad attention shape (B, Hq, Hkv, T, D) = (" + std::to_string(s.B) +
                                ", " + std::to_string(s.Hq) + ", " + std::to_string(s.Hkv) + ", " +
                                std::to_string(s.T) + ", " + std::to_string(s.D) + "); Hq must be a multiple of Hkv");
  if (s.window && *s.window < 1)
    throw std::invalid_argument(std::string(op) + ": window must be >= 1, got " + std::to_string(*s.window));
}

void check_token_spans(const TokenSpans& p, int64_t T, const char* op) {
  const bool two = p.split < T;
  if (p.start < 0 || (two && (p.split < 1 || p.second_start < p.start + p.split)))
    throw std::invalid_argument(std::string(op) + ": token positions (start " + std::to_string(p.start) + ", split " +
                                std::to_string(p.split) + ", second start " + std::to_string(p.second_start) +
                                ") must be non-negative and increasing");
}

AttnBlock checked_attn_block(const AttnShape& s, const AttnBlock& blk, const char* op) {
  AttnBlock b = blk;
  if (b.Tk == 0) b.Tk = s.T;
  if (b.seq == 0) b.seq = s.T;
  if (b.Tk < 0 || b.seq < s.T || b.seq < b.Tk)
    throw std::invalid_argument(std::string(op) + ": block of " + std::to_string(s.T) + " queries and " +
                                std::to_string(b.Tk) + " keys in a sequence of " + std::to_string(b.seq));
  check_token_spans(b.q_pos, s.T, op);
  check_token_spans(b.k_pos, b.Tk, op);
  if (b.q_pos.position(s.T - 1) >= b.seq || b.k_pos.position(b.Tk - 1) >= b.seq)
    throw std::invalid_argument(std::string(op) + ": a token position lies outside the sequence of " +
                                std::to_string(b.seq));
  if (!b.causal && s.window) throw std::invalid_argument(std::string(op) + ": a window needs the causal mask");
  return b;
}

void check_dropout_p(float p, const char* op) {
  if (!(p >= 0.0f && p <= 1.0f))
    throw std::invalid_argument(std::string(op) + ": dropout probability must be in [0, 1], got " + std::to_string(p));
}

void check_glu_clamp(float alpha, float limit, const char* op) {
  if (!(alpha > 0) || !(limit > 0))
    throw std::invalid_argument(std::string(op) + ": alpha and limit must be positive, got " + std::to_string(alpha) +
                                " and " + std::to_string(limit));
}

void check_fp8_blocks(int64_t block_rows, int64_t block_cols, const char* op) {
  if (block_rows < 1 || block_cols < 1)
    throw std::invalid_argument(std::string(op) + ": blocks of " + std::to_string(block_rows) + " × " +
                                std::to_string(block_cols) + " (each at least 1 × 1)");
}

void check_rope_args(int64_t D, float theta, const char* op) {
  if (D <= 0 || D % 2 != 0)
    throw std::invalid_argument(std::string(op) + ": head dim must be even, got " + std::to_string(D));
  if (!(theta > 0.0f)) throw std::invalid_argument(std::string(op) + ": theta must be > 0");
}

void check_cross_entropy_args(Device& d, const int32_t* targets, int64_t N, int64_t Vp, int64_t V) {
  if (V <= 0 || V > Vp)
    throw std::invalid_argument("cross_entropy: need 0 < V <= Vp, got V " + std::to_string(V) + ", Vp " +
                                std::to_string(Vp));
  std::vector<int32_t> host(static_cast<size_t>(N));
  d.copy_to_host(host.data(), targets, N * 4);
  for (int64_t i = 0; i < N; ++i)
    if (host[i] < 0 || host[i] >= V)
      throw std::invalid_argument("cross_entropy: target " + std::to_string(host[i]) + " of row " + std::to_string(i) +
                                  " is outside [0, " + std::to_string(V) + ")");
}

namespace {

// Sequences that read or write the cache need its memory, and the fixed
// (per-tensor, per-channel) formats need the layer's scales.
void check_kv_memory(const KvCacheView& c, const std::string& op, const char* rows) {
  bool any = false;
  for (const KvSeqView& s : c.seqs) {
    if (s.n_new > 0 && s.base == nullptr)
      throw std::invalid_argument(op + ": a sequence with " + rows + " has no cache memory");
    any = any || s.n_new > 0;
  }
  if (any && c.fixed_per_tensor() > 0 && c.fixed_scales == nullptr)
    throw std::invalid_argument(op + ": " + std::string(kv_scales_name(c.scales)) +
                                " scales need the layer's fixed scales");
}

}  // namespace

void check_kv_cache_write_args(const KvCacheView& c, bool has_memory) {
  validate_kv_view(c, "kv_cache_write");
  if (has_memory) check_kv_memory(c, "kv_cache_write", "new tokens");
}

void check_cached_attention_args(int64_t Hq, const KvCacheView& c, bool has_memory) {
  validate_kv_view(c, "cached_attention");
  if (Hq < 1 || Hq % c.Hkv != 0)
    throw std::invalid_argument("cached_attention: " + std::to_string(Hq) + " query heads are not a multiple of " +
                                std::to_string(c.Hkv) + " KV heads");
  if (has_memory) check_kv_memory(c, "cached_attention", "queries");
}

int optimizer_state_count(const OptimizerHyper& h) {
  switch (h.kind) {
    case OptimizerKind::kAdamW: return 2;
    case OptimizerKind::kSGD: return h.momentum != 0.0f ? 1 : 0;
    case OptimizerKind::kAdagrad: return 1;
    case OptimizerKind::kLion: return 1;
  }
  return 0;
}

void check_optimizer_buffers(const OptimizerHyper& h, const float* master, const void* weights, DType w_t,
                             const float* state1, const float* state2) {
  const std::string name(optimizer_name(h.kind));
  if (master == nullptr && (weights == nullptr || w_t != DType::kFP32))
    throw std::invalid_argument(name + ": without a master copy the weights must be fp32");
  const int states = optimizer_state_count(h);
  if ((states >= 1 && state1 == nullptr) || (states >= 2 && state2 == nullptr))
    throw std::invalid_argument(name + ": needs " + std::to_string(states) + " state buffer(s)");
}

OptimizerStep optimizer_step(const OptimizerHyper& h, int64_t step, float grad_scale) {
  if (step < 1)
    throw std::invalid_argument(std::string(optimizer_name(h.kind)) + ": step counts from 1, got " +
                                std::to_string(step));
  OptimizerStep a;
  a.hyper = h;
  a.step = step;
  a.grad_scale = grad_scale;
  if (h.kind == OptimizerKind::kAdamW) {
    const double t = static_cast<double>(step);
    a.bias_correction1 = static_cast<float>(1.0 - std::pow(static_cast<double>(h.beta1), t));
    a.bias_correction2 = static_cast<float>(1.0 - std::pow(static_cast<double>(h.beta2), t));
  }
  return a;
}

}  // namespace gpuledger
