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

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <utility>
#include <vector>

#include "core/dtype.h"
#include "kernels/cpu/cpu_device.h"

#ifdef _OPENMP
#include <omp.h>
#endif

namespace gpuledger {
namespace {

constexpr double kU32 = 1.0 / (1 << 24);

double unit_roundoff(DType t) {
  switch (t) {
    case DType::kBF16: return 1.0 / (1 << 8);
    case DType::kFP16: return 1.0 / (1 << 11);
    case DType::kFP32: return kU32;
  }
  return 0;
}

// Host-side storage of n values in dtype t, and the fp32 values they hold.
std::vector<char> encode(const std::vector<float>& v, DType t) {
  std::vector<char> out(v.size() * dtype_bytes(t));
  convert_from_fp32(v.data(), out.data(), t, static_cast<int64_t>(v.size()));
  return out;
}
std::vector<float> decode(const std::vector<char>& bytes, DType t) {
  std::vector<float> out(bytes.size() / dtype_bytes(t));
  convert_to_fp32(bytes.data(), t, out.data(), static_cast<int64_t>(out.size()));
  return out;
}

// Uniform(-1, 1) values rounded to dtype t, so they are exact in t.
std::vector<float> random_values(int64_t n, DType t, std::mt19937& rng) {
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = u(rng);
  return decode(encode(v, t), t);
}

struct Case {
  bool ta = false, tb = false;
  int64_t m = 1, n = 1, k = 1;
  int64_t lda_pad = 0, ldb_pad = 0, ldc_pad = 0;  // leading dimension = packed + pad
  int64_t batch = 1;
  int64_t gap_a = 0, gap_b = 0, gap_c = 0;  // stride = matrix size + gap
  bool broadcast_b = false;                 // stride_b = 0
  DType ab = DType::kFP32, c = DType::kFP32;
  float alpha = 1.0f, beta = 0.0f;
  bool nan_c = false;  // C starts as NaN (beta must be 0)
};

// Runs one case on a CpuDevice: every C element within the tolerance, C's
// padding and batch gaps untouched, the FLOPs counted, the workspace released.
void run_case(const Case& cs) {
  std::mt19937 rng(1234 + cs.m * 7 + cs.n * 13 + cs.k * 17 + cs.ta * 2 + cs.tb);
  const int64_t a_rows = cs.ta ? cs.k : cs.m, a_cols = cs.ta ? cs.m : cs.k;
  const int64_t b_rows = cs.tb ? cs.n : cs.k, b_cols = cs.tb ? cs.k : cs.n;
  const int64_t lda = a_cols + cs.lda_pad, ldb = b_cols + cs.ldb_pad, ldc = cs.n + cs.ldc_pad;
  const int64_t stride_a = a_rows * lda + cs.gap_a;
  const int64_t stride_b = cs.broadcast_b ? 0 : b_rows * ldb + cs.gap_b;
  const int64_t stride_c = cs.m * ldc + cs.gap_c;
  const int64_t na = stride_a * cs.batch, nb = cs.broadcast_b ? b_rows * ldb : stride_b * cs.batch;
  const int64_t nc = stride_c * cs.batch;

  const std::vector<float> a = random_values(na, cs.ab, rng), b = random_values(nb, cs.ab, rng);
  std::vector<float> c0 = random_values(nc, cs.c, rng);
  const float sentinel = 12288.0f;  // exact in bf16 and fp16; marks C's padding
  std::vector<bool> in_window(nc, false);
  for (int64_t bi = 0; bi < cs.batch; ++bi)
    for (int64_t i = 0; i < cs.m; ++i)
      for (int64_t j = 0; j < cs.n; ++j) in_window[bi * stride_c + i * ldc + j] = true;
  for (int64_t e = 0; e < nc; ++e) {
    if (!in_window[e])
      c0[e] = sentinel;
    else if (cs.nan_c)
      c0[e] = std::numeric_limits<float>::quiet_NaN();
  }

  Ledger ledger;
  CpuDevice dev(ledger);
  const auto ea = encode(a, cs.ab), eb = encode(b, cs.ab), ec = encode(c0, cs.c);
  Buffer da = dev.alloc(ea.size(), Account::kActivations), db = dev.alloc(eb.size(), Account::kActivations);
  Buffer dc = dev.alloc(ec.size(), Account::kActivations);
  dev.copy_from_host(da.data(), ea.data(), ea.size());
  dev.copy_from_host(db.data(), eb.data(), eb.size());
  dev.copy_from_host(dc.data(), ec.data(), ec.size());

  GemmArgs g;
  g.trans_a = cs.ta;
  g.trans_b = cs.tb;
  g.m = cs.m;
  g.n = cs.n;
  g.k = cs.k;
  g.a = da.data();
  g.lda = lda;
  g.stride_a = stride_a;
  g.b = db.data();
  g.ldb = ldb;
  g.stride_b = stride_b;
  g.ab_type = cs.ab;
  g.c = dc.data();
  g.ldc = ldc;
  g.stride_c = stride_c;
  g.c_type = cs.c;
  g.batch = cs.batch;
  g.alpha = cs.alpha;
  g.beta = cs.beta;
  dev.gemm(g);

  std::vector<char> out_bytes(ec.size());
  dev.copy_to_host(out_bytes.data(), dc.data(), out_bytes.size());
  const std::vector<float> out = decode(out_bytes, cs.c);

  const double gamma = (cs.k + 2) * kU32 / (1 - (cs.k + 2) * kU32);
  const double uc = cs.c == DType::kFP32 ? 0.0 : unit_roundoff(cs.c);
  int64_t bad = 0;
  double worst = 0;
  for (int64_t bi = 0; bi < cs.batch; ++bi) {
    const float* ab_ = a.data() + bi * stride_a;
    const float* bb_ = b.data() + bi * stride_b;
    for (int64_t i = 0; i < cs.m; ++i)
      for (int64_t j = 0; j < cs.n; ++j) {
        double s = 0, sabs = 0;
        for (int64_t p = 0; p < cs.k; ++p) {
          const double x = cs.ta ? ab_[p * lda + i] : ab_[i * lda + p];
          const double y = cs.tb ? bb_[j * ldb + p] : bb_[p * ldb + j];
          s += x * y;
          sabs += std::abs(x * y);
        }
        const int64_t e = bi * stride_c + i * ldc + j;
        const double c_in = cs.beta != 0 ? c0[e] : 0.0;
        const double ref = cs.alpha * s + cs.beta * c_in;
        const double bound = std::abs(cs.alpha) * sabs + std::abs(cs.beta) * std::abs(c_in);
        const double tol = gamma * bound + uc * (std::abs(ref) + gamma * bound) + 1e-30;
        const double err = std::abs(out[e] - ref);
        if (!(err <= tol)) ++bad;  // also catches NaN
        worst = std::max(worst, err / tol);
      }
  }
  EXPECT_EQ(bad, 0) << "worst error / tolerance " << worst;
  for (int64_t e = 0; e < nc; ++e) {
    if (!in_window[e]) {
      ASSERT_EQ(out[e], sentinel) << "C padding written at " << e;
    }
  }
  EXPECT_EQ(dev.executed_flops(), 2 * cs.m * cs.n * cs.k * cs.batch);
  EXPECT_EQ(ledger.live(Account::kWorkspace), 0);  // workspace released on return
}

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

// A 16-bit GEMM books fp32 copies of one batch entry of A and B (and of C when
// C is 16-bit) in the workspace account, and releases them before returning.
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
  EXPECT_EQ(ledger.peak(Account::kWorkspace), (k * m + k * n + m * n) * 4);  // 496 bytes
  EXPECT_EQ(ledger.count(Account::kWorkspace), 3);
  EXPECT_EQ(ledger.live(Account::kWorkspace), 0);
  for (uint16_t x : c16) EXPECT_EQ(bf16_to_fp32(x), 4.0f);  // 4 · 0.5 · 2

  Ledger l2;
  CpuDevice d2(l2);
  g.c = c32.data();
  g.c_type = DType::kFP32;
  d2.gemm(g);
  EXPECT_EQ(l2.peak(Account::kWorkspace), (k * m + k * n) * 4);  // 256 bytes: A and B only
  EXPECT_EQ(l2.count(Account::kWorkspace), 2);
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
