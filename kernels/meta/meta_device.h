// MetaDevice: the bookkeeping-only backend (docs/architecture.md "Three backends"). It
// books every allocation in the ledger exactly as the real backends do, touches
// no memory (Buffer::data() is nullptr) and computes nothing: every op body is
// empty. Device's entry points still check each call and count its FLOPs
// (kernels/flop_counts.h), so a meta run fails and counts as a real one does.
// It allocates no workspace of its own: the workspace account is
// backend-specific, every other account matches cpu to the byte.
#pragma once
#include <string>

#include "kernels/device.h"

namespace gpuledger {

class MetaDevice : public Device {
 public:
  explicit MetaDevice(Ledger& ledger) : Device(ledger) {}
  std::string name() const override { return "meta"; }
  std::string description() const override;
  bool touches_memory() const override { return false; }

  // copy_to_host zeroes the host buffer, so callers read deterministic values.
  // The memory operations report their cost to the step program's sink, as
  // the op table's entry points do for the ops (device.h).
  void copy_to_host(void* host_dst, const void* src, int64_t bytes) override;
  void copy_from_host(void* dst, const void* host_src, int64_t bytes) override;
  void copy(void* dst, const void* src, int64_t bytes) override;
  void fill_zero(void* dst, int64_t bytes) override;

 protected:
  void gemm_impl(const GemmArgs& g) override {}
  void convert_impl(void* dst, DType dst_t, const void* src, DType src_t, int64_t n) override {}
  void fp8_quantize_dequantize_impl(float* dst, const void* src, DType t, int64_t n, Fp8Format f) override {}
  void add_impl(void* out, const void* a, const void* b, DType t, int64_t n) override {}
  void accumulate_impl(void* dst, DType dst_t, const void* src, DType src_t, int64_t n) override {}
  void scale_impl(void* x, DType t, float alpha, int64_t n) override {}
  void bias_add_impl(void* out, const void* bias, DType t, int64_t rows, int64_t cols) override {}
  void bias_backward_impl(void* dbias, DType grad_t, const void* dout, DType t, int64_t rows, int64_t cols,
                          bool accumulate) override {}
  void embedding_forward_impl(void* out, const int32_t* ids, const void* wte, const void* wpe, DType t, int64_t B,
                              int64_t T, int64_t C, const TokenSpans& positions) override {}
  void embedding_backward_impl(void* dwte, void* dwpe, DType grad_t, const void* dout, DType t, const int32_t* ids,
                               int64_t B, int64_t T, int64_t C, const TokenSpans& positions) override {}
  void layernorm_forward_impl(void* out, float* mean, float* rstd, const void* x, const void* w, const void* bias,
                              DType t, int64_t N, int64_t C, float eps) override {}
  void layernorm_backward_impl(void* dx, void* dw, void* dbias, DType grad_t, const void* dout, const void* x,
                               const void* w, const float* mean, const float* rstd, DType t, int64_t N, int64_t C,
                               bool accumulate_dx) override {}
  void rmsnorm_forward_impl(void* out, float* rstd, const void* x, const void* w, DType t, int64_t N, int64_t C,
                            float eps) override {}
  void rmsnorm_backward_impl(void* dx, void* dw, DType grad_t, const void* dout, const void* x, const void* w,
                             const float* rstd, DType t, int64_t N, int64_t C, bool accumulate_dx) override {}
  void split_qkv_impl(void* q, void* k, void* v, const void* qkv, DType t, const AttnShape& s) override {}
  void merge_qkv_grad_impl(void* dqkv, const void* dq, const void* dk, const void* dv, DType t,
                           const AttnShape& s) override {}
  void merge_heads_impl(void* out, const void* ctx, DType t, const AttnShape& s) override {}
  void split_heads_impl(void* ctx, const void* in, DType t, const AttnShape& s) override {}
  void rope_forward_impl(void* x, DType t, int64_t B, int64_t H, int64_t T, int64_t D, const TokenSpans& positions,
                         float theta) override {}
  void rope_backward_impl(void* dx, DType t, int64_t B, int64_t H, int64_t T, int64_t D, const TokenSpans& positions,
                          float theta) override {}
  void softmax_forward_impl(void* probs, const float* scores, DType t, const AttnShape& s) override {}
  void softmax_backward_impl(float* dscores, const float* dprobs, const void* probs, DType t,
                             const AttnShape& s) override {}
  void dropout_forward_impl(void* out, uint8_t* mask, const void* x, DType t, int64_t n, float p, RngKey key) override {
  }
  void dropout_backward_impl(void* dx, DType dx_t, const void* dout, DType dout_t, const uint8_t* mask, int64_t n,
                             float p) override {}
  void flash_attention_forward_impl(void* out, float* lse, const void* q, const void* k, const void* v, DType t,
                                    const AttnShape& s, float p, RngKey key, const AttnBlock& blk) override {}
  void flash_attention_backward_impl(void* dq, void* dk, void* dv, const void* dout, const void* q, const void* k,
                                     const void* v, const void* out, const float* lse, DType t, const AttnShape& s,
                                     float p, RngKey key, const AttnBlock& blk) override {}
  void gelu_forward_impl(void* out, const void* x, DType t, int64_t n) override {}
  void gelu_backward_impl(void* dx, const void* dout, const void* x, DType t, int64_t n) override {}
  void swiglu_forward_impl(void* out, const void* gate, const void* up, DType t, int64_t n) override {}
  void swiglu_backward_impl(void* dgate, void* dup, const void* dout, const void* gate, const void* up, DType t,
                            int64_t n) override {}
  void cross_entropy_forward_impl(float* losses, const float* logits, const int32_t* targets, int64_t N, int64_t Vp,
                                  int64_t V) override {}
  void cross_entropy_backward_impl(float* dlogits, const float* logits, const int32_t* targets, int64_t N, int64_t Vp,
                                   int64_t V, float scale) override {}
  void optimizer_update_impl(float* master, void* weights, DType w_t, const void* grads, DType grad_t, float* state1,
                             float* state2, int64_t n, const OptimizerStep& update) override {}
  double sum_squares_impl(const void* x, DType t, int64_t n) override { return 0.0; }
  void kv_cache_write_impl(const KvCacheView& cache, const void* k, const void* v, DType t, bool calibrate) override {}
  void cached_attention_impl(void* out, const void* q, DType t, int64_t Hq, const KvCacheView& cache) override {}
  void vocab_embedding_forward_impl(void* out, const int32_t* ids, const void* wte, DType t, int64_t N, int64_t C,
                                    int64_t row_begin, int64_t rows) override {}
  void vocab_embedding_backward_impl(void* dwte, DType grad_t, const void* dout, DType t, const int32_t* ids, int64_t N,
                                     int64_t C, int64_t row_begin, int64_t rows) override {}
  void vocab_ce_stats_impl(float* row_max, float* target_logit, const float* logits, const int32_t* targets, int64_t N,
                           int64_t Vl, int64_t col_begin, int64_t V) override {}
  void vocab_ce_exp_impl(float* logits, float* sum_exp, const float* row_max, int64_t N, int64_t Vl, int64_t col_begin,
                         int64_t V) override {}
  void vocab_ce_normalize_impl(float* probs, const float* sum_exp, int64_t N, int64_t Vl) override {}
  void vocab_ce_backward_impl(float* dlogits, const float* probs, const int32_t* targets, int64_t N, int64_t Vl,
                              int64_t col_begin, float scale) override {}

  // Never called: Device::alloc skips raw_alloc when touches_memory() is false.
  void* raw_alloc(int64_t bytes) override { return nullptr; }
  void raw_free(void* p, int64_t bytes) override {}
};

}  // namespace gpuledger
