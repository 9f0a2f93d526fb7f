// CpuDevice::gemm against a double-precision reference: the four transpose
// combinations, leading dimensions larger than the rows, batch strides (with a
// broadcast operand and gaps that must stay untouched), alpha/beta, fp32,
// bf16 and fp16 operands, 16-bit C; the FLOP count; the fp32 workspace a
// 16-bit GEMM books and releases.
//
// Tolerance. The operands are drawn as values exact in their dtype, so the
// reference sees exactly what the kernel sees and the only errors are the
// kernel's fp32 rounding: any order of summation of k products satisfies
// |ĉ − c| ≤ γ_{k} Σ_p |a_ip·b_pj| with γ_n = n·u/(1 − n·u), u = 2^-24 (Higham,
// "Accuracy and Stability of Numerical Algorithms", 2nd ed., §3.1); alpha and
// beta add two more roundings, so we allow γ_{k+2}·(|α|Σ|a||b| + |β||c₀|).
// A 16-bit C is rounded once more: + u_t·|c| with u_t = 2^-8 (bf16), 2^-11 (fp16).
#include <gtest/gtest.h>

#include <utility>
#include <vector>

#include "tests/kernels/gemm_case.h"

#ifdef _OPENMP
#include <omp.h>
#endif

namespace gpuledger {
namespace {

using gemm_test::Case;
using gemm_test::run_case;

TEST(Gemm, AllTransposeCombosFp32WithPaddedLeadingDims) {
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      SCOPED_TRACE(testing::Message() << "ta " << ta << " tb " << tb);
      Case c;
      c.ta = ta;
      c.tb = tb;
      c.m = 13;
      c.n = 9;
      c.k = 21;
      c.lda_pad = 3;
      c.ldb_pad = 5;
      c.ldc_pad = 2;
      run_case(c);
    }
}

TEST(Gemm, SizesThatCrossEveryBlockEdge) {
  // Over the built-in GEMM's 64 × 256 × 256 blocks and its 4 × 8 micro-tiles.
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      SCOPED_TRACE(testing::Message() << "ta " << ta << " tb " << tb);
      Case c;
      c.ta = ta;
      c.tb = tb;
      c.m = 131;
      c.n = 263;
      c.k = 301;
      c.lda_pad = 1;
      c.ldb_pad = 2;
      c.ldc_pad = 3;
      run_case(c);
    }
}

TEST(Gemm, SplitAcrossThreadsAlongRowsAndAlongColumns) {
  // With a BLAS, a GEMM of at least 4 MFLOP is cut into one block of C per
  // OpenMP thread (ops_gemm.cpp): along m when C is taller than wide, else
  // along n; three threads make a ragged last block. Both, with every
  // transpose, padding and beta != 0 (C read back by each block).
#ifdef _OPENMP
  const int threads_before = omp_get_max_threads();
  omp_set_num_threads(3);
#endif
  for (const auto& [m, n] : {std::pair<int64_t, int64_t>{301, 70}, {40, 517}})
    for (bool ta : {false, true})
      for (bool tb : {false, true}) {
        SCOPED_TRACE(testing::Message() << "m " << m << " n " << n << " ta " << ta << " tb " << tb);
        Case c;
        c.ta = ta;
        c.tb = tb;
        c.m = m;
        c.n = n;
        c.k = 149;
        c.lda_pad = 3;
        c.ldb_pad = 1;
        c.ldc_pad = 5;
        c.alpha = 0.75f;
        c.beta = 0.5f;
        run_case(c);
      }
#ifdef _OPENMP
  omp_set_num_threads(threads_before);
#endif
}

TEST(Gemm, AlphaBetaAndBetaZeroIgnoresC) {
  Case c;
  c.m = 17;
  c.n = 11;
  c.k = 8;
  c.alpha = 0.75f;
  c.beta = -1.5f;
  run_case(c);
  c.alpha = 2.0f;
  c.beta = 0.0f;
  c.nan_c = true;  // C is NaN and must not be read
  run_case(c);
  c.alpha = 0.0f;
  c.beta = 0.5f;
  c.nan_c = false;  // alpha 0: C = beta·C
  run_case(c);
}

TEST(Gemm, BatchStridesWithGapsAndABroadcastOperand) {
  Case c;
  c.m = 7;
  c.n = 5;
  c.k = 6;
  c.batch = 4;
  c.gap_a = 3;
  c.gap_b = 2;
  c.gap_c = 4;
  c.ldc_pad = 1;
  c.alpha = 1.25f;
  c.beta = 0.5f;
  run_case(c);
  c.ta = true;
  c.tb = true;
  c.broadcast_b = true;
  run_case(c);
}

TEST(Gemm, SixteenBitOperandsAgainstDoubleReference) {
  for (DType t : {DType::kBF16, DType::kFP16})
    for (DType ct : {DType::kFP32, t}) {
      SCOPED_TRACE(testing::Message() << dtype_name(t) << " -> " << dtype_name(ct));
      Case c;
      c.ab = t;
      c.c = ct;
      c.ta = true;
      c.m = 19;
      c.n = 33;
      c.k = 40;
      c.batch = 3;
      c.lda_pad = 2;
      c.ldb_pad = 1;
      c.ldc_pad = 3;
      c.gap_a = 5;
      c.gap_c = 2;
      c.alpha = 0.5f;
      c.beta = 1.0f;
      run_case(c);
      c.beta = 0.0f;
      c.nan_c = true;
      c.tb = true;
      c.broadcast_b = true;
      run_case(c);
    }
}

TEST(Gemm, FlopCountIsTwoMnkPerBatchEntry) {
  Ledger ledger;
  CpuDevice dev(ledger);
  std::vector<float> a(5 * 3 * 4, 1.0f), b(3 * 7 * 4, 1.0f), c(5 * 7 * 4, 0.0f);
  GemmArgs g;
  g.m = 5;
  g.n = 7;
  g.k = 3;
  g.batch = 4;
  g.a = a.data();
  g.lda = 3;
  g.stride_a = 15;
  g.b = b.data();
  g.ldb = 7;
  g.stride_b = 21;
  g.c = c.data();
  g.ldc = 7;
  g.stride_c = 35;
  dev.gemm(g);
  EXPECT_EQ(dev.executed_flops(), 840);  // 2·5·7·3·4
  for (float x : c) EXPECT_EQ(x, 3.0f);  // each entry sums k = 3 ones
  dev.gemm(g);
  EXPECT_EQ(dev.executed_flops(), 1680);
  dev.reset_flops();
  EXPECT_EQ(dev.executed_flops(), 0);
}

// A 16-bit GEMM books its fp32 workspace in the workspace account and releases
// it before returning; this decode-shaped one (m = 6 ≤ 32) takes the skinny
// route, which widens only X = op(A) (k×m, one batch entry) and writes a
// 16-bit C directly (test_gemm_16bit.cpp covers the other routes).
TEST(Gemm, SixteenBitWorkspaceIsBookedThenReleased) {
  Ledger ledger;
  CpuDevice dev(ledger);
  const int64_t m = 6, n = 10, k = 4, batch = 3;
  std::vector<uint16_t> a(k * m * batch, fp32_to_bf16(0.5f)), b(k * n * batch, fp32_to_bf16(2.0f));
  std::vector<uint16_t> c16(m * n * batch);
  std::vector<float> c32(m * n * batch);
  GemmArgs g;
  g.trans_a = true;  // A stored k×m
  g.m = m;
  g.n = n;
  g.k = k;
  g.batch = batch;
  g.a = a.data();
  g.lda = m;
  g.stride_a = k * m;
  g.b = b.data();
  g.ldb = n;
  g.stride_b = k * n;
  g.ab_type = DType::kBF16;
  g.c = c16.data();
  g.ldc = n;
  g.stride_c = m * n;
  g.c_type = DType::kBF16;
  dev.gemm(g);
  EXPECT_EQ(ledger.peak(Account::kWorkspace), k * m * 4);  // 96 bytes
  EXPECT_EQ(ledger.count(Account::kWorkspace), 1);
  EXPECT_EQ(ledger.live(Account::kWorkspace), 0);
  for (uint16_t x : c16) EXPECT_EQ(bf16_to_fp32(x), 4.0f);  // 4 · 0.5 · 2

  Ledger l2;
  CpuDevice d2(l2);
  g.c = c32.data();
  g.c_type = DType::kFP32;
  d2.gemm(g);
  EXPECT_EQ(l2.peak(Account::kWorkspace), k * m * 4);  // 96 bytes: X only, whatever C's dtype
  EXPECT_EQ(l2.count(Account::kWorkspace), 1);
  EXPECT_EQ(l2.live(Account::kWorkspace), 0);

  Ledger l3;
  CpuDevice d3(l3);
  std::vector<float> a32(k * m * batch, 0.5f), b32(k * n * batch, 2.0f);
  g.a = a32.data();
  g.b = b32.data();
  g.ab_type = DType::kFP32;
  d3.gemm(g);
  EXPECT_EQ(l3.count(Account::kWorkspace), 0);  // fp32: nothing to convert
  for (float x : c32) EXPECT_EQ(x, 4.0f);
}

TEST(Gemm, RejectsBadArguments) {
  Ledger ledger;
  CpuDevice dev(ledger);
  std::vector<float> a(64), b(64), c(64);
  GemmArgs g;
  g.m = 4;
  g.n = 4;
  g.k = 4;
  g.a = a.data();
  g.lda = 4;
  g.b = b.data();
  g.ldb = 4;
  g.c = c.data();
  g.ldc = 4;
  g.lda = 3;
  EXPECT_THROW(dev.gemm(g), std::invalid_argument);
  g.lda = 4;
  g.ldc = 2;
  EXPECT_THROW(dev.gemm(g), std::invalid_argument);
  g.ldc = 4;
  g.ab_type = DType::kBF16;
  g.c_type = DType::kFP16;
  EXPECT_THROW(dev.gemm(g), std::invalid_argument);
  EXPECT_EQ(dev.executed_flops(), 0);
}

}  // namespace
}  // namespace gpuledger
