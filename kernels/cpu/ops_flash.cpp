// CPU reference flash attention (Dao et al. 2022, "FlashAttention", Alg. 1 for
// the forward with its online softmax; the backward recomputes the tiles as in
// their Alg. 4, with D_i = rowsum(dO∘O) computed once per row as FlashAttention-2,
// Dao 2023, does; query tiles outside, key tiles inside, so a dQ tile completes
// before it is stored and dK, dV accumulate per KV head). Same function as
// materialized attention (QKᵀ·scale, causal / window mask, softmax, dropout on
// the probabilities, ·V) without a T×T buffer: only out and the log-sum-exp
// lse_i = m_i + log l_i (fp32, natural log of Σ_j exp(scale·s_ij)) are saved.
//
// Scratch (not booked in the ledger, by choice): the forward's tiles are
// O(tile² + tile·D) floats per thread; the backward also keeps, per thread,
// fp32 accumulators for dK and dV of the one KV head it is working on (2·T·D
// floats, the size of that head's K and V; FlashAttention-2 keeps an fp32 dQ
// accumulator of the same order). Neither depends on the batch or head count.
//
// One block (kernels/attn_block.h): T queries against Tk keys, each query row
// seeing the contiguous run of keys attn::visible_keys gives (the causal mask
// on the tokens' positions, or every key). With blk.accumulate the forward
// starts its online softmax from the saved state of earlier blocks — running
// max m = lse, sum l = 1 (0 when lse = −inf), accumulator = out — which is
// exactly where Alg. 1 would stand had those keys been tiles of this call;
// the backward starts its dQ, dK, dV accumulators from the tensors given.
//
// FLOPs: the contract counts the full T×Tk products (flash_forward_flops,
// flash_backward_flops in kernels/flop_counts.h: the published convention, with
// the causal-halved figure reported beside it). This kernel skips key tiles that
// are entirely masked for a query tile (above the diagonal, or before the
// sliding window) — they contribute exactly nothing — so it executes fewer
// multiply-adds than Device::flash_attention_* count (the full figure).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "kernels/cpu/cpu_device.h"
#include "kernels/philox.h"

namespace gpuledger {
namespace {

// Query rows × key columns per tile. 64 × 64 fp32 is 16 KiB: S and dS stay in L1/L2.
constexpr int64_t kBr = 64, kBc = 64;
// Below this many multiply-adds (B·Hq·T·Tk·D) the op stays on one thread: the
// OpenMP fork/join costs more than the work.
constexpr int64_t kParallelMinMacs = int64_t{1} << 22;

inline const void* at(const void* p, DType t, int64_t i) { return static_cast<const char*>(p) + i * dtype_bytes(t); }
inline void* at(void* p, DType t, int64_t i) { return static_cast<char*>(p) + i * dtype_bytes(t); }

// The block's mask as the kernels read it.
struct BlockMask {
  const AttnBlock& blk;
  int64_t window;  // 0: none
  attn::KeyRun keys(int64_t i) const { return attn::visible_keys(blk, blk.Tk, window, i); }
  // Key tiles (from a multiple of kBc) that query rows [i0, i0 + nr) visit:
  // both ends of a row's run grow with the row.
  attn::KeyRun tile_span(int64_t i0, int64_t nr) const { return {keys(i0).begin / kBc * kBc, keys(i0 + nr - 1).end}; }
};

// dst (D × kBc) = transpose of rows (n × D), so products over D run along
// contiguous key columns (vectorizes without reassociating sums).
void transpose_tile(const float* rows, int64_t n, int64_t D, float* dst) {
  for (int64_t c = 0; c < n; ++c)
    for (int64_t d = 0; d < D; ++d) dst[d * kBc + c] = rows[c * D + d];
}

// out (nr × kBc, first nc columns) = a (nr × D) · bt (D × kBc).
void tile_product(const float* a, const float* bt, int64_t nr, int64_t nc, int64_t D, float* out) {
  for (int64_t r = 0; r < nr; ++r) {
    float* o = out + r * kBc;
    std::fill(o, o + nc, 0.0f);
    for (int64_t d = 0; d < D; ++d) {
      const float ad = a[r * D + d];
      const float* br = bt + d * kBc;
      for (int64_t c = 0; c < nc; ++c) o[c] += ad * br[c];
    }
  }
}

// Dropout multipliers of row i, keys j0 … j0 + n − 1: 1/(1 − p) kept, 0 dropped.
// Flat index ((b·Hq + h)·seq + pos_q(i))·seq + pos_k(j): the element of the
// (B, Hq, seq, seq) probabilities tensor that materialized attention's
// dropout_forward draws for. Keys on either side of the split are drawn apart
// (their positions are not consecutive).
void dropout_row(const RngKey& key, float p, const AttnShape& s, const AttnBlock& blk, int64_t b, int64_t h, int64_t i,
                 int64_t j0, int64_t n, float* z) {
  const int64_t row = (b * s.Hq + h) * blk.seq + blk.q_pos.position(i);
  for (int64_t c = 0; c < n;) {
    const int64_t j = j0 + c;
    const int64_t run = j < blk.k_pos.split ? std::min(n - c, blk.k_pos.split - j) : n - c;
    philox_uniform_fill(key.seed, key.stream, static_cast<uint64_t>(row * blk.seq + blk.k_pos.position(j)), run, z + c);
    c += run;
  }
  const float ks = p < 1.0f ? 1.0f / (1.0f - p) : 0.0f;
  for (int64_t c = 0; c < n; ++c) z[c] = z[c] >= p ? ks : 0.0f;
}

}  // namespace

void CpuDevice::flash_attention_forward_impl(void* out, float* lse, const void* q, const void* k, const void* v,
                                             DType t, const AttnShape& s, float p, RngKey key, const AttnBlock& blk) {
  const int64_t B = s.B, Hq = s.Hq, T = s.T, Tk = blk.Tk, D = s.D, group = s.Hq / s.Hkv;
  const int64_t q_tiles = (T + kBr - 1) / kBr;
  const float scale = s.scale();
  const bool drop = p > 0.0f;
  const BlockMask mask{blk, s.window ? *s.window : 0};
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();

#pragma omp parallel if (B * Hq * T * Tk * D > kParallelMinMacs)
  {
    std::vector<float> Q(kBr * D), Kr(kBc * D), Kt(D * kBc), V(kBc * D), S(kBr * kBc), acc(kBr * D), m(kBr), l(kBr),
        z(kBc);
#pragma omp for collapse(3) schedule(dynamic)
    for (int64_t b = 0; b < B; ++b)
      for (int64_t h = 0; h < Hq; ++h)
        for (int64_t qt = 0; qt < q_tiles; ++qt) {
          const int64_t hk = h / group;  // GQA: query head h reads KV head h / (Hq / Hkv)
          const int64_t q_head = (b * Hq + h) * T, kv_head = (b * s.Hkv + hk) * Tk;
          const int64_t i0 = qt * kBr, nr = std::min(kBr, T - i0);
          convert_to_fp32(at(q, t, (q_head + i0) * D), t, Q.data(), nr * D);
          std::fill(m.begin(), m.end(), kNegInf);
          std::fill(l.begin(), l.end(), 0.0f);
          std::fill(acc.begin(), acc.end(), 0.0f);
          if (blk.accumulate) {  // the earlier blocks' state: m = lse, l = 1, acc = out
            convert_to_fp32(at(out, t, (q_head + i0) * D), t, acc.data(), nr * D);
            for (int64_t r = 0; r < nr; ++r) {
              m[r] = lse[q_head + i0 + r];
              l[r] = m[r] == kNegInf ? 0.0f : 1.0f;
              if (l[r] == 0.0f) std::fill(acc.begin() + r * D, acc.begin() + (r + 1) * D, 0.0f);
            }
          }

          const attn::KeyRun span = mask.tile_span(i0, nr);
          for (int64_t j0 = span.begin; j0 < span.end; j0 += kBc) {
            const int64_t nc = std::min(kBc, Tk - j0);
            convert_to_fp32(at(k, t, (kv_head + j0) * D), t, Kr.data(), nc * D);
            convert_to_fp32(at(v, t, (kv_head + j0) * D), t, V.data(), nc * D);
            transpose_tile(Kr.data(), nc, D, Kt.data());
            tile_product(Q.data(), Kt.data(), nr, nc, D, S.data());  // S = Q·Kᵀ (unscaled)

            for (int64_t r = 0; r < nr; ++r) {
              const attn::KeyRun run = mask.keys(i0 + r);
              const int64_t ca = std::max(run.begin, j0) - j0, cb = std::min(run.end, j0 + nc) - j0;
              if (ca >= cb) continue;  // no visible key of row i in this tile
              float* sr = S.data() + r * kBc;
              float mt = kNegInf;
              for (int64_t c = ca; c < cb; ++c) {
                sr[c] *= scale;
                mt = std::max(mt, sr[c]);
              }
              // Online softmax (Alg. 1): rescale what was summed under the old max.
              const float m_new = std::max(m[r], mt);
              const float corr = std::exp(m[r] - m_new);  // exp(−inf) = 0 on the first tile
              float* ar = acc.data() + r * D;
              l[r] *= corr;
              for (int64_t d = 0; d < D; ++d) ar[d] *= corr;
              if (drop) dropout_row(key, p, s, blk, b, h, i0 + r, j0 + ca, cb - ca, z.data());
              for (int64_t c = ca; c < cb; ++c) {
                const float pc = std::exp(sr[c] - m_new);
                l[r] += pc;  // the normalizer sums the undropped probabilities
                const float w = drop ? pc * z[c - ca] : pc;
                if (w == 0.0f) continue;
                const float* vc = V.data() + c * D;
                for (int64_t d = 0; d < D; ++d) ar[d] += w * vc[d];
              }
              m[r] = m_new;
            }
          }

          for (int64_t r = 0; r < nr; ++r) {  // a row that saw no key: out 0, lse −inf
            const float inv = l[r] > 0.0f ? 1.0f / l[r] : 0.0f;
            for (int64_t d = 0; d < D; ++d) acc[r * D + d] *= inv;
            lse[q_head + i0 + r] = l[r] > 0.0f ? m[r] + std::log(l[r]) : kNegInf;
          }
          convert_from_fp32(acc.data(), at(out, t, (q_head + i0) * D), t, nr * D);
        }
  }
}

// With P = exp(scale·S − lse) (recomputed), Z the dropout multipliers, O = (P∘Z)·V:
//   dV = (P∘Z)ᵀ·dO,  dP = (dO·Vᵀ)∘Z,  dS = P∘(dP − D_i)·scale with D_i = Σ_d dO∘O
// (= Σ_j P∘dP: Dao et al. 2022, App. B.2), dQ = dS·K, dK = dSᵀ·Q.
// One task per (b, KV head): it owns dK, dV of that head (summed over the
// Hq/Hkv query heads that read it), so no two threads write the same gradient.
void CpuDevice::flash_attention_backward_impl(void* dq, void* dk, void* dv, const void* dout, const void* q,
                                              const void* k, const void* v, const void* out, const float* lse, DType t,
                                              const AttnShape& s, float p, RngKey key, const AttnBlock& blk) {
  const int64_t B = s.B, Hq = s.Hq, Hkv = s.Hkv, T = s.T, Tk = blk.Tk, D = s.D, group = s.Hq / s.Hkv;
  const int64_t q_tiles = (T + kBr - 1) / kBr;
  const float scale = s.scale();
  const bool drop = p > 0.0f;
  const BlockMask mask{blk, s.window ? *s.window : 0};

#pragma omp parallel if (B * Hq * T * Tk * D > kParallelMinMacs)
  {
    std::vector<float> Q(kBr * D), dO(kBr * D), O(kBr * D), dQ(kBr * D), Di(kBr), L(kBr), Kr(kBc * D), Kt(D * kBc),
        V(kBc * D), Vt(D * kBc), S(kBr * kBc), dPd(kBr * kBc), dS(kBr * kBc), z(kBc), dK, dV;
#pragma omp for collapse(2) schedule(dynamic)
    for (int64_t b = 0; b < B; ++b)
      for (int64_t g = 0; g < Hkv; ++g) {
        const int64_t kv_head = (b * Hkv + g) * Tk;
        dK.assign(static_cast<size_t>(Tk * D), 0.0f);
        dV.assign(static_cast<size_t>(Tk * D), 0.0f);
        if (blk.accumulate) {
          convert_to_fp32(at(dk, t, kv_head * D), t, dK.data(), Tk * D);
          convert_to_fp32(at(dv, t, kv_head * D), t, dV.data(), Tk * D);
        }
        for (int64_t h = g * group; h < (g + 1) * group; ++h)
          for (int64_t qt = 0; qt < q_tiles; ++qt) {
            const int64_t q_head = (b * Hq + h) * T;
            const int64_t i0 = qt * kBr, nr = std::min(kBr, T - i0);
            convert_to_fp32(at(q, t, (q_head + i0) * D), t, Q.data(), nr * D);
            convert_to_fp32(at(dout, t, (q_head + i0) * D), t, dO.data(), nr * D);
            convert_to_fp32(at(out, t, (q_head + i0) * D), t, O.data(), nr * D);
            for (int64_t r = 0; r < nr; ++r) {
              float di = 0.0f;
              for (int64_t d = 0; d < D; ++d) di += dO[r * D + d] * O[r * D + d];
              Di[r] = di;
              L[r] = lse[q_head + i0 + r];
            }
            if (blk.accumulate)
              convert_to_fp32(at(dq, t, (q_head + i0) * D), t, dQ.data(), nr * D);
            else
              std::fill(dQ.begin(), dQ.end(), 0.0f);

            const attn::KeyRun span = mask.tile_span(i0, nr);
            for (int64_t j0 = span.begin; j0 < span.end; j0 += kBc) {
              const int64_t nc = std::min(kBc, Tk - j0);
              convert_to_fp32(at(k, t, (kv_head + j0) * D), t, Kr.data(), nc * D);
              convert_to_fp32(at(v, t, (kv_head + j0) * D), t, V.data(), nc * D);
              transpose_tile(Kr.data(), nc, D, Kt.data());
              transpose_tile(V.data(), nc, D, Vt.data());
              tile_product(Q.data(), Kt.data(), nr, nc, D, S.data());     // S = Q·Kᵀ
              tile_product(dO.data(), Vt.data(), nr, nc, D, dPd.data());  // dO·Vᵀ

              for (int64_t r = 0; r < nr; ++r) {
                const attn::KeyRun run = mask.keys(i0 + r);
                const int64_t ca = std::max(run.begin, j0) - j0, cb = std::min(run.end, j0 + nc) - j0;
                float* dsr = dS.data() + r * kBc;
                std::fill(dsr, dsr + nc, 0.0f);  // masked: P = 0, so dS = 0 and no dV
                if (ca >= cb) continue;
                if (drop) dropout_row(key, p, s, blk, b, h, i0 + r, j0 + ca, cb - ca, z.data());
                const float* dOr = dO.data() + r * D;
                for (int64_t c = ca; c < cb; ++c) {
                  const float pc = std::exp(scale * S[r * kBc + c] - L[r]);
                  const float zc = drop ? z[c - ca] : 1.0f;
                  const float w = pc * zc;  // dropped probability: its weight in O
                  if (w != 0.0f) {
                    float* dvj = dV.data() + (j0 + c) * D;
                    for (int64_t d = 0; d < D; ++d) dvj[d] += w * dOr[d];
                  }
                  dsr[c] = pc * (dPd[r * kBc + c] * zc - Di[r]) * scale;
                }
              }
              // dQ += dS·K, dK += dSᵀ·Q (the scale is already in dS).
              for (int64_t r = 0; r < nr; ++r) {
                float* dqr = dQ.data() + r * D;
                const float* qr = Q.data() + r * D;
                for (int64_t c = 0; c < nc; ++c) {
                  const float w = dS[r * kBc + c];
                  if (w == 0.0f) continue;
                  const float* kc = Kr.data() + c * D;
                  float* dkj = dK.data() + (j0 + c) * D;
                  for (int64_t d = 0; d < D; ++d) {
                    dqr[d] += w * kc[d];
                    dkj[d] += w * qr[d];
                  }
                }
              }
            }
            convert_from_fp32(dQ.data(), at(dq, t, (q_head + i0) * D), t, nr * D);
          }
        convert_from_fp32(dK.data(), at(dk, t, kv_head * D), t, Tk * D);
        convert_from_fp32(dV.data(), at(dv, t, kv_head * D), t, Tk * D);
      }
  }
}

}  // namespace gpuledger
