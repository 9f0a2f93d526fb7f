// CUDA KV-cache ops (device.h; layout and codecs in kernels/kv_storage.h),
// with the CPU reference's semantics (kernels/cpu/ops_kv_cache_write.cpp,
// ops_cached_attention.cpp):
//   kv_cache_write   one block per (new token, KV head): reads the row in t,
//                    the per-token-head scale (amax / qmax, block max) stored
//                    beside the token (int4: a thread per group computes its
//                    fp16 scale and zero point and writes its code pairs), codes written byte by byte (scales and
//                    bf16 values may sit at odd offsets, as the layout allows);
//                    `calibrate` first sets the fixed per-tensor / per-channel
//                    scales from the amax over the whole write (one block per group);
//   cached_attention one block of 4 warps per (new token, query head): each warp
//                    walks every 4th visible key with an online softmax
//                    (Milakov & Gimelshein 2018; lanes own D/32 head-dim
//                    elements), then the warps' partial (max, sum, output) are
//                    merged — flash-decoding's split-K within a block (Dao et al.
//                    2023). Keys and values are dequantized on read.
// The views' metadata lives on the host (vLLM builds block tables on the host
// and copies them): each call uploads the small tables it needs (booked as
// workspace). FLOPs: counted by Device::cached_attention (cached_attention_flops).
#include <cmath>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "kernels/cuda/kv_codec.h"
#include "kernels/cuda/simt_device.cuh"

namespace gpuledger {
inline namespace GPL_SIMT_NAMESPACE {
namespace {

using namespace simt;

constexpr int kWriteThreads = 128;
constexpr int kAttnWarps = 4;

// What the kernels need of a KvCacheView (plain data, passed by value).
struct KvGeom {
  int64_t Hkv, D, S, block_bytes, layer_offset, window, row_bytes, scale_bytes, fixed_per_tensor, group;
  int format;  // KvFormat
  bool token_scales, group_scales, per_channel;
  float* fixed;  // the layer's K scales, then V scales; null when none
  float qmax;
};

KvGeom geom_of(const KvCacheView& c) {
  return KvGeom{c.Hkv,
                c.D,
                c.block_tokens,
                c.block_bytes,
                c.layer_offset_bytes,
                c.window ? *c.window : 0,
                c.row_bytes(),
                c.token_head_scale_bytes(),
                c.fixed_per_tensor(),
                c.group,
                static_cast<int>(c.format),
                c.token_scales(),
                c.group_scales(),
                c.scales == KvScales::kPerChannel,
                c.fixed_scales,
                kv_qmax(c.format)};
}

GPL_DEVICE int64_t value_offset(const KvGeom& g, int is_v, int64_t h, int64_t o) {
  return (((is_v ? g.Hkv : 0) + h) * g.S + o) * g.row_bytes;
}
GPL_DEVICE int64_t scale_offset(const KvGeom& g, int is_v, int64_t h, int64_t o) {
  return 2 * g.Hkv * g.S * g.row_bytes + (((is_v ? g.Hkv : 0) + h) * g.S + o) * g.scale_bytes;
}
// The fixed scale of element (h, d) of K or V.
GPL_DEVICE float fixed_scale(const KvGeom& g, int is_v, int64_t h, int64_t d) {
  return g.fixed[is_v * g.fixed_per_tensor + (g.per_channel ? h * g.D + d : 0)];
}

// ---- kv_cache_write ----

// One new token of one sequence: its layer section, slot offset, and where its
// (Hkv, ·, D) rows start in k and v.
struct KvRowDev {
  unsigned char* sec;
  int64_t o;            // slot within the block
  int64_t src;          // element of head 0's row in k / v
  int64_t head_stride;  // elements between heads (n_new · D)
};

template <class E>
__global__ void kv_write_kernel(const KvRowDev* rows, const E* k, const E* v, KvGeom g) {
  GPL_SHARED float scratch[32];
  const KvRowDev row = rows[blockIdx.x];
  const int64_t h = blockIdx.y, tid = threadIdx.x, nt = blockDim.x;
  for (int is_v = 0; is_v < 2; ++is_v) {
    const E* x = (is_v ? v : k) + row.src + h * row.head_stride;
    unsigned char* dst = row.sec + value_offset(g, is_v, h, row.o);
    if (g.group_scales) {  // int4: a thread per group, its fp16 (scale, zero) then its code pairs
      unsigned char* params = row.sec + scale_offset(g, is_v, h, row.o);
      for (int64_t g0 = tid * g.group; g0 < g.D; g0 += nt * g.group) {
        float mn = to_float(x[g0]), mx = mn;
        for (int64_t d = g0; d < g0 + g.group; ++d) {
          mn = fminf(mn, to_float(x[d]));
          mx = fmaxf(mx, to_float(x[d]));
        }
        fp16 s16 = from_float<fp16>(kv_codec::int4_raw_scale(mn, mx));
        if (!(to_float(s16) > 0.0f)) s16 = from_float<fp16>(1.0f);
        const fp16 z16 = from_float<fp16>(kv_codec::int4_raw_zero(mn));
        const float sc = to_float(s16), zero = to_float(z16);
        memcpy(params + g0 / g.group * 4, &s16, 2);
        memcpy(params + g0 / g.group * 4 + 2, &z16, 2);
        for (int64_t d = g0; d < g0 + g.group; d += 2)
          dst[d / 2] = static_cast<unsigned char>(kv_codec::int4_encode(to_float(x[d]), sc, zero) |
                                                  (kv_codec::int4_encode(to_float(x[d + 1]), sc, zero) << 4));
      }
      continue;
    }
    float token_scale = 1.0f;
    if (g.token_scales) {
      float amax = 0.0f;
      for (int64_t d = tid; d < g.D; d += nt) amax = fmaxf(amax, fabsf(to_float(x[d])));
      amax = block_reduce(amax, scratch, MaxOp{});
      token_scale = kv_codec::scale_from_amax(amax, g.qmax);
      if (tid == 0) memcpy(row.sec + scale_offset(g, is_v, h, row.o), &token_scale, 4);
    }
    for (int64_t d = tid; d < g.D; d += nt) {
      const float xv = to_float(x[d]);
      if (g.format == static_cast<int>(KvFormat::kBF16)) {
        const bf16 b = from_float<bf16>(xv);
        memcpy(dst + 2 * d, &b, 2);
        continue;
      }
      const float sc = g.token_scales ? token_scale : fixed_scale(g, is_v, h, d);
      dst[d] = g.format == static_cast<int>(KvFormat::kFP8E4M3)
                   ? kv_codec::fp8_e4m3_encode(xv / sc)
                   : static_cast<unsigned char>(kv_codec::int8_encode(xv / sc));
    }
  }
}

// Fixed scales from this write: block (group, K or V); per tensor one group of
// every element, per channel a group per (head, channel) over every new token.
template <class E>
__global__ void kv_calibrate_kernel(const KvRowDev* rows, int64_t nrows, const E* k, const E* v, KvGeom g) {
  GPL_SHARED float scratch[32];
  const int is_v = static_cast<int>(blockIdx.y);
  const E* x = is_v ? v : k;
  const int64_t grp = blockIdx.x;
  float amax = 0.0f;
  if (g.per_channel) {
    const int64_t h = grp / g.D, d = grp % g.D;
    for (int64_t r = threadIdx.x; r < nrows; r += blockDim.x)
      amax = fmaxf(amax, fabsf(to_float(x[rows[r].src + h * rows[r].head_stride + d])));
  } else {
    const int64_t per_row = g.Hkv * g.D;
    for (int64_t e = threadIdx.x; e < nrows * per_row; e += blockDim.x) {
      const KvRowDev& row = rows[e / per_row];
      const int64_t h = e % per_row / g.D, d = e % g.D;
      amax = fmaxf(amax, fabsf(to_float(x[row.src + h * row.head_stride + d])));
    }
  }
  amax = block_reduce(amax, scratch, MaxOp{});
  if (threadIdx.x == 0) g.fixed[is_v * g.fixed_per_tensor + grp] = kv_codec::scale_from_amax(amax, g.qmax);
}

// ---- cached_attention ----

struct KvSeqDev {
  const unsigned char* base;
  int64_t blocks_off;  // this sequence's block table in the concatenated tables
};
struct KvQueryDev {
  int64_t seq, pos;     // sequence index, query position
  int64_t elem;         // element of head 0's row in q / out
  int64_t head_stride;  // elements between heads (n_new · D)
};

// K or V element d of head h at slot o of a section, dequantized.
GPL_DEVICE float kv_read(const KvGeom& g, const unsigned char* sec, int is_v, int64_t h, int64_t o, int64_t d,
                         float token_scale) {
  const unsigned char* p = sec + value_offset(g, is_v, h, o);
  if (g.format == static_cast<int>(KvFormat::kBF16)) {
    const uint32_t bits = (static_cast<uint32_t>(p[2 * d]) | (static_cast<uint32_t>(p[2 * d + 1]) << 8)) << 16;
    float f;
    memcpy(&f, &bits, 4);
    return f;
  }
  if (g.group_scales) {  // int4: code · scale + zero of d's group
    fp16 s16, z16;
    const unsigned char* params = sec + scale_offset(g, is_v, h, o) + d / g.group * 4;
    memcpy(&s16, params, 2);
    memcpy(&z16, params + 2, 2);
    return static_cast<float>((p[d / 2] >> (4 * (d % 2))) & 0xF) * to_float(s16) + to_float(z16);
  }
  const float sc = g.token_scales ? token_scale : fixed_scale(g, is_v, h, d);
  if (g.format == static_cast<int>(KvFormat::kFP8E4M3)) return kv_codec::fp8_e4m3_decode(p[d]) * sc;
  return static_cast<float>(static_cast<int8_t>(p[d])) * sc;
}

// Block (query, head): 4 warps; lane owns head-dim elements lane + 32e, e < MAXE.
// Dynamic shared memory: kAttnWarps · D floats (the warps' partial outputs).
template <class E, int MAXE>
__global__ void cached_attention_kernel(E* out, const E* q, const KvQueryDev* queries, const KvSeqDev* seqs,
                                        const int32_t* blocks, KvGeom g, int64_t group, float scale) {
  GPL_SHARED float warp_m[kAttnWarps], warp_l[kAttnWarps];
  GPL_DYNAMIC_SMEM(float, warp_acc);
  const KvQueryDev qd = queries[blockIdx.x];
  const KvSeqDev sd = seqs[qd.seq];
  const int64_t h = blockIdx.y, hk = h / group, D = g.D;
  const int lane = static_cast<int>(threadIdx.x % 32), warp = static_cast<int>(threadIdx.x / 32);
  const E* qrow = q + qd.elem + h * qd.head_stride;
  float qv[MAXE], acc[MAXE];
  for (int e = 0; e < MAXE; ++e) {
    const int64_t d = lane + 32 * e;
    qv[e] = d < D ? to_float(qrow[d]) : 0.0f;
    acc[e] = 0.0f;
  }
  float m = -INFINITY, l = 0.0f;
  const int64_t jf = (g.window > 0 && qd.pos - g.window + 1 > 0) ? qd.pos - g.window + 1 : 0;
  for (int64_t j = jf + warp; j <= qd.pos; j += kAttnWarps) {
    const int64_t sl = g.window > 0 ? j % g.window : j;
    const unsigned char* sec =
        sd.base + static_cast<int64_t>(blocks[sd.blocks_off + sl / g.S]) * g.block_bytes + g.layer_offset;
    const int64_t o = sl % g.S;
    float ks = 1.0f, vs = 1.0f;
    if (g.token_scales) {
      memcpy(&ks, sec + scale_offset(g, 0, hk, o), 4);
      memcpy(&vs, sec + scale_offset(g, 1, hk, o), 4);
    }
    float dot = 0.0f;
    for (int e = 0; e < MAXE; ++e) {
      const int64_t d = lane + 32 * e;
      if (d < D) dot += qv[e] * kv_read(g, sec, 0, hk, o, d, ks);
    }
    const float s = warp_reduce(dot, SumOp{}) * scale;
    const float m_new = fmaxf(m, s), corr = expf(m - m_new), p = expf(s - m_new);
    l = l * corr + p;
    for (int e = 0; e < MAXE; ++e) {
      const int64_t d = lane + 32 * e;
      acc[e] = acc[e] * corr + (d < D ? p * kv_read(g, sec, 1, hk, o, d, vs) : 0.0f);
    }
    m = m_new;
  }
  if (lane == 0) {
    warp_m[warp] = m;
    warp_l[warp] = l;
  }
  for (int e = 0; e < MAXE; ++e) {
    const int64_t d = lane + 32 * e;
    if (d < D) warp_acc[warp * D + d] = acc[e];
  }
  __syncthreads();
  float M = -INFINITY;
  for (int w = 0; w < kAttnWarps; ++w) M = fmaxf(M, warp_m[w]);
  float L = 0.0f;
  for (int w = 0; w < kAttnWarps; ++w) L += warp_l[w] * expf(warp_m[w] - M);  // idle warps: l = 0
  E* orow = out + qd.elem + h * qd.head_stride;
  for (int64_t d = threadIdx.x; d < D; d += blockDim.x) {
    float o = 0.0f;
    for (int w = 0; w < kAttnWarps; ++w)
      if (warp_l[w] > 0.0f) o += warp_acc[w * D + d] * expf(warp_m[w] - M);
    orow[d] = from_float<E>(o / L);
  }
}

template <class F>
void with_max_e(int64_t D, F&& f) {
  if (D <= 32)
    f(std::integral_constant<int, 1>{});
  else if (D <= 64)
    f(std::integral_constant<int, 2>{});
  else if (D <= 128)
    f(std::integral_constant<int, 4>{});
  else
    f(std::integral_constant<int, 8>{});
}

}  // namespace

void SimtDevice::kv_cache_write_impl(const KvCacheView& c, const void* k, const void* v, DType t, bool calibrate) {
  const int64_t D = c.D, Hkv = c.Hkv;
  std::vector<KvRowDev> rows;
  int64_t first = 0;  // element offset of the sequence's (Hkv, n_new, D) rows
  for (const KvSeqView& s : c.seqs) {
    for (int64_t r = 0; r < s.n_new; ++r) {
      const int64_t sl = c.slot_of(s, s.len - s.n_new + r);
      rows.push_back(
          {reinterpret_cast<unsigned char*>(c.section_at(s, sl)), sl % c.block_tokens, first + r * D, s.n_new * D});
    }
    first += Hkv * s.n_new * D;
  }
  if (rows.empty()) return;
  const int64_t nrows = static_cast<int64_t>(rows.size());
  Buffer d_rows = alloc(nrows * static_cast<int64_t>(sizeof(KvRowDev)), Account::kWorkspace, "kv_cache_write.rows");
  copy_from_host(d_rows.data(), rows.data(), nrows * static_cast<int64_t>(sizeof(KvRowDev)));
  const KvGeom g = geom_of(c);
  dispatch(t, [&](auto tag) {
    using E = decltype(tag);
    if (calibrate && c.fixed_per_tensor() > 0)
      launch_kernel(kv_calibrate_kernel<E>, dim3(static_cast<unsigned>(c.fixed_per_tensor()), 2), dim3(256), 0,
                    stream(), d_rows.as<const KvRowDev>(), nrows, static_cast<const E*>(k), static_cast<const E*>(v),
                    g);
    launch_kernel(kv_write_kernel<E>, dim3(static_cast<unsigned>(nrows), static_cast<unsigned>(Hkv)),
                  dim3(kWriteThreads), 0, stream(), d_rows.as<const KvRowDev>(), static_cast<const E*>(k),
                  static_cast<const E*>(v), g);
  });
}

void SimtDevice::cached_attention_impl(void* out, const void* q, DType t, int64_t Hq, const KvCacheView& c) {
  const int64_t D = c.D;
  std::vector<KvSeqDev> seqs;
  std::vector<KvQueryDev> queries;
  std::vector<int32_t> tables;
  int64_t first = 0, macs = 0;
  for (size_t b = 0; b < c.seqs.size(); ++b) {
    const KvSeqView& s = c.seqs[b];
    // The kernel walks positions first_key … pos through slot(p); a scattered
    // slot map (attention sinks, heavy hitters) and H2O's score sums are the
    // cpu backend's (the command line refuses them on cuda up front).
    if (!s.slot_positions.empty() || s.slot_scores != nullptr)
      throw std::invalid_argument(
          "cached_attention: KV slot maps (sink, h2o eviction) run on the cpu and meta "
          "backends, not in the CUDA kernel");
    macs += Hq * s.n_new * c.kept(s.len) * D;
    seqs.push_back({static_cast<const unsigned char*>(s.base), static_cast<int64_t>(tables.size())});
    tables.insert(tables.end(), s.blocks.begin(), s.blocks.end());
    for (int64_t r = 0; r < s.n_new; ++r)
      queries.push_back({static_cast<int64_t>(b), s.len - s.n_new + r, first + r * D, s.n_new * D});
    first += Hq * s.n_new * D;
  }
  if (macs == 0) return;
  if (D > 256)
    throw std::invalid_argument("cached_attention: head dim " + std::to_string(D) +
                                " is not supported by the CUDA kernel (at most 256)");
  if (tables.empty()) tables.push_back(0);
  const auto bytes_of = [](const auto& vec) { return static_cast<int64_t>(vec.size() * sizeof(vec[0])); };
  Buffer d_seqs = alloc(bytes_of(seqs), Account::kWorkspace, "cached_attention.seqs");
  Buffer d_queries = alloc(bytes_of(queries), Account::kWorkspace, "cached_attention.queries");
  Buffer d_tables = alloc(bytes_of(tables), Account::kWorkspace, "cached_attention.block_tables");
  copy_from_host(d_seqs.data(), seqs.data(), bytes_of(seqs));
  copy_from_host(d_queries.data(), queries.data(), bytes_of(queries));
  copy_from_host(d_tables.data(), tables.data(), bytes_of(tables));
  const KvGeom g = geom_of(c);
  const float scale = 1.0f / std::sqrt(static_cast<float>(D));  // as the CPU reference: in fp32
  const dim3 grid(static_cast<unsigned>(queries.size()), static_cast<unsigned>(Hq));
  dispatch(t, [&](auto tag) {
    using E = decltype(tag);
    with_max_e(D, [&](auto me) {
      launch_kernel(cached_attention_kernel<E, decltype(me)::value>, grid, dim3(32 * kAttnWarps),
                    static_cast<size_t>(kAttnWarps * D * 4), stream(), static_cast<E*>(out), static_cast<const E*>(q),
                    d_queries.as<const KvQueryDev>(), d_seqs.as<const KvSeqDev>(), d_tables.as<const int32_t>(), g,
                    Hq / c.Hkv, scale);
    });
  });
}

}  // namespace GPL_SIMT_NAMESPACE
}  // namespace gpuledger
