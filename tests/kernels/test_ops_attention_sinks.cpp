// Attention sinks on the CPU (kernels/cpu/ops_attention.cpp): one learned
// logit per query head in every row's softmax denominator, with no value
// (gpt-oss). Against a naive double reference written here — out_i =
// Σ_j p_ij v_j with p_ij = exp(x_ij) / (Σ_j exp(x_ij) + exp(sink_h)),
// x = scale·q·k under the causal / window mask — and its gradients by central
// finite differences of L = Σ out ⊙ R in double:
//   flash: flash_attention_forward, then attention_sinks_forward (out and lse);
//          attention_sinks_backward, then flash_attention_backward given the
//          sink-inclusive lse — dq, dk, dv and dsinks;
//   materialized: softmax_sinks_forward's probabilities and lse; the
//          unchanged softmax_backward on them with the products done here in
//          double gives dq, and attention_sinks_backward dsinks.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <optional>
#include <random>
#include <vector>

#include "kernels/cpu/cpu_device.h"

namespace gpuledger {
namespace {

std::vector<float> random_vector(int64_t n, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> x(static_cast<size_t>(n));
  for (auto& v : x) v = dist(gen);
  return x;
}

bool visible(const AttnShape& s, int64_t i, int64_t j) { return j <= i && (!s.window || i - *s.window < j); }

// The inputs in double, so the finite differences move one of them.
struct SinkInputs {
  std::vector<double> q, k, v, sinks;
};

struct SinkReference {
  std::vector<double> out, lse, P;  // (B, Hq, T, D), (B, Hq, T), (B, Hq, T, T)
};

SinkReference sink_reference(const SinkInputs& in, const AttnShape& s) {
  const int64_t B = s.B, H = s.Hq, T = s.T, D = s.D, group = s.Hq / s.Hkv;
  const double scale = 1.0 / std::sqrt(static_cast<double>(D));
  SinkReference r;
  r.out.assign(static_cast<size_t>(B * H * T * D), 0.0);
  r.lse.assign(static_cast<size_t>(B * H * T), 0.0);
  r.P.assign(static_cast<size_t>(B * H * T * T), 0.0);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h) {
      const int64_t kv = (b * s.Hkv + h / group) * T * D;
      for (int64_t i = 0; i < T; ++i) {
        const int64_t row = (b * H + h) * T + i;
        std::vector<double> x(static_cast<size_t>(T), 0.0);
        double denom = std::exp(in.sinks[h]);
        for (int64_t j = 0; j < T; ++j) {
          if (!visible(s, i, j)) continue;
          double dot = 0;
          for (int64_t d = 0; d < D; ++d) dot += in.q[row * D + d] * in.k[kv + j * D + d];
          x[j] = scale * dot;
          denom += std::exp(x[j]);
        }
        r.lse[row] = std::log(denom);
        for (int64_t j = 0; j < T; ++j) {
          if (!visible(s, i, j)) continue;
          const double p = std::exp(x[j]) / denom;
          r.P[row * T + j] = p;
          for (int64_t d = 0; d < D; ++d) r.out[row * D + d] += p * in.v[kv + j * D + d];
        }
      }
    }
  return r;
}

double loss(const SinkInputs& in, const AttnShape& s, const std::vector<float>& R) {
  const auto out = sink_reference(in, s).out;
  double l = 0;
  for (size_t i = 0; i < out.size(); ++i) l += out[i] * R[i];
  return l;
}

// dL/dx for every element of x by central differences (h = 1e-5 in double:
// truncation ~1e-10, rounding ~1e-11).
std::vector<double> fd_grad(SinkInputs in, std::vector<double> SinkInputs::*field, const AttnShape& s,
                            const std::vector<float>& R) {
  std::vector<double> g((in.*field).size());
  constexpr double h = 1e-5;
  for (size_t i = 0; i < g.size(); ++i) {
    const double x0 = (in.*field)[i];
    (in.*field)[i] = x0 + h;
    const double lp = loss(in, s, R);
    (in.*field)[i] = x0 - h;
    const double lm = loss(in, s, R);
    (in.*field)[i] = x0;
    g[i] = (lp - lm) / (2 * h);
  }
  return g;
}

std::vector<float> to_float(const std::vector<double>& x) { return {x.begin(), x.end()}; }

struct Case {
  int64_t B, Hq, Hkv, T, D;
  std::optional<int64_t> window;
};

AttnShape shape_of(const Case& c) {
  AttnShape s;
  s.B = c.B, s.Hq = c.Hq, s.Hkv = c.Hkv, s.T = c.T, s.D = c.D, s.window = c.window;
  return s;
}

// GQA with a window, MHA without; sinks from −2 to 3 so that some rows give the
// sink most of their weight (|q|, |k| ≤ 1: scaled scores below ~2).
const Case kCases[] = {{2, 4, 2, 7, 8, 3}, {1, 2, 2, 9, 4, std::nullopt}};

SinkInputs make_inputs(const AttnShape& s, uint32_t seed) {
  auto d = [](const std::vector<float>& x) { return std::vector<double>(x.begin(), x.end()); };
  return {d(random_vector(s.B * s.Hq * s.T * s.D, seed)), d(random_vector(s.B * s.Hkv * s.T * s.D, seed + 1)),
          d(random_vector(s.B * s.Hkv * s.T * s.D, seed + 2)), d(random_vector(s.Hq, seed + 3, -2.0f, 3.0f))};
}

void expect_near_all(const std::vector<float>& got, const std::vector<double>& want, double tol, const char* what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], want[i], tol) << what << " element " << i;
}

class AttentionSinks : public ::testing::Test {
 protected:
  Ledger ledger;
  CpuDevice dev{ledger};
};

// fp32 against double: sums of ≤ 9 terms of O(1): error ~1e-6; tolerance 1e-5.
TEST_F(AttentionSinks, FlashForwardAndBackwardMatchTheReference) {
  uint32_t seed = 40;
  for (const Case& c : kCases) {
    const AttnShape s = shape_of(c);
    const SinkInputs in = make_inputs(s, seed += 10);
    const auto q = to_float(in.q), k = to_float(in.k), v = to_float(in.v), sinks = to_float(in.sinks);
    std::vector<float> out(q.size()), lse(static_cast<size_t>(s.B * s.Hq * s.T));
    dev.flash_attention_forward(out.data(), lse.data(), q.data(), k.data(), v.data(), DType::kFP32, s, 0.0f, {});
    dev.attention_sinks_forward(out.data(), lse.data(), sinks.data(), DType::kFP32, s);
    const SinkReference ref = sink_reference(in, s);
    expect_near_all(out, ref.out, 1e-5, "out");
    expect_near_all(lse, ref.lse, 1e-5, "lse");

    const auto R = random_vector(static_cast<int64_t>(out.size()), seed + 5);
    std::vector<float> dsinks(sinks.size(), 0.5f), dq(q.size()), dk(k.size()), dv(v.size());
    dev.attention_sinks_backward(dsinks.data(), DType::kFP32, R.data(), out.data(), lse.data(), sinks.data(),
                                 DType::kFP32, s);
    dev.flash_attention_backward(dq.data(), dk.data(), dv.data(), R.data(), q.data(), k.data(), v.data(), out.data(),
                                 lse.data(), DType::kFP32, s, 0.0f, {});
    auto want_ds = fd_grad(in, &SinkInputs::sinks, s, R);
    for (double& g : want_ds) g += 0.5;  // the op accumulates
    expect_near_all(dsinks, want_ds, 1e-5, "dsinks");
    expect_near_all(dq, fd_grad(in, &SinkInputs::q, s, R), 1e-5, "dq");
    expect_near_all(dk, fd_grad(in, &SinkInputs::k, s, R), 1e-5, "dk");
    expect_near_all(dv, fd_grad(in, &SinkInputs::v, s, R), 1e-5, "dv");
  }
}

// The materialized core: probabilities and lse from softmax_sinks_forward; then
// dP = dctx·Vᵀ, dS = softmax_backward (the op without sinks), dq = dS·K, all
// but the softmax in double here; dsinks from attention_sinks_backward on the
// context P·V and its gradient.
TEST_F(AttentionSinks, MaterializedSoftmaxMatchesTheReference) {
  uint32_t seed = 90;
  for (const Case& c : kCases) {
    const AttnShape s = shape_of(c);
    const int64_t B = s.B, H = s.Hq, T = s.T, D = s.D, group = s.Hq / s.Hkv;
    const SinkInputs in = make_inputs(s, seed += 10);
    const auto sinks = to_float(in.sinks);
    std::vector<float> scores(static_cast<size_t>(B * H * T * T), 1e30f);  // masked entries must not be read
    for (int64_t b = 0; b < B; ++b)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t i = 0; i < T; ++i)
          for (int64_t j = 0; j <= i; ++j) {
            if (!visible(s, i, j)) continue;
            double dot = 0;
            for (int64_t d = 0; d < D; ++d)
              dot += static_cast<double>(static_cast<float>(in.q[((b * H + h) * T + i) * D + d])) *
                     static_cast<float>(in.k[((b * s.Hkv + h / group) * T + j) * D + d]);
            scores[((b * H + h) * T + i) * T + j] = static_cast<float>(dot);
          }
    std::vector<float> probs(scores.size()), lse(static_cast<size_t>(B * H * T));
    dev.softmax_sinks_forward(probs.data(), lse.data(), scores.data(), sinks.data(), DType::kFP32, s);
    const SinkReference ref = sink_reference(in, s);
    expect_near_all(probs, ref.P, 1e-6, "probs");
    expect_near_all(lse, ref.lse, 1e-5, "lse");

    // The context, dctx = R, dP = R·Vᵀ in double (fp32 storage).
    const auto R = random_vector(B * H * T * D, seed + 5);
    std::vector<float> ctx(static_cast<size_t>(B * H * T * D)), dprobs(probs.size(), 0.0f);
    for (int64_t b = 0; b < B; ++b)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t i = 0; i < T; ++i) {
          const int64_t row = (b * H + h) * T + i, kv = (b * s.Hkv + h / group) * T * D;
          for (int64_t d = 0; d < D; ++d) {
            double acc = 0;
            for (int64_t j = 0; j < T; ++j) acc += probs[row * T + j] * in.v[kv + j * D + d];
            ctx[row * D + d] = static_cast<float>(acc);
          }
          for (int64_t j = 0; j < T; ++j) {
            double acc = 0;
            for (int64_t d = 0; d < D; ++d) acc += R[row * D + d] * in.v[kv + j * D + d];
            dprobs[row * T + j] = static_cast<float>(acc);
          }
        }
    std::vector<float> dscores(probs.size()), dsinks(sinks.size(), 0.0f);
    dev.softmax_backward(dscores.data(), dprobs.data(), probs.data(), DType::kFP32, s);
    dev.attention_sinks_backward(dsinks.data(), DType::kFP32, R.data(), ctx.data(), lse.data(), sinks.data(),
                                 DType::kFP32, s);
    std::vector<double> dq(static_cast<size_t>(B * H * T * D), 0.0);
    for (int64_t b = 0; b < B; ++b)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t i = 0; i < T; ++i)
          for (int64_t j = 0; j < T; ++j)
            for (int64_t d = 0; d < D; ++d)
              dq[((b * H + h) * T + i) * D + d] +=
                  dscores[((b * H + h) * T + i) * T + j] * in.k[((b * s.Hkv + h / group) * T + j) * D + d];
    const auto want_dq = fd_grad(in, &SinkInputs::q, s, R);
    for (size_t i = 0; i < dq.size(); ++i) ASSERT_NEAR(dq[i], want_dq[i], 1e-5) << "dq element " << i;
    expect_near_all(dsinks, fd_grad(in, &SinkInputs::sinks, s, R), 1e-5, "dsinks");
  }
}

// A row that saw no key (lse −inf, out 0: a context-parallel block can leave
// one) takes the sink alone: out stays 0 and lse becomes the sink's logit.
TEST_F(AttentionSinks, RowWithoutKeysTakesTheSink) {
  AttnShape s;
  s.B = 1, s.Hq = 2, s.Hkv = 1, s.T = 1, s.D = 4;
  std::vector<float> out(8, 0.0f), lse = {-INFINITY, 0.25f}, sinks = {1.5f, -0.5f};
  for (int d = 4; d < 8; ++d) out[d] = 1.0f;
  dev.attention_sinks_forward(out.data(), lse.data(), sinks.data(), DType::kFP32, s);
  EXPECT_EQ(lse[0], 1.5f);
  for (int d = 0; d < 4; ++d) EXPECT_EQ(out[d], 0.0f);
  // row 1: weight 1/(1 + e^(−0.5 − 0.25))
  const double w = 1.0 / (1.0 + std::exp(-0.75));
  for (int d = 4; d < 8; ++d) EXPECT_NEAR(out[d], w, 1e-6);
  EXPECT_NEAR(lse[1], 0.25 + std::log1p(std::exp(-0.75)), 1e-6);
}

// bf16 storage (out, sinks, gradient): within bf16's rounding of the fp32 result.
TEST_F(AttentionSinks, Bf16WithinRoundingOfFp32) {
  const AttnShape s = shape_of(kCases[0]);
  const SinkInputs in = make_inputs(s, 7);
  const auto q = to_float(in.q), k = to_float(in.k), v = to_float(in.v), sinks = to_float(in.sinks);
  auto bf = [](const std::vector<float>& x) {
    std::vector<uint16_t> y(x.size());
    convert_from_fp32(x.data(), y.data(), DType::kBF16, static_cast<int64_t>(x.size()));
    return y;
  };
  std::vector<float> out(q.size()), lse(static_cast<size_t>(s.B * s.Hq * s.T));
  dev.flash_attention_forward(out.data(), lse.data(), q.data(), k.data(), v.data(), DType::kFP32, s, 0.0f, {});
  auto out_b = bf(out), sinks_b = bf(sinks);
  std::vector<float> lse_b = lse;
  dev.attention_sinks_forward(out.data(), lse.data(), sinks.data(), DType::kFP32, s);
  dev.attention_sinks_forward(out_b.data(), lse_b.data(), sinks_b.data(), DType::kBF16, s);
  std::vector<float> got(out.size());
  convert_to_fp32(out_b.data(), DType::kBF16, got.data(), static_cast<int64_t>(got.size()));
  for (size_t i = 0; i < out.size(); ++i) ASSERT_NEAR(got[i], out[i], 1e-2 * (std::abs(out[i]) + 1e-2)) << i;
  const auto R = random_vector(static_cast<int64_t>(out.size()), 8);
  std::vector<float> ds(sinks.size(), 0.0f);
  std::vector<uint16_t> ds_b(sinks.size(), 0);
  dev.attention_sinks_backward(ds.data(), DType::kFP32, R.data(), out.data(), lse.data(), sinks.data(), DType::kFP32,
                               s);
  dev.attention_sinks_backward(ds_b.data(), DType::kBF16, bf(R).data(), out_b.data(), lse_b.data(), sinks_b.data(),
                               DType::kBF16, s);
  std::vector<float> ds_got(ds.size());
  convert_to_fp32(ds_b.data(), DType::kBF16, ds_got.data(), static_cast<int64_t>(ds.size()));
  for (size_t h = 0; h < ds.size(); ++h) {
    EXPECT_NE(ds[h], 0.0f);
    EXPECT_NEAR(ds_got[h], ds[h], 2e-2 * std::abs(ds[h]) + 1e-3) << h;
  }
}

}  // namespace
}  // namespace gpuledger
