// The skinny GEMM's loops (kernels/cpu/gemm_skinny.h), written once and
// compiled once per ISA by gemm_skinny.cpp, each time inside that ISA's namespace. No include guard, for that reason.

#include "kernels/cpu/simd_body.h"  // the vectors, loads and multiply-adds, in this namespace too

#define GPL_SKINNY_INLINE GPL_SIMD_INLINE
// Every loop over a register tile's rows or columns is unrolled whatever the
// optimization level, so its accumulators stay in registers (at -O2, the
// sanitizer build's level for these kernels, GCC otherwise keeps them in a
// stack array and stores after every multiply-add).
#define GPL_UNROLL_TILE _Pragma("GCC unroll 8")

template <bool kFp16>
GPL_SKINNY_INLINE V8 load_w(const uint16_t* p) {
  return kFp16 ? load_fp16(p) : load_bf16(p);
}
template <bool kFp16>
GPL_SKINNY_INLINE float scalar_w(uint16_t v) {
  return kFp16 ? fp16_to_fp32(v) : bf16_to_fp32(v);
}

// ---- dot form (w_sp == 1): C[i][j] = Σ_p X[i][p]·W[j-th row][p] ----
//
// Register tile: 3 rows of X × 4 rows of W, 12 8-lane accumulators, the 3 X
// vectors of a step and one widened W vector at a time: all 16 of AVX2's ymm
// registers, 7 loads per 12 multiply-adds, each widened W vector serving 3
// tokens. (The 4 × 2 tile this replaced folds its X loads into the FMAs, 10
// loads per 8: 20–25% slower at 8 to 32 tokens, one thread of this Zen 3,
// thread CPU time.) The W rows of a tile (4·k·2 bytes, ≤ 112 KiB at k = 14336)
// come from memory for the first 3 tokens and from L2 for the others, so W
// streams from memory once per call for every m.

template <bool kFp16, int IB, int JB>
GPL_SKINNY_INLINE void dot_tile(const SkinnyGemm& s, int64_t i0, int64_t j0) {
  const int64_t k = s.k, k8 = k & ~int64_t{7};
  const float* xr[IB];
  const uint16_t* wr[JB];
  GPL_UNROLL_TILE
  for (int ib = 0; ib < IB; ++ib) xr[ib] = s.x + (i0 + ib) * k;
  GPL_UNROLL_TILE
  for (int jb = 0; jb < JB; ++jb) wr[jb] = s.w + (j0 + jb) * s.w_sj;
  V8 acc[IB][JB];
  GPL_UNROLL_TILE
  for (int ib = 0; ib < IB; ++ib) GPL_UNROLL_TILE
  for (int jb = 0; jb < JB; ++jb) acc[ib][jb] = V8{};
  for (int64_t p = 0; p < k8; p += 8) {
    V8 xv[IB];
    GPL_UNROLL_TILE
    for (int ib = 0; ib < IB; ++ib) xv[ib] = load_f32(xr[ib] + p);
    GPL_UNROLL_TILE
    for (int jb = 0; jb < JB; ++jb) {
      const V8 wv = load_w<kFp16>(wr[jb] + p);
      GPL_UNROLL_TILE
      for (int ib = 0; ib < IB; ++ib) acc[ib][jb] = fma8(acc[ib][jb], xv[ib], wv);
    }
  }
  GPL_UNROLL_TILE
  for (int ib = 0; ib < IB; ++ib) GPL_UNROLL_TILE
  for (int jb = 0; jb < JB; ++jb) {
    float v = hsum(acc[ib][jb]);
    for (int64_t p = k8; p < k; ++p) v += xr[ib][p] * scalar_w<kFp16>(wr[jb][p]);
    skinny_store_c(s, i0 + ib, j0 + jb, v);
  }
}

// All m rows of X against weight rows j0 … j0+JB: 3 rows at a time, then the rest.
template <bool kFp16, int JB>
GPL_SKINNY_INLINE void dot_rows(const SkinnyGemm& s, int64_t j0) {
  int64_t i = 0;
  for (; i + 3 <= s.m; i += 3) dot_tile<kFp16, 3, JB>(s, i, j0);
  switch (s.m - i) {
    case 2: dot_tile<kFp16, 2, JB>(s, i, j0); break;
    case 1: dot_tile<kFp16, 1, JB>(s, i, j0); break;
    default: break;
  }
}

template <bool kFp16>
GPL_SKINNY_INLINE void dot_range(const SkinnyGemm& s, int64_t lo, int64_t hi) {
  int64_t j = lo;
  for (; j + 4 <= hi; j += 4) dot_rows<kFp16, 4>(s, j);
  for (; j + 2 <= hi; j += 2) dot_rows<kFp16, 2>(s, j);
  if (j < hi) dot_rows<kFp16, 1>(s, j);
}

// ---- axpy form (w_sj == 1): C[i][j0:j0+16] = Σ_p X[i][p]·W[p][j0:j0+16] ----

constexpr int64_t kAxpyCols = 16;    // two 8-lane vectors of outputs
constexpr int64_t kAxpyRows = 6;     // 12 accumulators: AVX2 has 16 registers
constexpr int64_t kAxpySlice = 512;  // k per slice: 512 × 16 × 2 bytes = 16 KiB of W

// Rows i0 … i0+IB over k slice p0 … p0+kc, partial sums in tile (rows of 16).
template <bool kFp16, int IB>
GPL_SKINNY_INLINE void axpy_tile(const SkinnyGemm& s, int64_t i0, int64_t j0, int64_t p0, int64_t kc, float* tile) {
  V8 acc[IB][2];
  GPL_UNROLL_TILE
  for (int ib = 0; ib < IB; ++ib) {
    acc[ib][0] = load_f32(tile + (i0 + ib) * kAxpyCols);
    acc[ib][1] = load_f32(tile + (i0 + ib) * kAxpyCols + 8);
  }
  const float* x = s.x + i0 * s.k;
  for (int64_t p = p0; p < p0 + kc; ++p) {
    const uint16_t* wp = s.w + p * s.w_sp + j0;
    const V8 w0 = load_w<kFp16>(wp), w1 = load_w<kFp16>(wp + 8);
    GPL_UNROLL_TILE
    for (int ib = 0; ib < IB; ++ib) {
      const V8 xb = splat(x[ib * s.k + p]);
      acc[ib][0] = fma8(acc[ib][0], xb, w0);
      acc[ib][1] = fma8(acc[ib][1], xb, w1);
    }
  }
  GPL_UNROLL_TILE
  for (int ib = 0; ib < IB; ++ib) {
    std::memcpy(tile + (i0 + ib) * kAxpyCols, &acc[ib][0], sizeof(V8));
    std::memcpy(tile + (i0 + ib) * kAxpyCols + 8, &acc[ib][1], sizeof(V8));
  }
}

template <bool kFp16>
GPL_SKINNY_INLINE void axpy_strip(const SkinnyGemm& s, int64_t j0) {
  alignas(32) float tile[kSkinnyMaxRows * kAxpyCols] = {};
  for (int64_t p0 = 0; p0 < s.k; p0 += kAxpySlice) {
    const int64_t kc = std::min(kAxpySlice, s.k - p0);
    int64_t i = 0;
    for (; i + kAxpyRows <= s.m; i += kAxpyRows) axpy_tile<kFp16, kAxpyRows>(s, i, j0, p0, kc, tile);
    switch (s.m - i) {
      case 5: axpy_tile<kFp16, 5>(s, i, j0, p0, kc, tile); break;
      case 4: axpy_tile<kFp16, 4>(s, i, j0, p0, kc, tile); break;
      case 3: axpy_tile<kFp16, 3>(s, i, j0, p0, kc, tile); break;
      case 2: axpy_tile<kFp16, 2>(s, i, j0, p0, kc, tile); break;
      case 1: axpy_tile<kFp16, 1>(s, i, j0, p0, kc, tile); break;
      default: break;
    }
  }
  for (int64_t i = 0; i < s.m; ++i)
    for (int64_t jj = 0; jj < kAxpyCols; ++jj) skinny_store_c(s, i, j0 + jj, tile[i * kAxpyCols + jj]);
}

template <bool kFp16>
GPL_SKINNY_INLINE void axpy_range(const SkinnyGemm& s, int64_t lo, int64_t hi) {
  int64_t j = lo;
  for (; j + kAxpyCols <= hi; j += kAxpyCols) axpy_strip<kFp16>(s, j);
  // The last columns (fewer than 16): one scalar sum each, W read with stride w_sp.
  for (; j < hi; ++j)
    for (int64_t i = 0; i < s.m; ++i) {
      float v = 0.0f;
      for (int64_t p = 0; p < s.k; ++p) v += s.x[i * s.k + p] * scalar_w<kFp16>(s.w[p * s.w_sp + j]);
      skinny_store_c(s, i, j, v);
    }
}

// Output columns lo … hi of s.
template <bool kFp16>
void run_range_t(const SkinnyGemm& s, int64_t lo, int64_t hi) {
  if (s.w_sp == 1)
    dot_range<kFp16>(s, lo, hi);
  else
    axpy_range<kFp16>(s, lo, hi);
}

void run_range(const SkinnyGemm& s, int64_t lo, int64_t hi) {
  if (s.w_type == DType::kFP16)
    run_range_t<true>(s, lo, hi);
  else
    run_range_t<false>(s, lo, hi);
}

#undef GPL_SKINNY_INLINE
#undef GPL_UNROLL_TILE
