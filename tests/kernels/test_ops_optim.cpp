// AdamW and sum_squares on the CPU backend. AdamW is run for three steps
// against a hand-written double-precision AdamW (Loshchilov & Hutter 2019,
// Alg. 2, bias-corrected), with a master copy and 16-bit weights and
// gradients, and with fp32 weights and no master; the weights must be the
// master rounded. Gradient clipping: the global norm from sum_squares, and a
// grad_scale that acts exactly as pre-scaled gradients.
#include <gtest/gtest.h>

#include <cmath>
#include <stdexcept>
#include <vector>

#include "core/dtype.h"
#include "kernels/cpu/cpu_device.h"
#include "tests/kernels/grad_check.h"

namespace gpuledger {
namespace {

using testing_util::random_uniform;

struct Dev {
  Ledger ledger;
  CpuDevice d{ledger};
};

struct Hyper {
  float lr = 1e-2f, beta1 = 0.9f, beta2 = 0.95f, eps = 1e-8f, wd = 0.1f;
};

// One AdamW step in double, from the fp32 values of the gradient.
void reference_step(std::vector<double>& p, std::vector<double>& m, std::vector<double>& v, const std::vector<float>& g,
                    double grad_scale, const Hyper& h, int step) {
  const double b1 = h.beta1, b2 = h.beta2;  // the fp32 hyper-parameters, exactly
  for (size_t i = 0; i < p.size(); ++i) {
    const double gi = g[i] * grad_scale;
    m[i] = b1 * m[i] + (1 - b1) * gi;
    v[i] = b2 * v[i] + (1 - b2) * gi * gi;
    const double mhat = m[i] / (1 - std::pow(b1, step)), vhat = v[i] / (1 - std::pow(b2, step));
    p[i] -= static_cast<double>(h.lr) * (mhat / (std::sqrt(vhat) + h.eps) + double(h.wd) * p[i]);
  }
}

// The fp32 kernel against the double reference: each step adds a few fp32
// roundings of p (≈ u·|p|) and of the update (≈ lr·u each): over three steps
// far below 1e-6·(|p| + lr). m and v: a few roundings of their terms, whose
// size is (1 − β)·|g| (resp. g²) however small the running sum (it can cancel
// to near 0): 1e-6·(|m| + that size).
void expect_close(const std::vector<float>& got, const std::vector<double>& ref, double abs_floor) {
  for (size_t i = 0; i < ref.size(); ++i) ASSERT_NEAR(got[i], ref[i], 1e-6 * (std::abs(ref[i]) + abs_floor)) << i;
}

TEST(AdamW, MasterAnd16BitWeightsMatchDoubleReferenceForThreeSteps) {
  Dev dev;
  const Hyper h;
  const int64_t n = 70001;  // past the parallel threshold; odd tail
  for (DType t : {DType::kBF16, DType::kFP16}) {
    SCOPED_TRACE(dtype_name(t));
    std::vector<float> master = random_uniform(n, -1, 1, 1), m(n, 0.0f), v(n, 0.0f);
    std::vector<double> p_ref(master.begin(), master.end()), m_ref(n, 0.0), v_ref(n, 0.0);
    std::vector<uint16_t> w(n), g16(n);
    const float grad_scale = 0.5f;
    for (int step = 1; step <= 3; ++step) {
      const auto gf = random_uniform(n, -2, 2, 10 + step);
      convert_from_fp32(gf.data(), g16.data(), t, n);
      std::vector<float> g(n);
      convert_to_fp32(g16.data(), t, g.data(), n);  // what the kernel reads
      dev.d.adamw(master.data(), w.data(), t, g16.data(), t, m.data(), v.data(), n, h.lr, h.beta1, h.beta2, h.eps, h.wd,
                  step, grad_scale);
      reference_step(p_ref, m_ref, v_ref, g, grad_scale, h, step);
    }
    expect_close(master, p_ref, h.lr);
    expect_close(m, m_ref, 0.1 * 1.0);   // (1 − β1)·max|g·grad_scale|
    expect_close(v, v_ref, 0.05 * 1.0);  // (1 − β2)·max (g·grad_scale)²
    std::vector<uint16_t> rounded(n);
    convert_from_fp32(master.data(), rounded.data(), t, n);
    EXPECT_EQ(w, rounded);  // weights = round(master), bit for bit
  }
}

TEST(AdamW, Fp32WeightsWithoutMaster) {
  Dev dev;
  const Hyper h;
  const int64_t n = 1000;
  std::vector<float> w = random_uniform(n, -1, 1, 2), m(n, 0.0f), v(n, 0.0f);
  std::vector<double> p_ref(w.begin(), w.end()), m_ref(n, 0.0), v_ref(n, 0.0);
  for (int step = 1; step <= 3; ++step) {
    const auto g = random_uniform(n, -1, 1, 20 + step);
    dev.d.adamw(nullptr, w.data(), DType::kFP32, g.data(), DType::kFP32, m.data(), v.data(), n, h.lr, h.beta1, h.beta2,
                h.eps, h.wd, step, 1.0f);
    reference_step(p_ref, m_ref, v_ref, g, 1.0, h, step);
  }
  expect_close(w, p_ref, h.lr);
}

TEST(AdamW, FirstStepMovesEachWeightByAboutLr) {
  // Step 1: m̂ = g and v̂ = g², so p1 = p0 − lr·(g/(|g| + ε) + wd·p0): a move of
  // lr against the gradient's sign, plus the decay (Kingma & Ba 2015, §2.1).
  Dev dev;
  std::vector<float> w = {1.0f, -2.0f, 0.5f}, m(3, 0.0f), v(3, 0.0f);
  const std::vector<float> g = {3.0f, -0.25f, 1e-3f};
  dev.d.adamw(nullptr, w.data(), DType::kFP32, g.data(), DType::kFP32, m.data(), v.data(), 3, 0.1f, 0.9f, 0.999f, 1e-8f,
              0.0f, 1, 1.0f);
  EXPECT_NEAR(w[0], 0.9, 1e-6);
  EXPECT_NEAR(w[1], -1.9, 1e-6);
  EXPECT_NEAR(w[2], 0.4, 1e-5);  // |g| = 1e-3 ≫ ε still gives a full step
}

TEST(AdamW, GradScaleActsAsPrescaledGradients) {
  Dev dev;
  const Hyper h;
  const int64_t n = 513;
  const auto g = random_uniform(n, -1, 1, 3);
  const float s = 0.37f;
  std::vector<float> gs(n);
  for (int64_t i = 0; i < n; ++i) gs[i] = g[i] * s;  // the same fp32 product the kernel forms
  std::vector<float> p1 = random_uniform(n, -1, 1, 4), p2 = p1, m1(n, 0.0f), m2(n, 0.0f), v1(n, 0.0f), v2(n, 0.0f);
  dev.d.adamw(nullptr, p1.data(), DType::kFP32, g.data(), DType::kFP32, m1.data(), v1.data(), n, h.lr, h.beta1, h.beta2,
              h.eps, h.wd, 1, s);
  dev.d.adamw(nullptr, p2.data(), DType::kFP32, gs.data(), DType::kFP32, m2.data(), v2.data(), n, h.lr, h.beta1,
              h.beta2, h.eps, h.wd, 1, 1.0f);
  EXPECT_EQ(p1, p2);
  EXPECT_EQ(m1, m2);
  EXPECT_EQ(v1, v2);
}

TEST(AdamW, RejectsBadArguments) {
  Dev dev;
  std::vector<float> p(4), m(4), v(4), g(4);
  std::vector<uint16_t> w16(4);
  EXPECT_THROW(dev.d.adamw(nullptr, p.data(), DType::kFP32, g.data(), DType::kFP32, m.data(), v.data(), 4, 1e-3f, 0.9f,
                           0.95f, 1e-8f, 0.0f, 0, 1.0f),
               std::invalid_argument);  // steps count from 1
  EXPECT_THROW(dev.d.adamw(nullptr, w16.data(), DType::kBF16, g.data(), DType::kFP32, m.data(), v.data(), 4, 1e-3f,
                           0.9f, 0.95f, 1e-8f, 0.0f, 1, 1.0f),
               std::invalid_argument);  // 16-bit weights need a master copy
}

TEST(SumSquares, MatchesDoubleReference) {
  Dev dev;
  const int64_t n = 300001;  // several fixed blocks and a tail
  const auto f = random_uniform(n, -1, 1, 5);
  std::vector<uint16_t> b(n);
  convert_from_fp32(f.data(), b.data(), DType::kBF16, n);
  std::vector<float> bf(n);
  convert_to_fp32(b.data(), DType::kBF16, bf.data(), n);
  double ref32 = 0, ref16 = 0;
  for (int64_t i = 0; i < n; ++i) {
    ref32 += static_cast<double>(f[i]) * f[i];
    ref16 += static_cast<double>(bf[i]) * bf[i];
  }
  // Products are exact in double; summation in another order errs by at most
  // γ_n·Σ ≈ 3e5·1.1e-16 ≈ 3.3e-11 relative.
  EXPECT_NEAR(dev.d.sum_squares(f.data(), DType::kFP32, n), ref32, 1e-10 * ref32);
  EXPECT_NEAR(dev.d.sum_squares(b.data(), DType::kBF16, n), ref16, 1e-10 * ref16);
  EXPECT_EQ(dev.d.sum_squares(f.data(), DType::kFP32, 0), 0.0);
  const std::vector<float> small = {3.0f, 4.0f};
  EXPECT_EQ(dev.d.sum_squares(small.data(), DType::kFP32, 2), 25.0);
}

TEST(SumSquares, GlobalNormClipping) {
  // Clipping as Megatron's clip_grad_norm: norm = sqrt(Σ over all gradients of
  // g²); if norm > max_norm, every gradient is scaled by max_norm / norm —
  // here through adamw's grad_scale, compared with the reference fed
  // gradients scaled in double.
  Dev dev;
  const Hyper h;
  const int64_t n1 = 300, n2 = 200;
  const auto g1 = random_uniform(n1, -1, 1, 6), g2 = random_uniform(n2, -1, 1, 7);
  const double norm =
      std::sqrt(dev.d.sum_squares(g1.data(), DType::kFP32, n1) + dev.d.sum_squares(g2.data(), DType::kFP32, n2));
  double ref_ss = 0;
  for (float x : g1) ref_ss += double(x) * x;
  for (float x : g2) ref_ss += double(x) * x;
  EXPECT_NEAR(norm, std::sqrt(ref_ss), 1e-12 * std::sqrt(ref_ss));
  const double max_norm = 1.0;
  ASSERT_GT(norm, max_norm);  // ≈ sqrt(500/3) ≈ 12.9
  const float clip = static_cast<float>(max_norm / norm);

  std::vector<float> p = random_uniform(n1, -1, 1, 8), m(n1, 0.0f), v(n1, 0.0f);
  std::vector<double> p_ref(p.begin(), p.end()), m_ref(n1, 0.0), v_ref(n1, 0.0);
  dev.d.adamw(nullptr, p.data(), DType::kFP32, g1.data(), DType::kFP32, m.data(), v.data(), n1, h.lr, h.beta1, h.beta2,
              h.eps, h.wd, 1, clip);
  reference_step(p_ref, m_ref, v_ref, g1, clip, h, 1);
  expect_close(p, p_ref, h.lr);
  expect_close(m, m_ref, 0.1 * clip);
}

}  // namespace
}  // namespace gpuledger
