// The 16-bit GEMM routes of the cpu backend (kernels/cpu/ops_gemm.cpp) against
// the double-precision reference of gemm_case.h (tolerance stated there):
//  - the skinny kernel (gemm_skinny.h) on each path this CPU runs (portable
//    always; AVX2+FMA+F16C where present), for m ∈ {1, 2, 3, 4, 5, 7, 8, 9,
//    16, 31, 32} (every remainder of the register tiles' rows), n and k not
//    multiples of 8 (k also past the 512-long axpy slice), the four transpose
//    combinations, padded leading dimensions, batch gaps and stride-0
//    operands, alpha/beta (beta 0 with C NaN), bf16 and fp16 operands with an
//    fp32 or a 16-bit C (GemmArgs allows fp32 or the operands' dtype);
//  - the transposed skinny route (n ≤ 32 < m) and the blocked route (m and n
//    over 32) through Device::gemm, sizes crossing the 512 blocks;
//  - the workspace each route books, to the byte;
//  - where the CPU has AVX512-BF16, each case again with bf16 operands kept in
//    bf16 and multiplied by vdpbf16ps (gemm_bf16_dot.h): the skinny dot form
//    and the blocked route's pair panels, with the workspace they book.
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "kernels/cpu/gemm_bf16_dot.h"
#include "tests/kernels/gemm_case.h"

#ifdef _OPENMP
#include <omp.h>
#endif

namespace gpuledger {
namespace {

using gemm_test::Case;
using gemm_test::run_case;

std::vector<CpuIsa> paths_here() {
  std::vector<CpuIsa> p{CpuIsa::kPortable};
  if (cpu_best_isa() != CpuIsa::kPortable) p.push_back(cpu_best_isa());
  return p;
}

// Runs f(dot) with Device::gemm's bf16 route widening (dot false) and, where
// the CPU has AVX512-BF16, multiplying bf16 pairs (dot true); then restores it.
template <class F>
void for_each_bf16_route(F f) {
  const bool before = bf16_dot_enabled();
  for (bool dot : {false, true}) {
    if (dot && !cpu_has_bf16_dot()) continue;
    SCOPED_TRACE(dot ? "bf16 pairs (vdpbf16ps)" : "widened to fp32");
    set_bf16_dot_enabled(dot);
    f(dot);
  }
  set_bf16_dot_enabled(before);
}

int64_t round_up(int64_t x, int64_t r) { return (x + r - 1) / r * r; }
// 4-byte words of the blocked route's bf16 pair panels: rows to 12, columns to 32, k to pairs.
int64_t pair_panel_words(int64_t mb, int64_t nb, int64_t kb) {
  return round_up(mb, 12) * round_up(kb, 2) / 2 + round_up(nb, 32) * round_up(kb, 2) / 2;
}

// Row counts of X: every remainder of the 3-row dot tile and of the 6-row axpy tile, 1 to kSkinnyMaxRows.
constexpr int64_t kRowCounts[] = {1, 2, 3, 4, 5, 7, 8, 9, 16, 31, 32};

// One skinny case on every path and in every dtype combination.
void skinny_everywhere(Case c) {
  for (CpuIsa isa : paths_here())
    for (DType ab : {DType::kBF16, DType::kFP16})
      for (DType ct : {DType::kFP32, ab}) {
        SCOPED_TRACE(testing::Message() << cpu_isa_name(isa) << " " << dtype_name(ab) << " -> " << dtype_name(ct));
        c.skinny = isa;
        c.ab = ab;
        c.c = ct;
        c.bf16_dot = false;
        run_case(c);
        // The dot form: bf16 weight rows contiguous in k (op(B) = Bᵀ, or op(A)ᵀ when X = op(B)ᵀ).
        const bool w_rows = c.m <= c.n ? c.tb : !c.ta;
        if (ab == DType::kBF16 && w_rows && cpu_has_bf16_dot()) {
          SCOPED_TRACE("bf16 dot form");
          c.bf16_dot = true;
          run_case(c);
        }
      }
}

TEST(Gemm16Bit, SkinnyKernelEveryTransposeAndRowCount) {
  for (int64_t m : kRowCounts)
    for (bool ta : {false, true})
      for (bool tb : {false, true}) {
        SCOPED_TRACE(testing::Message() << "m " << m << " ta " << ta << " tb " << tb);
        Case c;
        c.m = m;
        c.n = 37;  // the axpy form: two 16-column strips and a 5-column tail; dot: nine 4-row tiles and one row
        c.k = 45;  // 5 vectors of 8 and a tail of 5
        c.ta = ta;
        c.tb = tb;
        c.lda_pad = 3;
        c.ldb_pad = 1;
        c.ldc_pad = 2;
        c.batch = 2;
        c.gap_a = 5;
        c.gap_b = 3;
        c.gap_c = 4;
        c.alpha = 0.75f;
        c.beta = 0.5f;
        skinny_everywhere(c);
      }
}

TEST(Gemm16Bit, SkinnyKernelLongKCrossesTheAxpySlice) {
  // k = 1031: two full 512 slices and a 7-long one (axpy), 128 vectors and a tail of 7 (dot);
  // n = 50: twelve 4-row dot tiles and one of 2, three 16-column axpy strips and a tail of 2.
  for (int64_t m : kRowCounts)
    for (bool tb : {false, true}) {
      SCOPED_TRACE(testing::Message() << "m " << m << " tb " << tb);
      Case c;
      c.m = m;
      c.n = 50;
      c.k = 1031;
      c.tb = tb;
      c.ldb_pad = 2;
      c.beta = -1.0f;
      skinny_everywhere(c);
    }
}

TEST(Gemm16Bit, SkinnyKernelBetaZeroNeverReadsCAndBroadcastOperands) {
  for (bool tb : {false, true}) {
    Case c;
    c.m = 2;
    c.n = 19;
    c.k = 23;
    c.tb = tb;
    c.batch = 3;
    c.alpha = -2.0f;
    c.beta = 0.0f;
    c.nan_c = true;
    c.broadcast_b = true;  // one weight matrix for every batch entry
    skinny_everywhere(c);
    c.broadcast_b = false;
    c.broadcast_a = true;  // one X (widened once) for every batch entry
    c.gap_b = 2;
    skinny_everywhere(c);
  }
}

TEST(Gemm16Bit, SkinnyKernelSplitOverThreads) {
  // Past the one-thread threshold (2^18 multiply-adds): three threads, ragged ranges.
#ifdef _OPENMP
  const int threads_before = omp_get_max_threads();
  omp_set_num_threads(3);
#endif
  for (bool tb : {false, true}) {
    Case c;
    c.m = 7;
    c.n = 301;
    c.k = 257;
    c.tb = tb;
    c.beta = 0.25f;
    skinny_everywhere(c);
  }
#ifdef _OPENMP
  omp_set_num_threads(threads_before);
#endif
}

// Through Device::gemm: m ≤ 32 books X = op(A) widened, 4·m·k bytes, nothing
// else; kept bf16 for the dot form, 2·m·k.
TEST(Gemm16Bit, DecodeShapeTakesTheSkinnyRouteAndBooksOnlyTheTokens) {
  for_each_bf16_route([](bool dot) {
    for (bool ta : {false, true})
      for (DType ct : {DType::kFP32, DType::kBF16}) {
        Case c;
        c.m = 3;
        c.n = 70;
        c.k = 41;
        c.ta = ta;
        c.tb = true;
        c.ab = DType::kBF16;
        c.c = ct;
        c.batch = 2;
        c.beta = 1.0f;
        EXPECT_EQ(run_case(c), (dot ? 2 : 4) * 3 * 41);  // 492 (246) bytes: no weight-sized buffer, no C copy
      }
  });
}

// n ≤ 32 < m: X = op(B)ᵀ (n×k), W = op(A)ᵀ, C written transposed; books 4·n·k
// (2·n·k for the bf16 dot form, which needs W's rows, op(A)'s rows, contiguous: ta false).
TEST(Gemm16Bit, NarrowCTakesTheTransposedSkinnyRoute) {
  for_each_bf16_route([](bool dot) {
    for (DType ab : {DType::kFP16, DType::kBF16})
      for (int64_t n : {1, 7, 32})
        for (bool ta : {false, true})
          for (bool tb : {false, true}) {
            SCOPED_TRACE(testing::Message() << dtype_name(ab) << " n " << n << " ta " << ta << " tb " << tb);
            Case c;
            c.m = 45;
            c.n = n;
            c.k = 29;
            c.ta = ta;
            c.tb = tb;
            c.lda_pad = 1;
            c.ldb_pad = 2;
            c.ldc_pad = 3;
            c.ab = ab;
            c.c = ab;
            c.batch = 2;
            c.gap_c = 1;
            c.alpha = 1.5f;
            c.beta = 0.5f;
            const bool pairs = dot && ab == DType::kBF16 && !ta;
            EXPECT_EQ(run_case(c), (pairs ? 2 : 4) * n * 29);
          }
  });
}

// Runs f with `threads` OpenMP threads, then restores the count.
template <class F>
void with_threads(int threads, F f) {
#ifdef _OPENMP
  const int before = omp_get_max_threads();
  omp_set_num_threads(threads);
#endif
  f();
#ifdef _OPENMP
  omp_set_num_threads(before);
#endif
}

// m and n over 32: the blocked route. On one thread, tiles of 512 × 512 × 512
// at most, workspace 4·(mb·kb + kb·nb) bytes, + 4·mb·nb for a 16-bit C
// (mb = min(m, 512), …); with bf16 pairs the panels' words in place of
// mb·kb + kb·nb.
TEST(Gemm16Bit, BlockedRouteCrossesEveryBlockAndBooksBoundedBlocks) {
  struct Shape {
    int64_t m, n, k;
  };
  for_each_bf16_route([](bool dot) {
    with_threads(1, [dot] {
      for (const Shape& sh : {Shape{517, 45, 530}, Shape{40, 530, 515}})
        for (bool ta : {false, true})
          for (bool tb : {false, true})
            for (DType ct : {DType::kFP32, DType::kBF16}) {
              SCOPED_TRACE(testing::Message() << sh.m << "x" << sh.n << "x" << sh.k << " ta " << ta << " tb " << tb
                                              << " " << dtype_name(ct));
              Case c;
              c.m = sh.m;
              c.n = sh.n;
              c.k = sh.k;
              c.ta = ta;
              c.tb = tb;
              c.lda_pad = 1;
              c.ldb_pad = 2;
              c.ldc_pad = 3;
              c.ab = DType::kBF16;
              c.c = ct;
              c.alpha = 0.5f;
              c.beta = 1.0f;
              const int64_t mb = std::min<int64_t>(sh.m, 512), nb = std::min<int64_t>(sh.n, 512);
              const int64_t kb = std::min<int64_t>(sh.k, 512);
              const int64_t blocks = dot ? pair_panel_words(mb, nb, kb) : mb * kb + kb * nb;
              const int64_t expect = 4 * (blocks + (ct == DType::kFP32 ? 0 : mb * nb));
              EXPECT_EQ(run_case(c), expect);
            }
    });
  });
}

// On three threads the tiles are shared out, each thread with its own blocks;
// 517 × 45 has two 512-row tiles, fewer than the threads, so the rows are cut
// in three tiles of 176 (⌈517/3⌉ rounded up to 16): 3 · 4·(176·512 + 512·45
// + 176·45) bytes for a bf16 C. 40 × 530 has two 512-column tiles: columns cut
// in 192 (⌈530/3⌉ → 192), 3 · 4·(40·512 + 512·192) for an fp32 C. With bf16
// pairs: 176 rows in 15 panels of 12 (180 × 256 words), 45 columns in 2 of 32
// (64 × 256); 40 rows in 4 panels (48 × 256), 192 columns in 6 (192 × 256).
TEST(Gemm16Bit, BlockedRouteSharesTilesOverThreads) {
  for_each_bf16_route([](bool dot) {
    with_threads(3, [dot] {
      Case c;
      c.m = 517;
      c.n = 45;
      c.k = 530;
      c.ta = true;
      c.ab = DType::kBF16;
      c.c = DType::kBF16;
      c.beta = 0.5f;
      EXPECT_EQ(run_case(c), 3 * 4 * ((dot ? 180 * 256 + 64 * 256 : 176 * 512 + 512 * 45) + 176 * 45));
      c.m = 40;
      c.n = 530;
      c.k = 515;
      c.ta = false;
      c.tb = true;
      c.c = DType::kFP32;
      EXPECT_EQ(run_case(c), 3 * 4 * (dot ? 48 * 256 + 192 * 256 : 40 * 512 + 512 * 192));
    });
  });
}

TEST(Gemm16Bit, BlockedRouteBatchBroadcastAndBetaZero) {
  Case c;
  c.m = 35;
  c.n = 33;
  c.k = 20;
  c.ab = DType::kFP16;
  c.c = DType::kFP16;
  c.batch = 3;
  c.broadcast_b = true;
  c.gap_a = 2;
  c.gap_c = 3;
  c.beta = 0.0f;
  c.nan_c = true;
  run_case(c);
}

// alpha 0 is not skinny (A and B must not be read): C = beta·C through the blocked route.
TEST(Gemm16Bit, AlphaZeroScalesC) {
  Case c;
  c.m = 2;
  c.n = 9;
  c.k = 5;
  c.ab = DType::kBF16;
  c.c = DType::kBF16;
  c.alpha = 0.0f;
  c.beta = 0.5f;
  run_case(c);
}

TEST(Gemm16Bit, SkinnyRejectsWhatItCannotRun) {
  SkinnyGemm s;
  s.m = 1;
  s.n = 1;
  s.k = 1;
  s.w_type = DType::kFP32;
  s.w_sp = 1;
  EXPECT_THROW(skinny_gemm(s, CpuIsa::kPortable), std::invalid_argument);
  s.w_type = DType::kBF16;
  s.w_sp = 2;
  s.w_sj = 2;
  EXPECT_THROW(skinny_gemm(s, CpuIsa::kPortable), std::invalid_argument);
  s.w_sp = 1;
  s.m = kSkinnyMaxRows + 1;
  EXPECT_THROW(skinny_gemm(s, CpuIsa::kPortable), std::invalid_argument);
  // bf16 X: only against bf16 W rows, and only where the CPU has AVX512-BF16.
  const uint16_t x16[1] = {0};
  s.m = 1;
  s.x_bf16 = x16;
  s.w_type = DType::kFP16;
  EXPECT_THROW(skinny_gemm(s, CpuIsa::kPortable), std::invalid_argument);
  s.w_type = DType::kBF16;
  s.w_sp = 2;
  s.w_sj = 1;
  EXPECT_THROW(skinny_gemm(s, CpuIsa::kPortable), std::invalid_argument);
  if (!cpu_has_bf16_dot()) {
    s.w_sp = 1;
    EXPECT_THROW(skinny_gemm(s, CpuIsa::kPortable), std::invalid_argument);
  }
}

}  // namespace
}  // namespace gpuledger
