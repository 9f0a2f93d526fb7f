// The Linear GEMMs inside an Fp8GemmScope (models/linear/fp8_scope.h) on the
// cpu backend against a reference computed here in double from the FP8 codes
// of core/fp8.h (themselves tested against hand bit patterns): each operand
// scaled by FP8_MAX/amax in fp32, cast (E4M3 for x and W, E5M2 for dy), the
// products summed in double and rounded once to bf16 — the result must lie
// within one bf16 rounding (2⁻⁸ relative) plus the fp32 accumulation's error
// of it. Outside the scope the same calls are the bf16 GEMMs, which differ.
// On meta the FP8 GEMMs count 2·m·n·k FLOPs, as the bf16 ones. The blockwise
// recipe the same way with one power-of-2 scale per 1 × 128 tile of x (128 × 1
// in the weight gradient) and per 128 × 128 block of W, everything E4M3.
#include <gtest/gtest.h>

#include <algorithm>
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
    const Fp8GemmScope on(Fp8Recipe::kDelayed);
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
    const Fp8GemmScope on(Fp8Recipe::kDelayed);
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
    const Fp8GemmScope on(Fp8Recipe::kDelayed);
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

// ---- the blockwise recipe (Float8BlockScaling) ----

// The operand (rows × cols) as the blockwise FP8 GEMM sees it: each block of
// br × bc its own scale, FP8_MAX/amax rounded down to a power of 2 (written
// here from the rule: frexp), E4M3 codes times the inverse scale.
std::vector<double> block_image(const std::vector<uint16_t>& v, int64_t rows, int64_t cols, int64_t br, int64_t bc) {
  std::vector<double> out(v.size());
  for (int64_t r0 = 0; r0 < rows; r0 += br)
    for (int64_t c0 = 0; c0 < cols; c0 += bc) {
      const int64_t r1 = std::min(rows, r0 + br), c1 = std::min(cols, c0 + bc);
      float amax = 0;
      for (int64_t r = r0; r < r1; ++r)
        for (int64_t c = c0; c < c1; ++c) amax = std::max(amax, std::fabs(bf16_to_fp32(v[r * cols + c])));
      int e = 0;
      std::frexp(448.0 / amax, &e);  // 448/amax = m·2^e, m in [0.5, 1): the power of 2 below is 2^(e−1)
      const float scale = std::ldexp(1.0f, e - 1);
      for (int64_t r = r0; r < r1; ++r)
        for (int64_t c = c0; c < c1; ++c)
          out[r * cols + c] =
              static_cast<double>(
                  fp8_to_fp32(fp32_to_fp8(bf16_to_fp32(v[r * cols + c]) * scale, Fp8Format::kE4M3), Fp8Format::kE4M3)) /
              scale;
    }
  return out;
}

// 3 tokens of 300 inputs (tiles of 128, 128 and 44 per row) into 130 outputs
// (weight blocks 2 × 3, cut at the edges); x spans orders of magnitude by
// row and by tile so that per-tile scales matter.
constexpr int64_t kBn = 3, kBin = 300, kBout = 130;

TEST(Fp8LinearBlockwise, ForwardUsesTileAndBlockScales) {
  CpuRig rig;
  auto x = random_bf16(kBn * kBin, 11, 1.0f);
  for (int64_t i = 0; i < kBn * kBin; ++i)  // tile (row r, tile j) scaled by 8^(r + j)
    x[i] = fp32_to_bf16(bf16_to_fp32(x[i]) * std::ldexp(1.0f, 3 * static_cast<int>(i / kBin + i % kBin / 128)));
  const auto w = random_bf16(kBout * kBin, 12, 0.05f);
  Buffer bx = rig.upload(x), bw = rig.upload(w);
  Buffer y = rig.dev->alloc(kBn * kBout * 2, Account::kWorkspace, "y");
  {
    const Fp8GemmScope on(Fp8Recipe::kBlockwise);
    linear_forward(*rig.dev, y.data(), bx.data(), bw.data(), DType::kBF16, kBn, kBin, kBout);
  }
  const auto qx = block_image(x, kBn, kBin, 1, 128), qw = block_image(w, kBout, kBin, 128, 128);
  std::vector<double> want;
  for (int64_t i = 0; i < kBn; ++i)
    for (int64_t o = 0; o < kBout; ++o) {
      double s = 0;
      for (int64_t k = 0; k < kBin; ++k) s += qx[i * kBin + k] * qw[o * kBin + k];
      want.push_back(bf16_to_fp32(fp32_to_bf16(static_cast<float>(s))));
    }
  expect_near_bf16(rig.download(y, kBn * kBout), want);
  // and the per-tensor images differ: the test sees the tiles
  const auto per_tensor = fp8_image(x, Fp8Format::kE4M3);
  double largest = 0;
  for (size_t i = 0; i < qx.size(); ++i) largest = std::max(largest, std::abs(qx[i] - per_tensor[i]));
  EXPECT_GT(largest, 1e-3);
}

// The weight gradient: dy and x cast columnwise, 128 tokens × 1 channel per scale.
TEST(Fp8LinearBlockwise, WeightGradientUsesColumnTiles) {
  CpuRig rig;
  constexpr int64_t n = 200, in = 6, out = 4;  // two token tiles: 128 and 72
  auto dy = random_bf16(n * out, 13, 1e-2f), x = random_bf16(n * in, 14, 1.0f);
  for (int64_t i = 0; i < n * in; ++i)  // the second token tile 64 times larger
    if (i / in >= 128) x[i] = fp32_to_bf16(bf16_to_fp32(x[i]) * 64.0f);
  Buffer bdy = rig.upload(dy), bx = rig.upload(x);
  const std::vector<uint16_t> start(static_cast<size_t>(out * in), fp32_to_bf16(0.0f));
  Buffer dw = rig.upload(start);
  {
    const Fp8GemmScope on(Fp8Recipe::kBlockwise);
    linear_backward_weight(*rig.dev, dw.data(), DType::kBF16, bdy.data(), bx.data(), DType::kBF16, n, in, out);
  }
  const auto qdy = block_image(dy, n, out, 128, 1), qx = block_image(x, n, in, 128, 1);
  std::vector<double> want;
  for (int64_t o = 0; o < out; ++o)
    for (int64_t k = 0; k < in; ++k) {
      double s = 0;
      for (int64_t i = 0; i < n; ++i) s += qdy[i * out + o] * qx[i * in + k];
      want.push_back(bf16_to_fp32(fp32_to_bf16(static_cast<float>(s))));
    }
  expect_near_bf16(rig.download(dw, out * in), want);
}

TEST(Fp8Linear, MetaCountsTheSameFlops) {
  Ledger ledger;
  MetaDevice meta(ledger);
  {
    const Fp8GemmScope on(Fp8Recipe::kDelayed);
    EXPECT_EQ(fp8_gemm_recipe(), Fp8Recipe::kDelayed);
    linear_forward(meta, nullptr, nullptr, nullptr, DType::kBF16, kN, kIn, kOut);
    linear_backward_data(meta, nullptr, nullptr, nullptr, DType::kBF16, kN, kIn, kOut);
  }
  EXPECT_EQ(fp8_gemm_recipe(), Fp8Recipe::kNone);
  EXPECT_EQ(meta.executed_flops(), 2 * (2 * kN * kIn * kOut));
}

}  // namespace
}  // namespace gpuledger
