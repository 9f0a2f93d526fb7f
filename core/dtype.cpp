// bf16 / fp16 <-> fp32 conversions, bit-exact to IEEE 754 round-to-nearest-even
// (what CUDA's __float2bfloat16_rn / __float2half_rn do), so a value stored by
// the CPU backend has the same bits as one stored by the CUDA backend.
//   bf16: 1 sign, 8 exponent (bias 127), 7 mantissa — fp32's top half.
//   fp16: 1 sign, 5 exponent (bias 15), 10 mantissa; max 65504, smallest
//         subnormal 2^-24 (IEEE 754-2008 binary16).
#include "core/dtype.h"

#include <bit>
#include <cmath>

namespace gpuledger {

std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::kBF16: return "bf16";
    case DType::kFP16: return "fp16";
    case DType::kFP32: return "fp32";
  }
  return "?";
}

std::optional<DType> dtype_from_name(std::string_view name) {
  for (DType t : {DType::kBF16, DType::kFP16, DType::kFP32})
    if (dtype_name(t) == name) return t;
  return std::nullopt;
}

// ---- bf16 ----

uint16_t fp32_to_bf16(float x) {
  const uint32_t bits = std::bit_cast<uint32_t>(x);
  if ((bits & 0x7FFFFFFFu) > 0x7F800000u) {
    // NaN: keep sign and top payload bits, force the quiet bit so truncation
    // cannot turn a NaN into an infinity.
    return static_cast<uint16_t>((bits >> 16) | 0x0040u);
  }
  // Round to nearest even on the 16 dropped bits: add 0x7FFF plus the LSB of
  // the kept part; a carry into the exponent is correct (and reaches inf at
  // the top of the range).
  const uint32_t rounded = bits + 0x7FFFu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(rounded >> 16);
}

float bf16_to_fp32(uint16_t x) { return std::bit_cast<float>(static_cast<uint32_t>(x) << 16); }

// ---- fp16 ----

uint16_t fp32_to_fp16(float x) {
  const uint32_t bits = std::bit_cast<uint32_t>(x);
  const uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000u);
  const uint32_t abs = bits & 0x7FFFFFFFu;
  const uint32_t mant = abs & 0x007FFFFFu;

  if (abs > 0x7F800000u)  // NaN: quiet, top payload bits kept
    return static_cast<uint16_t>(sign | 0x7C00u | 0x0200u | (mant >> 13));
  if (abs == 0x7F800000u) return static_cast<uint16_t>(sign | 0x7C00u);  // inf

  const int exp = static_cast<int>(abs >> 23) - 127;           // unbiased
  if (exp > 15) return static_cast<uint16_t>(sign | 0x7C00u);  // >= 2^16: overflow

  if (exp >= -14) {
    // Normal range: drop 13 mantissa bits with round-to-nearest-even. A carry
    // out of the mantissa bumps the exponent (65520 and up become inf).
    uint32_t half = (static_cast<uint32_t>(exp + 15) << 10) | (mant >> 13);
    const uint32_t rest = mant & 0x1FFFu;
    if (rest > 0x1000u || (rest == 0x1000u && (half & 1u))) ++half;
    return static_cast<uint16_t>(sign | half);
  }
  if (exp < -25) return sign;  // below half the smallest subnormal: rounds to ±0

  // Subnormal: value = sig·2^(exp-23) with a 24-bit significand; in units of
  // the fp16 subnormal step 2^-24 that is sig >> shift, shift = -(exp+1) in [14, 24].
  const uint32_t sig = mant | 0x00800000u;
  const int shift = -(exp + 1);
  uint32_t half = sig >> shift;
  const uint32_t rest = sig & ((1u << shift) - 1u);
  const uint32_t halfway = 1u << (shift - 1);
  if (rest > halfway || (rest == halfway && (half & 1u))) ++half;  // 0x400 = min normal: correct
  return static_cast<uint16_t>(sign | half);
}

float fp16_to_fp32(uint16_t x) {
  const uint32_t sign = static_cast<uint32_t>(x & 0x8000u) << 16;
  const uint32_t exp = (x >> 10) & 0x1Fu;
  const uint32_t mant = x & 0x3FFu;
  if (exp == 0) {
    // Zero or subnormal: mant·2^-24, exact in fp32.
    const float v = std::ldexp(static_cast<float>(mant), -24);
    return sign ? -v : v;
  }
  if (exp == 31) return std::bit_cast<float>(sign | 0x7F800000u | (mant << 13));  // inf / NaN
  return std::bit_cast<float>(sign | ((exp - 15 + 127) << 23) | (mant << 13));
}

// ---- bulk ----

void convert_to_fp32(const void* src, DType src_type, float* dst, int64_t n) {
  switch (src_type) {
    case DType::kFP32: {
      const float* s = static_cast<const float*>(src);
      if (s != dst)
        for (int64_t i = 0; i < n; ++i) dst[i] = s[i];
      return;
    }
    case DType::kBF16: {
      const uint16_t* s = static_cast<const uint16_t*>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_fp32(s[i]);
      return;
    }
    case DType::kFP16: {
      const uint16_t* s = static_cast<const uint16_t*>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = fp16_to_fp32(s[i]);
      return;
    }
  }
}

void convert_from_fp32(const float* src, void* dst, DType dst_type, int64_t n) {
  switch (dst_type) {
    case DType::kFP32: {
      float* d = static_cast<float*>(dst);
      if (d != src)
        for (int64_t i = 0; i < n; ++i) d[i] = src[i];
      return;
    }
    case DType::kBF16: {
      uint16_t* d = static_cast<uint16_t*>(dst);
      for (int64_t i = 0; i < n; ++i) d[i] = fp32_to_bf16(src[i]);
      return;
    }
    case DType::kFP16: {
      uint16_t* d = static_cast<uint16_t*>(dst);
      for (int64_t i = 0; i < n; ++i) d[i] = fp32_to_fp16(src[i]);
      return;
    }
  }
}

}  // namespace gpuledger
