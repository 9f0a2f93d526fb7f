// The skinny 16-bit GEMM of decode: C (m×n) = alpha · X (m×k) · W (k×n) + beta · C
// with m ≤ kSkinnyMaxRows, X the small operand (the tokens' activations)
// already widened to fp32, and W the large operand (a weight matrix) read in
// its stored 16-bit dtype. Each 8 values of W are widened to fp32 in vector
// registers (bf16: zero-extend and shift left 16; fp16: F16C's vcvtph2ps) and
// fused-multiply-added into fp32 accumulators, so every byte of W is read once
// from memory per call and nothing the size of W is ever written: decode is a
// stream over the weights (llama.cpp's ggml_vec_dot_bf16 and vLLM's CPU
// "skinny" GEMMs take the same route).
//
// W is addressed by element strides: W[p][j] at w[p·w_sp + j·w_sj], one of
// the two equal to 1.
//   w_sp == 1 (each output column j a contiguous row of W, the nn.Linear
//     forward, trans_b): "dot" form, a register tile of 3 activation rows × 4
//     weight rows (each widened W vector serves 3 tokens from registers),
//     8-lane partial sums reduced once at the end.
//   w_sj == 1 (W contiguous along the outputs, the data-gradient GEMM): "axpy"
//     form, a strip of 16 output columns × up to 6 activation rows held in
//     registers over a k slice of 512 (16 KiB of W in L1), the partial sums
//     kept in a 2 KiB tile on the stack between slices.
// C is addressed the same way (C[i][j] at c[i·c_si + j·c_sj]) in fp32, bf16 or
// fp16, written once per element as alpha·acc + beta·C (C not read when beta
// is 0, as in BLAS) and rounded once to its dtype.
//
// Threads: the n output columns are cut into one contiguous range per OpenMP
// thread (multiples of 16: the axpy strip), so each thread
// streams its own part of W; every element of C is one thread's full-k sum,
// independent of the thread count.
#pragma once
#include <cstdint>

#include "core/dtype.h"
#include "kernels/cpu/cpu_isa.h"

namespace gpuledger {

inline constexpr int64_t kSkinnyMaxRows = 32;

struct SkinnyGemm {
  int64_t m = 0, n = 0, k = 0;
  const float* x = nullptr;  // X (m×k) fp32, row i at x + i·k
  // Or X in bf16 (row i at x_bf16 + i·k) for the AVX512-BF16 dot form
  // (gemm_bf16_dot.h: bf16 W with w_sp == 1); x is then not read.
  const uint16_t* x_bf16 = nullptr;
  const uint16_t* w = nullptr;
  int64_t w_sp = 0, w_sj = 0;   // W[p][j] at w[p·w_sp + j·w_sj]; w_sp == 1 or w_sj == 1
  DType w_type = DType::kBF16;  // bf16 or fp16
  void* c = nullptr;
  int64_t c_si = 0, c_sj = 0;  // C[i][j] at c[i·c_si + j·c_sj] (elements)
  DType c_type = DType::kFP32;
  float alpha = 1.0f, beta = 0.0f;
};

// C[i][j] = alpha·v + beta·C[i][j] (C not read when beta is 0), rounded once to C's dtype.
inline void skinny_store_c(const SkinnyGemm& s, int64_t i, int64_t j, float v) {
  const int64_t e = i * s.c_si + j * s.c_sj;
  if (s.c_type == DType::kFP32) {
    float* c = static_cast<float*>(s.c) + e;
    *c = s.beta == 0.0f ? s.alpha * v : s.alpha * v + s.beta * *c;
    return;
  }
  uint16_t* c = static_cast<uint16_t*>(s.c) + e;
  const bool f16 = s.c_type == DType::kFP16;
  const float old = s.beta == 0.0f ? 0.0f : s.beta * (f16 ? fp16_to_fp32(*c) : bf16_to_fp32(*c));
  const float r = s.alpha * v + old;
  *c = f16 ? fp32_to_fp16(r) : fp32_to_bf16(r);
}

// Runs s on the given path, or on the AVX512-BF16 dot form when s.x_bf16 is
// set (throws std::invalid_argument for a path this CPU lacks, a W dtype that
// is not 16-bit, strides neither of which is 1, or x_bf16 with W not bf16 rows).
void skinny_gemm(const SkinnyGemm& s, CpuIsa isa);
inline void skinny_gemm(const SkinnyGemm& s) { skinny_gemm(s, cpu_best_isa()); }

class Device;
struct GemmArgs;
// Device::gemm's skinny route (kernels/cpu/ops_gemm.cpp). Takes g when A and B
// are 16-bit, k > 0, alpha != 0 and m or n is at most kSkinnyMaxRows, and
// returns true; otherwise does nothing and returns false. X is op(A) when
// m ≤ n (else op(B)ᵀ, C written transposed), copied per batch entry (once
// under a batch stride of 0) into booked Account::kWorkspace for the call:
// with bf16_dot (bf16 operands, W rows contiguous in k) as bf16 rows,
// `gemm.x_bf16`, 2·min(m, n)·k bytes; otherwise widened, `gemm.x_fp32`,
// 4·min(m, n)·k bytes. Every trans_a/trans_b, leading dimension, batch
// stride, alpha, beta and C dtype GemmArgs allows.
bool run_skinny_gemm(Device& dev, const GemmArgs& g, CpuIsa isa, bool bf16_dot);
bool run_skinny_gemm(Device& dev, const GemmArgs& g, CpuIsa isa);  // bf16_dot as bf16_dot_enabled()
inline bool run_skinny_gemm(Device& dev, const GemmArgs& g) { return run_skinny_gemm(dev, g, cpu_best_isa()); }

}  // namespace gpuledger
