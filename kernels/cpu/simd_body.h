// 8-lane fp32 vectors and the loads, multiply-adds and exp the cpu backend's
// hand-vectorized kernels share (gemm_skinny_body.h, cached_attention_body.h).
// Included once per ISA inside that ISA's namespace: within
// `#pragma GCC target("avx2,fma,f16c")` with GPL_SIMD_AVX2 set (the intrinsics
// below), and for the baseline ISA without it (GCC's generic vectors, lowered
// to SSE2; scalar fp16). No include guard, for that reason.

typedef float V8 __attribute__((vector_size(32)));
typedef int32_t I32x8 __attribute__((vector_size(32)));
typedef uint32_t U32x8 __attribute__((vector_size(32)));
typedef uint16_t U16x8 __attribute__((vector_size(16)));
typedef int8_t I8x8 __attribute__((vector_size(8)));

#define GPL_SIMD_INLINE inline __attribute__((always_inline))

// x in every lane (vbroadcastss; `V8{} + x` would add 0.0 first, as -0.0 + 0.0 is not -0.0).
GPL_SIMD_INLINE V8 splat(float x) { return V8{x, x, x, x, x, x, x, x}; }
GPL_SIMD_INLINE V8 load_f32(const float* p) {
  V8 v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
GPL_SIMD_INLINE void store_f32(float* p, const V8& v) { std::memcpy(p, &v, sizeof v); }

// 8 consecutive 16-bit values widened to fp32. bf16 is the high half of an
// fp32, so zero-extending to 32 bits and shifting left 16 is exact. On AVX2
// spelled with intrinsics: GCC lowers the generic convert to two 128-bit
// vpmovzxwd and a vinserti128 (4 operations, not 1 with a folded load).
GPL_SIMD_INLINE V8 load_bf16(const uint16_t* p) {
#ifdef GPL_SIMD_AVX2
  const __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  return _mm256_castsi256_ps(_mm256_slli_epi32(w, 16));
#else
  U16x8 h;
  std::memcpy(&h, p, sizeof h);
  const U32x8 w = __builtin_convertvector(h, U32x8) << 16;
  V8 f;
  std::memcpy(&f, &w, sizeof f);
  return f;
#endif
}
GPL_SIMD_INLINE V8 load_fp16(const uint16_t* p) {
#ifdef GPL_SIMD_AVX2
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
#else
  V8 f;
  for (int l = 0; l < 8; ++l) f[l] = fp16_to_fp32(p[l]);
  return f;
#endif
}
// 8 signed bytes as fp32 (exact).
GPL_SIMD_INLINE V8 load_i8(const uint8_t* p) {
  I8x8 b;
  std::memcpy(&b, p, sizeof b);
  return __builtin_convertvector(b, V8);
}
// 8 codes looked up in a 256-entry table (the FP8 E4M3 decode table).
GPL_SIMD_INLINE V8 load_table8(const uint8_t* p, const float* table) {
#ifdef GPL_SIMD_AVX2
  const __m256i idx = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
  return _mm256_i32gather_ps(table, idx, 4);
#else
  V8 f;
  for (int l = 0; l < 8; ++l) f[l] = table[p[l]];
  return f;
#endif
}
GPL_SIMD_INLINE V8 fma8(const V8& acc, const V8& a, const V8& b) {
#ifdef GPL_SIMD_AVX2
  return _mm256_fmadd_ps(a, b, acc);
#else
  return acc + a * b;
#endif
}
GPL_SIMD_INLINE float hsum(const V8& v) { return ((v[0] + v[4]) + (v[1] + v[5])) + ((v[2] + v[6]) + (v[3] + v[7])); }

// e^x on 8 lanes: Cephes expf (S. L. Moshier, Cephes Math Library 2.2,
// expf.c): x = n·ln2 + r with n = round(x·log2 e) and ln2 split into
// 0.693359375 − 2.12194440e−4 so n·ln2 is exact, e^r by its degree-7
// minimax-fitted series 1 + r + r²·P(r), times 2^n put into the exponent bits.
// x is clamped to [−87.336, 88.376] (e^x stays a normal float): below, the
// result is 1.2e−38, not 0. Max relative error against exp in double over
// [−87, 88]: 1.17e−7 (1.96·2^−24) on both paths here, bounded at 4·2^−24 by
// tests/kernels/test_kv_row_ops.cpp (ExpMaxRelativeError).
GPL_SIMD_INLINE V8 exp8(const V8& x_in) {
  V8 x = x_in;
  const V8 lo = splat(-87.3365447504f), hi = splat(88.3762626647f);
  x = x < lo ? lo : x;
  x = x > hi ? hi : x;
  const V8 fx = x * 1.44269504088896341f + 0.5f;
  V8 n = __builtin_convertvector(__builtin_convertvector(fx, I32x8), V8);  // truncates toward 0
  n = n > fx ? n - 1.0f : n;                                               // floor
  V8 r = x - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  V8 p = splat(1.9875691500E-4f);
  p = fma8(splat(1.3981999507E-3f), p, r);
  p = fma8(splat(8.3334519073E-3f), p, r);
  p = fma8(splat(4.1665795894E-2f), p, r);
  p = fma8(splat(1.6666665459E-1f), p, r);
  p = fma8(splat(5.0000001201E-1f), p, r);
  const V8 y = fma8(r + 1.0f, p, r * r);
  const I32x8 e = (__builtin_convertvector(n, I32x8) + 127) << 23;
  V8 scale;
  std::memcpy(&scale, &e, sizeof scale);
  return y * scale;
}
