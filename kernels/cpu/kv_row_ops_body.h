// The row operations of kv_row_ops.h, written once and compiled once per ISA
// by kv_row_ops.cpp, each time inside that ISA's namespace. No include guard,
// for that reason.

#include "kernels/cpu/simd_body.h"  // the vectors, loads, multiply-adds and exp, in this namespace too

// The (scale, zero) pair of int4 group g, stored as two fp16 values.
GPL_SIMD_INLINE void int4_group(const uint8_t* params, int64_t g, float* scale, float* zero) {
  uint16_t s16, z16;
  std::memcpy(&s16, params + g * kKvGroupParamBytes, 2);
  std::memcpy(&z16, params + g * kKvGroupParamBytes + 2, 2);
  *scale = fp16_to_fp32(s16);
  *zero = fp16_to_fp32(z16);
}
GPL_SIMD_INLINE float int4_code(const uint8_t* row, int64_t d) {
  return static_cast<float>((row[d / 2] >> (4 * (d % 2))) & 0xF);
}
// One value of a bf16, FP8 or int8 row (the tails past the last 8).
GPL_SIMD_INLINE float scalar_value(const KvRowFormat& f, const uint8_t* row, int64_t d) {
  if (f.format == KvFormat::kBF16) {
    uint16_t b;
    std::memcpy(&b, row + 2 * d, 2);
    return bf16_to_fp32(b);
  }
  if (f.format == KvFormat::kFP8E4M3) return f.fp8_table[row[d]];
  return static_cast<float>(static_cast<int8_t>(row[d]));
}
template <KvFormat kF>
GPL_SIMD_INLINE V8 load8(const KvRowFormat& f, const uint8_t* row, int64_t d) {
  if constexpr (kF == KvFormat::kBF16) return load_bf16(reinterpret_cast<const uint16_t*>(row) + d);
  if constexpr (kF == KvFormat::kFP8E4M3) return load_table8(row + d, f.fp8_table);
  return load_i8(row + d);
}

template <KvFormat kF>
GPL_SIMD_INLINE float dot8(const KvRowFormat& f, const float* q, const uint8_t* row) {
  const int64_t D8 = f.D & ~int64_t{7};
  V8 a0{}, a1{};
  int64_t d = 0;
  for (; d + 16 <= D8; d += 16) {
    a0 = fma8(a0, load_f32(q + d), load8<kF>(f, row, d));
    a1 = fma8(a1, load_f32(q + d + 8), load8<kF>(f, row, d + 8));
  }
  if (d < D8) a0 = fma8(a0, load_f32(q + d), load8<kF>(f, row, d));
  float s = hsum(a0 + a1);
  for (d = D8; d < f.D; ++d) s += q[d] * scalar_value(f, row, d);
  return s;
}

float row_dot(const KvRowFormat& f, const float* q, const uint8_t* row, const uint8_t* params) {
  switch (f.format) {
    case KvFormat::kBF16: return dot8<KvFormat::kBF16>(f, q, row);
    case KvFormat::kFP8E4M3: return dot8<KvFormat::kFP8E4M3>(f, q, row);
    case KvFormat::kInt8: return dot8<KvFormat::kInt8>(f, q, row);
    default: break;
  }
  // int4: Σ_g (scale_g·Σ q·code + zero_g·Σ q) over the groups.
  float s = 0.0f;
  for (int64_t g0 = 0; g0 < f.D; g0 += f.group) {
    float scale, zero, qc = 0.0f, qs = 0.0f;
    int4_group(params, g0 / f.group, &scale, &zero);
    for (int64_t d = g0; d < g0 + f.group; ++d) {
      qc += q[d] * int4_code(row, d);
      qs += q[d];
    }
    s += scale * qc + zero * qs;
  }
  return s;
}

template <KvFormat kF>
GPL_SIMD_INLINE void axpy8(const KvRowFormat& f, float* acc, float w, const uint8_t* row) {
  const int64_t D8 = f.D & ~int64_t{7};
  const V8 wv = splat(w);
  for (int64_t d = 0; d < D8; d += 8) store_f32(acc + d, fma8(load_f32(acc + d), wv, load8<kF>(f, row, d)));
  for (int64_t d = D8; d < f.D; ++d) acc[d] += w * scalar_value(f, row, d);
}

void row_axpy(const KvRowFormat& f, float* acc, float w, const uint8_t* row, const uint8_t* params) {
  switch (f.format) {
    case KvFormat::kBF16: axpy8<KvFormat::kBF16>(f, acc, w, row); return;
    case KvFormat::kFP8E4M3: axpy8<KvFormat::kFP8E4M3>(f, acc, w, row); return;
    case KvFormat::kInt8: axpy8<KvFormat::kInt8>(f, acc, w, row); return;
    default: break;
  }
  for (int64_t g0 = 0; g0 < f.D; g0 += f.group) {
    float scale, zero;
    int4_group(params, g0 / f.group, &scale, &zero);
    const float ws = w * scale, wz = w * zero;
    for (int64_t d = g0; d < g0 + f.group; ++d) acc[d] += ws * int4_code(row, d) + wz;
  }
}

float exp_shifted_sum(float* x, int64_t n, float m) {
  const V8 mv = splat(m);
  V8 sum{};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const V8 e = exp8(load_f32(x + i) - mv);
    store_f32(x + i, e);
    sum += e;
  }
  float s = hsum(sum);
  if (i < n) {  // the last n − i < 8: the unused lanes hold m (e^0), neither stored nor summed
    V8 t = mv;
    for (int64_t l = 0; l < n - i; ++l) t[l] = x[i + l];
    const V8 e = exp8(t - mv);
    for (int64_t l = 0; l < n - i; ++l) {
      x[i + l] = e[l];
      s += e[l];
    }
  }
  return s;
}

void exp_all(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; i += 8) {
    V8 t{};
    const int64_t lanes = n - i < 8 ? n - i : 8;
    for (int64_t l = 0; l < lanes; ++l) t[l] = x[i + l];
    const V8 e = exp8(t);
    for (int64_t l = 0; l < lanes; ++l) y[i + l] = e[l];
  }
}
