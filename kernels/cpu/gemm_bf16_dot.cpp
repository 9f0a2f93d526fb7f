// See gemm_bf16_dot.h. The vdpbf16ps loops are compiled for AVX512F +
// AVX512BW + AVX512_BF16 by function attribute (the build targets baseline
// x86-64) and called only after cpu_has_bf16_dot().
#include "kernels/cpu/gemm_bf16_dot.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

#include "core/int_math.h"
#include "kernels/cpu/gemm_skinny.h"

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 10
#include <immintrin.h>
#define GPL_HAVE_BF16_DOT 1
#define GPL_BF16_DOT_TARGET __attribute__((target("avx512f,avx512bw,avx512bf16")))
#endif

namespace gpuledger {

bool cpu_has_bf16_dot() {
#ifdef GPL_HAVE_BF16_DOT
  static const bool has =
      __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512bf16");
  return has;
#else
  return false;
#endif
}

namespace {
std::atomic<int> g_bf16_dot{-1};  // -1: not read yet; 0 off; 1 on
}  // namespace

bool bf16_dot_enabled() {
  int v = g_bf16_dot.load(std::memory_order_relaxed);
  if (v < 0) {
    const char* env = std::getenv("GPULEDGER_BF16_DOT");
    v = cpu_has_bf16_dot() && !(env != nullptr && std::strcmp(env, "0") == 0) ? 1 : 0;
    g_bf16_dot.store(v, std::memory_order_relaxed);
  }
  return v == 1;
}

void set_bf16_dot_enabled(bool on) { g_bf16_dot.store(on && cpu_has_bf16_dot() ? 1 : 0, std::memory_order_relaxed); }

namespace {
// Words of ⌈count/lanes⌉ panels of ⌈kc/2⌉ × lanes pairs.
int64_t panel_words(int64_t count, int64_t kc, int64_t lanes) {
  return ceil_div(count, lanes) * lanes * ceil_div(kc, 2);
}
}  // namespace

int64_t bf16_dot_a_words(int64_t mc, int64_t kc) { return panel_words(mc, kc, kBf16DotMR); }
int64_t bf16_dot_b_words(int64_t kc, int64_t nc) { return panel_words(nc, kc, kBf16DotNR); }

namespace {

// (lo, hi) -> one 32-bit word, lo in the low half (the value at the even k).
inline uint32_t pair(uint16_t lo, uint16_t hi) { return static_cast<uint32_t>(lo) | static_cast<uint32_t>(hi) << 16; }

// A line of op(·) contiguous in k (a row of A, a column of op(B) = Bᵀ) into
// the panel's lane `lane` of `lanes`: its pairs are adjacent 16-bit values,
// copied as 32-bit words; an odd k's last pair gets a zero high half.
inline void pack_contiguous_line(const uint16_t* line, int64_t kc, int64_t lanes, int64_t lane, uint32_t* panel) {
  const int64_t full = kc / 2;
  for (int64_t q = 0; q < full; ++q) {
    uint32_t w;
    std::memcpy(&w, line + 2 * q, sizeof w);  // little-endian: the value at 2q in the low half
    panel[q * lanes + lane] = w;
  }
  if (kc % 2 != 0) panel[full * lanes + lane] = pair(line[kc - 1], 0);
}

// Lines of op(·) that cross k (rows p, p+1 of B; of A for op(A) = Aᵀ), each
// contiguous along the panel's lanes: lanes [0, count) from lo/hi, the rest 0.
inline void pack_crossing_lines(const uint16_t* lo, const uint16_t* hi, int64_t count, int64_t lanes, uint32_t* row) {
  if (hi != nullptr)
    for (int64_t l = 0; l < count; ++l) row[l] = pair(lo[l], hi[l]);
  else
    for (int64_t l = 0; l < count; ++l) row[l] = pair(lo[l], 0);
  for (int64_t l = count; l < lanes; ++l) row[l] = 0;
}

// Lanes [count, lanes) of every pair row of a panel: zero (rows or columns past the edge).
inline void zero_lanes(int64_t kq, int64_t count, int64_t lanes, uint32_t* panel) {
  if (count == lanes) return;
  for (int64_t q = 0; q < kq; ++q) std::fill(panel + q * lanes + count, panel + (q + 1) * lanes, 0u);
}

}  // namespace

namespace {

// count lines of kc values into ⌈count/lanes⌉ panels of ⌈kc/2⌉ × lanes pairs:
// line l's value at p is x[l·ld + p] when lines_contiguous (a row of A, a
// column of op(B) = Bᵀ), else x[p·ld + l].
void pack_panels(const uint16_t* x, int64_t ld, bool lines_contiguous, int64_t count, int64_t kc, int64_t lanes,
                 uint32_t* out) {
  const int64_t kq = ceil_div(kc, 2);
  for (int64_t l0 = 0; l0 < count; l0 += lanes) {
    uint32_t* panel = out + l0 * kq;  // kq × lanes words
    const int64_t here = std::min(lanes, count - l0);
    if (lines_contiguous) {
      for (int64_t l = 0; l < here; ++l) pack_contiguous_line(x + (l0 + l) * ld, kc, lanes, l, panel);
      zero_lanes(kq, here, lanes, panel);
    } else {  // a pair joins rows 2q and 2q+1 of x
      for (int64_t q = 0; q < kq; ++q) {
        const uint16_t* lo = x + 2 * q * ld + l0;
        pack_crossing_lines(lo, 2 * q + 1 < kc ? lo + ld : nullptr, here, lanes, panel + q * lanes);
      }
    }
  }
}

}  // namespace

void bf16_dot_pack_a(const uint16_t* a, int64_t lda, bool ta, int64_t mc, int64_t kc, uint32_t* ap) {
  pack_panels(a, lda, /*lines_contiguous=*/!ta, mc, kc, kBf16DotMR, ap);
}

void bf16_dot_pack_b(const uint16_t* b, int64_t ldb, bool tb, int64_t kc, int64_t nc, uint32_t* bp) {
  pack_panels(b, ldb, /*lines_contiguous=*/tb, nc, kc, kBf16DotNR, bp);
}

#ifdef GPL_HAVE_BF16_DOT
namespace {

// k pairs per pass over the panels: a B panel of 128 × 32 words (16 KiB)
// stays in L1 while every A panel of the slice runs against it.
constexpr int64_t kPairsPerPass = 128;

// out (MR × NR) = Σ_q A-panel[q] ⊗ B-panel[q] over kq pairs: each A pair
// broadcast to 16 lanes, two B vectors per pair, 24 accumulators.
GPL_BF16_DOT_TARGET void dot_tile(int64_t kq, const uint32_t* ap, const uint32_t* bp,
                                  float (&out)[kBf16DotMR][kBf16DotNR]) {
  __m512 acc[kBf16DotMR][2];
#pragma GCC unroll 12
  for (int r = 0; r < kBf16DotMR; ++r) acc[r][0] = acc[r][1] = _mm512_setzero_ps();
  for (int64_t q = 0; q < kq; ++q) {
    const __m512bh b0 = (__m512bh)_mm512_loadu_si512(bp + q * kBf16DotNR);
    const __m512bh b1 = (__m512bh)_mm512_loadu_si512(bp + q * kBf16DotNR + 16);
#pragma GCC unroll 12
    for (int r = 0; r < kBf16DotMR; ++r) {
      const __m512bh av = (__m512bh)_mm512_set1_epi32(static_cast<int>(ap[q * kBf16DotMR + r]));
      acc[r][0] = _mm512_dpbf16_ps(acc[r][0], av, b0);
      acc[r][1] = _mm512_dpbf16_ps(acc[r][1], av, b1);
    }
  }
#pragma GCC unroll 12
  for (int r = 0; r < kBf16DotMR; ++r) {
    _mm512_storeu_ps(out[r], acc[r][0]);
    _mm512_storeu_ps(out[r] + 16, acc[r][1]);
  }
}

}  // namespace
#endif

void bf16_dot_multiply(const uint32_t* ap, const uint32_t* bp, int64_t mc, int64_t nc, int64_t kc, float alpha,
                       float beta, float* c, int64_t ldc) {
#ifdef GPL_HAVE_BF16_DOT
  if (!cpu_has_bf16_dot()) throw std::logic_error("bf16_dot_multiply: this CPU lacks AVX512_BF16");
  const int64_t kq = ceil_div(kc, 2);
  alignas(64) float acc[kBf16DotMR][kBf16DotNR];
  for (int64_t q0 = 0; q0 < kq; q0 += kPairsPerPass) {
    const int64_t qn = std::min(kPairsPerPass, kq - q0);
    const float b = q0 == 0 ? beta : 1.0f;
    for (int64_t jr = 0; jr < nc; jr += kBf16DotNR) {
      const int64_t cols = std::min(kBf16DotNR, nc - jr);
      for (int64_t ir = 0; ir < mc; ir += kBf16DotMR) {
        dot_tile(qn, ap + ir * kq + q0 * kBf16DotMR, bp + jr * kq + q0 * kBf16DotNR, acc);
        const int64_t rows = std::min(kBf16DotMR, mc - ir);
        for (int64_t r = 0; r < rows; ++r) {
          float* crow = c + (ir + r) * ldc + jr;
          if (b == 0.0f)  // C not read (it may hold NaN), as in BLAS
            for (int64_t j = 0; j < cols; ++j) crow[j] = alpha * acc[r][j];
          else
            for (int64_t j = 0; j < cols; ++j) crow[j] = alpha * acc[r][j] + b * crow[j];
        }
      }
    }
  }
#else
  (void)ap, (void)bp, (void)mc, (void)nc, (void)kc, (void)alpha, (void)beta, (void)c, (void)ldc;
  throw std::logic_error("bf16_dot_multiply: not built for this compiler or architecture");
#endif
}

#ifdef GPL_HAVE_BF16_DOT
namespace {

// 32 values of a row from p on (the last step masked: lanes past k read as 0).
GPL_BF16_DOT_TARGET inline __m512bh load32(const uint16_t* row, int64_t p, int64_t k) {
  if (p + 32 <= k) return (__m512bh)_mm512_loadu_si512(row + p);
  const __mmask32 m = (__mmask32)((uint64_t{1} << (k - p)) - 1);
  return (__m512bh)_mm512_maskz_loadu_epi16(m, row + p);
}

// The 16 lanes' sum (stored and added: GCC 12's _mm512_reduce_add_ps trips
// its own -Wmaybe-uninitialized on _mm256_undefined_pd).
GPL_BF16_DOT_TARGET inline float lane_sum(__m512 v) {
  alignas(64) float t[16];
  _mm512_store_ps(t, v);
  float s = 0.0f;
  for (float x : t) s += x;
  return s;
}

// Token rows i0 … i0+IB against weight rows j0 … j0+JB, the whole k.
template <int IB, int JB>
GPL_BF16_DOT_TARGET void skinny_tile(const SkinnyGemm& s, int64_t i0, int64_t j0) {
  __m512 acc[IB][JB];
#pragma GCC unroll 8
  for (int ib = 0; ib < IB; ++ib)
#pragma GCC unroll 8
    for (int jb = 0; jb < JB; ++jb) acc[ib][jb] = _mm512_setzero_ps();
  for (int64_t p = 0; p < s.k; p += 32) {
    __m512bh xv[IB];
#pragma GCC unroll 8
    for (int ib = 0; ib < IB; ++ib) xv[ib] = load32(s.x_bf16 + (i0 + ib) * s.k, p, s.k);
#pragma GCC unroll 8
    for (int jb = 0; jb < JB; ++jb) {
      const __m512bh wv = load32(s.w + (j0 + jb) * s.w_sj, p, s.k);
#pragma GCC unroll 8
      for (int ib = 0; ib < IB; ++ib) acc[ib][jb] = _mm512_dpbf16_ps(acc[ib][jb], xv[ib], wv);
    }
  }
#pragma GCC unroll 8
  for (int ib = 0; ib < IB; ++ib)
#pragma GCC unroll 8
    for (int jb = 0; jb < JB; ++jb) skinny_store_c(s, i0 + ib, j0 + jb, lane_sum(acc[ib][jb]));
}

// Every token row against weight rows j0 … j0+JB: 4 rows a tile, then the rest.
template <int JB>
GPL_BF16_DOT_TARGET void skinny_rows(const SkinnyGemm& s, int64_t j0) {
  int64_t i = 0;
  for (; i + 4 <= s.m; i += 4) skinny_tile<4, JB>(s, i, j0);
  switch (s.m - i) {
    case 3: skinny_tile<3, JB>(s, i, j0); break;
    case 2: skinny_tile<2, JB>(s, i, j0); break;
    case 1: skinny_tile<1, JB>(s, i, j0); break;
    default: break;
  }
}

}  // namespace
#endif

// Tile: 4 token rows × 4 weight rows, 16 accumulators of 16 lanes; each
// weight vector serves 4 tokens from registers, each token vector 4 weight rows.
void bf16_dot_skinny_range(const SkinnyGemm& s, int64_t lo, int64_t hi) {
#ifdef GPL_HAVE_BF16_DOT
  if (!cpu_has_bf16_dot()) throw std::logic_error("bf16_dot_skinny_range: this CPU lacks AVX512_BF16");
  if (s.x_bf16 == nullptr || s.w_sp != 1 || s.w_type != DType::kBF16)
    throw std::logic_error("bf16_dot_skinny_range: needs bf16 tokens (x_bf16) and bf16 weight rows contiguous in k");
  int64_t j = lo;
  for (; j + 4 <= hi; j += 4) skinny_rows<4>(s, j);
  for (; j < hi; ++j) skinny_rows<1>(s, j);
#else
  (void)s, (void)lo, (void)hi;
  throw std::logic_error("bf16_dot_skinny_range: not built for this compiler or architecture");
#endif
}

}  // namespace gpuledger
