// KV storage formats: the OCP FP8 E4M3 codec (every byte pattern, published
// values, subnormals, round-to-nearest-even against a brute-force nearest
// search, saturation, NaN), symmetric int8, the host quantizers' error bounds
// per granularity, and the bytes per token of models/kv against the analytic
// formula (analytic/kv_cache.h) and the hand-computed figures of
// docs/formulas/kv.md.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "analytic/kv_cache.h"
#include "core/model_config.h"
#include "models/kv/kv_format.h"
#include "tests/models/transformer/kv_rig.h"

namespace gpuledger::kv {
namespace {

// ---- FP8 E4M3 ----

TEST(Fp8E4M3, EveryBytePatternRoundTrips) {
  int nans = 0;
  for (int c = 0; c < 256; ++c) {
    const auto code = static_cast<uint8_t>(c);
    const float x = fp8_e4m3_to_fp32(code);
    if (std::isnan(x)) {
      ++nans;
      EXPECT_TRUE(c == 0x7F || c == 0xFF) << c;
    }
    EXPECT_EQ(fp32_to_fp8_e4m3(x), code) << "code " << c << " decodes to " << x;
    uint32_t table_bits, bits;  // bitwise, so NaN compares too
    std::memcpy(&table_bits, &fp8_e4m3_table()[c], 4);
    std::memcpy(&bits, &x, 4);
    EXPECT_EQ(table_bits, bits) << c;
  }
  EXPECT_EQ(nans, 2);  // S.1111.111 only: no infinities in E4M3
}

TEST(Fp8E4M3, PublishedValues) {
  // OCP OFP8 spec v1.0, Table 2 (E4M3): max normal S.1111.110 = 448, min normal
  // S.0001.000 = 2^−6, max subnormal S.0000.111 = 0.875·2^−6, min subnormal 2^−9.
  EXPECT_EQ(fp8_e4m3_to_fp32(0x7E), 448.0f);
  EXPECT_EQ(fp8_e4m3_to_fp32(0xFE), -448.0f);
  EXPECT_EQ(fp8_e4m3_to_fp32(0x38), 1.0f);
  EXPECT_EQ(fp8_e4m3_to_fp32(0xB8), -1.0f);
  EXPECT_EQ(fp8_e4m3_to_fp32(0x40), 2.0f);
  EXPECT_EQ(fp8_e4m3_to_fp32(0x3C), 1.5f);
  EXPECT_EQ(fp8_e4m3_to_fp32(0x77), 240.0f);        // 1.875 · 2^7
  EXPECT_EQ(fp8_e4m3_to_fp32(0x08), 0.015625f);     // 2^−6
  EXPECT_EQ(fp8_e4m3_to_fp32(0x07), 0.013671875f);  // 7 · 2^−9
  EXPECT_EQ(fp8_e4m3_to_fp32(0x01), 0.001953125f);  // 2^−9
  EXPECT_EQ(fp8_e4m3_to_fp32(0x00), 0.0f);
  EXPECT_TRUE(std::signbit(fp8_e4m3_to_fp32(0x80)));  // −0
  EXPECT_EQ(fp32_to_fp8_e4m3(448.0f), 0x7E);
  EXPECT_EQ(fp32_to_fp8_e4m3(1.0f), 0x38);
  EXPECT_EQ(fp32_to_fp8_e4m3(0.001953125f), 0x01);
  EXPECT_EQ(fp32_to_fp8_e4m3(-0.015625f), 0x88);
}

TEST(Fp8E4M3, RoundsToNearestEvenAndSaturates) {
  // Ties between neighbours go to the even mantissa.
  EXPECT_EQ(fp32_to_fp8_e4m3(1.0625f), 0x38);        // 1 + 1/16: between 1.0 (m 0) and 1.125 (m 1)
  EXPECT_EQ(fp32_to_fp8_e4m3(1.1875f), 0x3A);        // between 1.125 (m 1) and 1.25 (m 2)
  EXPECT_EQ(fp32_to_fp8_e4m3(0.0009765625f), 0x00);  // 2^−10: between 0 and 2^−9
  EXPECT_EQ(fp32_to_fp8_e4m3(0.0029296875f), 0x02);  // 3·2^−10: between 1 and 2 (·2^−9)
  EXPECT_EQ(fp32_to_fp8_e4m3(0.0146484375f), 0x08);  // 7.5·2^−9: up into the first normal
  EXPECT_EQ(fp32_to_fp8_e4m3(15.5f), 0x58);          // between 15 (0x57, m 7) and 16 (0x58, m 0)
  // Saturation: no infinity; everything beyond 448 is ±448.
  EXPECT_EQ(fp32_to_fp8_e4m3(449.0f), 0x7E);
  EXPECT_EQ(fp32_to_fp8_e4m3(464.0f), 0x7E);
  EXPECT_EQ(fp32_to_fp8_e4m3(1e9f), 0x7E);
  EXPECT_EQ(fp32_to_fp8_e4m3(-1e9f), 0xFE);
  EXPECT_EQ(fp32_to_fp8_e4m3(std::numeric_limits<float>::infinity()), 0x7E);
  EXPECT_EQ(fp32_to_fp8_e4m3(-std::numeric_limits<float>::infinity()), 0xFE);
  EXPECT_EQ(fp32_to_fp8_e4m3(std::numeric_limits<float>::quiet_NaN()), 0x7F);
}

TEST(Fp8E4M3, EncodeIsTheNearestCodeByExhaustiveSearch) {
  // Independent of the encoder's method: the nearest of the 127 non-negative
  // finite codes, ties to the even code (even mantissa), saturating at 448.
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> expo(-12.0f, 9.5f);
  for (int i = 0; i < 20000; ++i) {
    const float x = std::exp2(expo(rng)) * (i % 2 ? -1.0f : 1.0f);
    const float a = std::fabs(x);
    int best = 0;
    float best_err = std::numeric_limits<float>::infinity();
    for (int c = 0; c <= 0x7E; ++c) {
      const float err = std::fabs(fp8_e4m3_to_fp32(static_cast<uint8_t>(c)) - std::min(a, 448.0f));
      if (err < best_err || (err == best_err && c % 2 == 0)) {
        best = c;
        best_err = err;
      }
    }
    const int expect = best | (x < 0 ? 0x80 : 0);
    ASSERT_EQ(fp32_to_fp8_e4m3(x), expect) << "x = " << x;
  }
}

TEST(Fp8E4M3, DecodedValuesIncreaseWithTheCode) {
  for (int c = 1; c <= 0x7E; ++c)
    EXPECT_LT(fp8_e4m3_to_fp32(static_cast<uint8_t>(c - 1)), fp8_e4m3_to_fp32(static_cast<uint8_t>(c)));
}

// ---- int8 ----

TEST(Int8Symmetric, RoundsHalfToEvenAndClamps) {
  EXPECT_EQ(fp32_to_int8_sym(2.5f), 2);
  EXPECT_EQ(fp32_to_int8_sym(3.5f), 4);
  EXPECT_EQ(fp32_to_int8_sym(-2.5f), -2);
  EXPECT_EQ(fp32_to_int8_sym(0.49f), 0);
  EXPECT_EQ(fp32_to_int8_sym(126.6f), 127);
  EXPECT_EQ(fp32_to_int8_sym(200.0f), 127);
  EXPECT_EQ(fp32_to_int8_sym(-200.0f), -127);  // symmetric: −128 is never produced
  EXPECT_EQ(fp32_to_int8_sym(std::numeric_limits<float>::quiet_NaN()), 0);
  EXPECT_EQ(kv_scale_from_amax(254.0f, KvFormat::kInt8), 2.0f);
  EXPECT_EQ(kv_scale_from_amax(896.0f, KvFormat::kFP8E4M3), 2.0f);
  EXPECT_EQ(kv_scale_from_amax(0.0f, KvFormat::kInt8), 1.0f);
}

// ---- host quantizers: error bounds per granularity ----

std::vector<float> random_kv(int64_t n, uint32_t seed, float spread) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> g(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(n));
  for (auto& v : x) v = g(rng) * spread;
  return x;
}

// The largest |x| of the group each value's scale covers, recomputed here.
float group_amax(const std::vector<float>& x, int64_t T, int64_t H, int64_t D, KvScales s, int64_t t, int64_t h,
                 int64_t d) {
  float m = 0.0f;
  for (int64_t tt = 0; tt < T; ++tt)
    for (int64_t hh = 0; hh < H; ++hh)
      for (int64_t dd = 0; dd < D; ++dd) {
        const bool in = s == KvScales::kPerTensor || (s == KvScales::kPerTokenHead && tt == t && hh == h) ||
                        (s == KvScales::kPerChannel && hh == h && dd == d);
        if (in) m = std::max(m, std::fabs(x[static_cast<size_t>((tt * H + hh) * D + dd)]));
      }
  return m;
}

TEST(HostQuantizer, ErrorBoundsPerGranularity) {
  const int64_t T = 7, H = 3, D = 16;
  const auto x = random_kv(T * H * D, 11, 3.0f);
  for (KvScales s : {KvScales::kPerTensor, KvScales::kPerTokenHead, KvScales::kPerChannel}) {
    const auto q8 = quantize_kv(x.data(), T, H, D, KvFormat::kInt8, s);
    const auto qf = quantize_kv(x.data(), T, H, D, KvFormat::kFP8E4M3, s);
    const auto y8 = dequantize_kv(q8), yf = dequantize_kv(qf);
    for (int64_t t = 0; t < T; ++t)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t d = 0; d < D; ++d) {
          const size_t i = static_cast<size_t>((t * H + h) * D + d);
          const float amax = group_amax(x, T, H, D, s, t, h, d);
          // int8: half a step of amax/127, with fp32 slack for the division.
          EXPECT_LE(std::fabs(y8[i] - x[i]), 0.5f * amax / 127.0f * (1 + 1e-5f)) << kv_scales_name(s);
          // fp8: half an ulp of the 3-bit mantissa (2^−4 relative) for normals,
          // half the subnormal step 2^−9·scale below 2^−6·scale.
          const float scale = amax / 448.0f;
          const float bound = std::max(std::fabs(x[i]) * 0.0625f, 0.5f * 0.001953125f * scale);
          EXPECT_LE(std::fabs(yf[i] - x[i]), bound * (1 + 1e-5f)) << kv_scales_name(s);
        }
  }
}

// ---- int4, asymmetric per group ----

TEST(Int4Group, HandComputedCodes) {
  // Group {−1, 0, 0.5, 2}: scale (2 − (−1)) / 15 = 0.2, zero −1 (both exact
  // enough in fp16: 0.2 rounds to 0.199951171875). Codes round((x + 1) / s).
  const Int4Group p = int4_group_params(-1.0f, 2.0f);
  EXPECT_EQ(p.scale, 0.199951171875f);
  EXPECT_EQ(p.zero, -1.0f);
  EXPECT_EQ(fp16_to_fp32(p.scale_fp16), p.scale);
  EXPECT_EQ(fp32_to_int4(-1.0f, p.scale, p.zero), 0);
  EXPECT_EQ(fp32_to_int4(0.0f, p.scale, p.zero), 5);   // 1 / 0.19995 = 5.0012
  EXPECT_EQ(fp32_to_int4(0.5f, p.scale, p.zero), 8);   // 7.5018 -> 8
  EXPECT_EQ(fp32_to_int4(2.0f, p.scale, p.zero), 15);  // 15.0037 -> 15
  EXPECT_EQ(fp32_to_int4(9.0f, p.scale, p.zero), 15);  // clamps
  EXPECT_EQ(fp32_to_int4(-9.0f, p.scale, p.zero), 0);
  EXPECT_EQ(fp32_to_int4(std::nanf(""), p.scale, p.zero), 0);
  // A constant group: scale 1, every value reads back as the zero point, exactly.
  const Int4Group c = int4_group_params(0.75f, 0.75f);
  EXPECT_EQ(c.scale, 1.0f);
  EXPECT_EQ(c.zero, 0.75f);
  EXPECT_EQ(fp32_to_int4(0.75f, c.scale, c.zero), 0);
}

TEST(Int4Group, PackUnpackRoundTripAndErrorBoundPerGroup) {
  const int64_t T = 5, H = 3, D = 64;
  const auto x = random_kv(T * H * D, 17, 3.0f);
  for (int64_t G : {2, 8, 32, 64}) {
    const auto q = quantize_kv(x.data(), T, H, D, KvFormat::kInt4, KvScales::kPerGroup, G);
    ASSERT_EQ(q.codes.size(), static_cast<size_t>(T * H * D / 2));  // two codes per byte
    ASSERT_EQ(q.scale_values.size(), static_cast<size_t>(T * H * D / G));
    const auto y = dequantize_kv(q);
    for (int64_t i = 0; i < T * H * D; ++i) {
      const size_t g = static_cast<size_t>(i / G);
      const int code = (q.codes[static_cast<size_t>(i / 2)] >> (4 * (i % 2))) & 0xF;
      // The stored code is the one the codec gives from the stored scale and zero.
      EXPECT_EQ(code, fp32_to_int4(x[static_cast<size_t>(i)], q.scale_values[g], q.zero_values[g]));
      float mn = x[g * G], mx = x[g * G];
      for (int64_t j = static_cast<int64_t>(g) * G; j < static_cast<int64_t>(g + 1) * G; ++j) {
        mn = std::min(mn, x[static_cast<size_t>(j)]);
        mx = std::max(mx, x[static_cast<size_t>(j)]);
      }
      // Half a step of the stored scale, plus what fp16 rounding of the zero
      // point and of the scale (15 steps up) can move the grid, plus fp32 slack.
      const float s = q.scale_values[g];
      const float bound = 0.5f * s + std::fabs(mn - q.zero_values[g]) + 15.0f * std::fabs((mx - mn) / 15.0f - s);
      EXPECT_LE(std::fabs(y[static_cast<size_t>(i)] - x[static_cast<size_t>(i)]), bound * (1 + 1e-5f) + 1e-6f)
          << "G " << G << " element " << i;
      // and the step itself is the group's range / 15, to fp16 precision
      EXPECT_NEAR(s, (mx - mn) / 15.0f, (mx - mn) / 15.0f * 0x1p-11f);
    }
  }
  // Bad groups: odd, or not dividing D.
  EXPECT_THROW(quantize_kv(x.data(), T, H, D, KvFormat::kInt4, KvScales::kPerGroup, 3), std::invalid_argument);
  EXPECT_THROW(quantize_kv(x.data(), T, H, D, KvFormat::kInt4, KvScales::kPerGroup, 48), std::invalid_argument);
  EXPECT_THROW(quantize_kv(x.data(), T, H, D, KvFormat::kInt4, KvScales::kPerTokenHead), std::invalid_argument);
}

TEST(HostQuantizer, BF16IsPlainRounding) {
  const std::vector<float> x = {1.0f, -2.5f, 3.14159265f, 1e-3f};
  const auto q = quantize_kv(x.data(), 1, 1, 4, KvFormat::kBF16, KvScales::kPerTensor);
  EXPECT_TRUE(q.scale_values.empty());
  EXPECT_EQ(q.codes.size(), 8u);
  const auto y = dequantize_kv(q);
  for (size_t i = 0; i < x.size(); ++i) EXPECT_EQ(y[i], bf16_to_fp32(fp32_to_bf16(x[i])));
}

// ---- bytes per token against the analytic formula ----

TEST(KvGeometry, BytesMatchTheAnalyticFormulaToTheByte) {
  for (const char* name : {"llama2-7b", "llama3-8b", "qwen2.5-7b", "mistral-7b", "llama3-70b", "gpt2"}) {
    const ModelConfig m = load_model(name);
    for (int64_t tp : {1, 2, 4, 8, 16}) {
      if (tp <= m.kv_heads ? m.kv_heads % tp != 0 : tp % m.kv_heads != 0) continue;
      for (int64_t pp : {1, 2, 4}) {
        if (m.layers % pp != 0) continue;
        Layout l;
        l.tp = tp;
        l.pp = pp;
        for (KvFormat f : {KvFormat::kBF16, KvFormat::kFP8E4M3, KvFormat::kInt8})
          for (KvScales s : {KvScales::kPerTensor, KvScales::kPerTokenHead, KvScales::kPerChannel}) {
            const KvGeometry g = kv_geometry(m, l, f, s);
            analytic::KvOptions o;
            o.dtype = f;
            o.scales = s;
            SCOPED_TRACE(std::string(name) + " tp " + std::to_string(tp) + " pp " + std::to_string(pp) + " " +
                         std::string(kv_format_name(f)) + "/" + std::string(kv_scales_name(s)));
            EXPECT_EQ(g.value_bytes_per_token(), analytic::kv_bytes_per_token(m, l, o.dtype));
            EXPECT_EQ(g.scale_bytes_per_token(), analytic::kv_scale_bytes_per_token(m, l, o));
            EXPECT_EQ(g.fixed_scale_bytes(), analytic::kv_scale_bytes_fixed(m, l, o));
            EXPECT_EQ(g.layer_token_bytes() * g.layers, g.token_bytes());
          }
        for (int64_t G : {2, 16, 32, 64}) {  // int4, per group
          if (m.head_dim % G != 0) continue;
          const KvGeometry g = kv_geometry(m, l, KvFormat::kInt4, KvScales::kPerGroup, 0, G);
          const auto o = testing::analytic_options(KvLayout::kPaged, g);
          SCOPED_TRACE(std::string(name) + " tp " + std::to_string(tp) + " pp " + std::to_string(pp) + " int4 G " +
                       std::to_string(G));
          EXPECT_EQ(g.value_bytes_per_token(), analytic::kv_bytes_per_token(m, l, o.dtype));
          EXPECT_EQ(g.scale_bytes_per_token(), analytic::kv_scale_bytes_per_token(m, l, o));
          EXPECT_EQ(g.fixed_scale_bytes(), 0);
          EXPECT_EQ(analytic::kv_scale_bytes_fixed(m, l, o), 0);
          EXPECT_EQ(g.layer_token_bytes() * g.layers, g.token_bytes());
        }
      }
    }
  }
}

TEST(KvGeometry, HandComputedFigures) {
  // docs/formulas/kv.md: Llama-3-8B (32 layers, 8 KV heads, d 128).
  const ModelConfig m = load_model("llama3-8b");
  Layout l;
  EXPECT_EQ(kv_geometry(m, l, KvFormat::kBF16).token_bytes(), 131072);  // 128 KiB
  const KvGeometry fp8 = kv_geometry(m, l, KvFormat::kFP8E4M3, KvScales::kPerTokenHead);
  EXPECT_EQ(fp8.token_bytes(), 65536 + 2048);  // + 2·32·8·4
  EXPECT_EQ(16 * fp8.token_bytes(), 1081344);  // a 16-token block
  EXPECT_EQ(kv_geometry(m, l, KvFormat::kFP8E4M3, KvScales::kPerTensor).fixed_scale_bytes(), 256);
  EXPECT_EQ(kv_geometry(m, l, KvFormat::kInt8, KvScales::kPerChannel).fixed_scale_bytes(), 2 * 32 * 8 * 128 * 4);
  // int4, group 32: values 2·32·8·128/2 = 32768, (scale, zero) fp16 pairs
  // 2·32·8·(128/32)·4 = 8192; 40960 B for 65536 elements = 0.625 B/element
  // (1/2 + 4/32); group 64: 32768 + 4096 = 36864 B, 0.5625 B/element.
  const KvGeometry i4 = kv_geometry(m, l, KvFormat::kInt4, KvScales::kPerGroup, 0, 32);
  EXPECT_EQ(i4.value_bytes_per_token(), 32768);
  EXPECT_EQ(i4.scale_bytes_per_token(), 8192);
  EXPECT_EQ(static_cast<double>(i4.token_bytes()) / (2 * 32 * 8 * 128), 0.625);
  EXPECT_EQ(kv_geometry(m, l, KvFormat::kInt4, KvScales::kPerGroup, 0, 64).token_bytes(), 36864);
  l.tp = 16;  // more ranks than KV heads: one replicated head per rank
  EXPECT_EQ(kv_geometry(m, l, KvFormat::kBF16).token_bytes(), 16384);
}

}  // namespace
}  // namespace gpuledger::kv
