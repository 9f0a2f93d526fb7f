// bf16 GEMMs in the CPU's own bf16 arithmetic: AVX512-BF16's vdpbf16ps, which
// multiplies 16 pairs of bf16 values by 16 pairs and adds each pair's two
// products into one fp32 lane (Intel SDM, VDPBF16PS; Cooper Lake, Sapphire
// Rapids, AMD Zen 4 and later). Per instruction that is twice the multiply-adds
// of an fp32 FMA of the same width, and the operands are never widened.
//
// Two users:
//  - the blocked route of kernels/cpu/ops_gemm.cpp: per C tile and k slice,
//    op(A) and op(B) are packed into pair panels (bf16_dot_pack_a/b) in a
//    booked workspace, and bf16_dot_multiply runs a 12×32 register tile over
//    them (24 of AVX-512's 32 registers accumulate; Goto & van de Geijn's
//    micro-kernel with k advancing two at a time);
//  - the skinny route of decode (gemm_skinny.h): bf16_dot_skinny_range, a
//    dot product of each token row with each weight row, 32 values a step.
// The pair (p, p+1) is one 32-bit word: (value at p) in the low half, (p+1)
// in the high half; an odd k is padded with a zero pair half.
//
// Rounding: each product of two bf16 values is exact in fp32; vdpbf16ps adds
// them with round-to-nearest-even and treats denormal inputs and outputs as
// zero. The sums therefore differ from the widen-then-sgemm route in the
// last bits (fp32 accumulation either way).
#pragma once
#include <cstdint>

namespace gpuledger {

struct SkinnyGemm;

// Whether this CPU runs vdpbf16ps on 512-bit vectors (AVX512F, AVX512BW and
// AVX512_BF16) and this compiler builds the path.
bool cpu_has_bf16_dot();
// Whether the gemm routes take it: cpu_has_bf16_dot() unless the environment
// sets GPULEDGER_BF16_DOT=0 (to measure the widening route on the same
// machine). The environment is read once; set_bf16_dot_enabled switches the
// route for the whole process (tests and `gpuledger peak` measure both), and
// cannot turn it on where the CPU lacks it.
bool bf16_dot_enabled();
void set_bf16_dot_enabled(bool on);

inline constexpr int64_t kBf16DotMR = 12;  // rows of a register tile
inline constexpr int64_t kBf16DotNR = 32;  // columns: two 16-lane vectors

// 32-bit words of the packed panels of an mc×kc slice of op(A) and of a kc×nc
// slice of op(B) (rows and columns rounded up to whole panels, k to pairs).
int64_t bf16_dot_a_words(int64_t mc, int64_t kc);
int64_t bf16_dot_b_words(int64_t kc, int64_t nc);

// Packs op(A)[0:mc, 0:kc] (a at its first element; A row-major with leading
// dimension lda, transposed when ta) into ⌈mc/12⌉ panels of ⌈kc/2⌉ × 12 pairs.
void bf16_dot_pack_a(const uint16_t* a, int64_t lda, bool ta, int64_t mc, int64_t kc, uint32_t* ap);
// Packs op(B)[0:kc, 0:nc] into ⌈nc/32⌉ panels of ⌈kc/2⌉ × 32 pairs.
void bf16_dot_pack_b(const uint16_t* b, int64_t ldb, bool tb, int64_t kc, int64_t nc, uint32_t* bp);

// C (mc×nc, fp32, leading dimension ldc) = alpha·op(A)·op(B) + beta·C over
// the packed slices (beta 0: C not read). Throws std::logic_error where the
// CPU lacks the path.
void bf16_dot_multiply(const uint32_t* ap, const uint32_t* bp, int64_t mc, int64_t nc, int64_t kc, float alpha,
                       float beta, float* c, int64_t ldc);

// The skinny GEMM's dot form (s.w_sp == 1, bf16 W) over output columns
// [lo, hi), the token rows in bf16 at s.x_bf16 (row i at s.x_bf16 + i·s.k).
// s.x is not read.
void bf16_dot_skinny_range(const SkinnyGemm& s, int64_t lo, int64_t hi);

}  // namespace gpuledger
