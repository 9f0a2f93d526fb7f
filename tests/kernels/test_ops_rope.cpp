// CPU RoPE (kernels/cpu/ops_rope.cpp), rotate-half convention: against a double
// reference written from the Llama / Hugging Face formula, norm preservation,
// backward ∘ forward = identity, positions offset, finite differences, bf16 storage.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <stdexcept>
#include <vector>

#include "kernels/cpu/cpu_device.h"

namespace gpuledger {
namespace {

std::vector<float> random_vector(int64_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> x(n);
  for (auto& v : x) v = dist(gen);
  return x;
}

// HF apply_rotary_pos_emb: out = x·cos + rotate_half(x)·sin, rotate_half(x) =
// (−x[D/2:], x[:D/2]), angle of pair i at position pos = pos · θ^(−2i/D). In double.
std::vector<double> rope_ref(const std::vector<float>& x, int64_t BH, int64_t T, int64_t D, int64_t pos_offset,
                             double theta) {
  std::vector<double> out(x.size());
  const int64_t half = D / 2;
  for (int64_t r = 0; r < BH; ++r)
    for (int64_t t = 0; t < T; ++t)
      for (int64_t i = 0; i < half; ++i) {
        const double a = (pos_offset + t) * std::pow(theta, -2.0 * i / D);
        const int64_t o = (r * T + t) * D;
        const double x1 = x[o + i], x2 = x[o + i + half];
        out[o + i] = x1 * std::cos(a) - x2 * std::sin(a);
        out[o + i + half] = x2 * std::cos(a) + x1 * std::sin(a);
      }
  return out;
}

class Rope : public ::testing::Test {
 protected:
  Ledger ledger;
  CpuDevice dev{ledger};
  static constexpr int64_t B = 2, H = 4, T = 67, D = 64;  // N > 2¹⁵: multithreaded
  static constexpr int64_t N = B * H * T * D;
};

// fp32 rotation with cos/sin rounded once from double: error ≤ a few ulp of the
// pair's norm (|x| ≤ √2 here); tolerance 1e-6 absolute.
TEST_F(Rope, ForwardMatchesDoubleReference) {
  for (int64_t offset : {int64_t{0}, int64_t{11}, int64_t{100000}}) {
    auto x = random_vector(N, 1);
    const auto ref = rope_ref(x, B * H, T, D, offset, 10000.0);
    dev.rope_forward(x.data(), DType::kFP32, B, H, T, D, offset, 10000.0f);
    for (int64_t i = 0; i < N; ++i) ASSERT_NEAR(x[i], ref[i], 1e-6) << "offset " << offset << " i " << i;
  }
  // Another base (Llama 3 uses θ = 500000).
  auto x = random_vector(N, 2);
  const auto ref = rope_ref(x, B * H, T, D, 3, 500000.0);
  dev.rope_forward(x.data(), DType::kFP32, B, H, T, D, 3, 500000.0f);
  for (int64_t i = 0; i < N; ++i) ASSERT_NEAR(x[i], ref[i], 1e-6) << i;
}

// Position 0 is the identity; the pair (i, i + D/2) keeps its norm.
TEST_F(Rope, PositionZeroIsIdentityAndPairsKeepTheirNorm) {
  const auto x0 = random_vector(N, 3);
  auto x = x0;
  dev.rope_forward(x.data(), DType::kFP32, B, H, T, D, 0, 10000.0f);
  for (int64_t r = 0; r < B * H; ++r)
    for (int64_t d = 0; d < D; ++d) EXPECT_EQ(x[r * T * D + d], x0[r * T * D + d]);
  for (int64_t row = 0; row < B * H * T; ++row)
    for (int64_t i = 0; i < D / 2; ++i) {
      const int64_t a = row * D + i, b = a + D / 2;
      const double n0 = std::hypot(x0[a], x0[b]), n1 = std::hypot(x[a], x[b]);
      EXPECT_NEAR(n1, n0, 1e-6);
    }
}

// Backward rotates by −angle: the inverse (rotations are orthogonal), so
// backward(forward(x)) = x up to fp32 rounding (tolerance 1e-6 absolute, |x| ≤ 1).
TEST_F(Rope, BackwardInvertsForward) {
  const auto x0 = random_vector(N, 4);
  auto x = x0;
  dev.rope_forward(x.data(), DType::kFP32, B, H, T, D, 5, 10000.0f);
  dev.rope_backward(x.data(), DType::kFP32, B, H, T, D, 5, 10000.0f);
  for (int64_t i = 0; i < N; ++i) ASSERT_NEAR(x[i], x0[i], 1e-6) << i;
}

// Row t with offset o is the same rotation as row t + o with offset 0 (the KV
// cache relies on this at decode).
TEST_F(Rope, OffsetShiftsPositions) {
  const auto x0 = random_vector(N, 5);
  auto a = x0;
  dev.rope_forward(a.data(), DType::kFP32, B, H, T, D, 0, 10000.0f);
  const int64_t t0 = 20;
  for (int64_t r = 0; r < B * H; ++r) {
    std::vector<float> tail(x0.begin() + (r * T + t0) * D, x0.begin() + (r + 1) * T * D);
    dev.rope_forward(tail.data(), DType::kFP32, 1, 1, T - t0, D, t0, 10000.0f);
    for (int64_t i = 0; i < (T - t0) * D; ++i) EXPECT_EQ(tail[i], a[(r * T + t0) * D + i]);
  }
}

// Two spans (context parallelism's chunks, kernels/attn_block.h): rows
// 0 … 8 at positions 4 … 12 and rows 9 … T − 1 from position 40 on are the
// rotations of those positions, bit for bit as one span from each start.
TEST_F(Rope, TwoSpansRotateAtTheirPositions) {
  const auto x0 = random_vector(N, 6);
  auto a = x0;
  const int64_t split = 9;
  dev.rope_forward(a.data(), DType::kFP32, B, H, T, D, TokenSpans(4, split, 40), 10000.0f);
  for (int64_t r = 0; r < B * H; ++r) {
    std::vector<float> head(x0.begin() + r * T * D, x0.begin() + (r * T + split) * D);
    std::vector<float> tail(x0.begin() + (r * T + split) * D, x0.begin() + (r + 1) * T * D);
    dev.rope_forward(head.data(), DType::kFP32, 1, 1, split, D, 4, 10000.0f);
    dev.rope_forward(tail.data(), DType::kFP32, 1, 1, T - split, D, 40, 10000.0f);
    for (int64_t i = 0; i < split * D; ++i) ASSERT_EQ(head[i], a[r * T * D + i]);
    for (int64_t i = 0; i < (T - split) * D; ++i) ASSERT_EQ(tail[i], a[(r * T + split) * D + i]);
  }
  EXPECT_THROW(dev.rope_forward(a.data(), DType::kFP32, B, H, T, D, TokenSpans(4, split, 10), 10000.0f),
               std::invalid_argument);  // the second span overlaps the first
}

// L = Σ w ⊙ rope(x): dL/dx = rope_backward(w). RoPE is linear, so central
// differences are exact up to rounding of the one changed row (D terms of ~1e-7
// over 2h = 2e-2): tolerance 1e-4.
TEST_F(Rope, BackwardMatchesFiniteDifferences) {
  const auto x0 = random_vector(N, 6), w = random_vector(N, 7);
  auto g = w;
  dev.rope_backward(g.data(), DType::kFP32, B, H, T, D, 2, 10000.0f);
  auto loss = [&](const std::vector<float>& x) {
    auto y = x;
    dev.rope_forward(y.data(), DType::kFP32, B, H, T, D, 2, 10000.0f);
    double s = 0;
    for (int64_t i = 0; i < N; ++i) s += static_cast<double>(w[i]) * y[i];
    return s;
  };
  const float h = 1e-2f;
  std::mt19937 gen(8);
  for (int trial = 0; trial < 40; ++trial) {
    const int64_t k = gen() % N;
    auto xp = x0, xm = x0;
    xp[k] += h;
    xm[k] -= h;
    const double fd = (loss(xp) - loss(xm)) / (static_cast<double>(xp[k]) - xm[k]);
    EXPECT_NEAR(g[k], fd, 1e-4) << "element " << k;
  }
}

// bf16 storage: read, rotate in fp32, round once. Rounding is at most half a
// bf16 ulp (2⁻⁸ relative: 8 significant bits); tolerance 2⁻⁸ relative plus
// 1e-6 absolute (the fp32 rotation error, visible where the rotation cancels an
// element to near 0).
TEST_F(Rope, Bf16StorageComputesInFp32) {
  const auto xf = random_vector(N, 9);
  std::vector<uint16_t> x(N);
  std::vector<float> xr(N);
  for (int64_t i = 0; i < N; ++i) x[i] = fp32_to_bf16(xf[i]), xr[i] = bf16_to_fp32(x[i]);
  const auto ref = rope_ref(xr, B * H, T, D, 7, 10000.0);
  dev.rope_forward(x.data(), DType::kBF16, B, H, T, D, 7, 10000.0f);
  for (int64_t i = 0; i < N; ++i) ASSERT_NEAR(bf16_to_fp32(x[i]), ref[i], std::abs(ref[i]) / 256 + 1e-6) << i;
}

TEST_F(Rope, OddHeadDimIsAnError) {
  std::vector<float> x(2 * 3 * 5);
  EXPECT_THROW(dev.rope_forward(x.data(), DType::kFP32, 1, 2, 3, 5, 0, 10000.0f), std::invalid_argument);
}

}  // namespace
}  // namespace gpuledger
