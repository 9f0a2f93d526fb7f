// CPU flash attention (kernels/cpu/ops_flash.cpp) against the naive double
// materialized reference (tests/kernels/attention_reference.h): forward output
// and log-sum-exp, backward dq, dk, dv, finite differences, GQA / MQA, sliding
// window, dropout drawn at the flat (B, Hq, T, T) index exactly as dropout_forward
// draws it on the materialized probabilities, T not a multiple of the 64-row
// tile, the FLOP count, and bf16 storage.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <optional>
#include <random>
#include <stdexcept>
#include <vector>

#include "kernels/cpu/cpu_device.h"
#include "kernels/flop_counts.h"
#include "tests/kernels/attention_reference.h"

namespace gpuledger {
namespace {

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

struct Case {
  int64_t B, Hq, Hkv, T, D;
  std::optional<int64_t> window;
  float p;
};

AttnShape shape_of(const Case& c) {
  AttnShape s;
  s.B = c.B, s.Hq = c.Hq, s.Hkv = c.Hkv, s.T = c.T, s.D = c.D, s.window = c.window;
  return s;
}

// T = 130 is two full 64-row tiles and a partial one; window 40 makes the last
// query tile skip key tile 0 entirely; 64 is exactly one tile; T = 1 the smallest;
// the last case is large enough (B·Hq·T²·D > 2²²) for the op to run multithreaded.
const std::vector<Case> kCases = {
    {2, 4, 2, 130, 16, std::nullopt, 0.0f}, {2, 4, 2, 130, 16, 40, 0.0f},
    {2, 4, 2, 130, 16, std::nullopt, 0.1f}, {2, 4, 2, 130, 16, 40, 0.1f},
    {1, 2, 2, 67, 32, std::nullopt, 0.1f},  {1, 3, 1, 64, 8, 17, 0.3f},
    {1, 1, 1, 1, 4, std::nullopt, 0.0f},    {2, 4, 2, 200, 32, 90, 0.1f},
};

struct Inputs {
  std::vector<float> q, k, v, dout;
};
Inputs make_inputs(const AttnShape& s, uint32_t seed) {
  // |q|, |k| ≤ 2 with D ≤ 32: scaled scores up to ~20, so the softmax is far from uniform.
  return {random_vector(s.B * s.Hq * s.T * s.D, seed, -2, 2), random_vector(s.B * s.Hkv * s.T * s.D, seed + 1, -2, 2),
          random_vector(s.B * s.Hkv * s.T * s.D, seed + 2), random_vector(s.B * s.Hq * s.T * s.D, seed + 3)};
}

class Flash : public ::testing::Test {
 protected:
  Ledger ledger;
  CpuDevice dev{ledger};
  const RngKey key{777, 12345};
};

// fp32 flash vs double: each output is a sum of ≤ 130 terms of O(1) computed in
// a different order (online rescaling): error ~1e-6; tolerance 1e-5 of the largest
// output (≈ 1 here), i.e. 1e-5 relative. lse (≈ log T + max score): same bound.
TEST_F(Flash, ForwardMatchesNaiveReference) {
  uint32_t seed = 10;
  for (const Case& c : kCases) {
    const AttnShape s = shape_of(c);
    const Inputs in = make_inputs(s, seed += 10);
    std::vector<float> out(in.q.size()), lse(s.B * s.Hq * s.T);
    dev.flash_attention_forward(out.data(), lse.data(), in.q.data(), in.k.data(), in.v.data(), DType::kFP32, s, c.p,
                                key);
    const auto ref = test::attention_reference(in.q, in.k, in.v, s, c.p, key);
    const double tol = 1e-5 * std::max(1.0, max_abs(ref.out));
    for (size_t i = 0; i < out.size(); ++i)
      ASSERT_NEAR(out[i], ref.out[i], tol) << "T " << c.T << " p " << c.p << " element " << i;
    for (size_t i = 0; i < lse.size(); ++i)
      ASSERT_NEAR(lse[i], ref.lse[i], 1e-5 * std::max(1.0, std::abs(ref.lse[i]))) << "T " << c.T << " row " << i;
  }
}

// The multipliers flash applies are exactly dropout_forward's mask on a
// (B, Hq, T, T) tensor with the same key: run dropout_forward on ones and compare
// with the reference's multipliers (which the forward test shows flash uses).
TEST_F(Flash, DropoutIsTheMaterializedMaskOnTheProbabilities) {
  AttnShape s = shape_of(kCases[3]);
  const float p = 0.1f;
  const int64_t n = s.B * s.Hq * s.T * s.T;
  std::vector<float> ones(n, 1.0f), dropped(n);
  std::vector<uint8_t> mask(n);
  dev.dropout_forward(dropped.data(), mask.data(), ones.data(), DType::kFP32, n, p, key);
  const Inputs in = make_inputs(s, 3);
  const auto ref = test::attention_reference(in.q, in.k, in.v, s, p, key);
  int64_t dropped_count = 0;
  for (int64_t e = 0; e < n; ++e) {
    ASSERT_EQ(mask[e] != 0, ref.Z[e] != 0.0) << e;
    dropped_count += mask[e] == 0;
  }
  EXPECT_GT(dropped_count, 0);
  // And dropout changes the result (the mask is really applied).
  std::vector<float> o0(in.q.size()), o1(in.q.size()), lse(s.B * s.Hq * s.T);
  dev.flash_attention_forward(o0.data(), lse.data(), in.q.data(), in.k.data(), in.v.data(), DType::kFP32, s, 0.0f, key);
  dev.flash_attention_forward(o1.data(), lse.data(), in.q.data(), in.k.data(), in.v.data(), DType::kFP32, s, p, key);
  EXPECT_NE(o0, o1);
}

// Window 1: each query sees only itself, so out_i = v_i exactly (p = exp(0) / 1)
// and lse_i = scale·q_i·k_i (fp32 dot of 8 terms: tolerance 1e-6).
TEST_F(Flash, WindowOfOneCopiesV) {
  AttnShape s;
  s.B = 2, s.Hq = 4, s.Hkv = 2, s.T = 70, s.D = 8, s.window = 1;
  const Inputs in = make_inputs(s, 4);
  std::vector<float> out(in.q.size()), lse(s.B * s.Hq * s.T);
  dev.flash_attention_forward(out.data(), lse.data(), in.q.data(), in.k.data(), in.v.data(), DType::kFP32, s, 0.0f,
                              key);
  for (int64_t b = 0; b < s.B; ++b)
    for (int64_t h = 0; h < s.Hq; ++h)
      for (int64_t i = 0; i < s.T; ++i) {
        const int64_t qr = ((b * s.Hq + h) * s.T + i) * s.D;
        const int64_t kr = ((b * s.Hkv + h / 2) * s.T + i) * s.D;
        double dot = 0;
        for (int64_t d = 0; d < s.D; ++d) {
          EXPECT_EQ(out[qr + d], in.v[kr + d]);
          dot += static_cast<double>(in.q[qr + d]) * in.k[kr + d];
        }
        EXPECT_NEAR(lse[(b * s.Hq + h) * s.T + i], dot / std::sqrt(8.0), 1e-6);
      }
}

// Backward vs the materialized chain rule in double. fp32 gradients are sums of
// ≤ T·(Hq/Hkv) = 260 products accumulated tile by tile: errors ~1e-6 of the
// largest gradient; tolerance 1e-5 of each tensor's largest reference value.
TEST_F(Flash, BackwardMatchesNaiveReference) {
  uint32_t seed = 100;
  for (const Case& c : kCases) {
    const AttnShape s = shape_of(c);
    const Inputs in = make_inputs(s, seed += 10);
    std::vector<float> out(in.q.size()), lse(s.B * s.Hq * s.T), dq(in.q.size()), dk(in.k.size(), 9.0f),
        dv(in.v.size(), 9.0f);
    dev.flash_attention_forward(out.data(), lse.data(), in.q.data(), in.k.data(), in.v.data(), DType::kFP32, s, c.p,
                                key);
    dev.flash_attention_backward(dq.data(), dk.data(), dv.data(), in.dout.data(), in.q.data(), in.k.data(), in.v.data(),
                                 out.data(), lse.data(), DType::kFP32, s, c.p, key);
    const auto ref = test::attention_reference(in.q, in.k, in.v, s, c.p, key);
    const auto g = test::attention_reference_backward(in.dout, in.q, in.k, in.v, s, ref);
    const double tq = 1e-5 * max_abs(g.dq), tk = 1e-5 * max_abs(g.dk), tv = 1e-5 * max_abs(g.dv);
    for (size_t i = 0; i < dq.size(); ++i) ASSERT_NEAR(dq[i], g.dq[i], tq) << "T " << c.T << " dq " << i;
    for (size_t i = 0; i < dk.size(); ++i) ASSERT_NEAR(dk[i], g.dk[i], tk) << "T " << c.T << " dk " << i;
    for (size_t i = 0; i < dv.size(); ++i) ASSERT_NEAR(dv[i], g.dv[i], tv) << "T " << c.T << " dv " << i;
  }
}

// Central differences of the fp32 forward on L = Σ w ⊙ out (dropout p = 0.1 with
// its fixed mask: L is smooth), every element of q, k and v. h = 1e-2: truncation
// h²/6·|L'''| ~ 1e-5; rounding: the ≤ 480 outputs one perturbation touches, ~1e-7
// each, random in sign, over 2h: ~1e-5 (the largest difference seen is 1.6e-5).
// Tolerance 1e-4, against gradients of 0.4 to 1.3.
TEST_F(Flash, BackwardMatchesFiniteDifferences) {
  AttnShape s;
  s.B = 1, s.Hq = 2, s.Hkv = 1, s.T = 70, s.D = 8, s.window = 30;
  const float p = 0.1f;
  Inputs in = make_inputs(s, 5);
  in.q = random_vector(in.q.size(), 50), in.k = random_vector(in.k.size(), 51);  // |q|, |k| ≤ 1
  std::vector<float> out(in.q.size()), lse(s.B * s.Hq * s.T), dq(in.q.size()), dk(in.k.size()), dv(in.v.size());
  dev.flash_attention_forward(out.data(), lse.data(), in.q.data(), in.k.data(), in.v.data(), DType::kFP32, s, p, key);
  dev.flash_attention_backward(dq.data(), dk.data(), dv.data(), in.dout.data(), in.q.data(), in.k.data(), in.v.data(),
                               out.data(), lse.data(), DType::kFP32, s, p, key);
  auto loss = [&](const std::vector<float>& q, const std::vector<float>& k, const std::vector<float>& v) {
    std::vector<float> o(q.size()), l(s.B * s.Hq * s.T);
    dev.flash_attention_forward(o.data(), l.data(), q.data(), k.data(), v.data(), DType::kFP32, s, p, key);
    double sum = 0;
    for (size_t i = 0; i < o.size(); ++i) sum += static_cast<double>(in.dout[i]) * o[i];
    return sum;
  };
  const float h = 1e-2f;
  for (int which = 0; which < 3; ++which) {
    std::vector<float>* x = which == 0 ? &in.q : which == 1 ? &in.k : &in.v;
    const std::vector<float>& grad = which == 0 ? dq : which == 1 ? dk : dv;
    for (size_t e = 0; e < x->size(); ++e) {
      const float x0 = (*x)[e];
      (*x)[e] = x0 + h;
      const double lp = loss(in.q, in.k, in.v);
      (*x)[e] = x0 - h;
      const double lm = loss(in.q, in.k, in.v);
      (*x)[e] = x0;
      const double fd = (lp - lm) / ((static_cast<double>(x0) + h) - (static_cast<double>(x0) - h));
      ASSERT_NEAR(grad[e], fd, 1e-4) << "tensor "
                                     << "qkv"[which] << " element " << e;
    }
  }
}

// The counter takes the full T×T figure for both passes (flop_counts.h), even
// though fully masked tiles are skipped: for B = 2, Hq = 4, T = 130, D = 16,
// B·Hq·T²·D = 2·4·16900·16 = 2,163,200; forward 4× that = 8,652,800, backward
// 10× = 21,632,000 (with or without a window or dropout).
TEST_F(Flash, CountsTheFullFlopFigure) {
  const AttnShape s = shape_of(kCases[3]);
  const Inputs in = make_inputs(s, 7);
  std::vector<float> out(in.q.size()), lse(s.B * s.Hq * s.T), dq(in.q.size()), dk(in.k.size()), dv(in.v.size());
  dev.reset_flops();
  dev.flash_attention_forward(out.data(), lse.data(), in.q.data(), in.k.data(), in.v.data(), DType::kFP32, s, 0.1f,
                              key);
  EXPECT_EQ(dev.executed_flops(), 8652800);
  EXPECT_EQ(dev.executed_flops(), flash_forward_flops(s));
  dev.flash_attention_backward(dq.data(), dk.data(), dv.data(), in.dout.data(), in.q.data(), in.k.data(), in.v.data(),
                               out.data(), lse.data(), DType::kFP32, s, 0.1f, key);
  EXPECT_EQ(dev.executed_flops(), 8652800 + 21632000);
  EXPECT_EQ(dev.executed_flops(), flash_forward_flops(s) + flash_backward_flops(s));
  // The ledger is untouched: tile scratch is not booked.
  EXPECT_EQ(ledger.peak_total(), 0);
}

// bf16 q, k, v, dout; fp32 compute. Forward vs the double reference on the same
// bf16 values: out is rounded once to bf16 (≤ 2⁻⁸ relative) on top of the fp32
// error: tolerance 2⁻⁸·|ref| + 1e-5·max. lse is fp32 from the same inputs: 1e-5.
// Backward: dO and the saved O are bf16, so D_i = Σ dO∘O carries a 2⁻⁸ relative
// error into every dS, and the results round to bf16: tolerance 2⁻⁶ of each
// tensor's largest reference value.
TEST_F(Flash, Bf16StorageComputesInFp32) {
  const AttnShape s = shape_of(kCases[3]);
  const float p = 0.1f;
  Inputs in = make_inputs(s, 8);
  auto to_bf16 = [](std::vector<float>& x) {
    std::vector<uint16_t> r(x.size());
    for (size_t i = 0; i < x.size(); ++i) r[i] = fp32_to_bf16(x[i]), x[i] = bf16_to_fp32(r[i]);
    return r;
  };
  const auto q = to_bf16(in.q), k = to_bf16(in.k), v = to_bf16(in.v), dout = to_bf16(in.dout);
  std::vector<uint16_t> out(q.size()), dq(q.size()), dk(k.size()), dv(v.size());
  std::vector<float> lse(s.B * s.Hq * s.T);
  dev.flash_attention_forward(out.data(), lse.data(), q.data(), k.data(), v.data(), DType::kBF16, s, p, key);
  const auto ref = test::attention_reference(in.q, in.k, in.v, s, p, key);
  const double m = max_abs(ref.out);
  for (size_t i = 0; i < out.size(); ++i)
    ASSERT_NEAR(bf16_to_fp32(out[i]), ref.out[i], std::abs(ref.out[i]) / 256 + 1e-5 * m) << i;
  for (size_t i = 0; i < lse.size(); ++i) ASSERT_NEAR(lse[i], ref.lse[i], 1e-5 * std::max(1.0, std::abs(ref.lse[i])));

  dev.flash_attention_backward(dq.data(), dk.data(), dv.data(), dout.data(), q.data(), k.data(), v.data(), out.data(),
                               lse.data(), DType::kBF16, s, p, key);
  const auto g = test::attention_reference_backward(in.dout, in.q, in.k, in.v, s, ref);
  const double tq = max_abs(g.dq) / 64, tk = max_abs(g.dk) / 64, tv = max_abs(g.dv) / 64;
  for (size_t i = 0; i < dq.size(); ++i) ASSERT_NEAR(bf16_to_fp32(dq[i]), g.dq[i], tq) << i;
  for (size_t i = 0; i < dk.size(); ++i) ASSERT_NEAR(bf16_to_fp32(dk[i]), g.dk[i], tk) << i;
  for (size_t i = 0; i < dv.size(); ++i) ASSERT_NEAR(bf16_to_fp32(dv[i]), g.dv[i], tv) << i;
}

TEST_F(Flash, BadArgumentsAreErrors) {
  AttnShape s;
  s.B = 1, s.Hq = 3, s.Hkv = 2, s.T = 4, s.D = 2;
  std::vector<float> buf(64);
  EXPECT_THROW(dev.flash_attention_forward(buf.data(), buf.data(), buf.data(), buf.data(), buf.data(), DType::kFP32, s,
                                           0.0f, key),
               std::invalid_argument);
  s.Hkv = 1;
  EXPECT_THROW(dev.flash_attention_forward(buf.data(), buf.data(), buf.data(), buf.data(), buf.data(), DType::kFP32, s,
                                           -0.1f, key),
               std::invalid_argument);
}

}  // namespace
}  // namespace gpuledger
