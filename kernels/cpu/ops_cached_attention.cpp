// CPU reference of cached_attention: the new tokens of each sequence (one in
// decode, a chunk in prefill) attend to the K and V the cache holds for that
// sequence — PagedAttention's decode (Kwon et al. 2023, vLLM) generalised to
// chunks, reading through the same block table for a paged and a contiguous
// cache (kernels/kv_storage.h). Query i sees keys first_key(i) … i: causal,
// and within the sliding window when there is one; under a slot map (an
// eviction policy) the kept keys at or before i. With KvSeqView::slot_scores
// each key's softmax weight, summed over query heads and new queries, is
// added to its slot's score (H2O's accumulated attention).
//
// One task per (sequence, KV head), OpenMP over the tasks: it dequantizes the
// keys and values its queries can see once into fp32 scratch (kept · D floats
// each, per thread; not booked in the ledger, like flash attention's tiles),
// then serves every query head of its GQA group and every new token. Scores,
// softmax (max-subtracted, fp32) and the weighted sum run in fp32; the output
// is rounded to t once.
//
// FLOPs: cached_attention_flops (kernels/flop_counts.h), the full rectangle of
// new queries × kept keys per head; a chunk's masked part is skipped here but
// counted (by Device::cached_attention), as flash attention does.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <utility>
#include <vector>

#include "kernels/cpu/cpu_device.h"

namespace gpuledger {
namespace {

// Below this many multiply-adds the op stays on one thread (fork/join costs more).
constexpr int64_t kParallelMinMacs = int64_t{1} << 20;

// Dequantizes head h of K (or V) at slot sl of sequence s into dst (D floats).
void read_row(const KvCacheView& c, const KvSeqView& s, int64_t sl, int64_t h, bool is_v, const float* fp8,
              float* dst) {
  const int64_t D = c.D, o = sl % c.block_tokens;
  const char* sec = c.section_at(s, sl);
  const char* src = sec + c.value_offset(is_v, h, o);
  if (!kv_quantized(c.format)) {
    for (int64_t d = 0; d < D; ++d) {
      uint16_t b;
      std::memcpy(&b, src + 2 * d, 2);
      dst[d] = bf16_to_fp32(b);
    }
    return;
  }
  const auto* u = reinterpret_cast<const uint8_t*>(src);
  if (c.group_scales()) {  // int4: code · scale + zero, per group of c.group channels
    const char* params = sec + c.scale_offset(is_v, h, o);
    for (int64_t g0 = 0; g0 < D; g0 += c.group) {
      uint16_t s16, z16;
      std::memcpy(&s16, params + g0 / c.group * kKvGroupParamBytes, 2);
      std::memcpy(&z16, params + g0 / c.group * kKvGroupParamBytes + 2, 2);
      const float sc = fp16_to_fp32(s16), zero = fp16_to_fp32(z16);
      for (int64_t d = g0; d < g0 + c.group; ++d)
        dst[d] = static_cast<float>((u[d / 2] >> (4 * (d % 2))) & 0xF) * sc + zero;
    }
    return;
  }
  // The scale of each value: beside the token, or the layer's fixed ones.
  float token_scale = 1.0f;
  const float* scale = &token_scale;
  int64_t step = 0;
  if (c.token_scales()) {
    std::memcpy(&token_scale, sec + c.scale_offset(is_v, h, o), sizeof(float));
  } else {
    const float* fixed = c.fixed_scales + (is_v ? c.fixed_per_tensor() : 0);
    if (c.scales == KvScales::kPerChannel) {
      scale = fixed + h * D;
      step = 1;
    } else {
      scale = fixed;
    }
  }
  if (c.format == KvFormat::kFP8E4M3) {
    for (int64_t d = 0; d < D; ++d) dst[d] = fp8[u[d]] * scale[d * step];
  } else {
    for (int64_t d = 0; d < D; ++d) dst[d] = static_cast<float>(static_cast<int8_t>(u[d])) * scale[d * step];
  }
}

}  // namespace

void CpuDevice::cached_attention_impl(void* out, const void* q, DType t, int64_t Hq, const KvCacheView& c) {
  const size_t nseq = c.seqs.size();
  const int64_t D = c.D, Hkv = c.Hkv, group = Hq / Hkv, eb = dtype_bytes(t);
  int64_t macs = 0;
  std::vector<int64_t> first(nseq + 1, 0);  // element offset of sequence b's (Hq, n_new, D) rows
  for (size_t b = 0; b < nseq; ++b) {
    const KvSeqView& s = c.seqs[b];
    first[b + 1] = first[b] + Hq * s.n_new * D;
    macs += Hq * s.n_new * c.slots_held(s) * D;
  }
  if (macs == 0) return;

  const float scale = 1.0f / std::sqrt(static_cast<float>(D));
  const float* fp8 = fp8_e4m3_table();
  const int64_t tasks = static_cast<int64_t>(nseq) * Hkv;

#pragma omp parallel if (macs > kParallelMinMacs)
  {
    std::vector<float> K, V, w, weight_sum, qrow(static_cast<size_t>(D)), acc(static_cast<size_t>(D));
    std::vector<std::pair<int64_t, int64_t>> keys;
#pragma omp for schedule(dynamic)
    for (int64_t task = 0; task < tasks; ++task) {
      const size_t b = static_cast<size_t>(task / Hkv);
      const int64_t hk = task % Hkv;
      const KvSeqView& s = c.seqs[b];
      const int64_t n = s.n_new;
      if (n == 0) continue;
      // Keys visible to any of the new queries, oldest first, as (position,
      // slot): first_key(len − n) … len − 1, or every slot of a slot map.
      const int64_t i0 = s.len - n;
      keys.clear();
      if (s.slot_positions.empty()) {
        for (int64_t j = c.first_key(i0); j < s.len; ++j) keys.emplace_back(j, c.slot(j));
      } else {
        for (size_t sl = 0; sl < s.slot_positions.size(); ++sl)
          keys.emplace_back(s.slot_positions[sl], static_cast<int64_t>(sl));
        std::sort(keys.begin(), keys.end());
      }
      const auto nk = static_cast<int64_t>(keys.size());
      K.resize(static_cast<size_t>(nk * D));
      V.resize(static_cast<size_t>(nk * D));
      w.resize(static_cast<size_t>(nk));
      if (s.slot_scores != nullptr) weight_sum.assign(static_cast<size_t>(nk), 0.0f);
      for (int64_t x = 0; x < nk; ++x) {
        read_row(c, s, keys[static_cast<size_t>(x)].second, hk, false, fp8, K.data() + x * D);
        read_row(c, s, keys[static_cast<size_t>(x)].second, hk, true, fp8, V.data() + x * D);
      }
      auto key_index = [&](int64_t position) {  // the first key at or after `position`
        return std::lower_bound(keys.begin(), keys.end(), std::make_pair(position, int64_t{-1})) - keys.begin();
      };
      for (int64_t h = hk * group; h < (hk + 1) * group; ++h)
        for (int64_t r = 0; r < n; ++r) {
          // Query i sees the keys at positions first_key(i) … i.
          const int64_t i = i0 + r, xf = key_index(c.first_key(i)), xe = key_index(i + 1);
          const int64_t row = first[b] + (h * n + r) * D;
          convert_to_fp32(static_cast<const char*>(q) + row * eb, t, qrow.data(), D);
          float m = -std::numeric_limits<float>::infinity();
          for (int64_t x = xf; x < xe; ++x) {
            const float* kr = K.data() + x * D;
            float dot = 0.0f;
            for (int64_t d = 0; d < D; ++d) dot += qrow[d] * kr[d];
            w[x] = dot * scale;
            m = std::max(m, w[x]);
          }
          std::fill(acc.begin(), acc.end(), 0.0f);
          float l = 0.0f;
          for (int64_t x = xf; x < xe; ++x) {
            const float e = std::exp(w[x] - m);
            w[x] = e;
            l += e;
            const float* vr = V.data() + x * D;
            for (int64_t d = 0; d < D; ++d) acc[d] += e * vr[d];
          }
          for (int64_t d = 0; d < D; ++d) acc[d] /= l;
          convert_from_fp32(acc.data(), static_cast<char*>(out) + row * eb, t, D);
          if (s.slot_scores != nullptr)
            for (int64_t x = xf; x < xe; ++x) weight_sum[static_cast<size_t>(x)] += w[x] / l;
        }
      if (s.slot_scores != nullptr) {
        // Tasks of one sequence's other KV heads add into the same slots.
#pragma omp critical(gpuledger_kv_slot_scores)
        for (int64_t x = 0; x < nk; ++x)
          s.slot_scores[keys[static_cast<size_t>(x)].second] += weight_sum[static_cast<size_t>(x)];
      }
    }
  }
}

}  // namespace gpuledger
