// FP8 conversions against hand-computed bit patterns (Micikevicius et al. 2022,
// Table 1): max normals, min normals, subnormals, ties to even, saturation of
// finite values and infinities, NaN; every code round-trips; random floats land
// on the nearest representable value found by a search over all 256 codes
// (ties to the even code); the delayed-scaling scale update.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

#include "core/fp8.h"

namespace gpuledger {
namespace {

constexpr Fp8Format kE4 = Fp8Format::kE4M3;
constexpr Fp8Format kE5 = Fp8Format::kE5M2;

TEST(Fp8E4M3, KnownBitPatterns) {
  EXPECT_EQ(fp32_to_fp8(1.0f, kE4), 0x38);          // 0.0111.000
  EXPECT_EQ(fp32_to_fp8(448.0f, kE4), 0x7E);        // max normal 0.1111.110 = 2^8·1.75
  EXPECT_EQ(fp32_to_fp8(-448.0f, kE4), 0xFE);       //
  EXPECT_EQ(fp32_to_fp8(0.015625f, kE4), 0x08);     // min normal 2^-6
  EXPECT_EQ(fp32_to_fp8(0.001953125f, kE4), 0x01);  // min subnormal 2^-9
  EXPECT_EQ(fp32_to_fp8(0.013671875f, kE4), 0x07);  // largest subnormal 7·2^-9
  EXPECT_EQ(fp32_to_fp8(240.0f, kE4), 0x77);        // 2^7·1.875
  EXPECT_EQ(fp32_to_fp8(0.0f, kE4), 0x00);
  EXPECT_EQ(fp32_to_fp8(-0.0f, kE4), 0x80);
}

TEST(Fp8E4M3, TiesRoundToEven) {
  EXPECT_EQ(fp32_to_fp8(1.0625f, kE4), 0x38);                 // 1 + 1/16: between 1.0 (000) and 1.125 (001) -> 1.0
  EXPECT_EQ(fp32_to_fp8(1.1875f, kE4), 0x3A);                 // 1 + 3/16: between 1.125 (001) and 1.25 (010) -> 1.25
  EXPECT_EQ(fp32_to_fp8(std::ldexp(1.0f, -10), kE4), 0x00);   // half the min subnormal -> 0
  EXPECT_EQ(fp32_to_fp8(std::ldexp(3.0f, -10), kE4), 0x02);   // 1.5 quanta -> 2
  EXPECT_EQ(fp32_to_fp8(std::ldexp(1.5f, -10), kE4), 0x01);   // 0.75 quantum -> 1
  EXPECT_EQ(fp32_to_fp8(std::ldexp(15.0f, -10), kE4), 0x08);  // 7.5 quanta -> 8: the min normal
  EXPECT_EQ(fp32_to_fp8(1.0624999f, kE4), 0x38);              // just below the tie
  EXPECT_EQ(fp32_to_fp8(1.0625001f, kE4), 0x39);              // just above it
}

TEST(Fp8E4M3, SaturatesAndKeepsNaN) {
  EXPECT_EQ(fp32_to_fp8(464.0f, kE4), 0x7E);  // would round to 480, beyond the max normal
  EXPECT_EQ(fp32_to_fp8(500.0f, kE4), 0x7E);
  EXPECT_EQ(fp32_to_fp8(1e30f, kE4), 0x7E);
  EXPECT_EQ(fp32_to_fp8(std::numeric_limits<float>::infinity(), kE4), 0x7E);
  EXPECT_EQ(fp32_to_fp8(-std::numeric_limits<float>::infinity(), kE4), 0xFE);
  EXPECT_EQ(fp32_to_fp8(std::numeric_limits<float>::quiet_NaN(), kE4) & 0x7F, 0x7F);
  EXPECT_TRUE(std::isnan(fp8_to_fp32(0x7F, kE4)));
  EXPECT_TRUE(std::isnan(fp8_to_fp32(0xFF, kE4)));
  EXPECT_EQ(fp8_to_fp32(0x7E, kE4), 448.0f);
  EXPECT_EQ(fp8_to_fp32(0x01, kE4), std::ldexp(1.0f, -9));
  EXPECT_EQ(fp8_max(kE4), 448.0f);
}

TEST(Fp8E5M2, KnownBitPatterns) {
  EXPECT_EQ(fp32_to_fp8(1.0f, kE5), 0x3C);                   // 0.01111.00
  EXPECT_EQ(fp32_to_fp8(57344.0f, kE5), 0x7B);               // max normal 2^15·1.75
  EXPECT_EQ(fp32_to_fp8(std::ldexp(1.0f, -14), kE5), 0x04);  // min normal
  EXPECT_EQ(fp32_to_fp8(std::ldexp(1.0f, -16), kE5), 0x01);  // min subnormal
  EXPECT_EQ(fp32_to_fp8(std::ldexp(3.0f, -16), kE5), 0x03);  // largest subnormal
  EXPECT_EQ(fp32_to_fp8(-2.0f, kE5), 0xC0);
  EXPECT_EQ(fp32_to_fp8(1.125f, kE5), 0x3C);                 // tie between 1.0 (00) and 1.25 (01) -> 1.0
  EXPECT_EQ(fp32_to_fp8(1.375f, kE5), 0x3E);                 // tie between 1.25 (01) and 1.5 (10) -> 1.5
  EXPECT_EQ(fp32_to_fp8(std::ldexp(1.0f, -17), kE5), 0x00);  // half the min subnormal -> 0
}

TEST(Fp8E5M2, SaturatesAndDecodesSpecials) {
  EXPECT_EQ(fp32_to_fp8(61440.0f, kE5), 0x7B);  // the tie with 65536 (inf's place) saturates
  EXPECT_EQ(fp32_to_fp8(1e6f, kE5), 0x7B);
  EXPECT_EQ(fp32_to_fp8(std::numeric_limits<float>::infinity(), kE5), 0x7B);
  EXPECT_EQ(fp32_to_fp8(-std::numeric_limits<float>::infinity(), kE5), 0xFB);
  EXPECT_TRUE(std::isinf(fp8_to_fp32(0x7C, kE5)));
  EXPECT_TRUE(std::isnan(fp8_to_fp32(0x7D, kE5)));
  EXPECT_TRUE(std::isnan(fp8_to_fp32(fp32_to_fp8(std::numeric_limits<float>::quiet_NaN(), kE5), kE5)));
  EXPECT_EQ(fp8_max(kE5), 57344.0f);
}

bool is_special(uint8_t c, Fp8Format f) { return f == kE4 ? (c & 0x7F) == 0x7F : (c & 0x7F) >= 0x7C; }

TEST(Fp8, EveryFiniteCodeRoundTrips) {
  for (Fp8Format f : {kE4, kE5})
    for (int c = 0; c < 256; ++c) {
      const auto code = static_cast<uint8_t>(c);
      if (is_special(code, f)) continue;
      EXPECT_EQ(fp32_to_fp8(fp8_to_fp32(code, f), f), code) << "code " << c;
    }
}

// The nearest finite code by search (ties to the even mantissa, i.e. even code),
// saturating beyond the max normal.
uint8_t nearest_by_search(float x, Fp8Format f) {
  int best = -1;
  double best_err = 0;
  for (int c = 0; c < 256; ++c) {
    const auto code = static_cast<uint8_t>(c);
    if (is_special(code, f) || std::signbit(fp8_to_fp32(code, f)) != std::signbit(x)) continue;
    const double err = std::fabs(static_cast<double>(fp8_to_fp32(code, f)) - x);
    if (best < 0 || err < best_err || (err == best_err && (c & 1) == 0)) best = c, best_err = err;
  }
  return static_cast<uint8_t>(best);
}

TEST(Fp8, RandomValuesLandOnTheNearestCode) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> mant(-1.0f, 1.0f);
  std::uniform_int_distribution<int> expo(-20, 17);
  for (int i = 0; i < 20000; ++i) {
    const float x = std::ldexp(mant(rng), expo(rng));
    for (Fp8Format f : {kE4, kE5}) ASSERT_EQ(fp32_to_fp8(x, f), nearest_by_search(x, f)) << x;
  }
}

TEST(Fp8Recipe, NamesAndScaleUpdate) {
  EXPECT_EQ(fp8_recipe_from_name("delayed"), Fp8Recipe::kDelayed);
  EXPECT_EQ(fp8_recipe_name(Fp8Recipe::kDelayed), "delayed");
  EXPECT_FALSE(fp8_recipe_from_name("tensorwise").has_value());
  EXPECT_EQ(fp8_scale_from_amax(224.0f, kE4, 0, 1.0f), 2.0f);  // 448 / 224
  EXPECT_EQ(fp8_scale_from_amax(224.0f, kE4, 1, 1.0f), 1.0f);  // / 2^margin
  EXPECT_EQ(fp8_scale_from_amax(4.0f, kE5, 0, 1.0f), 14336.0f);
  EXPECT_EQ(fp8_scale_from_amax(0.0f, kE4, 0, 3.0f), 3.0f);  // amax 0 keeps the previous scale
  EXPECT_EQ(fp8_scale_from_amax(std::numeric_limits<float>::infinity(), kE4, 0, 3.0f), 3.0f);
  EXPECT_EQ(fp8_recipe_from_name("blockwise"), Fp8Recipe::kBlockwise);
}

// The blockwise scale: FP8_MAX/amax rounded down to a power of 2, 1 for amax 0 or not finite.
TEST(Fp8Recipe, BlockScaleIsAPowerOfTwoAtOrBelow) {
  EXPECT_EQ(fp8_block_scale(3.0f, kE4), 128.0f);  // 448/3 = 149.3
  EXPECT_EQ(fp8_block_scale(3.5f, kE4), 128.0f);  // 448/3.5 = 128 exactly
  EXPECT_EQ(fp8_block_scale(448.0f, kE4), 1.0f);
  EXPECT_EQ(fp8_block_scale(1000.0f, kE4), 0.25f);  // 0.448
  EXPECT_EQ(fp8_block_scale(1.0f, kE5), 32768.0f);  // 57344
  EXPECT_EQ(fp8_block_scale(0.0f, kE4), 1.0f);
  EXPECT_EQ(fp8_block_scale(std::numeric_limits<float>::infinity(), kE4), 1.0f);
  EXPECT_EQ(fp8_block_scale(1e-45f, kE4), std::ldexp(1.0f, 127));  // 448/amax overflows: the largest float's power of 2
}

}  // namespace
}  // namespace gpuledger
