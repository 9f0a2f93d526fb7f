// The GEMM test harness shared by test_gemm.cpp and test_gemm_16bit.cpp: one
// case (shapes, transposes, padding, batch strides, dtypes, alpha/beta) run on
// a CpuDevice and every C element checked against a double-precision
// reference.
//
// Tolerance. The operands are drawn as values exact in their dtype, so the
// reference sees exactly what the kernel sees and the only errors are the
// kernel's fp32 rounding: any order of summation of k products satisfies
// |ĉ − c| ≤ γ_{k} Σ_p |a_ip·b_pj| with γ_n = n·u/(1 − n·u), u = 2^-24 (Higham,
// "Accuracy and Stability of Numerical Algorithms", 2nd ed., §3.1); alpha and
// beta add two more roundings, so we allow γ_{k+2}·(|α|Σ|a||b| + |β||c₀|).
// A 16-bit C is rounded once more: + u_t·|c| with u_t = 2^-8 (bf16), 2^-11 (fp16).
#pragma once
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <random>
#include <vector>

#include "core/dtype.h"
#include "kernels/cpu/cpu_device.h"
#include "kernels/cpu/gemm_skinny.h"

namespace gpuledger::gemm_test {

inline constexpr double kU32 = 1.0 / (1 << 24);

inline double unit_roundoff(DType t) {
  switch (t) {
    case DType::kBF16: return 1.0 / (1 << 8);
    case DType::kFP16: return 1.0 / (1 << 11);
    case DType::kFP32: return kU32;
  }
  return 0;
}

// Host-side storage of n values in dtype t, and the fp32 values they hold.
inline std::vector<char> encode(const std::vector<float>& v, DType t) {
  std::vector<char> out(v.size() * dtype_bytes(t));
  convert_from_fp32(v.data(), out.data(), t, static_cast<int64_t>(v.size()));
  return out;
}
inline std::vector<float> decode(const std::vector<char>& bytes, DType t) {
  std::vector<float> out(bytes.size() / dtype_bytes(t));
  convert_to_fp32(bytes.data(), t, out.data(), static_cast<int64_t>(out.size()));
  return out;
}

// Uniform(-1, 1) values rounded to dtype t, so they are exact in t.
inline std::vector<float> random_values(int64_t n, DType t, std::mt19937& rng) {
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
  int64_t gap_a = 0, gap_b = 0, gap_c = 0;        // stride = matrix size + gap
  bool broadcast_a = false, broadcast_b = false;  // stride_a / stride_b = 0
  DType ab = DType::kFP32, c = DType::kFP32;
  float alpha = 1.0f, beta = 0.0f;
  bool nan_c = false;  // C starts as NaN (beta must be 0)
  // Set: run the skinny route directly on this path (run_skinny_gemm, which
  // must take the case) instead of Device::gemm; no FLOPs are then counted.
  std::optional<CpuIsa> skinny;
  bool bf16_dot = false;  // with skinny: X kept bf16 for the AVX512-BF16 dot form (gemm_bf16_dot.h)
};

// Runs one case on a CpuDevice: every C element within the tolerance, C's
// padding and batch gaps untouched, the FLOPs counted, the workspace released.
// Returns the peak of the workspace account during the call.
inline int64_t run_case(const Case& cs) {
  std::mt19937 rng(1234 + cs.m * 7 + cs.n * 13 + cs.k * 17 + cs.ta * 2 + cs.tb);
  const int64_t a_rows = cs.ta ? cs.k : cs.m, a_cols = cs.ta ? cs.m : cs.k;
  const int64_t b_rows = cs.tb ? cs.n : cs.k, b_cols = cs.tb ? cs.k : cs.n;
  const int64_t lda = a_cols + cs.lda_pad, ldb = b_cols + cs.ldb_pad, ldc = cs.n + cs.ldc_pad;
  const int64_t stride_a = cs.broadcast_a ? 0 : a_rows * lda + cs.gap_a;
  const int64_t stride_b = cs.broadcast_b ? 0 : b_rows * ldb + cs.gap_b;
  const int64_t stride_c = cs.m * ldc + cs.gap_c;
  const int64_t na = cs.broadcast_a ? a_rows * lda : stride_a * cs.batch,
                nb = cs.broadcast_b ? b_rows * ldb : stride_b * cs.batch;
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
  if (cs.skinny) {
    EXPECT_TRUE(run_skinny_gemm(dev, g, *cs.skinny, cs.bf16_dot)) << "the skinny route declined the case";
  } else {
    dev.gemm(g);
  }

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
      EXPECT_EQ(out[e], sentinel) << "C padding written at " << e;
      if (out[e] != sentinel) break;
    }
  }
  EXPECT_EQ(dev.executed_flops(), cs.skinny ? 0 : 2 * cs.m * cs.n * cs.k * cs.batch);
  EXPECT_EQ(ledger.live(Account::kWorkspace), 0);  // workspace released on return
  return ledger.peak(Account::kWorkspace);
}

}  // namespace gpuledger::gemm_test
