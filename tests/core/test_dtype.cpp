// Storage dtypes: exact bit patterns of bf16/fp16 conversions (IEEE 754
// binary16 and bfloat16, round-to-nearest-even), every 16-bit pattern round
// trips, and random floats agree with an independent nearest-value search over
// all representable values (and with the compiler's _Float16 where it exists).
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "core/dtype.h"

namespace gpuledger {
namespace {

float f(uint32_t bits) { return std::bit_cast<float>(bits); }
uint32_t bits(float x) { return std::bit_cast<uint32_t>(x); }

TEST(DTypeNames, RoundTripAndSizes) {
  for (DType t : {DType::kBF16, DType::kFP16, DType::kFP32}) EXPECT_EQ(dtype_from_name(dtype_name(t)), t);
  EXPECT_EQ(dtype_name(DType::kBF16), "bf16");
  EXPECT_EQ(dtype_name(DType::kFP16), "fp16");
  EXPECT_EQ(dtype_name(DType::kFP32), "fp32");
  EXPECT_FALSE(dtype_from_name("float16").has_value());
  EXPECT_EQ(dtype_bytes(DType::kBF16), 2);
  EXPECT_EQ(dtype_bytes(DType::kFP16), 2);
  EXPECT_EQ(dtype_bytes(DType::kFP32), 4);
}

// ---- bf16 ----

TEST(BF16, KnownPatterns) {
  EXPECT_EQ(fp32_to_bf16(1.0f), 0x3F80);
  EXPECT_EQ(fp32_to_bf16(-2.0f), 0xC000);
  EXPECT_EQ(fp32_to_bf16(0.0f), 0x0000);
  EXPECT_EQ(fp32_to_bf16(-0.0f), 0x8000);
  EXPECT_EQ(fp32_to_bf16(0.1f), 0x3DCD);       // 0x3DCCCCCD: dropped 0xCCCD > half, round up
  EXPECT_EQ(fp32_to_bf16(3.140625f), 0x4049);  // exactly representable
  EXPECT_EQ(bf16_to_fp32(0x3F80), 1.0f);
  EXPECT_EQ(bf16_to_fp32(0x4049), 3.140625f);
}

TEST(BF16, TiesToEven) {
  // 0x3F808000 lies exactly between 0x3F80 (even) and 0x3F81: goes to 0x3F80.
  EXPECT_EQ(fp32_to_bf16(f(0x3F808000)), 0x3F80);
  // 0x3F818000 lies between 0x3F81 and 0x3F82 (even): goes to 0x3F82.
  EXPECT_EQ(fp32_to_bf16(f(0x3F818000)), 0x3F82);
  // Just above / below the tie.
  EXPECT_EQ(fp32_to_bf16(f(0x3F808001)), 0x3F81);
  EXPECT_EQ(fp32_to_bf16(f(0x3F817FFF)), 0x3F81);
  // A carry out of the mantissa moves to the next binade: 0x3FFF8000 -> 0x4000 (= 2.0).
  EXPECT_EQ(fp32_to_bf16(f(0x3FFF8000)), 0x4000);
}

TEST(BF16, InfNanOverflow) {
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(fp32_to_bf16(inf), 0x7F80);
  EXPECT_EQ(fp32_to_bf16(-inf), 0xFF80);
  EXPECT_EQ(fp32_to_bf16(f(0x7FC00000)), 0x7FC0);  // quiet NaN
  EXPECT_EQ(fp32_to_bf16(f(0xFFC00000)), 0xFFC0);  // negative quiet NaN keeps its sign
  // A NaN whose payload sits only in the low 16 bits must stay NaN, not become inf.
  const uint16_t snan = fp32_to_bf16(f(0x7F800001));
  EXPECT_EQ(snan & 0x7F80, 0x7F80);
  EXPECT_NE(snan & 0x007F, 0);
  EXPECT_TRUE(std::isnan(bf16_to_fp32(snan)));
  // bf16 max is 0x7F7F = (2 - 2^-7)·2^127; FLT_MAX is above max + half an ulp -> inf.
  EXPECT_EQ(fp32_to_bf16(std::numeric_limits<float>::max()), 0x7F80);
  EXPECT_EQ(fp32_to_bf16(f(0x7F7F7FFF)), 0x7F7F);  // just below the tie stays finite
}

// ---- fp16 ----

TEST(FP16, KnownPatterns) {
  EXPECT_EQ(fp32_to_fp16(1.0f), 0x3C00);
  EXPECT_EQ(fp32_to_fp16(-2.0f), 0xC000);
  EXPECT_EQ(fp32_to_fp16(0.5f), 0x3800);
  EXPECT_EQ(fp32_to_fp16(0.1f), 0x2E66);
  EXPECT_EQ(fp32_to_fp16(-0.0f), 0x8000);
  EXPECT_EQ(fp32_to_fp16(65504.0f), 0x7BFF);  // max
  EXPECT_EQ(fp16_to_fp32(0x7BFF), 65504.0f);
  EXPECT_EQ(fp16_to_fp32(0x3555), 0.333251953125f);  // 1365/4096
  EXPECT_EQ(fp16_to_fp32(0xC000), -2.0f);
}

TEST(FP16, OverflowAndTiesAtTheTop) {
  const float inf = std::numeric_limits<float>::infinity();
  // ulp at the top is 32; 65520 is the tie between 65504 (mantissa 0x3FF, odd) and 65536 (inf).
  EXPECT_EQ(fp32_to_fp16(65519.0f), 0x7BFF);
  EXPECT_EQ(fp32_to_fp16(65520.0f), 0x7C00);
  EXPECT_EQ(fp32_to_fp16(1e6f), 0x7C00);
  EXPECT_EQ(fp32_to_fp16(-1e6f), 0xFC00);
  EXPECT_EQ(fp32_to_fp16(inf), 0x7C00);
  EXPECT_EQ(fp32_to_fp16(-inf), 0xFC00);
  EXPECT_EQ(fp16_to_fp32(0x7C00), inf);
  // 2049 lies between 2048 (0x6800, even) and 2050 (0x6801): tie -> 0x6800; 2051 -> 2052 (0x6802).
  EXPECT_EQ(fp32_to_fp16(2049.0f), 0x6800);
  EXPECT_EQ(fp32_to_fp16(2051.0f), 0x6802);
}

TEST(FP16, Subnormals) {
  const float tiny = std::ldexp(1.0f, -24);  // smallest fp16 subnormal
  EXPECT_EQ(fp32_to_fp16(tiny), 0x0001);
  EXPECT_EQ(fp16_to_fp32(0x0001), tiny);
  EXPECT_EQ(fp32_to_fp16(std::ldexp(1.0f, -25)), 0x0000);     // tie with 0 -> even (0)
  EXPECT_EQ(fp32_to_fp16(-std::ldexp(1.0f, -25)), 0x8000);    // signed zero
  EXPECT_EQ(fp32_to_fp16(std::ldexp(1.5f, -25)), 0x0001);     // above the tie
  EXPECT_EQ(fp32_to_fp16(std::ldexp(3.0f, -25)), 0x0002);     // 1.5 steps: tie -> 2 (even)
  EXPECT_EQ(fp32_to_fp16(std::ldexp(5.0f, -25)), 0x0002);     // 2.5 steps: tie -> 2 (even)
  EXPECT_EQ(fp32_to_fp16(std::ldexp(1023.0f, -24)), 0x03FF);  // largest subnormal
  EXPECT_EQ(fp32_to_fp16(std::ldexp(1023.5f, -24)), 0x0400);  // tie -> min normal (even)
  EXPECT_EQ(fp32_to_fp16(std::ldexp(1.0f, -14)), 0x0400);     // min normal
  EXPECT_EQ(fp32_to_fp16(std::ldexp(1.0f, -26)), 0x0000);     // underflow
  EXPECT_EQ(fp32_to_fp16(std::numeric_limits<float>::denorm_min()), 0x0000);
  EXPECT_EQ(fp16_to_fp32(0x03FF), std::ldexp(1023.0f, -24));
  EXPECT_EQ(fp16_to_fp32(0x8001), -tiny);
  EXPECT_TRUE(std::signbit(fp16_to_fp32(0x8000)));
}

TEST(FP16, NaN) {
  const uint16_t q = fp32_to_fp16(std::numeric_limits<float>::quiet_NaN());
  EXPECT_EQ(q & 0x7C00, 0x7C00);
  EXPECT_NE(q & 0x03FF, 0);
  // Payload only in bits fp16 drops: still NaN.
  const uint16_t s = fp32_to_fp16(f(0xFF800001));
  EXPECT_EQ(s & 0xFC00, 0xFC00);
  EXPECT_NE(s & 0x03FF, 0);
  EXPECT_TRUE(std::isnan(fp16_to_fp32(0x7E00)));
  EXPECT_TRUE(std::isnan(fp16_to_fp32(0x7C01)));
}

// ---- every 16-bit pattern ----

TEST(RoundTrip, EveryPattern) {
  for (uint32_t p = 0; p <= 0xFFFF; ++p) {
    const uint16_t h = static_cast<uint16_t>(p);
    const float vb = bf16_to_fp32(h), vh = fp16_to_fp32(h);
    if (std::isnan(vb)) {
      EXPECT_TRUE(std::isnan(bf16_to_fp32(fp32_to_bf16(vb)))) << std::hex << p;
    } else {
      EXPECT_EQ(fp32_to_bf16(vb), h) << std::hex << p;
    }
    if (std::isnan(vh)) {
      EXPECT_TRUE(std::isnan(fp16_to_fp32(fp32_to_fp16(vh)))) << std::hex << p;
    } else {
      EXPECT_EQ(fp32_to_fp16(vh), h) << std::hex << p;
    }
  }
}

// ---- independent reference: nearest representable value, ties to even ----

// All finite non-negative values of a 16-bit format, ascending, with their patterns.
struct Table {
  std::vector<double> values;
  std::vector<uint16_t> patterns;
  double overflow_tie;  // max + ulp/2: at or above -> inf (RNE when max's mantissa is odd)
};

Table make_table(float (*decode)(uint16_t), uint16_t inf_pattern) {
  Table t;
  for (uint32_t p = 0; p < inf_pattern; ++p) {  // 0 .. max finite, ascending
    t.values.push_back(decode(static_cast<uint16_t>(p)));
    t.patterns.push_back(static_cast<uint16_t>(p));
  }
  const double max = t.values.back(), below = t.values[t.values.size() - 2];
  t.overflow_tie = max + (max - below) / 2;
  return t;
}

uint16_t reference(const Table& t, float x, uint16_t inf_pattern, uint16_t sign_bit) {
  const double a = std::fabs(static_cast<double>(x));
  const uint16_t sign = std::signbit(x) ? sign_bit : 0;
  if (a >= t.overflow_tie) return sign | inf_pattern;
  const auto it = std::lower_bound(t.values.begin(), t.values.end(), a);
  const size_t hi = it - t.values.begin();
  if (hi == t.values.size()) return sign | t.patterns.back();  // (max, overflow tie): max
  if (t.values[hi] == a) return sign | t.patterns[hi];
  const size_t lo = hi - 1;
  const double dl = a - t.values[lo], dh = t.values[hi] - a;
  if (dl < dh) return sign | t.patterns[lo];
  if (dh < dl) return sign | t.patterns[hi];
  return sign | ((t.patterns[lo] & 1) ? t.patterns[hi] : t.patterns[lo]);
}

TEST(Reference, RandomFloatsMatchNearestEven) {
  const Table bf = make_table(bf16_to_fp32, 0x7F80);
  const Table hf = make_table(fp16_to_fp32, 0x7C00);
  std::mt19937 rng(1234);
  std::uniform_int_distribution<uint32_t> any_bits;
  std::uniform_real_distribution<float> exp16(-27.0f, 17.0f);
  for (int i = 0; i < 200000; ++i) {
    // Random bit patterns (all binades) and values concentrated on fp16's range.
    float x = f(any_bits(rng));
    if (std::isnan(x)) continue;
    EXPECT_EQ(fp32_to_bf16(x), reference(bf, x, 0x7F80, 0x8000)) << std::hex << bits(x);
    float y = std::exp2(exp16(rng)) * ((i & 1) ? -1.0f : 1.0f);
    EXPECT_EQ(fp32_to_fp16(y), reference(hf, y, 0x7C00, 0x8000)) << std::hex << bits(y);
    EXPECT_EQ(fp32_to_fp16(x), reference(hf, x, 0x7C00, 0x8000)) << std::hex << bits(x);
  }
}

#ifdef __FLT16_MAX__
// The compiler's _Float16 conversion (RNE, IEEE binary16) as a second reference.
TEST(Reference, CompilerFloat16) {
  std::mt19937 rng(99);
  std::uniform_real_distribution<float> e(-27.0f, 17.0f);
  for (int i = 0; i < 100000; ++i) {
    const float x = std::exp2(e(rng)) * ((i & 1) ? -1.0f : 1.0f);
    const _Float16 h = static_cast<_Float16>(x);
    EXPECT_EQ(fp32_to_fp16(x), std::bit_cast<uint16_t>(h)) << x;
  }
}
#endif

// ---- bulk ----

TEST(Bulk, MatchesScalar) {
  const std::vector<float> src = {1.0f,    -0.1f, 65520.0f,   std::ldexp(3.0f, -25),
                                  3.3e38f, -0.0f, 1234.5678f, std::numeric_limits<float>::infinity()};
  const int64_t n = static_cast<int64_t>(src.size());
  std::vector<uint16_t> b(n), h(n);
  convert_from_fp32(src.data(), b.data(), DType::kBF16, n);
  convert_from_fp32(src.data(), h.data(), DType::kFP16, n);
  std::vector<float> back_b(n), back_h(n), copy(n);
  convert_to_fp32(b.data(), DType::kBF16, back_b.data(), n);
  convert_to_fp32(h.data(), DType::kFP16, back_h.data(), n);
  convert_from_fp32(src.data(), copy.data(), DType::kFP32, n);
  for (int64_t i = 0; i < n; ++i) {
    EXPECT_EQ(b[i], fp32_to_bf16(src[i]));
    EXPECT_EQ(h[i], fp32_to_fp16(src[i]));
    EXPECT_EQ(bits(back_b[i]), bits(bf16_to_fp32(b[i])));
    EXPECT_EQ(bits(back_h[i]), bits(fp16_to_fp32(h[i])));
    EXPECT_EQ(bits(copy[i]), bits(src[i]));
  }
  std::vector<float> copy2(n);
  convert_to_fp32(copy.data(), DType::kFP32, copy2.data(), n);
  EXPECT_EQ(copy2, copy);
}

}  // namespace
}  // namespace gpuledger
