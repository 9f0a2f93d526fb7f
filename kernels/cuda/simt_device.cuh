// SimtDevice: the op table of device.h as CUDA kernels (each op's <op>_impl),
// except the GEMM and memory, which belong to the concrete backend. CudaDevice
// (cuda_device.cuh) adds device memory, a stream and cuBLASLt GEMMs; the
// test-only EmuDevice (tests/gpu) adds host memory and runs these very kernels
// on the CPU emulator. Each op has the semantics of the CPU reference
// (kernels/cpu/ops_*.cpp): same masks, same Philox draws, same rounding points
// (fp32 compute, one rounding to the storage dtype).
//
// The op bodies live beside their kernels, one file per family as on the CPU:
// ops_elementwise.cu, ops_norm.cu, ops_embedding.cu, ops_loss.cu,
// ops_optim.cu, ops_attention.cu, ops_rope.cu, ops_dropout.cu,
// ops_activation.cu, ops_flash.cu, ops_kv_cache.cu, ops_vocab_parallel.cu.
//
// Temporaries an op needs (column-sum partials, grouping tables, reduction
// partials, flash's D_i) are allocated through Device::alloc under
// Account::kWorkspace, so the ledger sees them; they are freed when the op
// returns (stream-ordered on CUDA, so a kernel still running keeps them valid).
#pragma once
#include <cstdint>

#include "kernels/cuda/simt.cuh"
#include "kernels/device.h"

namespace gpuledger {
inline namespace GPL_SIMT_NAMESPACE {

class SimtDevice : public Device {
 public:
  explicit SimtDevice(Ledger& ledger) : Device(ledger) {}

 protected:
  void convert_impl(void* dst, DType dst_t, const void* src, DType src_t, int64_t n) override;
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
  // The stream every kernel is launched on (nullptr: the default stream; the
  // emulator ignores it).
  cudaStream_t stream() const { return stream_; }
  // C_i (m×n, ldc) = beta·C_i for i < batch (stride_c elements apart); beta == 0
  // writes zeros without reading C (BLAS semantics). The GEMM's k == 0 or
  // alpha == 0 case. In ops_elementwise.cu.
  void scale_matrices(void* c, DType t, int64_t m, int64_t n, int64_t ldc, int64_t stride_c, int64_t batch, float beta);

  cudaStream_t stream_ = nullptr;
  // The most dynamic shared memory one block may use (the device's opt-in
  // limit); flash attention checks its tiles against it.
  int64_t max_smem_per_block_bytes_ = 48 * 1024;
};

}  // namespace GPL_SIMT_NAMESPACE
}  // namespace gpuledger
