// CPU reference of kv_cache_write (vLLM's reshape_and_cache): the K and V of
// each sequence's new tokens, from the compute dtype into the cache format at
// their slots (kernels/kv_storage.h: block table, rolling buffer, head-major
// sections), with the quantization scales:
//   - per token-head: scale = amax of the head's D values / qmax, stored in the
//     block beside the token (the per-token grouping KIVI, Liu et al. 2024,
//     uses for values);
//   - per tensor / per channel: the fixed scales of the layer; with `calibrate`
//     first set to amax / qmax over this write (the caller calibrates on a
//     layer's first write; models/kv/kv_format.h gives the rule and its source).
//   - per group (int4): for each group of G channels of the token's head, the
//     fp16 scale (max − min) / 15 and zero point min, stored beside the token
//     (kernels/kv_storage.h: int4_group_params); two codes per byte.
// Codes are encode(x / scale): fp8 E4M3 rounds to nearest even and saturates
// at ±448; int8 rounds half to even and clamps to ±127; int4 codes are
// round((x − zero) / scale) clamped to 0 … 15.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/cpu/cpu_device.h"

namespace gpuledger {
namespace {

constexpr int64_t kParallelMinElems = int64_t{1} << 15;

// Encodes n values x / scale[d · scale_step] into dst (the cache format).
void encode_row(const float* x, int64_t n, KvFormat f, const float* scale, int64_t scale_step, char* dst) {
  switch (f) {
    case KvFormat::kBF16:
      for (int64_t d = 0; d < n; ++d) {
        const uint16_t b = fp32_to_bf16(x[d]);
        std::memcpy(dst + 2 * d, &b, 2);
      }
      return;
    case KvFormat::kFP8E4M3:
      for (int64_t d = 0; d < n; ++d) dst[d] = static_cast<char>(fp32_to_fp8_e4m3(x[d] / scale[d * scale_step]));
      return;
    case KvFormat::kInt8:
      for (int64_t d = 0; d < n; ++d) dst[d] = static_cast<char>(fp32_to_int8_sym(x[d] / scale[d * scale_step]));
      return;
    case KvFormat::kInt4: return;  // per group only: encode_int4_row
  }
}

// Encodes n values (n a multiple of the even `group`) as int4, two codes per
// byte (even channel in the low nibble), and each group's fp16 scale and zero
// point into params (scale, zero, scale, zero, …).
void encode_int4_row(const float* x, int64_t n, int64_t group, char* dst, char* params) {
  for (int64_t g0 = 0; g0 < n; g0 += group) {
    float mn = x[g0], mx = x[g0];
    for (int64_t d = g0; d < g0 + group; ++d) {
      mn = std::min(mn, x[d]);
      mx = std::max(mx, x[d]);
    }
    const Int4Group p = int4_group_params(mn, mx);
    char* pp = params + g0 / group * kKvGroupParamBytes;
    std::memcpy(pp, &p.scale_fp16, 2);
    std::memcpy(pp + 2, &p.zero_fp16, 2);
    for (int64_t d = g0; d < g0 + group; d += 2) {
      const uint8_t lo = fp32_to_int4(x[d], p.scale, p.zero), hi = fp32_to_int4(x[d + 1], p.scale, p.zero);
      dst[d / 2] = static_cast<char>(lo | (hi << 4));
    }
  }
}

// Fixed scales from this write: amax over every new row (Hkv, n, D) of every
// sequence, over all of it (per tensor) or per (head, channel) (per channel).
void calibrate_fixed(const KvCacheView& c, const std::vector<float>& x, const std::vector<int64_t>& first,
                     float* scales) {
  const int64_t per_channel = c.scales == KvScales::kPerChannel;
  std::vector<float> amax(static_cast<size_t>(per_channel ? c.Hkv * c.D : 1), 0.0f);
  for (size_t b = 0; b < c.seqs.size(); ++b) {
    const int64_t n = c.seqs[b].n_new;
    for (int64_t h = 0; h < c.Hkv; ++h)
      for (int64_t r = 0; r < n; ++r) {
        const float* row = x.data() + first[b] + (h * n + r) * c.D;
        for (int64_t d = 0; d < c.D; ++d) {
          float& m = amax[static_cast<size_t>(per_channel ? h * c.D + d : 0)];
          m = std::max(m, std::fabs(row[d]));
        }
      }
  }
  for (size_t g = 0; g < amax.size(); ++g) scales[g] = kv_scale_from_amax(amax[g], c.format);
}

}  // namespace

void CpuDevice::kv_cache_write_impl(const KvCacheView& c, const void* k, const void* v, DType t, bool calibrate) {
  const int64_t Hkv = c.Hkv, D = c.D, S = c.block_tokens;
  const size_t nseq = c.seqs.size();
  // first[b]: element offset of sequence b's (Hkv, n_new, D) rows in k and v.
  std::vector<int64_t> first(nseq + 1, 0);
  for (size_t b = 0; b < nseq; ++b) first[b + 1] = first[b] + Hkv * c.seqs[b].n_new * D;
  const int64_t total = first[nseq];
  if (total == 0) return;

  std::vector<float> kf(static_cast<size_t>(total)), vf(static_cast<size_t>(total));
  convert_to_fp32(k, t, kf.data(), total);
  convert_to_fp32(v, t, vf.data(), total);

  const bool fixed = c.fixed_per_tensor() > 0;
  float* k_fixed = nullptr;
  float* v_fixed = nullptr;
  if (fixed) {
    k_fixed = c.fixed_scales;
    v_fixed = c.fixed_scales + c.fixed_per_tensor();
    if (calibrate) {
      calibrate_fixed(c, kf, first, k_fixed);
      calibrate_fixed(c, vf, first, v_fixed);
    }
  }
  const bool per_channel = c.scales == KvScales::kPerChannel;

  // One task per (sequence, KV head); every task writes its own slots.
  const int64_t tasks = static_cast<int64_t>(nseq) * Hkv;
#pragma omp parallel for schedule(dynamic) if (total > kParallelMinElems)
  for (int64_t task = 0; task < tasks; ++task) {
    const size_t b = static_cast<size_t>(task / Hkv);
    const int64_t h = task % Hkv;
    const KvSeqView& s = c.seqs[b];
    const int64_t n = s.n_new, p0 = s.len - s.n_new;
    for (int64_t r = 0; r < n; ++r) {
      const int64_t p = p0 + r, sl = c.slot_of(s, p), o = sl % S;
      char* sec = c.section_at(s, sl);
      for (int is_v = 0; is_v < 2; ++is_v) {
        const float* row = (is_v ? vf : kf).data() + first[b] + (h * n + r) * D;
        char* dst = sec + c.value_offset(is_v, h, o);
        if (!kv_quantized(c.format)) {
          encode_row(row, D, c.format, nullptr, 0, dst);
        } else if (c.group_scales()) {
          encode_int4_row(row, D, c.group, dst, sec + c.scale_offset(is_v, h, o));
        } else if (c.token_scales()) {
          float amax = 0.0f;
          for (int64_t d = 0; d < D; ++d) amax = std::max(amax, std::fabs(row[d]));
          const float scale = kv_scale_from_amax(amax, c.format);
          std::memcpy(sec + c.scale_offset(is_v, h, o), &scale, sizeof(float));
          encode_row(row, D, c.format, &scale, 0, dst);
        } else {
          const float* sc = is_v ? v_fixed : k_fixed;
          if (per_channel)
            encode_row(row, D, c.format, sc + h * D, 1, dst);
          else
            encode_row(row, D, c.format, sc, 0, dst);
        }
      }
    }
  }
}

}  // namespace gpuledger
