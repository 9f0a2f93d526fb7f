// Element-wise ops on the CPU backend: convert, add, accumulate, scale,
// bias_add and bias_backward. The forward ops compute in fp32 and round once,
// so their results are compared bit for bit with the same arithmetic written
// out here on the scalar conversions of core/dtype.h; bias_backward is
// checked against central finite differences of L = Σ dout·bias_add(x, bias)
// and against a double-precision column sum. Sizes include odd tails and
// sizes past the OpenMP threshold.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
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

float to32(uint16_t x, DType t) { return t == DType::kBF16 ? bf16_to_fp32(x) : fp16_to_fp32(x); }
uint16_t to16(float x, DType t) { return t == DType::kBF16 ? fp32_to_bf16(x) : fp32_to_fp16(x); }

std::vector<uint16_t> random16(int64_t n, DType t, uint32_t seed) {
  const auto f = random_uniform(n, -3.0f, 3.0f, seed);
  std::vector<uint16_t> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = to16(f[i], t);
  return v;
}

constexpr int64_t kBig = 100003;  // > the parallel threshold, not a multiple of the chunk

TEST(Convert, EveryPairOfDtypesRoundsOnce) {
  Dev dev;
  const auto f = random_uniform(kBig, -70000.0f, 70000.0f, 1);  // past fp16's range: inf
  std::vector<uint16_t> bf(kBig), h(kBig), h2(kBig);
  std::vector<float> back(kBig);
  dev.d.convert(bf.data(), DType::kBF16, f.data(), DType::kFP32, kBig);
  for (int64_t i = 0; i < kBig; ++i) ASSERT_EQ(bf[i], fp32_to_bf16(f[i])) << i;
  dev.d.convert(h.data(), DType::kFP16, bf.data(), DType::kBF16, kBig);
  for (int64_t i = 0; i < kBig; ++i) ASSERT_EQ(h[i], fp32_to_fp16(bf16_to_fp32(bf[i]))) << i;
  dev.d.convert(back.data(), DType::kFP32, h.data(), DType::kFP16, kBig);
  for (int64_t i = 0; i < kBig; ++i) ASSERT_EQ(back[i], fp16_to_fp32(h[i])) << i;
  dev.d.convert(h2.data(), DType::kFP16, h.data(), DType::kFP16, kBig);  // same dtype: a copy
  EXPECT_EQ(std::memcmp(h.data(), h2.data(), kBig * 2), 0);
}

TEST(Add, Fp32IsExactAndMayAlias) {
  Dev dev;
  auto a = random_uniform(kBig, -1, 1, 2);
  const auto b = random_uniform(kBig, -1, 1, 3);
  std::vector<float> out(kBig);
  dev.d.add(out.data(), a.data(), b.data(), DType::kFP32, kBig);
  for (int64_t i = 0; i < kBig; ++i) ASSERT_EQ(out[i], a[i] + b[i]);
  const auto a0 = a;
  dev.d.add(a.data(), a.data(), b.data(), DType::kFP32, kBig);  // in place
  for (int64_t i = 0; i < kBig; ++i) ASSERT_EQ(a[i], a0[i] + b[i]);
}

TEST(Add, SixteenBit) {
  Dev dev;
  for (DType t : {DType::kBF16, DType::kFP16}) {
    const auto a = random16(kBig, t, 4), b = random16(kBig, t, 5);
    std::vector<uint16_t> out(kBig);
    dev.d.add(out.data(), a.data(), b.data(), t, kBig);
    for (int64_t i = 0; i < kBig; ++i) ASSERT_EQ(out[i], to16(to32(a[i], t) + to32(b[i], t), t));
  }
}

TEST(Accumulate, MixedDtypes) {
  Dev dev;
  const int64_t n = 1500;
  // 16-bit gradients += fp32 values, and fp32 += 16-bit.
  auto d16 = random16(n, DType::kBF16, 6);
  const auto d16_0 = d16;
  const auto s32 = random_uniform(n, -1, 1, 7);
  dev.d.accumulate(d16.data(), DType::kBF16, s32.data(), DType::kFP32, n);
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(d16[i], fp32_to_bf16(bf16_to_fp32(d16_0[i]) + s32[i]));
  auto d32 = random_uniform(n, -1, 1, 8);
  const auto d32_0 = d32;
  const auto s16 = random16(n, DType::kFP16, 9);
  dev.d.accumulate(d32.data(), DType::kFP32, s16.data(), DType::kFP16, n);
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(d32[i], d32_0[i] + fp16_to_fp32(s16[i]));
}

TEST(Scale, AllDtypes) {
  Dev dev;
  const float alpha = -0.37f;
  auto x32 = random_uniform(kBig, -1, 1, 10);
  const auto x32_0 = x32;
  dev.d.scale(x32.data(), DType::kFP32, alpha, kBig);
  for (int64_t i = 0; i < kBig; ++i) ASSERT_EQ(x32[i], x32_0[i] * alpha);
  auto x16 = random16(kBig, DType::kFP16, 11);
  const auto x16_0 = x16;
  dev.d.scale(x16.data(), DType::kFP16, alpha, kBig);
  for (int64_t i = 0; i < kBig; ++i) ASSERT_EQ(x16[i], fp32_to_fp16(fp16_to_fp32(x16_0[i]) * alpha));
}

TEST(BiasAdd, AddsTheBiasToEveryRow) {
  Dev dev;
  const int64_t rows = 1000, cols = 37;  // 37 000 elements: the parallel path
  auto out = random_uniform(rows * cols, -1, 1, 12);
  const auto out0 = out;
  const auto bias = random_uniform(cols, -1, 1, 13);
  dev.d.bias_add(out.data(), bias.data(), DType::kFP32, rows, cols);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) ASSERT_EQ(out[r * cols + c], out0[r * cols + c] + bias[c]);

  auto o16 = random16(rows * cols, DType::kBF16, 14);
  const auto o16_0 = o16;
  const auto b16 = random16(cols, DType::kBF16, 15);
  dev.d.bias_add(o16.data(), b16.data(), DType::kBF16, rows, cols);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      ASSERT_EQ(o16[r * cols + c], fp32_to_bf16(bf16_to_fp32(o16_0[r * cols + c]) + bf16_to_fp32(b16[c])));
}

TEST(BiasBackward, MatchesFiniteDifferencesAndAColumnSum) {
  Dev dev;
  const int64_t rows = 1000, cols = 40;
  const auto x = random_uniform(rows * cols, -1, 1, 16), dout = random_uniform(rows * cols, -1, 1, 17);
  auto bias = random_uniform(cols, -1, 1, 18);
  std::vector<float> out(rows * cols);
  auto loss = [&]() {
    out = x;
    dev.d.bias_add(out.data(), bias.data(), DType::kFP32, rows, cols);
    return testing_util::dot(dout, out);
  };
  std::vector<float> dbias(cols, 999.0f);  // overwritten when accumulate is false
  dev.d.bias_backward(dbias.data(), DType::kFP32, dout.data(), DType::kFP32, rows, cols, false);
  // L is linear in the bias, so only rounding separates the two; perturbing
  // bias_c changes the 1000 outputs of column c: noise ≈ 6e-8·1000/1e-2 ≈ 6e-3
  // relative to |dL/db| ≈ √1000/√3 ≈ 18, i.e. ≈ 3e-4.
  EXPECT_LT(testing_util::max_rel_error(dbias, testing_util::numeric_grad(bias, loss)), 2e-3);
  // The column sums themselves: one fp32 rounding of the double sum.
  std::vector<double> ref(cols, 0.0);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) ref[c] += dout[r * cols + c];
  for (int64_t c = 0; c < cols; ++c) EXPECT_EQ(dbias[c], static_cast<float>(ref[c]));

  // accumulate: added to what is there; 16-bit gradients rounded once.
  std::vector<float> acc(cols, 0.5f);
  dev.d.bias_backward(acc.data(), DType::kFP32, dout.data(), DType::kFP32, rows, cols, true);
  for (int64_t c = 0; c < cols; ++c) EXPECT_EQ(acc[c], static_cast<float>(0.5 + ref[c]));
  std::vector<uint16_t> acc16(cols, fp32_to_bf16(0.5f));
  dev.d.bias_backward(acc16.data(), DType::kBF16, dout.data(), DType::kFP32, rows, cols, true);
  for (int64_t c = 0; c < cols; ++c) EXPECT_EQ(acc16[c], fp32_to_bf16(static_cast<float>(0.5 + ref[c])));
}

}  // namespace
}  // namespace gpuledger
