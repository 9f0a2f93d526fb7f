// CPU dropout (kernels/cpu/ops_dropout.cpp): the mask is exactly the Philox rule
// of device.h (keep i iff uniform(key, i) >= p), kept values scaled by 1/(1 − p),
// keep rate, p = 0 and p = 1, backward, and 16-bit storage.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "kernels/cpu/cpu_device.h"
#include "kernels/philox.h"

namespace gpuledger {
namespace {

std::vector<float> random_vector(int64_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-2.0f, 2.0f);
  std::vector<float> x(n);
  for (auto& v : x) v = dist(gen);
  return x;
}

class Dropout : public ::testing::Test {
 protected:
  Ledger ledger;
  CpuDevice dev{ledger};
};

// n not a multiple of the op's chunk or of 4, so the tails are exercised.
constexpr int64_t kN = 100003;

TEST_F(Dropout, MaskIsThePhiloxRuleAndKeptValuesAreScaled) {
  const float p = 0.1f;
  const RngKey key{42, 7};
  const auto x = random_vector(kN, 1);
  std::vector<float> out(kN);
  std::vector<uint8_t> mask(kN, 9);
  dev.dropout_forward(out.data(), mask.data(), x.data(), DType::kFP32, kN, p, key);
  int64_t kept = 0;
  for (int64_t i = 0; i < kN; ++i) {
    const bool keep = philox_uniform(key.seed, key.stream, i) >= p;
    ASSERT_EQ(mask[i], keep ? 1 : 0) << i;
    kept += keep;
    // 1/(1 − p) rounded once, times x rounded once: within one ulp either way.
    if (keep)
      EXPECT_FLOAT_EQ(out[i], x[i] / (1.0f - p));
    else
      EXPECT_EQ(out[i], 0.0f);
  }
  // Binomial keep count: σ = √(p(1−p)/n) = 9.5e-4; the 0.01 bound is ~10σ.
  EXPECT_NEAR(static_cast<double>(kept) / kN, 1.0 - p, 0.01);

  // Same key: the same mask (a recompute, another backend); another stream: another one.
  std::vector<uint8_t> again(kN), other(kN);
  dev.dropout_forward(out.data(), again.data(), x.data(), DType::kFP32, kN, p, key);
  dev.dropout_forward(out.data(), other.data(), x.data(), DType::kFP32, kN, p, RngKey{42, 8});
  EXPECT_EQ(again, mask);
  EXPECT_NE(other, mask);
}

TEST_F(Dropout, KeepRateFollowsP) {
  const int64_t n = 100000;
  std::vector<float> x(n, 1.0f), out(n);
  std::vector<uint8_t> mask(n);
  for (float p : {0.05f, 0.3f, 0.5f, 0.9f}) {
    dev.dropout_forward(out.data(), mask.data(), x.data(), DType::kFP32, n, p, RngKey{3, 1});
    int64_t kept = 0;
    for (auto m : mask) kept += m;
    // σ ≤ √(0.25/n) = 1.6e-3; 0.01 is > 6σ.
    EXPECT_NEAR(static_cast<double>(kept) / n, 1.0 - p, 0.01) << "p = " << p;
  }
}

TEST_F(Dropout, ZeroProbabilityKeepsEverythingExactly) {
  const auto x = random_vector(kN, 2);
  std::vector<float> out(kN);
  std::vector<uint8_t> mask(kN, 0);
  dev.dropout_forward(out.data(), mask.data(), x.data(), DType::kFP32, kN, 0.0f, RngKey{1, 1});
  EXPECT_EQ(out, x);
  for (auto m : mask) ASSERT_EQ(m, 1);
  std::vector<float> dx(kN);
  dev.dropout_backward(dx.data(), DType::kFP32, x.data(), DType::kFP32, mask.data(), kN, 0.0f);
  EXPECT_EQ(dx, x);
}

TEST_F(Dropout, ProbabilityOneDropsEverything) {
  const auto x = random_vector(1000, 3);
  std::vector<float> out(1000, 5.0f);
  std::vector<uint8_t> mask(1000, 1);
  dev.dropout_forward(out.data(), mask.data(), x.data(), DType::kFP32, 1000, 1.0f, RngKey{1, 1});
  for (int i = 0; i < 1000; ++i) {
    ASSERT_EQ(out[i], 0.0f);
    ASSERT_EQ(mask[i], 0);
  }
  EXPECT_THROW(dev.dropout_forward(out.data(), mask.data(), x.data(), DType::kFP32, 1000, 1.5f, RngKey{}),
               std::invalid_argument);
}

// dx = dout · mask / (1 − p), across dtypes (bf16 dout -> fp32 dx is exact up to the scale).
TEST_F(Dropout, BackwardAppliesTheSavedMask) {
  const float p = 0.25f;
  const int64_t n = 5000;
  const auto dout = random_vector(n, 4);
  std::vector<uint8_t> mask(n);
  std::mt19937 gen(5);
  for (auto& m : mask) m = gen() % 2;
  std::vector<float> dx(n);
  dev.dropout_backward(dx.data(), DType::kFP32, dout.data(), DType::kFP32, mask.data(), n, p);
  for (int64_t i = 0; i < n; ++i) EXPECT_FLOAT_EQ(dx[i], mask[i] ? dout[i] / (1.0f - p) : 0.0f);

  std::vector<uint16_t> dout16(n);
  for (int64_t i = 0; i < n; ++i) dout16[i] = fp32_to_bf16(dout[i]);
  dev.dropout_backward(dx.data(), DType::kFP32, dout16.data(), DType::kBF16, mask.data(), n, p);
  for (int64_t i = 0; i < n; ++i) EXPECT_FLOAT_EQ(dx[i], mask[i] ? bf16_to_fp32(dout16[i]) / (1.0f - p) : 0.0f);
}

// bf16 storage: reads bf16, scales in fp32, rounds once: within half a bf16 ulp
// (at most 2⁻⁸ relative: bf16 has 8 significant bits) of the exact
// product, plus the fp32 rounding of the product; the mask is the same as in fp32.
TEST_F(Dropout, Bf16StorageRoundsOnce) {
  const float p = 0.2f;
  const int64_t n = 4099;
  const auto xf = random_vector(n, 6);
  std::vector<uint16_t> x(n), out(n);
  for (int64_t i = 0; i < n; ++i) x[i] = fp32_to_bf16(xf[i]);
  std::vector<uint8_t> mask(n), mask32(n);
  dev.dropout_forward(out.data(), mask.data(), x.data(), DType::kBF16, n, p, RngKey{9, 9});
  std::vector<float> out32(n);
  dev.dropout_forward(out32.data(), mask32.data(), xf.data(), DType::kFP32, n, p, RngKey{9, 9});
  EXPECT_EQ(mask, mask32);
  for (int64_t i = 0; i < n; ++i) {
    const double exact = mask[i] ? static_cast<double>(bf16_to_fp32(x[i])) / (1.0 - p) : 0.0;
    EXPECT_NEAR(bf16_to_fp32(out[i]), exact, std::abs(exact) * (1.0 / 256 + 1e-6)) << i;
  }
}

}  // namespace
}  // namespace gpuledger
