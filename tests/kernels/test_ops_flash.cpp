// CPU flash attention (kernels/cpu/ops_flash.cpp) against the naive double
// materialized reference (tests/kernels/attention_reference.h): forward output
// and log-sum-exp, backward dq, dk, dv, finite differences, GQA / MQA, sliding
// window, dropout drawn at the flat (B, Hq, T, T) index exactly as dropout_forward
// draws it on the materialized probabilities, T not a multiple of the 64-row
// tile, the FLOP count, and bf16 storage. Blocks (kernels/attn_block.h): T
// queries against Tk ≠ T keys under the causal mask on the tokens' positions
// and with every key visible, against a double reference of the rectangle;
// and the blocks of a context-parallel ring (each rank's two chunks against
// every rank's K/V, merged by the log-sum-exp, the backward of each block
// given the merged result) against the whole sequence's reference.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
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

// ---- blocks (kernels/attn_block.h) ----

// The double reference of one block: P = softmax over the visible keys of
// scale·q·k (log-sum-exp `lse`), out = Σ P∘Z·v, Z the dropout multipliers at
// the tokens' positions in the (B, Hq, seq, seq) tensor; the backward of the
// same chain for upstream dout (its own lse: a single block is the whole result).
struct BlockRef {
  std::vector<double> out, lse, dq, dk, dv;
};
BlockRef block_reference(const Inputs& in, const AttnShape& s, const AttnBlock& blk, double p, RngKey key) {
  const int64_t B = s.B, Hq = s.Hq, Hkv = s.Hkv, T = s.T, Tk = blk.Tk, D = s.D, group = Hq / Hkv;
  const double scale = 1.0 / std::sqrt(static_cast<double>(D));
  auto vis = [&](int64_t i, int64_t j) {
    if (!blk.causal) return true;
    const int64_t pq = blk.q_pos.position(i), pk = blk.k_pos.position(j);
    return pk <= pq && (!s.window || pq - *s.window < pk);
  };
  BlockRef r;
  r.out.assign(B * Hq * T * D, 0.0);
  r.lse.assign(B * Hq * T, -INFINITY);
  r.dq.assign(B * Hq * T * D, 0.0);
  r.dk.assign(B * Hkv * Tk * D, 0.0);
  r.dv.assign(B * Hkv * Tk * D, 0.0);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < Hq; ++h) {
      const int64_t qh = (b * Hq + h) * T * D, kh = (b * Hkv + h / group) * Tk * D;
      for (int64_t i = 0; i < T; ++i) {
        std::vector<double> sc(Tk, 0.0), P(Tk, 0.0), Z(Tk, 1.0), dP(Tk, 0.0);
        double mx = -INFINITY, sum = 0;
        for (int64_t j = 0; j < Tk; ++j) {
          if (!vis(i, j)) continue;
          for (int64_t d = 0; d < D; ++d) sc[j] += static_cast<double>(in.q[qh + i * D + d]) * in.k[kh + j * D + d];
          sc[j] *= scale;
          mx = std::max(mx, sc[j]);
        }
        if (mx == -INFINITY) continue;  // no visible key: out 0, lse −inf
        for (int64_t j = 0; j < Tk; ++j)
          if (vis(i, j)) sum += std::exp(sc[j] - mx);
        r.lse[(b * Hq + h) * T + i] = mx + std::log(sum);
        double di = 0;
        for (int64_t j = 0; j < Tk; ++j) {
          if (!vis(i, j)) continue;
          P[j] = std::exp(sc[j] - mx) / sum;
          if (p > 0) {
            const auto e = static_cast<uint64_t>(((b * Hq + h) * blk.seq + blk.q_pos.position(i)) * blk.seq +
                                                 blk.k_pos.position(j));
            Z[j] = philox_uniform(key.seed, key.stream, e) >= p ? 1.0 / (1.0 - p) : 0.0;
          }
          for (int64_t d = 0; d < D; ++d) {
            r.out[qh + i * D + d] += P[j] * Z[j] * in.v[kh + j * D + d];
            dP[j] += static_cast<double>(in.dout[qh + i * D + d]) * in.v[kh + j * D + d];
            r.dv[kh + j * D + d] += P[j] * Z[j] * in.dout[qh + i * D + d];
          }
          dP[j] *= Z[j];
          di += P[j] * dP[j];
        }
        for (int64_t j = 0; j < Tk; ++j) {
          if (!vis(i, j)) continue;
          const double ds = P[j] * (dP[j] - di) * scale;
          for (int64_t d = 0; d < D; ++d) {
            r.dq[qh + i * D + d] += ds * in.k[kh + j * D + d];
            r.dk[kh + j * D + d] += ds * in.q[qh + i * D + d];
          }
        }
      }
    }
  return r;
}

struct BlockCase {
  AttnShape s;
  AttnBlock blk;
  float p;
};

// T = 37 queries at positions 60 … 96 against Tk = 90 keys at 0 … 89 (query i
// sees 61 + i of them: the bottom rows see all); T = 90 against Tk = 37 with
// every key visible; two-span positions on both sides (context parallelism's
// chunks: queries 10 … 44 and 200 … 234, keys 0 … 64 and 180 … 244) with a
// window of 50 and dropout, the key runs crossing the split and the 64-key tile.
std::vector<BlockCase> block_cases() {
  std::vector<BlockCase> v;
  BlockCase a;
  a.s.B = 2, a.s.Hq = 4, a.s.Hkv = 2, a.s.T = 37, a.s.D = 16;
  a.blk.Tk = 90, a.blk.seq = 97, a.blk.q_pos = TokenSpans(60), a.p = 0.0f;
  v.push_back(a);
  BlockCase b;
  b.s.B = 1, b.s.Hq = 2, b.s.Hkv = 1, b.s.T = 90, b.s.D = 8;
  b.blk.Tk = 37, b.blk.seq = 90, b.blk.causal = false, b.p = 0.1f;
  v.push_back(b);
  BlockCase c;
  c.s.B = 2, c.s.Hq = 2, c.s.Hkv = 2, c.s.T = 70, c.s.D = 16, c.s.window = 50;
  c.blk.Tk = 130, c.blk.seq = 300, c.blk.q_pos = TokenSpans(10, 35, 200), c.blk.k_pos = TokenSpans(0, 65, 180);
  c.p = 0.1f;
  v.push_back(c);
  return v;
}

// fp32 vs double as the square case above: 1e-5 of each tensor's largest
// reference value. Outputs of a backward that writes are poisoned first.
TEST_F(Flash, BlockOfTqQueriesAgainstTkKeysMatchesTheReference) {
  uint32_t seed = 500;
  for (const BlockCase& c : block_cases()) {
    const AttnShape& s = c.s;
    Inputs in = make_inputs(s, seed += 10);
    in.k = random_vector(s.B * s.Hkv * c.blk.Tk * s.D, seed + 5, -2, 2);
    in.v = random_vector(s.B * s.Hkv * c.blk.Tk * s.D, seed + 6);
    std::vector<float> out(in.q.size(), 9.0f), lse(s.B * s.Hq * s.T, 9.0f), dq(in.q.size(), 9.0f),
        dk(in.k.size(), 9.0f), dv(in.v.size(), 9.0f);
    dev.reset_flops();
    dev.flash_attention_forward(out.data(), lse.data(), in.q.data(), in.k.data(), in.v.data(), DType::kFP32, s, c.p,
                                key, c.blk);
    EXPECT_EQ(dev.executed_flops(), 2 * 2 * s.B * s.Hq * s.T * c.blk.Tk * s.D);  // the full T×Tk rectangle
    dev.flash_attention_backward(dq.data(), dk.data(), dv.data(), in.dout.data(), in.q.data(), in.k.data(), in.v.data(),
                                 out.data(), lse.data(), DType::kFP32, s, c.p, key, c.blk);
    EXPECT_EQ(dev.executed_flops(), 7 * 2 * s.B * s.Hq * s.T * c.blk.Tk * s.D);
    const BlockRef r = block_reference(in, s, c.blk, c.p, key);
    const double to = 1e-5 * std::max(1.0, max_abs(r.out));
    for (size_t i = 0; i < out.size(); ++i) ASSERT_NEAR(out[i], r.out[i], to) << "T " << s.T << " out " << i;
    for (size_t i = 0; i < lse.size(); ++i)
      ASSERT_NEAR(lse[i], r.lse[i], 1e-5 * std::max(1.0, std::abs(r.lse[i]))) << "T " << s.T << " lse " << i;
    const double tq = 1e-5 * max_abs(r.dq), tk = 1e-5 * max_abs(r.dk), tv = 1e-5 * max_abs(r.dv);
    for (size_t i = 0; i < dq.size(); ++i) ASSERT_NEAR(dq[i], r.dq[i], tq) << "T " << s.T << " dq " << i;
    for (size_t i = 0; i < dk.size(); ++i) ASSERT_NEAR(dk[i], r.dk[i], tk) << "T " << s.T << " dk " << i;
    for (size_t i = 0; i < dv.size(); ++i) ASSERT_NEAR(dv[i], r.dv[i], tv) << "T " << s.T << " dv " << i;
  }
}

// A query row that sees no key of the block: out 0 and lse −inf, and merging
// such a block into a result leaves the result as it was.
TEST_F(Flash, BlockRowsWithoutVisibleKeys) {
  AttnShape s;
  s.B = 1, s.Hq = 1, s.Hkv = 1, s.T = 4, s.D = 4;
  AttnBlock blk;
  blk.Tk = 4, blk.seq = 12, blk.q_pos = TokenSpans(0), blk.k_pos = TokenSpans(8);  // every key after every query
  const Inputs in = make_inputs(s, 21);
  std::vector<float> out(16, 9.0f), lse(4, 9.0f);
  dev.flash_attention_forward(out.data(), lse.data(), in.q.data(), in.k.data(), in.v.data(), DType::kFP32, s, 0.0f, key,
                              blk);
  for (float x : out) EXPECT_EQ(x, 0.0f);
  for (float x : lse) EXPECT_EQ(x, -std::numeric_limits<float>::infinity());
  std::vector<float> held = in.dout, held_lse = {0.5f, -1.0f, 2.0f, 0.25f};
  std::vector<float> merged = held, merged_lse = held_lse;
  blk.accumulate = true;
  dev.flash_attention_forward(merged.data(), merged_lse.data(), in.q.data(), in.k.data(), in.v.data(), DType::kFP32, s,
                              0.0f, key, blk);
  EXPECT_EQ(merged, held);
  EXPECT_EQ(merged_lse, held_lse);
}

// The context-parallel ring on one device: S = 2·cp·c tokens, cp = 3 ranks of
// c = 23-token chunk pairs (rank r: chunks r and 5 − r). Rank r's forward runs
// the blocks of ranks r, r − 1, … (the first written, the others merged by
// their lse), its backward the blocks of ranks r + 1, r + 2, …, r with the
// merged out and lse, dq accumulated; each block's dK, dV summed over the
// ranks. Against the whole sequence's double reference (attention_reference),
// dropout 0.1 drawn at the same (B, Hq, S, S) elements, with and without a
// window: every row of out, lse, dq and every key's dk, dv at 1e-5 of the
// largest value (fp32 merging and accumulating in another order than one pass).
TEST_F(Flash, RingOfBlocksIsTheWholeSequencesAttention) {
  const int64_t cp = 3, c = 23, S = 2 * cp * c, T = 2 * c;
  for (std::optional<int64_t> window : {std::optional<int64_t>{}, std::optional<int64_t>{40}}) {
    AttnShape full;
    full.B = 2, full.Hq = 4, full.Hkv = 2, full.T = S, full.D = 16, full.window = window;
    const float p = 0.1f;
    const Inputs in = make_inputs(full, 31);
    const auto ref = test::attention_reference(in.q, in.k, in.v, full, p, key);
    const auto g = test::attention_reference_backward(in.dout, in.q, in.k, in.v, full, ref);
    AttnShape s = full;
    s.T = T;
    auto spans = [&](int64_t r) { return TokenSpans(r * c, c, (2 * cp - 1 - r) * c); };
    // rows (B, H, S, D) -> the T local rows of rank r, (B, H, T, D)
    auto local = [&](const std::vector<float>& x, int64_t H, int64_t r) {
      std::vector<float> y(s.B * H * T * s.D);
      for (int64_t bh = 0; bh < s.B * H; ++bh)
        for (int64_t i = 0; i < T; ++i)
          for (int64_t d = 0; d < s.D; ++d) y[(bh * T + i) * s.D + d] = x[(bh * S + spans(r).position(i)) * s.D + d];
      return y;
    };
    std::vector<double> dk(in.k.size(), 0.0), dv(in.v.size(), 0.0);
    for (int64_t r = 0; r < cp; ++r) {
      const auto q = local(in.q, s.Hq, r), dout = local(in.dout, s.Hq, r);
      std::vector<float> out(q.size()), lse(s.B * s.Hq * T), dq(q.size());
      auto block = [&](int64_t j, bool acc) {
        AttnBlock b;
        b.Tk = T, b.seq = S, b.q_pos = spans(r), b.k_pos = spans(j), b.accumulate = acc;
        return b;
      };
      for (int64_t i = 0; i < cp; ++i) {
        const int64_t j = (r - i + cp) % cp;
        dev.flash_attention_forward(out.data(), lse.data(), q.data(), local(in.k, s.Hkv, j).data(),
                                    local(in.v, s.Hkv, j).data(), DType::kFP32, s, p, key, block(j, i > 0));
      }
      for (int64_t i = 0; i < cp; ++i) {
        const int64_t j = (r + 1 + i) % cp;
        const auto kj = local(in.k, s.Hkv, j), vj = local(in.v, s.Hkv, j);
        std::vector<float> dkj(kj.size(), i > 0 ? 0.0f : 9.0f), dvj(vj.size(), i > 0 ? 0.0f : 9.0f);
        dev.flash_attention_backward(dq.data(), dkj.data(), dvj.data(), dout.data(), q.data(), kj.data(), vj.data(),
                                     out.data(), lse.data(), DType::kFP32, s, p, key, block(j, i > 0));
        for (int64_t bh = 0; bh < s.B * s.Hkv; ++bh)
          for (int64_t t = 0; t < T; ++t)
            for (int64_t d = 0; d < s.D; ++d) {
              const int64_t at_full = (bh * S + spans(j).position(t)) * s.D + d, at_local = (bh * T + t) * s.D + d;
              dk[at_full] += dkj[at_local];
              dv[at_full] += dvj[at_local];
            }
      }
      const double to = 1e-5 * max_abs(ref.out), tq = 1e-5 * max_abs(g.dq);
      for (int64_t bh = 0; bh < s.B * s.Hq; ++bh)
        for (int64_t i = 0; i < T; ++i) {
          const int64_t row = bh * S + spans(r).position(i);
          ASSERT_NEAR(lse[bh * T + i], ref.lse[row], 1e-5 * std::max(1.0, std::abs(ref.lse[row]))) << r << " " << i;
          for (int64_t d = 0; d < s.D; ++d) {
            ASSERT_NEAR(out[(bh * T + i) * s.D + d], ref.out[row * s.D + d], to) << "rank " << r << " row " << i;
            ASSERT_NEAR(dq[(bh * T + i) * s.D + d], g.dq[row * s.D + d], tq) << "rank " << r << " row " << i;
          }
        }
    }
    const double tk = 1e-5 * max_abs(g.dk), tv = 1e-5 * max_abs(g.dv);
    for (size_t i = 0; i < dk.size(); ++i) ASSERT_NEAR(dk[i], g.dk[i], tk) << "dk " << i;
    for (size_t i = 0; i < dv.size(); ++i) ASSERT_NEAR(dv[i], g.dv[i], tv) << "dv " << i;
  }
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
  AttnBlock blk;
  blk.k_pos = TokenSpans(4, 2, 3);  // the second span starts before the first ends
  EXPECT_THROW(dev.flash_attention_forward(buf.data(), buf.data(), buf.data(), buf.data(), buf.data(), DType::kFP32, s,
                                           0.0f, key, blk),
               std::invalid_argument);
  blk = AttnBlock{};
  blk.seq = 3;  // shorter than the 4 queries
  EXPECT_THROW(dev.flash_attention_forward(buf.data(), buf.data(), buf.data(), buf.data(), buf.data(), DType::kFP32, s,
                                           0.0f, key, blk),
               std::invalid_argument);
  blk = AttnBlock{};
  blk.causal = false;
  s.window = 2;  // a window needs the causal mask
  EXPECT_THROW(dev.flash_attention_forward(buf.data(), buf.data(), buf.data(), buf.data(), buf.data(), DType::kFP32, s,
                                           0.0f, key, blk),
               std::invalid_argument);
}

}  // namespace
}  // namespace gpuledger
