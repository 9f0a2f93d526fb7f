// The Linear GEMMs inside an Fp8GemmScope (models/linear/fp8_scope.h) on the
// cpu backend against a reference computed here in double from the FP8 codes
// of core/fp8.h (themselves tested against hand bit patterns): each operand
// scaled by FP8_MAX/amax in fp32, cast (E4M3 for x and W, E5M2 for dy), the
// products summed in double and rounded once to bf16 — the result must lie
// within one bf16 rounding (2⁻⁸ relative) plus the fp32 accumulation's error
// of it. Outside the scope the same calls are the bf16 GEMMs, which differ.
// On meta the FP8 GEMMs count 2·m·n·k FLOPs, as the bf16 ones.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "core/fp8.h"
#include "kernels/ledger.h"
#include "kernels/meta/meta_device.h"
#include "kernels/registry/registry.h"
#include "models/linear/fp8_scope.h"
#include "models/linear/linear.h"

namespace gpuledger {
namespace {

constexpr int64_t kN = 6, kIn = 40, kOut = 5;

std::vector<uint16_t> random_bf16(int64_t n, uint32_t seed, float spread) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, spread);
  std::vector<uint16_t> v(static_cast<size_t>(n));
  for (auto& x : v) x = fp32_to_bf16(d(rng));
  return v;
}

// The operand as the FP8 GEMM sees it: each value's FP8 code times the inverse scale.
std::vector<double> fp8_image(const std::vector<uint16_t>& v, Fp8Format f) {
  float amax = 0;
  for (uint16_t x : v) amax = std::max(amax, std::fabs(bf16_to_fp32(x)));
  const float scale = fp8_max(f) / amax;
  std::vector<double> out;
  for (uint16_t x : v)
    out.push_back(static_cast<double>(fp8_to_fp32(fp32_to_fp8(bf16_to_fp32(x) * scale, f), f)) /
                  static_cast<double>(scale));
  return out;
}

struct CpuRig {
  Ledger ledger;
  std::unique_ptr<Device> dev = make_device("cpu", ledger);
  Buffer upload(const std::vector<uint16_t>& v) {
    Buffer b = dev->alloc(static_cast<int64_t>(v.size()) * 2, Account::kWorkspace, "test");
    dev->copy_from_host(b.data(), v.data(), b.bytes());
    return b;
  }
  std::vector<float> download(const Buffer& b, int64_t n) {
    std::vector<uint16_t> h(static_cast<size_t>(n));
    dev->copy_to_host(h.data(), b.data(), n * 2);
    std::vector<float> out;
    for (uint16_t x : h) out.push_back(bf16_to_fp32(x));
    return out;
  }
};

void expect_near_bf16(const std::vector<float>& got, const std::vector<double>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_NEAR(got[i], want[i], std::abs(want[i]) * std::ldexp(1.0, -8) + 1e-6) << "element " << i;
}

TEST(Fp8Linear, ForwardIsTheE4M3ProductAccumulatedInFp32) {
  CpuRig rig;
  const auto x = random_bf16(kN * kIn, 1, 1.0f), w = random_bf16(kOut * kIn, 2, 0.05f);
  Buffer bx = rig.upload(x), bw = rig.upload(w);
  Buffer y = rig.dev->alloc(kN * kOut * 2, Account::kWorkspace, "y");
  {
    const Fp8GemmScope on(true);
    linear_forward(*rig.dev, y.data(), bx.data(), bw.data(), DType::kBF16, kN, kIn, kOut);
  }
  const auto qx = fp8_image(x, Fp8Format::kE4M3), qw = fp8_image(w, Fp8Format::kE4M3);
  std::vector<double> want;
  for (int64_t i = 0; i < kN; ++i)
    for (int64_t o = 0; o < kOut; ++o) {
      double s = 0;
      for (int64_t k = 0; k < kIn; ++k)
        s += qx[static_cast<size_t>(i * kIn + k)] * qw[static_cast<size_t>(o * kIn + k)];
      want.push_back(bf16_to_fp32(fp32_to_bf16(static_cast<float>(s))));
    }
  const auto got = rig.download(y, kN * kOut);
  expect_near_bf16(got, want);

  // outside the scope: the bf16 GEMM, which FP8's 3-bit mantissa moves visibly
  linear_forward(*rig.dev, y.data(), bx.data(), bw.data(), DType::kBF16, kN, kIn, kOut);
  const auto bf16 = rig.download(y, kN * kOut);
  double largest = 0;
  for (size_t i = 0; i < got.size(); ++i) largest = std::max(largest, std::abs(static_cast<double>(got[i]) - bf16[i]));
  EXPECT_GT(largest, 1e-3);
}

TEST(Fp8Linear, BackwardDataCastsTheGradientToE5M2) {
  CpuRig rig;
  const auto dy = random_bf16(kN * kOut, 3, 1e-3f), w = random_bf16(kOut * kIn, 4, 0.05f);
  Buffer bdy = rig.upload(dy), bw = rig.upload(w);
  Buffer dx = rig.dev->alloc(kN * kIn * 2, Account::kWorkspace, "dx");
  {
    const Fp8GemmScope on(true);
    linear_backward_data(*rig.dev, dx.data(), bdy.data(), bw.data(), DType::kBF16, kN, kIn, kOut);
  }
  const auto qdy = fp8_image(dy, Fp8Format::kE5M2), qw = fp8_image(w, Fp8Format::kE4M3);
  std::vector<double> want;
  for (int64_t i = 0; i < kN; ++i)
    for (int64_t k = 0; k < kIn; ++k) {
      double s = 0;
      for (int64_t o = 0; o < kOut; ++o)
        s += qdy[static_cast<size_t>(i * kOut + o)] * qw[static_cast<size_t>(o * kIn + k)];
      want.push_back(bf16_to_fp32(fp32_to_bf16(static_cast<float>(s))));
    }
  expect_near_bf16(rig.download(dx, kN * kIn), want);
}

TEST(Fp8Linear, BackwardWeightAccumulatesTheE5M2ByE4M3Product) {
  CpuRig rig;
  const auto dy = random_bf16(kN * kOut, 5, 1e-2f), x = random_bf16(kN * kIn, 6, 1.0f);
  Buffer bdy = rig.upload(dy), bx = rig.upload(x);
  const std::vector<uint16_t> start(static_cast<size_t>(kOut * kIn), fp32_to_bf16(0.25f));
  Buffer dw = rig.upload(start);
  {
    const Fp8GemmScope on(true);
    linear_backward_weight(*rig.dev, dw.data(), DType::kBF16, bdy.data(), bx.data(), DType::kBF16, kN, kIn, kOut);
  }
  const auto qdy = fp8_image(dy, Fp8Format::kE5M2), qx = fp8_image(x, Fp8Format::kE4M3);
  std::vector<double> want;
  for (int64_t o = 0; o < kOut; ++o)
    for (int64_t k = 0; k < kIn; ++k) {
      double s = 0;
      for (int64_t i = 0; i < kN; ++i)
        s += qdy[static_cast<size_t>(i * kOut + o)] * qx[static_cast<size_t>(i * kIn + k)];
      want.push_back(bf16_to_fp32(fp32_to_bf16(0.25f + static_cast<float>(s))));
    }
  expect_near_bf16(rig.download(dw, kOut * kIn), want);
}

TEST(Fp8Linear, MetaCountsTheSameFlops) {
  Ledger ledger;
  MetaDevice meta(ledger);
  {
    const Fp8GemmScope on(true);
    EXPECT_TRUE(fp8_gemms_on());
    linear_forward(meta, nullptr, nullptr, nullptr, DType::kBF16, kN, kIn, kOut);
    linear_backward_data(meta, nullptr, nullptr, nullptr, DType::kBF16, kN, kIn, kOut);
  }
  EXPECT_FALSE(fp8_gemms_on());
  EXPECT_EQ(meta.executed_flops(), 2 * (2 * kN * kIn * kOut));
}

}  // namespace
}  // namespace gpuledger
