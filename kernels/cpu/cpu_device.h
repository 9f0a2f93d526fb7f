// CpuDevice: the reference backend. Host memory (64-byte aligned), fp32
// compute on 16-bit storage, OpenBLAS sgemm (or the built-in GEMM without
// BLAS), OpenMP threads where they pay. Every other backend is tested against it.
// The op implementations are split by family: cpu_device.cpp (memory, registry
// glue), ops_gemm.cpp, ops_elementwise.cpp, ops_norm.cpp, ops_embedding.cpp,
// ops_loss.cpp, ops_optim.cpp, ops_attention.cpp, ops_flash.cpp,
// ops_rope.cpp, ops_dropout.cpp, ops_activation.cpp; ops_kv_cache_write.cpp and
// ops_cached_attention.cpp (the KV cache of inference), ops_vocab_parallel.cpp
// (vocabulary-parallel embedding and cross-entropy).
#pragma once
#include <string>

#include "kernels/device.h"

namespace gpuledger {

class CpuDevice : public Device {
 public:
  explicit CpuDevice(Ledger& ledger);
  std::string name() const override { return "cpu"; }
  std::string description() const override;
  void copy_to_host(void* host_dst, const void* src, int64_t bytes) override;
  void copy_from_host(void* dst, const void* host_src, int64_t bytes) override;
  void copy(void* dst, const void* src, int64_t bytes) override;
  void fill_zero(void* dst, int64_t bytes) override;

 protected:
  void gemm_impl(const GemmArgs& g) override;
  void convert_impl(void* dst, DType dst_t, const void* src, DType src_t, int64_t n) override;
  void fp8_quantize_dequantize_impl(float* dst, const void* src, DType t, int64_t n, Fp8Format f) override;
  void add_impl(void* out, const void* a, const void* b, DType t, int64_t n) override;
  void accumulate_impl(void* dst, DType dst_t, const void* src, DType src_t, int64_t n) override;
  void scale_impl(void* x, DType t, float alpha, int64_t n) override;
  void bias_add_impl(void* out, const void* bias, DType t, int64_t rows, int64_t cols) override;
  void bias_backward_impl(void* dbias, DType grad_t, const void* dout, DType t, int64_t rows, int64_t cols,
                          bool accumulate) override;
  void embedding_forward_impl(void* out, const int32_t* ids, const void* wte, const void* wpe, DType t, int64_t B,
                              int64_t T, int64_t C, const TokenSpans& positions) override;
  void embedding_backward_impl(void* dwte, void* dwpe, DType grad_t, const void* dout, DType t, const int32_t* ids,
                               int64_t B, int64_t T, int64_t C, const TokenSpans& positions) override;
  void layernorm_forward_impl(void* out, float* mean, float* rstd, const void* x, const void* w, const void* bias,
                              DType t, int64_t N, int64_t C, float eps) override;
  void layernorm_backward_impl(void* dx, void* dw, void* dbias, DType grad_t, const void* dout, const void* x,
                               const void* w, const float* mean, const float* rstd, DType t, int64_t N, int64_t C,
                               bool accumulate_dx) override;
  void rmsnorm_forward_impl(void* out, float* rstd, const void* x, const void* w, DType t, int64_t N, int64_t C,
                            float eps) override;
  void rmsnorm_backward_impl(void* dx, void* dw, DType grad_t, const void* dout, const void* x, const void* w,
                             const float* rstd, DType t, int64_t N, int64_t C, bool accumulate_dx) override;
  void split_qkv_impl(void* q, void* k, void* v, const void* qkv, DType t, const AttnShape& s) override;
  void merge_qkv_grad_impl(void* dqkv, const void* dq, const void* dk, const void* dv, DType t,
                           const AttnShape& s) override;
  void merge_heads_impl(void* out, const void* ctx, DType t, const AttnShape& s) override;
  void split_heads_impl(void* ctx, const void* in, DType t, const AttnShape& s) override;
  void rope_forward_impl(void* x, DType t, int64_t B, int64_t H, int64_t T, int64_t D, const TokenSpans& positions,
                         float theta) override;
  void rope_backward_impl(void* dx, DType t, int64_t B, int64_t H, int64_t T, int64_t D, const TokenSpans& positions,
                          float theta) override;
  void softmax_forward_impl(void* probs, const float* scores, DType t, const AttnShape& s) override;
  void softmax_backward_impl(float* dscores, const float* dprobs, const void* probs, DType t,
                             const AttnShape& s) override;
  void dropout_forward_impl(void* out, uint8_t* mask, const void* x, DType t, int64_t n, float p, RngKey key) override;
  void dropout_backward_impl(void* dx, DType dx_t, const void* dout, DType dout_t, const uint8_t* mask, int64_t n,
                             float p) override;
  void flash_attention_forward_impl(void* out, float* lse, const void* q, const void* k, const void* v, DType t,
                                    const AttnShape& s, float p, RngKey key, const AttnBlock& blk) override;
  void flash_attention_backward_impl(void* dq, void* dk, void* dv, const void* dout, const void* q, const void* k,
                                     const void* v, const void* out, const float* lse, DType t, const AttnShape& s,
                                     float p, RngKey key, const AttnBlock& blk) override;
  void gelu_forward_impl(void* out, const void* x, DType t, int64_t n) override;
  void gelu_backward_impl(void* dx, const void* dout, const void* x, DType t, int64_t n) override;
  void swiglu_forward_impl(void* out, const void* gate, const void* up, DType t, int64_t n) override;
  void swiglu_backward_impl(void* dgate, void* dup, const void* dout, const void* gate, const void* up, DType t,
                            int64_t n) override;
  void cross_entropy_forward_impl(float* losses, const float* logits, const int32_t* targets, int64_t N, int64_t Vp,
                                  int64_t V) override;
  void cross_entropy_backward_impl(float* dlogits, const float* logits, const int32_t* targets, int64_t N, int64_t Vp,
                                   int64_t V, float scale) override;
  void optimizer_update_impl(float* master, void* weights, DType w_t, const void* grads, DType grad_t, float* state1,
                             float* state2, int64_t n, const OptimizerStep& update) override;
  double sum_squares_impl(const void* x, DType t, int64_t n) override;
  void kv_cache_write_impl(const KvCacheView& cache, const void* k, const void* v, DType t, bool calibrate) override;
  void cached_attention_impl(void* out, const void* q, DType t, int64_t Hq, const KvCacheView& cache) override;
  void vocab_embedding_forward_impl(void* out, const int32_t* ids, const void* wte, DType t, int64_t N, int64_t C,
                                    int64_t row_begin, int64_t rows) override;
  void vocab_embedding_backward_impl(void* dwte, DType grad_t, const void* dout, DType t, const int32_t* ids, int64_t N,
                                     int64_t C, int64_t row_begin, int64_t rows) override;
  void vocab_ce_stats_impl(float* row_max, float* target_logit, const float* logits, const int32_t* targets, int64_t N,
                           int64_t Vl, int64_t col_begin, int64_t V) override;
  void vocab_ce_exp_impl(float* logits, float* sum_exp, const float* row_max, int64_t N, int64_t Vl, int64_t col_begin,
                         int64_t V) override;
  void vocab_ce_normalize_impl(float* probs, const float* sum_exp, int64_t N, int64_t Vl) override;
  void vocab_ce_backward_impl(float* dlogits, const float* probs, const int32_t* targets, int64_t N, int64_t Vl,
                              int64_t col_begin, float scale) override;
  void* raw_alloc(int64_t bytes) override;
  void raw_free(void* p, int64_t bytes) override;
};

}  // namespace gpuledger
