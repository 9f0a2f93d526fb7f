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
  l.tp = 16;  // more ranks than KV heads: one replicated head per rank
  EXPECT_EQ(kv_geometry(m, l, KvFormat::kBF16).token_bytes(), 16384);
}

}  // namespace
}  // namespace gpuledger::kv
