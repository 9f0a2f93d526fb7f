// CPU activations (kernels/cpu/ops_activation.cpp): GELU (tanh form), SwiGLU
// and gpt-oss's clamped SwiGLU against values computed independently from the published formulas, their
// backward against central finite differences of the forward op, and bf16 storage.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "kernels/cpu/cpu_device.h"

namespace gpuledger {
namespace {

std::vector<float> random_vector(int64_t n, uint32_t seed, float lo = -3.0f, float hi = 3.0f) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> x(n);
  for (auto& v : x) v = dist(gen);
  return x;
}

// Independent double references (Hendrycks & Gimpel 2016 tanh form; Shazeer 2020).
double gelu_ref(double x) { return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x))); }
double silu_ref(double x) { return x / (1.0 + std::exp(-x)); }

class Activation : public ::testing::Test {
 protected:
  Ledger ledger;
  CpuDevice dev{ledger};
};

// Values of 0.5·x·(1 + tanh(√(2/π)(x + 0.044715x³))) evaluated in double (Python's
// math module): gelu(1) = 0.8411919906…, the figure PyTorch's gelu(approximate='tanh')
// prints as 0.8412. fp32: relative error ~1e-7, except that tanh near −1 is off by
// up to an ulp of 1 (6e-8), scaled by ½·|x| in the product (gelu(−3) is 0.0036):
// tolerance 1e-6·(|gelu(x)| + |x|).
TEST_F(Activation, GeluKnownValues) {
  const std::vector<float> x = {1.0f, -1.0f, 2.0f, 0.5f, -3.0f, 0.0f};
  const std::vector<double> want = {0.8411919906082768,  -0.15880800939172324,   1.954597694087775,
                                    0.34571400982514394, -0.0036373920817729943, 0.0};
  std::vector<float> out(x.size());
  dev.gelu_forward(out.data(), x.data(), DType::kFP32, static_cast<int64_t>(x.size()));
  for (size_t i = 0; i < x.size(); ++i)
    EXPECT_NEAR(out[i], want[i], 1e-6 * (std::abs(want[i]) + std::abs(x[i]))) << "x = " << x[i];
}

TEST_F(Activation, GeluMatchesDoubleReferenceOnManyValues) {
  const int64_t n = 40001;  // not a multiple of the op's chunk; > 2¹⁵: multithreaded
  const auto x = random_vector(n, 1, -6.0f, 6.0f);
  std::vector<float> out(n);
  dev.gelu_forward(out.data(), x.data(), DType::kFP32, n);
  // Tolerance as above.
  for (int64_t i = 0; i < n; ++i)
    EXPECT_NEAR(out[i], gelu_ref(x[i]), 1e-6 * (std::abs(gelu_ref(x[i])) + std::abs(x[i]))) << "x = " << x[i];
}

// Central differences of the fp32 op with h = 1e-2: truncation h²/6·|gelu'''| < 3e-5,
// rounding 2·eps·|gelu| / (2h) < 4e-5 for |x| ≤ 3; tolerance 1e-4.
TEST_F(Activation, GeluBackwardMatchesFiniteDifferences) {
  const int64_t n = 257;
  const auto x = random_vector(n, 2);
  const auto dout = random_vector(n, 3, -1.0f, 1.0f);
  std::vector<float> dx(n), xp(x), xm(x), fp(n), fm(n);
  dev.gelu_backward(dx.data(), dout.data(), x.data(), DType::kFP32, n);
  const float h = 1e-2f;
  for (int64_t i = 0; i < n; ++i) {
    xp[i] = x[i] + h;
    xm[i] = x[i] - h;
  }
  dev.gelu_forward(fp.data(), xp.data(), DType::kFP32, n);
  dev.gelu_forward(fm.data(), xm.data(), DType::kFP32, n);
  for (int64_t i = 0; i < n; ++i) {
    const double fd = (static_cast<double>(fp[i]) - fm[i]) / (static_cast<double>(xp[i]) - xm[i]);
    EXPECT_NEAR(dx[i], dout[i] * fd, 1e-4) << "x = " << x[i];
  }
}

// silu(g)·up: silu(1) = 0.7310585786300049, silu(2) = 1.7615941559557646,
// silu(−1) = −0.2689414213699951 (double); tolerance 1e-6 relative.
TEST_F(Activation, SwigluKnownValues) {
  const std::vector<float> gate = {1.0f, 2.0f, -1.0f, 0.0f};
  const std::vector<float> up = {1.0f, -0.5f, 3.0f, 7.0f};
  const std::vector<double> want = {0.7310585786300049, -0.5 * 1.7615941559557646, 3.0 * -0.2689414213699951, 0.0};
  std::vector<float> out(gate.size());
  dev.swiglu_forward(out.data(), gate.data(), up.data(), DType::kFP32, 4);
  for (size_t i = 0; i < gate.size(); ++i) EXPECT_NEAR(out[i], want[i], 1e-6 * std::abs(want[i]) + 1e-9) << i;

  const int64_t n = 40001;
  const auto g = random_vector(n, 4, -8.0f, 8.0f), u = random_vector(n, 5);
  std::vector<float> o(n);
  dev.swiglu_forward(o.data(), g.data(), u.data(), DType::kFP32, n);
  for (int64_t i = 0; i < n; ++i) {
    const double ref = silu_ref(g[i]) * u[i];
    EXPECT_NEAR(o[i], ref, 1e-6 * std::abs(ref) + 1e-7);
  }
}

// L = Σ dout ⊙ swiglu(gate, up); central differences in gate (h = 1e-2: error
// < 1e-4 as for GELU) and in up (swiglu is linear in up: only rounding).
TEST_F(Activation, SwigluBackwardMatchesFiniteDifferences) {
  const int64_t n = 300;
  const auto g = random_vector(n, 6), u = random_vector(n, 7), dout = random_vector(n, 8, -1, 1);
  std::vector<float> dg(n), du(n);
  dev.swiglu_backward(dg.data(), du.data(), dout.data(), g.data(), u.data(), DType::kFP32, n);
  const float h = 1e-2f;
  std::vector<float> gp(g), gm(g), up(u), um(u), fp(n), fm(n), fup(n), fum(n);
  for (int64_t i = 0; i < n; ++i) {
    gp[i] += h, gm[i] -= h, up[i] += h, um[i] -= h;
  }
  dev.swiglu_forward(fp.data(), gp.data(), u.data(), DType::kFP32, n);
  dev.swiglu_forward(fm.data(), gm.data(), u.data(), DType::kFP32, n);
  dev.swiglu_forward(fup.data(), g.data(), up.data(), DType::kFP32, n);
  dev.swiglu_forward(fum.data(), g.data(), um.data(), DType::kFP32, n);
  for (int64_t i = 0; i < n; ++i) {
    const double fdg = (static_cast<double>(fp[i]) - fm[i]) / (static_cast<double>(gp[i]) - gm[i]);
    const double fdu = (static_cast<double>(fup[i]) - fum[i]) / (static_cast<double>(up[i]) - um[i]);
    EXPECT_NEAR(dg[i], dout[i] * fdg, 2e-4) << "gate = " << g[i] << " up = " << u[i];
    EXPECT_NEAR(du[i], dout[i] * fdu, 1e-4) << "gate = " << g[i];
  }
}

// bf16 storage, fp32 compute: each output is the fp32 result rounded once to bf16,
// so within half a bf16 ulp (at most 2⁻⁸ relative: 8 significant bits) plus the
// fp32 error of the formula (≤ 1e-6 relative here).
// gpt-oss's clamped SwiGLU against the formula in double, values on both sides
// of the limits; its backward against the derivative of that formula (with the
// clamps: zero past a limit, the bound itself inside) and, away from the
// limits, central differences of the op (h = 1e-3, tolerance 1e-3).
double clamped_ref(double g, double u, double alpha, double limit) {
  g = std::min(g, limit);
  u = std::clamp(u, -limit, limit);
  return (u + 1.0) * g / (1.0 + std::exp(-alpha * g));
}

TEST_F(Activation, SwigluClampedMatchesFormulaAndDerivative) {
  const float alpha = 1.702f, limit = 2.0f;
  const int64_t n = 40001;
  const auto g = random_vector(n, 31, -4.0f, 4.0f), u = random_vector(n, 32, -4.0f, 4.0f);
  const auto dout = random_vector(n, 33, -1.0f, 1.0f);
  std::vector<float> out(n), dg(n), du(n);
  dev.swiglu_clamped_forward(out.data(), g.data(), u.data(), DType::kFP32, n, alpha, limit);
  dev.swiglu_clamped_backward(dg.data(), du.data(), dout.data(), g.data(), u.data(), DType::kFP32, n, alpha, limit);
  int64_t clamped_g = 0, clamped_u = 0, fd_checked = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double want = clamped_ref(g[i], u[i], alpha, limit);
    ASSERT_NEAR(out[i], want, 1e-6 * (std::abs(want) + 1)) << i;
    clamped_g += g[i] > limit;
    clamped_u += std::abs(u[i]) > limit;
    if (g[i] > limit) {
      EXPECT_EQ(dg[i], 0.0f) << i;
    }
    if (std::abs(u[i]) > limit) {
      EXPECT_EQ(du[i], 0.0f) << i;
    }
    const double h = 1e-3;
    if (std::abs(g[i] - limit) > 2 * h && std::abs(std::abs(u[i]) - limit) > 2 * h) {
      const double fd_g =
          (clamped_ref(g[i] + h, u[i], alpha, limit) - clamped_ref(g[i] - h, u[i], alpha, limit)) / (2 * h);
      const double fd_u =
          (clamped_ref(g[i], u[i] + h, alpha, limit) - clamped_ref(g[i], u[i] - h, alpha, limit)) / (2 * h);
      ASSERT_NEAR(dg[i], dout[i] * fd_g, 1e-3) << i;
      ASSERT_NEAR(du[i], dout[i] * fd_u, 1e-3) << i;
      ++fd_checked;
    }
  }
  EXPECT_GT(clamped_g, n / 10);  // both clamps are exercised
  EXPECT_GT(clamped_u, n / 10);
  EXPECT_GT(fd_checked, n / 2);
  // dgate may be dout's buffer (the MoE block's in-place call)
  std::vector<float> inplace = dout, du2(n);
  dev.swiglu_clamped_backward(inplace.data(), du2.data(), inplace.data(), g.data(), u.data(), DType::kFP32, n, alpha,
                              limit);
  EXPECT_EQ(inplace, dg);
  EXPECT_EQ(du2, du);
}

TEST_F(Activation, Bf16StorageComputesInFp32) {
  const int64_t n = 1500;
  const auto xf = random_vector(n, 9), uf = random_vector(n, 10);
  std::vector<uint16_t> x(n), u(n), out(n), dg(n), du(n);
  for (int64_t i = 0; i < n; ++i) x[i] = fp32_to_bf16(xf[i]), u[i] = fp32_to_bf16(uf[i]);
  const double tol = 1.0 / 256 + 1e-6;
  dev.gelu_forward(out.data(), x.data(), DType::kBF16, n);
  for (int64_t i = 0; i < n; ++i) {
    const double ref = gelu_ref(bf16_to_fp32(x[i]));
    EXPECT_NEAR(bf16_to_fp32(out[i]), ref, tol * std::abs(ref) + 1e-30) << i;
  }
  dev.swiglu_forward(out.data(), x.data(), u.data(), DType::kBF16, n);
  for (int64_t i = 0; i < n; ++i) {
    const double ref = silu_ref(bf16_to_fp32(x[i])) * bf16_to_fp32(u[i]);
    EXPECT_NEAR(bf16_to_fp32(out[i]), ref, tol * std::abs(ref) + 1e-30) << i;
  }
  // Backward in bf16 vs the fp32 op on the same (bf16-representable) inputs.
  std::vector<float> x32(n), u32(n), d32(n, 1.0f), dg32(n), du32(n);
  std::vector<uint16_t> ones(n, fp32_to_bf16(1.0f));
  for (int64_t i = 0; i < n; ++i) x32[i] = bf16_to_fp32(x[i]), u32[i] = bf16_to_fp32(u[i]);
  dev.swiglu_backward(dg.data(), du.data(), ones.data(), x.data(), u.data(), DType::kBF16, n);
  dev.swiglu_backward(dg32.data(), du32.data(), d32.data(), x32.data(), u32.data(), DType::kFP32, n);
  for (int64_t i = 0; i < n; ++i) {
    EXPECT_NEAR(bf16_to_fp32(dg[i]), dg32[i], tol * std::abs(dg32[i]) + 1e-30) << i;
    EXPECT_NEAR(bf16_to_fp32(du[i]), du32[i], tol * std::abs(du32[i]) + 1e-30) << i;
  }
}

}  // namespace
}  // namespace gpuledger
