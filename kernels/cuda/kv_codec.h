// The KV-cache value codecs of kernels/kv_storage.h — OCP FP8 E4M3 (round to
// nearest even, saturating at ±448, NaN kept), symmetric int8 (round half to
// even, clamp ±127, NaN -> 0), scale-from-amax and asymmetric int4 per group — as host-and-device inline
// functions for the CUDA kernels (ops_kv_cache.cu). They follow the host
// codecs step by step; tests/kernels/test_cuda_launch_config.cpp checks them
// against kv_storage.cpp on every fp8 code and across the float range.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>

#include "core/host_device.h"

namespace gpuledger::kv_codec {

inline constexpr float kFp8Max = 448.0f;  // kFp8E4M3Max
inline constexpr float kInt8Max = 127.0f;

GPL_HOST_DEVICE uint8_t fp8_e4m3_encode(float x) {
  uint32_t bits;
  memcpy(&bits, &x, 4);
  const uint8_t sign = (bits >> 31) ? 0x80 : 0x00;
  if (x != x) return sign | 0x7F;  // NaN
  const float a = fabsf(x);
  if (a >= kFp8Max) return sign | 0x7E;  // no infinity in E4M3: saturate
  // Subnormal grid m·2^−9: a·2^9 is exact; nearbyint rounds half to even.
  if (a < 0.015625f) return sign | static_cast<uint8_t>(nearbyintf(a * 512.0f));
  int e2 = 0;
  frexpf(a, &e2);  // a ∈ [2^(e2−1), 2^e2)
  int E = e2 - 1;
  int q = static_cast<int>(nearbyintf(ldexpf(a, 3 - E)));  // 1.mmm·8, exact scaling, RNE
  if (q == 16) {                                           // rounded up into the next binade
    q = 8;
    ++E;
  }
  return sign | static_cast<uint8_t>(((E + 7) << 3) | (q - 8));
}

GPL_HOST_DEVICE float fp8_e4m3_decode(uint8_t c) {
  const int e = (c >> 3) & 0xF, m = c & 0x7;
  if (e == 15 && m == 7) {  // NaN, sign kept
    const uint32_t bits = 0x7FC00000u | (static_cast<uint32_t>(c & 0x80) << 24);
    float f;
    memcpy(&f, &bits, 4);
    return f;
  }
  const float sign = (c & 0x80) ? -1.0f : 1.0f;
  if (e == 0) return sign * ldexpf(static_cast<float>(m), -9);  // subnormal m·2^−9
  return sign * ldexpf(static_cast<float>(8 + m), e - 10);      // 1.mmm·2^(e−7)
}

GPL_HOST_DEVICE int8_t int8_encode(float x) {
  if (x != x) return 0;
  const float r = nearbyintf(x);
  return static_cast<int8_t>(r < -kInt8Max ? -kInt8Max : r > kInt8Max ? kInt8Max : r);
}

// amax / qmax, or 1 for a zero, NaN or infinite amax (or a quotient that underflows).
GPL_HOST_DEVICE float scale_from_amax(float amax, float qmax) {
  if (!(amax > 0.0f) || !(amax <= 3.402823466e38f)) return 1.0f;
  const float s = amax / qmax;
  return s > 0.0f ? s : 1.0f;
}

// int4 (kv_storage.h: int4_group_params, fp32_to_int4): the group's scale
// before its fp16 rounding — (max − min) / 15, 1 when that is 0 or not finite,
// capped at fp16's largest 65504 — and its zero point before rounding (min,
// NaN -> 0, clamped to ±65504). The kernel rounds both to fp16, and takes 1
// for a scale that rounds to 0.
inline constexpr float kInt4Levels = 15.0f;
inline constexpr float kFp16Max = 65504.0f;
GPL_HOST_DEVICE float int4_raw_scale(float min, float max) {
  float s = (max - min) / kInt4Levels;
  if (!(s > 0.0f) || !(s <= 3.402823466e38f)) s = 1.0f;
  return s < kFp16Max ? s : kFp16Max;
}
GPL_HOST_DEVICE float int4_raw_zero(float min) {
  if (min != min) return 0.0f;
  return min < -kFp16Max ? -kFp16Max : min > kFp16Max ? kFp16Max : min;
}
// round((x − zero) / scale) clamped to 0 … 15, half to even; NaN -> 0.
GPL_HOST_DEVICE uint8_t int4_encode(float x, float scale, float zero) {
  const float q = (x - zero) / scale;
  if (q != q) return 0;
  const float r = nearbyintf(q);
  return static_cast<uint8_t>(r < 0.0f ? 0.0f : r > kInt4Levels ? kInt4Levels : r);
}

}  // namespace gpuledger::kv_codec
