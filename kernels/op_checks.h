// The argument checks of the op table, run once by Device's entry points
// (kernels/device_ops.cpp) before any backend's <op>_impl, so every backend —
// cpu, meta and cuda — rejects a bad call with the same std::invalid_argument,
// whose message names the op. Only what the host can see is checked here
// (sizes, shapes, probabilities, the cache view, the targets read back); limits
// of one backend (cuBLAS's int ranges, CUDA shared memory) stay with it.
#pragma once
#include <cstdint>

#include "kernels/device.h"
#include "kernels/kv_storage.h"

namespace gpuledger {

// Non-negative sizes, C fp32 or the dtype of A and B, leading dimensions at
// least the stored row length (BLAS's rules).
void check_gemm_args(const GemmArgs& g);

// Positive B, Hq, Hkv, T, D; Hq a multiple of Hkv (GQA); a window of at least 1.
// Every op that takes an AttnShape calls it.
void check_attn_shape(const AttnShape& s, const char* op);

// Positions of T tokens (attn_block.h): non-negative, and a second span, when
// T reaches it, after the first (split >= 1, second_start >= start + split).
void check_token_spans(const TokenSpans& p, int64_t T, const char* op);

// One flash block (attn_block.h), returned with Tk and seq resolved (0 -> T):
// Tk >= 1, seq >= T and Tk, both sides' positions checked and inside [0, seq),
// no window without the causal mask.
AttnBlock checked_attn_block(const AttnShape& s, const AttnBlock& blk, const char* op);

// A dropout probability in [0, 1].
void check_dropout_p(float p, const char* op);

// gpt-oss's clamped GLU: a positive alpha and limit.
void check_glu_clamp(float alpha, float limit, const char* op);

// The blockwise FP8 cast's blocks: at least 1 × 1.
void check_fp8_blocks(int64_t block_rows, int64_t block_cols, const char* op);

// An even head dimension (RoPE rotates pairs) and a positive theta base.
void check_rope_args(int64_t D, float theta, const char* op);

// 0 < V <= Vp, and every target in [0, V): the N targets are read back through
// d.copy_to_host (zeros on meta), so a bad target is an exception on every
// backend rather than an out-of-bounds read on the device.
void check_cross_entropy_args(Device& d, const int32_t* targets, int64_t N, int64_t Vp, int64_t V);

// Checks of pointers apply only to a device that has memory (`has_memory`:
// Device::touches_memory()); on meta every pointer is null.

// The view (validate_kv_view), and with memory, that each sequence with new
// tokens has cache memory and fixed scales exist where the format needs them.
void check_kv_cache_write_args(const KvCacheView& c, bool has_memory);
// The view, Hq a positive multiple of c.Hkv, and as kv_cache_write for the
// sequences with queries.
void check_cached_attention_args(int64_t Hq, const KvCacheView& c, bool has_memory);

// With memory: fp32 weights when there is no master copy (master == nullptr),
// and the rule's optimizer_state_count(h) states given. Messages start with the
// optimizer's name.
void check_optimizer_buffers(const OptimizerHyper& h, const float* master, const void* weights, DType w_t,
                             const float* state1, const float* state2);
// The checked step: step >= 1, and for AdamW the bias corrections 1 − β^t formed in double.
OptimizerStep optimizer_step(const OptimizerHyper& h, int64_t step, float grad_scale);

}  // namespace gpuledger
