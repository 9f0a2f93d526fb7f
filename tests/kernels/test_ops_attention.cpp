// CPU materialized-attention ops (kernels/cpu/ops_attention.cpp): head layout
// moves, the masked softmax and its backward (double reference, finite
// differences, exact zeros under the causal and window masks, bf16 storage), and
// a whole materialized attention forward + backward composed from device ops
// (gemm, softmax, dropout) against the naive double reference.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "kernels/cpu/cpu_device.h"
#include "tests/kernels/attention_reference.h"

namespace gpuledger {
namespace {

using test::visible;

std::vector<float> random_vector(int64_t n, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> x(n);
  for (auto& v : x) v = dist(gen);
  return x;
}

double max_abs(const std::vector<double>& x) {
  double m = 0;
  for (double v : x) m = std::max(m, std::abs(v));
  return m;
}

class Attention : public ::testing::Test {
 protected:
  Ledger ledger;
  CpuDevice dev{ledger};
};

// ---- layout moves: pure copies, checked element by element ----

TEST_F(Attention, SplitQkvPlacesEveryHeadAndMergeInvertsIt) {
  AttnShape s;
  s.B = 2, s.Hq = 4, s.Hkv = 2, s.T = 5, s.D = 3;
  const int64_t W = (s.Hq + 2 * s.Hkv) * s.D;
  std::vector<float> qkv(s.B * s.T * W);
  for (size_t i = 0; i < qkv.size(); ++i) qkv[i] = static_cast<float>(i);  // each value its index
  std::vector<float> q(s.B * s.Hq * s.T * s.D), k(s.B * s.Hkv * s.T * s.D), v(k.size());
  dev.split_qkv(q.data(), k.data(), v.data(), qkv.data(), DType::kFP32, s);
  for (int64_t b = 0; b < s.B; ++b)
    for (int64_t t = 0; t < s.T; ++t)
      for (int64_t d = 0; d < s.D; ++d) {
        const int64_t row = (b * s.T + t) * W;
        for (int64_t h = 0; h < s.Hq; ++h) EXPECT_EQ(q[((b * s.Hq + h) * s.T + t) * s.D + d], qkv[row + h * s.D + d]);
        for (int64_t g = 0; g < s.Hkv; ++g) {
          EXPECT_EQ(k[((b * s.Hkv + g) * s.T + t) * s.D + d], qkv[row + (s.Hq + g) * s.D + d]);
          EXPECT_EQ(v[((b * s.Hkv + g) * s.T + t) * s.D + d], qkv[row + (s.Hq + s.Hkv + g) * s.D + d]);
        }
      }
  std::vector<float> back(qkv.size(), -1.0f);
  dev.merge_qkv_grad(back.data(), q.data(), k.data(), v.data(), DType::kFP32, s);
  EXPECT_EQ(back, qkv);

  // 16-bit storage: the same moves on 2-byte elements, bit for bit.
  std::vector<uint16_t> qkv16(qkv.size()), q16(q.size()), k16(k.size()), v16(v.size()), back16(qkv.size());
  for (size_t i = 0; i < qkv.size(); ++i) qkv16[i] = static_cast<uint16_t>(i * 7 + 1);
  dev.split_qkv(q16.data(), k16.data(), v16.data(), qkv16.data(), DType::kBF16, s);
  EXPECT_EQ(q16[((1 * s.Hq + 3) * s.T + 4) * s.D + 2], qkv16[(1 * s.T + 4) * W + 3 * s.D + 2]);
  dev.merge_qkv_grad(back16.data(), q16.data(), k16.data(), v16.data(), DType::kBF16, s);
  EXPECT_EQ(back16, qkv16);
}

TEST_F(Attention, MergeHeadsAndSplitHeadsAreInverse) {
  AttnShape s;
  s.B = 2, s.Hq = 3, s.Hkv = 1, s.T = 4, s.D = 5;
  const int64_t n = s.B * s.Hq * s.T * s.D;
  std::vector<float> ctx(n), out(n), back(n);
  for (int64_t i = 0; i < n; ++i) ctx[i] = static_cast<float>(i);
  dev.merge_heads(out.data(), ctx.data(), DType::kFP32, s);
  for (int64_t b = 0; b < s.B; ++b)
    for (int64_t h = 0; h < s.Hq; ++h)
      for (int64_t t = 0; t < s.T; ++t)
        for (int64_t d = 0; d < s.D; ++d)
          EXPECT_EQ(out[(b * s.T + t) * s.Hq * s.D + h * s.D + d], ctx[((b * s.Hq + h) * s.T + t) * s.D + d]);
  dev.split_heads(back.data(), out.data(), DType::kFP32, s);
  EXPECT_EQ(back, ctx);

  // Large enough (> 2¹⁵ elements) to run multithreaded: still an exact round trip.
  s.B = 2, s.Hq = 8, s.T = 64, s.D = 64;
  const int64_t m = s.B * s.Hq * s.T * s.D;
  std::vector<float> big(m), merged(m), split(m);
  for (int64_t i = 0; i < m; ++i) big[i] = static_cast<float>(i);
  dev.merge_heads(merged.data(), big.data(), DType::kFP32, s);
  EXPECT_EQ(merged[(1 * s.T + 63) * s.Hq * s.D + 7 * s.D + 5], big[((1 * s.Hq + 7) * s.T + 63) * s.D + 5]);
  dev.split_heads(split.data(), merged.data(), DType::kFP32, s);
  EXPECT_EQ(split, big);
}

// ---- softmax ----

// Masked scores are NaN: the op must never read them, and must write exact zeros.
// Visible probabilities vs double: fp32 exp and sum, tolerance 1e-6 relative.
TEST_F(Attention, SoftmaxForwardMatchesReferenceWithExactZeros) {
  // The last shape has B·Hq·T² > 2¹⁵: the op runs multithreaded.
  struct Shape {
    int64_t Hq, T;
    std::optional<int64_t> window;
  };
  for (const Shape& sh : {Shape{3, 9, std::nullopt}, Shape{3, 9, 3}, Shape{4, 100, 33}}) {
    AttnShape s;
    s.B = 2, s.Hq = sh.Hq, s.Hkv = 1, s.T = sh.T, s.D = 4, s.window = sh.window;
    const int64_t T = s.T, rows = s.B * s.Hq * T;
    auto scores = random_vector(rows * T, 1, -4.0f, 4.0f);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t j = 0; j < T; ++j)
        if (!visible(s, r % T, j)) scores[r * T + j] = std::numeric_limits<float>::quiet_NaN();
    std::vector<float> probs(rows * T, -1.0f);
    dev.softmax_forward(probs.data(), scores.data(), DType::kFP32, s);
    const double scale = 0.5;  // 1/sqrt(4)
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t i = r % T;
      double sum = 0, psum = 0;
      for (int64_t j = 0; j < T; ++j)
        if (visible(s, i, j)) sum += std::exp(scale * scores[r * T + j]);
      for (int64_t j = 0; j < T; ++j) {
        if (!visible(s, i, j)) {
          EXPECT_EQ(probs[r * T + j], 0.0f) << "row " << r << " key " << j;
          continue;
        }
        const double ref = std::exp(scale * scores[r * T + j]) / sum;
        EXPECT_NEAR(probs[r * T + j], ref, 1e-6 * ref) << "row " << r << " key " << j;
        psum += probs[r * T + j];
      }
      EXPECT_NEAR(psum, 1.0, 1e-6);
    }
  }
}

// dscores vs (a) the double Jacobian product and (b) central differences of the
// fp32 op on L = Σ w ⊙ probs. (a): fp32 rounding, tolerance 1e-6 absolute
// (|dscores| < 1). (b): h = 1e-2 in score units; truncation h²·scale³/6·O(1)
// < 1e-5, rounding T·6e-8/(2h) < 3e-5: tolerance 1e-4.
TEST_F(Attention, SoftmaxBackwardMatchesJacobianAndFiniteDifferences) {
  AttnShape s;
  s.B = 1, s.Hq = 2, s.Hkv = 2, s.T = 7, s.D = 4, s.window = 4;
  const int64_t T = s.T, rows = s.B * s.Hq * T, n = rows * T;
  const auto scores = random_vector(n, 2, -3.0f, 3.0f);
  auto w = random_vector(n, 3);
  std::vector<float> probs(n), dscores(n, 7.0f);
  dev.softmax_forward(probs.data(), scores.data(), DType::kFP32, s);
  // Masked upstream gradients are NaN: they must not leak into dscores.
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < T; ++j)
      if (!visible(s, r % T, j)) w[r * T + j] = std::numeric_limits<float>::quiet_NaN();
  dev.softmax_backward(dscores.data(), w.data(), probs.data(), DType::kFP32, s);
  const double scale = 0.5;
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t i = r % T;
    double dot = 0;
    for (int64_t j = 0; j < T; ++j)
      if (visible(s, i, j)) dot += static_cast<double>(w[r * T + j]) * probs[r * T + j];
    for (int64_t j = 0; j < T; ++j) {
      if (!visible(s, i, j)) {
        EXPECT_EQ(dscores[r * T + j], 0.0f);
        continue;
      }
      const double ref = probs[r * T + j] * (w[r * T + j] - dot) * scale;
      EXPECT_NEAR(dscores[r * T + j], ref, 1e-6);
    }
  }
  auto loss = [&](const std::vector<float>& sc) {
    std::vector<float> pr(n);
    dev.softmax_forward(pr.data(), sc.data(), DType::kFP32, s);
    double l = 0;
    for (int64_t e = 0; e < n; ++e)
      if (visible(s, (e / T) % T, e % T)) l += static_cast<double>(w[e]) * pr[e];
    return l;
  };
  const float h = 1e-2f;
  for (int64_t e = 0; e < n; ++e) {
    if (!visible(s, (e / T) % T, e % T)) continue;
    auto sp = scores, sm = scores;
    sp[e] += h;
    sm[e] -= h;
    const double fd = (loss(sp) - loss(sm)) / (static_cast<double>(sp[e]) - sm[e]);
    EXPECT_NEAR(dscores[e], fd, 1e-4) << "element " << e;
  }
}

// bf16 probabilities: computed in fp32, rounded once (half a bf16 ulp: at
// most 2⁻⁸ relative);
// zeros stay exact. The backward reads bf16 probabilities and computes in fp32:
// vs the double formula on the same bf16 values, tolerance 1e-6.
TEST_F(Attention, SoftmaxWithBf16Probabilities) {
  AttnShape s;
  s.B = 1, s.Hq = 2, s.Hkv = 1, s.T = 11, s.D = 16;
  const int64_t T = s.T, n = s.B * s.Hq * T * T;
  const auto scores = random_vector(n, 4, -8.0f, 8.0f);
  std::vector<uint16_t> probs(n);
  std::vector<float> p32(n);
  dev.softmax_forward(probs.data(), scores.data(), DType::kBF16, s);
  dev.softmax_forward(p32.data(), scores.data(), DType::kFP32, s);
  for (int64_t e = 0; e < n; ++e) {
    if (!visible(s, (e / T) % T, e % T)) {
      EXPECT_EQ(probs[e], 0u);
      continue;
    }
    EXPECT_NEAR(bf16_to_fp32(probs[e]), p32[e], p32[e] / 256) << e;
  }
  const auto w = random_vector(n, 5);
  std::vector<float> ds(n);
  dev.softmax_backward(ds.data(), w.data(), probs.data(), DType::kBF16, s);
  for (int64_t r = 0; r < s.B * s.Hq * T; ++r) {
    double dot = 0;
    for (int64_t j = 0; j <= r % T; ++j) dot += static_cast<double>(w[r * T + j]) * bf16_to_fp32(probs[r * T + j]);
    for (int64_t j = 0; j <= r % T; ++j) {
      const double ref = bf16_to_fp32(probs[r * T + j]) * (w[r * T + j] - dot) * 0.25;
      EXPECT_NEAR(ds[r * T + j], ref, 1e-6);
    }
  }
}

// ---- a whole materialized attention from device ops ----

// Forward: scores = Q·Kᵀ (gemm), probs = softmax (mask, scale), dropped =
// dropout(probs) with the flat (B, Hq, T, T) index, ctx = dropped·V (gemm).
// Backward: dV += droppedᵀ·dctx, dP = dropout_backward(dctx·Vᵀ), dS = softmax_backward,
// dQ = dS·K, dK += dSᵀ·Q. Against the naive double reference, GQA (Hq = 4, Hkv = 2),
// window 5, p = 0.2. fp32 throughout: errors are a few ulp of sums of ≤ T = 13
// terms of O(1); tolerances 1e-5 of the largest reference value.
TEST_F(Attention, MaterializedAttentionFromDeviceOpsMatchesReference) {
  AttnShape s;
  s.B = 2, s.Hq = 4, s.Hkv = 2, s.T = 13, s.D = 8, s.window = 5;
  const float p = 0.2f;
  const RngKey key{2024, 17};
  const int64_t B = s.B, Hq = s.Hq, Hkv = s.Hkv, T = s.T, D = s.D, group = Hq / Hkv;
  const auto q = random_vector(B * Hq * T * D, 6, -2, 2), k = random_vector(B * Hkv * T * D, 7, -2, 2),
             v = random_vector(B * Hkv * T * D, 8), dctx = random_vector(B * Hq * T * D, 9);
  const int64_t nP = B * Hq * T * T;
  std::vector<float> scores(nP), probs(nP), dropped(nP), ctx(B * Hq * T * D);
  std::vector<uint8_t> mask(nP);

  auto gemm = [&](bool ta, bool tb, int64_t m, int64_t n, int64_t kk, const float* a, int64_t lda, const float* b,
                  int64_t ldb, float* c, int64_t ldc, float beta) {
    GemmArgs g;
    g.trans_a = ta, g.trans_b = tb, g.m = m, g.n = n, g.k = kk;
    g.a = a, g.lda = lda, g.b = b, g.ldb = ldb, g.c = c, g.ldc = ldc, g.beta = beta;
    dev.gemm(g);
  };
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < Hq; ++h) {
      const int64_t qh = (b * Hq + h) * T * D, kvh = (b * Hkv + h / group) * T * D;
      gemm(false, true, T, T, D, &q[qh], D, &k[kvh], D, &scores[(b * Hq + h) * T * T], T, 0.0f);
    }
  dev.softmax_forward(probs.data(), scores.data(), DType::kFP32, s);
  dev.dropout_forward(dropped.data(), mask.data(), probs.data(), DType::kFP32, nP, p, key);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < Hq; ++h) {
      const int64_t qh = (b * Hq + h) * T * D, kvh = (b * Hkv + h / group) * T * D;
      gemm(false, false, T, D, T, &dropped[(b * Hq + h) * T * T], T, &v[kvh], D, &ctx[qh], D, 0.0f);
    }

  const auto ref = test::attention_reference(q, k, v, s, p, key);
  const double out_tol = 1e-5 * max_abs(ref.out);
  for (size_t i = 0; i < ctx.size(); ++i) ASSERT_NEAR(ctx[i], ref.out[i], out_tol) << i;
  for (int64_t e = 0; e < nP; ++e) ASSERT_EQ(mask[e] != 0, ref.Z[e] != 0.0) << e;

  std::vector<float> dPd(nP), dP(nP), dS(nP), dq(B * Hq * T * D), dk(B * Hkv * T * D, 0.0f), dv(B * Hkv * T * D, 0.0f);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < Hq; ++h) {
      const int64_t qh = (b * Hq + h) * T * D, kvh = (b * Hkv + h / group) * T * D;
      const int64_t ph = (b * Hq + h) * T * T;
      gemm(true, false, T, D, T, &dropped[ph], T, &dctx[qh], D, &dv[kvh], D, 1.0f);
      gemm(false, true, T, T, D, &dctx[qh], D, &v[kvh], D, &dPd[ph], T, 0.0f);
    }
  dev.dropout_backward(dP.data(), DType::kFP32, dPd.data(), DType::kFP32, mask.data(), nP, p);
  dev.softmax_backward(dS.data(), dP.data(), probs.data(), DType::kFP32, s);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < Hq; ++h) {
      const int64_t qh = (b * Hq + h) * T * D, kvh = (b * Hkv + h / group) * T * D;
      const int64_t ph = (b * Hq + h) * T * T;
      gemm(false, false, T, D, T, &dS[ph], T, &k[kvh], D, &dq[qh], D, 0.0f);
      gemm(true, false, T, D, T, &dS[ph], T, &q[qh], D, &dk[kvh], D, 1.0f);
    }
  const auto grads = test::attention_reference_backward(dctx, q, k, v, s, ref);
  const double tq = 1e-5 * max_abs(grads.dq), tk = 1e-5 * max_abs(grads.dk), tv = 1e-5 * max_abs(grads.dv);
  for (size_t i = 0; i < dq.size(); ++i) ASSERT_NEAR(dq[i], grads.dq[i], tq) << i;
  for (size_t i = 0; i < dk.size(); ++i) ASSERT_NEAR(dk[i], grads.dk[i], tk) << i;
  for (size_t i = 0; i < dv.size(); ++i) ASSERT_NEAR(dv[i], grads.dv[i], tv) << i;
}

TEST_F(Attention, BadShapesAreErrors) {
  AttnShape s;
  s.B = 1, s.Hq = 3, s.Hkv = 2, s.T = 4, s.D = 2;  // Hq not a multiple of Hkv
  std::vector<float> buf(1024);
  EXPECT_THROW(dev.softmax_forward(buf.data(), buf.data(), DType::kFP32, s), std::invalid_argument);
  s.Hkv = 1, s.window = 0;
  EXPECT_THROW(dev.softmax_forward(buf.data(), buf.data(), DType::kFP32, s), std::invalid_argument);
}

}  // namespace
}  // namespace gpuledger
