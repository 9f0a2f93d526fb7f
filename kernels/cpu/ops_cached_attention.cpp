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
// One task per (sequence, KV head), OpenMP over the tasks. A task serves the
// queries of its GQA group and new tokens, kQueryBlock query rows at a time,
// in three passes over the keys they can see: scores (each K row read once in
// its stored format and dotted with every query of the block, kv_row_ops.h),
// the softmax (max-subtracted, a vectorized exp), and the weighted sum (each V
// row read once and added into every query's fp32 accumulator). No K or V row
// is widened into memory; the per-thread buffers hold the block's queries,
// scores and accumulators (rows·D + rows·keys + rows·D floats), not booked in
// the ledger, like flash attention's tiles, and kept from call to call. The
// output is rounded to t once.
//
// Scales (kernels/kv_storage.h): per token-head and per tensor multiply the
// dot product (K) or the weight (V); per channel multiplies the query by the
// K scales once, and the finished accumulator by the V scales.
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
#include "kernels/cpu/kv_row_ops.h"

namespace gpuledger {
namespace {

// Below this many multiply-adds the op stays on one thread (fork/join costs more).
constexpr int64_t kParallelMinMacs = int64_t{1} << 20;
// Query rows (GQA group × new tokens) served per pass over the keys: bounds the
// score buffer to kQueryBlock · keys floats in a long prefill chunk.
constexpr int64_t kQueryBlock = 64;

// One task's fixed inputs.
struct Task {
  const KvCacheView& c;
  const KvSeqView& s;
  const KvRowOps& ops;
  KvRowFormat fmt;
  int64_t hk = 0, group = 0;
  float scale = 0;                                       // 1/sqrt(D)
  const std::vector<std::pair<int64_t, int64_t>>& keys;  // (position, slot), oldest first
};

// The per-thread buffers, grown to the largest task and reused.
struct Scratch {
  std::vector<float> q, w, acc, l, weight_sum;
  std::vector<int64_t> xf, xe;
  std::vector<std::pair<int64_t, int64_t>> keys;
};

// The row (values and, for int4, group parameters) of head h at slot sl, and
// its per token-head scale (1 when none).
struct RowAt {
  const uint8_t* values;
  const uint8_t* params;
  float token_scale;
};
RowAt row_at(const KvCacheView& c, const KvSeqView& s, int64_t sl, int64_t h, bool is_v) {
  const int64_t o = sl % c.block_tokens;
  const char* sec = c.section_at(s, sl);
  RowAt r{reinterpret_cast<const uint8_t*>(sec + c.value_offset(is_v, h, o)), nullptr, 1.0f};
  if (c.group_scales()) r.params = reinterpret_cast<const uint8_t*>(sec + c.scale_offset(is_v, h, o));
  if (c.token_scales()) std::memcpy(&r.token_scale, sec + c.scale_offset(is_v, h, o), sizeof(float));
  return r;
}

// The fixed (per tensor or per channel) scales of K or V for KV head h: a
// pointer to D values (per channel), or null with *tensor set (per tensor, else 1).
const float* fixed_scales(const KvCacheView& c, int64_t h, bool is_v, float* tensor) {
  *tensor = 1.0f;
  if (!kv_quantized(c.format) || c.token_scales() || c.group_scales()) return nullptr;
  const float* fixed = c.fixed_scales + (is_v ? c.fixed_per_tensor() : 0);
  if (c.scales == KvScales::kPerChannel) return fixed + h * c.D;
  *tensor = fixed[0];
  return nullptr;
}

// Query rows q0 … q1 of a task (row qi: head hk·group + qi / n, new token qi % n).
void serve_block(const Task& t, const void* q, void* out, DType dt, int64_t q_first, int64_t q0, int64_t q1,
                 Scratch& b) {
  const KvCacheView& c = t.c;
  const KvSeqView& s = t.s;
  const int64_t D = c.D, n = s.n_new, rows = q1 - q0, nk = static_cast<int64_t>(t.keys.size());
  const int64_t eb = dtype_bytes(dt);
  auto key_index = [&](int64_t position) {  // the first key at or after `position`
    return std::lower_bound(t.keys.begin(), t.keys.end(), std::make_pair(position, int64_t{-1})) - t.keys.begin();
  };
  float k_tensor, v_tensor;
  const float* k_channel = fixed_scales(c, t.hk, false, &k_tensor);
  const float* v_channel = fixed_scales(c, t.hk, true, &v_tensor);
  b.q.resize(static_cast<size_t>(rows * D));
  b.w.resize(static_cast<size_t>(rows * nk));
  b.acc.assign(static_cast<size_t>(rows * D), 0.0f);
  b.l.resize(static_cast<size_t>(rows));
  b.xf.resize(static_cast<size_t>(rows));
  b.xe.resize(static_cast<size_t>(rows));
  int64_t x_lo = nk, x_hi = 0;
  for (int64_t qi = q0; qi < q1; ++qi) {
    const int64_t h = t.hk * t.group + qi / n, r = qi % n, i = s.len - n + r, row = qi - q0;
    float* qr = b.q.data() + row * D;
    convert_to_fp32(static_cast<const char*>(q) + (q_first + (h * n + r) * D) * eb, dt, qr, D);
    if (k_channel != nullptr)
      for (int64_t d = 0; d < D; ++d) qr[d] *= k_channel[d];
    b.xf[row] = key_index(c.first_key(i));  // query i sees the keys at positions first_key(i) … i
    b.xe[row] = key_index(i + 1);
    x_lo = std::min(x_lo, b.xf[row]);
    x_hi = std::max(x_hi, b.xe[row]);
  }
  for (int64_t x = x_lo; x < x_hi; ++x) {  // scores: each K row read once for the block
    const RowAt k = row_at(c, s, t.keys[static_cast<size_t>(x)].second, t.hk, false);
    const float ks = k.token_scale * k_tensor * t.scale;
    for (int64_t row = 0; row < rows; ++row)
      if (b.xf[row] <= x && x < b.xe[row])
        b.w[row * nk + x] = t.ops.dot(t.fmt, b.q.data() + row * D, k.values, k.params) * ks;
  }
  for (int64_t row = 0; row < rows; ++row) {  // softmax numerators in place, and their sums
    float* wr = b.w.data() + row * nk;
    if (b.xe[row] == b.xf[row]) {  // no key visible (a query always sees itself; kept for safety): 0/0
      b.l[row] = 0.0f;
      continue;
    }
    const float m = *std::max_element(wr + b.xf[row], wr + b.xe[row]);
    b.l[row] = t.ops.exp_shifted_sum(wr + b.xf[row], b.xe[row] - b.xf[row], m);
  }
  for (int64_t x = x_lo; x < x_hi; ++x) {  // weighted sum: each V row read once for the block
    const RowAt v = row_at(c, s, t.keys[static_cast<size_t>(x)].second, t.hk, true);
    const float vs = v.token_scale * v_tensor;
    for (int64_t row = 0; row < rows; ++row)
      if (b.xf[row] <= x && x < b.xe[row])
        t.ops.axpy(t.fmt, b.acc.data() + row * D, b.w[row * nk + x] * vs, v.values, v.params);
  }
  for (int64_t qi = q0; qi < q1; ++qi) {
    const int64_t h = t.hk * t.group + qi / n, r = qi % n, row = qi - q0;
    float* a = b.acc.data() + row * D;
    const float inv_l = 1.0f / b.l[row];
    for (int64_t d = 0; d < D; ++d) a[d] *= (v_channel != nullptr ? v_channel[d] : 1.0f) * inv_l;
    convert_from_fp32(a, static_cast<char*>(out) + (q_first + (h * n + r) * D) * eb, dt, D);
    if (s.slot_scores != nullptr)
      for (int64_t x = b.xf[row]; x < b.xe[row]; ++x) b.weight_sum[static_cast<size_t>(x)] += b.w[row * nk + x] * inv_l;
  }
}

// Keys visible to any of the new queries of s, oldest first, as (position,
// slot): first_key(len − n) … len − 1, or every slot of a slot map.
void collect_keys(const KvCacheView& c, const KvSeqView& s, std::vector<std::pair<int64_t, int64_t>>& keys) {
  keys.clear();
  if (s.slot_positions.empty()) {
    for (int64_t j = c.first_key(s.len - s.n_new); j < s.len; ++j) keys.emplace_back(j, c.slot(j));
  } else {
    for (size_t sl = 0; sl < s.slot_positions.size(); ++sl)
      keys.emplace_back(s.slot_positions[sl], static_cast<int64_t>(sl));
    std::sort(keys.begin(), keys.end());
  }
}

}  // namespace

void CpuDevice::cached_attention_impl(void* out, const void* q, DType t, int64_t Hq, const KvCacheView& c) {
  const size_t nseq = c.seqs.size();
  const int64_t D = c.D, Hkv = c.Hkv, group = Hq / Hkv;
  int64_t macs = 0;
  std::vector<int64_t> first(nseq + 1, 0);  // element offset of sequence b's (Hq, n_new, D) rows
  for (size_t b = 0; b < nseq; ++b) {
    const KvSeqView& s = c.seqs[b];
    first[b + 1] = first[b] + Hq * s.n_new * D;
    macs += Hq * s.n_new * c.slots_held(s) * D;
  }
  if (macs == 0) return;

  const float scale = 1.0f / std::sqrt(static_cast<float>(D));
  const KvRowOps& ops = kv_row_ops(cpu_best_isa());
  const KvRowFormat fmt{c.format, D, c.group, fp8_e4m3_table()};
  const int64_t tasks = static_cast<int64_t>(nseq) * Hkv;

#pragma omp parallel if (macs > kParallelMinMacs)
  {
    // Each thread's buffers outlive the call: a decode step allocates nothing
    // once they have grown to the longest context seen (test_decode_allocations).
    static thread_local Scratch scratch;
#pragma omp for schedule(dynamic)
    for (int64_t task = 0; task < tasks; ++task) {
      const size_t b = static_cast<size_t>(task / Hkv);
      const KvSeqView& s = c.seqs[b];
      if (s.n_new == 0) continue;
      collect_keys(c, s, scratch.keys);
      const Task tk{c, s, ops, fmt, task % Hkv, group, scale, scratch.keys};
      if (s.slot_scores != nullptr) scratch.weight_sum.assign(scratch.keys.size(), 0.0f);
      const int64_t rows = group * s.n_new;
      for (int64_t q0 = 0; q0 < rows; q0 += kQueryBlock)
        serve_block(tk, q, out, t, first[b], q0, std::min(rows, q0 + kQueryBlock), scratch);
      if (s.slot_scores != nullptr) {
        // Tasks of one sequence's other KV heads add into the same slots.
#pragma omp critical(gpuledger_kv_slot_scores)
        for (size_t x = 0; x < scratch.keys.size(); ++x) s.slot_scores[scratch.keys[x].second] += scratch.weight_sum[x];
      }
    }
  }
}

}  // namespace gpuledger
