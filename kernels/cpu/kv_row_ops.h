// The vectorized work cached attention does on one K or V row (one token of
// one KV head) as the cache stores it (kernels/kv_storage.h): a dot product
// with an fp32 query and a weighted add into an fp32 accumulator, each
// reading the row in its stored format and widening 8 values at a time in
// registers — bf16 by a shift, FP8 E4M3 through its 256-entry table (an AVX2
// gather), int8 by sign extension; int4 per group, one scalar code at a time —
// so no row is ever written out as fp32. And the softmax's exponentials, by a
// polynomial exp on 8 lanes (Cephes expf; simd_body.h states its error).
//
// A row's value v[d] here is what its format holds before the token,
// tensor or channel scale: the bf16 value, the decoded FP8 value, the int8
// code, or for int4 code·scale + zero of its group (the group's own
// parameters travel with the row). The caller applies the other scales
// (kernels/cpu/ops_cached_attention.cpp): per token-head or per tensor as one
// factor on the dot product or the weight, per channel on the query (K) or
// on the finished accumulator (V).
#pragma once
#include <cstdint>

#include "kernels/cpu/cpu_isa.h"
#include "kernels/kv_storage.h"

namespace gpuledger {

struct KvRowFormat {
  KvFormat format = KvFormat::kBF16;
  int64_t D = 0;                     // values per row
  int64_t group = kKvDefaultGroup;   // int4: channels per (scale, zero) pair
  const float* fp8_table = nullptr;  // fp8_e4m3_table()
};

struct KvRowOps {
  // Σ_d q[d]·v[d]. `params`: the row's int4 group parameters, else unused.
  float (*dot)(const KvRowFormat& f, const float* q, const uint8_t* row, const uint8_t* params);
  // acc[d] += w·v[d].
  void (*axpy)(const KvRowFormat& f, float* acc, float w, const uint8_t* row, const uint8_t* params);
  // x[i] = e^(x[i] − m) in place for i < n; returns Σ x[i] (the softmax's denominator).
  float (*exp_shifted_sum)(float* x, int64_t n, float m);
  // y[i] = e^(x[i]) for i < n (for tests of the exp itself).
  void (*exp)(const float* x, float* y, int64_t n);
};

// The operations on the given path (throws std::invalid_argument where this CPU lacks it).
const KvRowOps& kv_row_ops(CpuIsa isa);

}  // namespace gpuledger
