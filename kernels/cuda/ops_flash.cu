// CUDA flash attention (Dao et al. 2022, "FlashAttention": tiled online
// softmax, Alg. 1; the backward recomputes the tiles, Alg. 4, with
// D_i = rowsum(dO ⊙ O) precomputed as FlashAttention-2, Dao 2023, does).
// The same function as the CPU reference (kernels/cpu/ops_flash.cpp): QKᵀ·scale
// under the causal / window mask, softmax, dropout on the probabilities drawn
// at the flat (B, Hq, seq, seq) index of the tokens' positions (attn_tiles.h,
// prob_index), ·V; saves out
// and lse_i = m_i + log l_i (fp32, natural log of Σ_j exp(scale·s_ij)).
//
// SIMT kernels, 16 × 16 threads, fp32 tiles in shared memory
// (launch_config.h, FlashTiles), a register micro-tile per thread:
//   forward       block = (b, h, query tile): S = QKᵀ per key tile, online
//                 softmax per row (one warp per row), O in registers.
//   backward dKdV block = (b, KV head, key tile): loops over the query heads
//                 of its GQA group and the query tiles that see its keys;
//                 dV += (P∘Z)ᵀ dO, dK += dSᵀ Q in registers.
//   backward dQ   block = (b, h, query tile): loops over key tiles; dQ += dS K.
// Each gradient has a single writer: no atomics, deterministic results. The
// price is that both backward kernels recompute S = QKᵀ and dP = dO·Vᵀ (7 tile
// products executed where FlashAttention-2, accumulating dQ atomically,
// executes 5). FLOPs are counted by the contract (kernels/flop_counts.h: the
// full T×T products, 2 forward + 5 backward) like every backend; key tiles
// that are entirely masked are skipped, as on the CPU.
// One block (kernels/attn_block.h): T queries against Tk keys, each row
// seeing the contiguous run of keys attn::visible_keys gives; with
// blk.accumulate the forward starts from the saved state of earlier blocks
// (m = lse, l = 1, O = out: Alg. 1 continued) and the backward adds to dq,
// dk, dv. The dKdV kernel visits the query tiles whose rows see its keys.
// Heavy blocks first: the forward and dQ kernels number query tiles from the
// last (causal rows near the end see the most keys), dKdV key tiles from the first.
#include <stdexcept>
#include <string>
#include <type_traits>

#include "kernels/cuda/attn_tiles.h"
#include "kernels/cuda/launch_config.h"
#include "kernels/cuda/simt_device.cuh"
#include "kernels/philox.h"

namespace gpuledger {
inline namespace GPL_SIMT_NAMESPACE {
namespace {

using namespace simt;
using cuda_launch::flash_tiles_for_max_b;
using cuda_launch::FlashTiles;

constexpr int kTX = cuda_launch::kFlashThreadsX, kTY = cuda_launch::kFlashThreadsY;
constexpr int kThreads = kTX * kTY;

// Everything a flash kernel needs to know about the problem: T queries
// against Tk = blk.Tk keys (kernels/attn_block.h).
struct FlashArgs {
  int64_t B, Hq, Hkv, T, Tk, D, window;
  float scale, p, keep_scale;  // keep_scale: 1/(1 − p), or 0 when p == 1
  uint64_t seed, stream;
  AttnBlock blk;
};

// The keys query row i sees: [begin, end) of the key block.
GPL_DEVICE attn::KeyRun row_keys(const FlashArgs& a, int64_t i) { return attn::visible_keys(a.blk, a.Tk, a.window, i); }
GPL_DEVICE bool visible(const FlashArgs& a, int64_t i, int64_t j) {
  const attn::KeyRun r = row_keys(a, i);
  return j >= r.begin && j < r.end;
}

// Dropout multiplier of probability (b, h, i, j): 1/(1 − p) kept, 0 dropped,
// drawn at the tokens' positions in the whole sequence.
GPL_DEVICE float dropout_z(const FlashArgs& a, int64_t b, int64_t h, int64_t i, int64_t j) {
  const uint64_t idx = attn::prob_index(b, h, a.blk.q_pos.position(i), a.blk.k_pos.position(j), a.Hq, a.blk.seq);
  const float u = philox_uniform(a.seed, a.stream, idx);
  return u >= a.p ? a.keep_scale : 0.0f;
}

// rows (n of them, else zeros up to `rows`) of a (…, D) tensor starting at
// element `first_row`·D -> fp32 shared memory with row stride ld.
template <class E>
GPL_DEVICE void load_tile(float* dst, int64_t ld, const E* src, int64_t first_row, int64_t n, int64_t rows, int64_t D,
                          int tid) {
  for (int64_t e = tid; e < rows * D; e += kThreads) {
    const int64_t r = e / D, d = e % D;
    dst[r * ld + d] = r < n ? to_float(src[(first_row + r) * D + d]) : 0.0f;
  }
}

// ---- forward ----

// Online softmax (Alg. 1) over one key tile, one warp per row: the scores Ss
// (BR, BC + 1) become P∘Z = exp(S − m_new), dropped where Z = 0; the running
// max m_s and sum l_s (of the undropped probabilities) are updated and each
// row's rescale factor exp(m_old − m_new) goes to c_s for the output.
template <int BR, int BC>
GPL_DEVICE void online_softmax_tile(float* Ss, float* m_s, float* l_s, float* c_s, const FlashArgs& a, int64_t b,
                                    int64_t h, int64_t i0, int64_t j0, int warp, int lane) {
  for (int r = warp; r < BR; r += kThreads / 32) {
    float* sr = Ss + r * (BC + 1);
    float mt = -INFINITY;
    for (int c = lane; c < BC; c += 32) mt = fmaxf(mt, sr[c]);
    mt = warp_reduce(mt, MaxOp{});
    if (mt == -INFINITY) {  // no key of this tile is visible to row r
      for (int c = lane; c < BC; c += 32) sr[c] = 0.0f;
      if (lane == 0) c_s[r] = 1.0f;
      continue;
    }
    const float m_old = m_s[r], m_new = fmaxf(m_old, mt);
    float sum = 0.0f;
    for (int c = lane; c < BC; c += 32) {
      float pc = sr[c] == -INFINITY ? 0.0f : expf(sr[c] - m_new);
      sum += pc;  // the normalizer sums the undropped probabilities
      if (a.p > 0.0f && pc != 0.0f) pc *= dropout_z(a, b, h, i0 + r, j0 + c);
      sr[c] = pc;
    }
    sum = warp_reduce(sum, SumOp{});
    if (lane == 0) {
      const float corr = expf(m_old - m_new);  // exp(−inf) = 0 on the row's first tile
      c_s[r] = corr;
      l_s[r] = l_s[r] * corr + sum;
      m_s[r] = m_new;
    }
  }
}

template <class E, int MAXB>
__global__ void GPL_LAUNCH_BOUNDS(kThreads)
    flash_forward_kernel(E* out, float* lse, const E* q, const E* k, const E* v, FlashArgs a, int64_t q_tiles) {
  constexpr FlashTiles kTiles = flash_tiles_for_max_b(MAXB);
  constexpr int BR = kTiles.fwd_br, BC = kTiles.fwd_bc, RA = BR / 16, CB = BC / 16;
  const int64_t D = a.D, ld = D + 1;
  GPL_DYNAMIC_SMEM(float, smem);
  float* Qs = smem;                 // (BR, ld)
  float* Ks = Qs + BR * ld;         // (BC, ld)
  float* Vs = Ks + BC * ld;         // (BC, D)
  float* Ss = Vs + BC * D;          // (BR, BC + 1): scores, then P∘Z
  float* m_s = Ss + BR * (BC + 1);  // running max
  float* l_s = m_s + BR;            // running Σ exp (undropped)
  float* c_s = l_s + BR;            // this tile's rescale factor

  const int tx = static_cast<int>(threadIdx.x), ty = static_cast<int>(threadIdx.y);
  const int tid = ty * kTX + tx, warp = tid / 32, lane = tid % 32;
  const int64_t BH = a.B * a.Hq;
  const int64_t qt = q_tiles - 1 - static_cast<int64_t>(blockIdx.x) / BH;
  const int64_t bh = static_cast<int64_t>(blockIdx.x) % BH, b = bh / a.Hq, h = bh % a.Hq;
  const int64_t hk = h / (a.Hq / a.Hkv);  // GQA: query head h reads KV head h / (Hq / Hkv)
  const int64_t q_head = bh * a.T, kv_head = (b * a.Hkv + hk) * a.Tk;
  const int64_t i0 = qt * BR, nr = BR < a.T - i0 ? BR : a.T - i0;

  load_tile(Qs, ld, q, q_head + i0, nr, BR, D, tid);
  // The earlier blocks' state when accumulating: m = lse, l = 1 (0 for a row
  // that saw no key, lse −inf), O = out; else the start of Alg. 1.
  for (int r = tid; r < BR; r += kThreads) {
    const float m0 = a.blk.accumulate && r < nr ? lse[q_head + i0 + r] : -INFINITY;
    m_s[r] = m0;
    l_s[r] = m0 == -INFINITY ? 0.0f : 1.0f;
  }
  __syncthreads();
  float acc[RA][MAXB];
  for (int ra = 0; ra < RA; ++ra)
    for (int cb = 0; cb < MAXB; ++cb) {
      const int r = ty + 16 * ra;
      const int64_t d = tx + 16 * cb;
      const bool held = a.blk.accumulate && r < nr && d < D && l_s[r] > 0.0f;
      acc[ra][cb] = held ? to_float(out[(q_head + i0 + r) * D + d]) : 0.0f;
    }

  // Key tiles from the one holding the first row's first key to the last row's last.
  const int64_t j_end = row_keys(a, i0 + nr - 1).end;
  for (int64_t j0 = row_keys(a, i0).begin / BC * BC; j0 < j_end; j0 += BC) {
    const int64_t nc = BC < a.Tk - j0 ? BC : a.Tk - j0;
    __syncthreads();  // the previous tile's readers are done
    load_tile(Ks, ld, k, kv_head + j0, nc, BC, D, tid);
    load_tile(Vs, D, v, kv_head + j0, nc, BC, D, tid);
    __syncthreads();

    // S = Q·Kᵀ on this thread's micro-tile, scaled, masked to −inf.
    float s[RA][CB];
    for (int ra = 0; ra < RA; ++ra)
      for (int cb = 0; cb < CB; ++cb) s[ra][cb] = 0.0f;
    for (int64_t d = 0; d < D; ++d) {
      float qa[RA], kb[CB];
      for (int ra = 0; ra < RA; ++ra) qa[ra] = Qs[(ty + 16 * ra) * ld + d];
      for (int cb = 0; cb < CB; ++cb) kb[cb] = Ks[(tx + 16 * cb) * ld + d];
      for (int ra = 0; ra < RA; ++ra)
        for (int cb = 0; cb < CB; ++cb) s[ra][cb] += qa[ra] * kb[cb];
    }
    for (int ra = 0; ra < RA; ++ra)
      for (int cb = 0; cb < CB; ++cb) {
        const int r = ty + 16 * ra, c = tx + 16 * cb;
        const bool vis = r < nr && c < nc && visible(a, i0 + r, j0 + c);
        Ss[r * (BC + 1) + c] = vis ? s[ra][cb] * a.scale : -INFINITY;
      }
    __syncthreads();

    online_softmax_tile<BR, BC>(Ss, m_s, l_s, c_s, a, b, h, i0, j0, warp, lane);
    __syncthreads();

    // O = O·corr + (P∘Z)·V on this thread's rows and head-dim columns.
    for (int ra = 0; ra < RA; ++ra) {
      const float corr = c_s[ty + 16 * ra];
      for (int cb = 0; cb < MAXB; ++cb) acc[ra][cb] *= corr;
    }
    for (int c = 0; c < BC; ++c) {
      float pa[RA];
      for (int ra = 0; ra < RA; ++ra) pa[ra] = Ss[(ty + 16 * ra) * (BC + 1) + c];
      for (int cb = 0; cb < MAXB; ++cb) {
        const int64_t d = tx + 16 * cb;
        const float vv = d < D ? Vs[c * D + d] : 0.0f;
        for (int ra = 0; ra < RA; ++ra) acc[ra][cb] += pa[ra] * vv;
      }
    }
  }
  __syncthreads();

  for (int ra = 0; ra < RA; ++ra) {
    const int r = ty + 16 * ra;
    if (r >= nr) continue;
    const float inv = l_s[r] > 0.0f ? 1.0f / l_s[r] : 0.0f;  // a row that saw no key: out 0, lse −inf
    for (int cb = 0; cb < MAXB; ++cb) {
      const int64_t d = tx + 16 * cb;
      if (d < D) out[(q_head + i0 + r) * D + d] = from_float<E>(acc[ra][cb] * inv);
    }
  }
  __syncthreads();  // every thread has read the incoming lse (accumulate)
  for (int r = tid; r < nr; r += kThreads) lse[q_head + i0 + r] = l_s[r] > 0.0f ? m_s[r] + logf(l_s[r]) : -INFINITY;
}

// ---- backward ----

// D_i = Σ_d dO_id · O_id, one warp per row of (B·Hq·T, D).
template <class E>
__global__ void flash_rowdot_kernel(float* Di, const E* dout, const E* out, int64_t rows, int64_t D) {
  const int64_t warps = static_cast<int64_t>(blockDim.x) / 32;
  const int64_t r = static_cast<int64_t>(blockIdx.x) * warps + threadIdx.x / 32;
  const int lane = static_cast<int>(threadIdx.x % 32);
  float s = 0.0f;
  if (r < rows)
    for (int64_t d = lane; d < D; d += 32) s += to_float(dout[r * D + d]) * to_float(out[r * D + d]);
  s = warp_reduce(s, SumOp{});
  if (r < rows && lane == 0) Di[r] = s;
}

// S = Q·Kᵀ and dP = dO·Vᵀ on a thread's (RA × CB) micro-tile: rows ty + 16ra
// of Qs/dOs, rows tx + 16cb of Ks/Vs (all with row stride ld).
template <int RA, int CB>
GPL_DEVICE void score_tiles(float (&s)[RA][CB], float (&dp)[RA][CB], const float* Qs, const float* dOs, const float* Ks,
                            const float* Vs, int64_t ld, int64_t D, int tx, int ty) {
  for (int ra = 0; ra < RA; ++ra)
    for (int cb = 0; cb < CB; ++cb) s[ra][cb] = dp[ra][cb] = 0.0f;
  for (int64_t d = 0; d < D; ++d) {
    float qa[RA], oa[RA], kb[CB], vb[CB];
    for (int ra = 0; ra < RA; ++ra) {
      qa[ra] = Qs[(ty + 16 * ra) * ld + d];
      oa[ra] = dOs[(ty + 16 * ra) * ld + d];
    }
    for (int cb = 0; cb < CB; ++cb) {
      kb[cb] = Ks[(tx + 16 * cb) * ld + d];
      vb[cb] = Vs[(tx + 16 * cb) * ld + d];
    }
    for (int ra = 0; ra < RA; ++ra)
      for (int cb = 0; cb < CB; ++cb) {
        s[ra][cb] += qa[ra] * kb[cb];
        dp[ra][cb] += oa[ra] * vb[cb];
      }
  }
}

// With P = exp(scale·S − lse), Z the dropout multipliers, O = (P∘Z)·V:
//   dV = (P∘Z)ᵀ·dO, dS = P∘(dP∘Z − D_i)·scale, dK = dSᵀ·Q
// (Dao et al. 2022, App. B.2). Block = (b, KV head g, key tile).
template <class E, int MAXB>
__global__ void GPL_LAUNCH_BOUNDS(kThreads)
    flash_backward_dkdv_kernel(E* dk, E* dv, const E* q, const E* k, const E* v, const E* dout, const float* lse,
                               const float* Di, FlashArgs a) {
  constexpr FlashTiles kTiles = flash_tiles_for_max_b(MAXB);
  constexpr int BK = kTiles.kv_bk, BQ = kTiles.kv_bq, QA = BQ / 16, KB = BK / 16, KA = BK / 16;
  const int64_t D = a.D, ld = D + 1;
  GPL_DYNAMIC_SMEM(float, smem);
  float* Ks = smem;                 // (BK, ld)
  float* Vs = Ks + BK * ld;         // (BK, ld)
  float* Qs = Vs + BK * ld;         // (BQ, ld)
  float* dOs = Qs + BQ * ld;        // (BQ, ld)
  float* Ps = dOs + BQ * ld;        // (BQ, BK + 1): P∘Z
  float* dSs = Ps + BQ * (BK + 1);  // (BQ, BK + 1)
  float* Ls = dSs + BQ * (BK + 1);  // (BQ)
  float* Ds = Ls + BQ;              // (BQ)

  const int tx = static_cast<int>(threadIdx.x), ty = static_cast<int>(threadIdx.y);
  const int tid = ty * kTX + tx;
  const int64_t BG = a.B * a.Hkv;
  const int64_t kt = static_cast<int64_t>(blockIdx.x) / BG;
  const int64_t bg = static_cast<int64_t>(blockIdx.x) % BG, b = bg / a.Hkv, g = bg % a.Hkv;
  const int64_t group = a.Hq / a.Hkv, kv_head = bg * a.Tk;
  const int64_t k0 = kt * BK, nk = BK < a.Tk - k0 ? BK : a.Tk - k0;

  load_tile(Ks, ld, k, kv_head + k0, nk, BK, D, tid);
  load_tile(Vs, ld, v, kv_head + k0, nk, BK, D, tid);
  float dk_acc[KA][MAXB], dv_acc[KA][MAXB];
  for (int ka = 0; ka < KA; ++ka)
    for (int cb = 0; cb < MAXB; ++cb) {
      const int c = ty + 16 * ka;
      const int64_t d = tx + 16 * cb;
      const bool held = a.blk.accumulate && c < nk && d < D;
      dk_acc[ka][cb] = held ? to_float(dk[(kv_head + k0 + c) * D + d]) : 0.0f;
      dv_acc[ka][cb] = held ? to_float(dv[(kv_head + k0 + c) * D + d]) : 0.0f;
    }

  const int64_t q_tiles = (a.T + BQ - 1) / BQ;
  for (int64_t h = g * group; h < (g + 1) * group; ++h)
    for (int64_t qt = 0; qt < q_tiles; ++qt) {
      const int64_t q_head = (b * a.Hq + h) * a.T;
      const int64_t i0 = qt * BQ, nq = BQ < a.T - i0 ? BQ : a.T - i0;
      // Rows' key runs grow with the row: the tile sees none of [k0, k0 + nk)
      // when its last row's run ends before k0 or its first row's starts after.
      if (row_keys(a, i0 + nq - 1).end <= k0 || row_keys(a, i0).begin >= k0 + nk) continue;
      __syncthreads();  // K, V loaded; the previous tile's readers are done
      load_tile(Qs, ld, q, q_head + i0, nq, BQ, D, tid);
      load_tile(dOs, ld, dout, q_head + i0, nq, BQ, D, tid);
      for (int r = tid; r < BQ; r += kThreads) {
        Ls[r] = r < nq ? lse[q_head + i0 + r] : 0.0f;
        Ds[r] = r < nq ? Di[q_head + i0 + r] : 0.0f;
      }
      __syncthreads();

      float s[QA][KB], dp[QA][KB];
      score_tiles<QA, KB>(s, dp, Qs, dOs, Ks, Vs, ld, D, tx, ty);
      for (int qa = 0; qa < QA; ++qa)
        for (int kb = 0; kb < KB; ++kb) {
          const int r = ty + 16 * qa, c = tx + 16 * kb;
          const int64_t i = i0 + r, j = k0 + c;
          float pz = 0.0f, ds = 0.0f;
          if (r < nq && c < nk && visible(a, i, j)) {
            const float pc = expf(a.scale * s[qa][kb] - Ls[r]);
            const float z = a.p > 0.0f ? dropout_z(a, b, h, i, j) : 1.0f;
            pz = pc * z;
            ds = pc * (dp[qa][kb] * z - Ds[r]) * a.scale;
          }
          Ps[r * (BK + 1) + c] = pz;
          dSs[r * (BK + 1) + c] = ds;
        }
      __syncthreads();

      // dV[c] += Σ_r (P∘Z)[r, c]·dO[r], dK[c] += Σ_r dS[r, c]·Q[r], c = ty + 16ka.
      for (int r = 0; r < BQ; ++r) {
        float pa[KA], sa[KA];
        for (int ka = 0; ka < KA; ++ka) {
          pa[ka] = Ps[r * (BK + 1) + ty + 16 * ka];
          sa[ka] = dSs[r * (BK + 1) + ty + 16 * ka];
        }
        for (int cb = 0; cb < MAXB; ++cb) {
          const int64_t d = tx + 16 * cb;
          if (d >= D) break;
          const float o = dOs[r * ld + d], qv = Qs[r * ld + d];
          for (int ka = 0; ka < KA; ++ka) {
            dv_acc[ka][cb] += pa[ka] * o;
            dk_acc[ka][cb] += sa[ka] * qv;
          }
        }
      }
    }

  for (int ka = 0; ka < KA; ++ka) {
    const int c = ty + 16 * ka;
    if (c >= nk) continue;
    for (int cb = 0; cb < MAXB; ++cb) {
      const int64_t d = tx + 16 * cb;
      if (d >= D) break;
      dk[(kv_head + k0 + c) * D + d] = from_float<E>(dk_acc[ka][cb]);
      dv[(kv_head + k0 + c) * D + d] = from_float<E>(dv_acc[ka][cb]);
    }
  }
}

// dQ = dS·K. Block = (b, h, query tile).
template <class E, int MAXB>
__global__ void GPL_LAUNCH_BOUNDS(kThreads)
    flash_backward_dq_kernel(E* dq, const E* q, const E* k, const E* v, const E* dout, const float* lse,
                             const float* Di, FlashArgs a, int64_t q_tiles) {
  constexpr FlashTiles kTiles = flash_tiles_for_max_b(MAXB);
  constexpr int BQ = kTiles.q_bq, BK = kTiles.q_bk, QA = BQ / 16, KB = BK / 16;
  const int64_t D = a.D, ld = D + 1;
  GPL_DYNAMIC_SMEM(float, smem);
  float* Qs = smem;                 // (BQ, ld)
  float* dOs = Qs + BQ * ld;        // (BQ, ld)
  float* Ks = dOs + BQ * ld;        // (BK, ld)
  float* Vs = Ks + BK * ld;         // (BK, ld)
  float* dSs = Vs + BK * ld;        // (BQ, BK + 1)
  float* Ls = dSs + BQ * (BK + 1);  // (BQ)
  float* Ds = Ls + BQ;              // (BQ)

  const int tx = static_cast<int>(threadIdx.x), ty = static_cast<int>(threadIdx.y);
  const int tid = ty * kTX + tx;
  const int64_t BH = a.B * a.Hq;
  const int64_t qt = q_tiles - 1 - static_cast<int64_t>(blockIdx.x) / BH;
  const int64_t bh = static_cast<int64_t>(blockIdx.x) % BH, b = bh / a.Hq, h = bh % a.Hq;
  const int64_t hk = h / (a.Hq / a.Hkv);
  const int64_t q_head = bh * a.T, kv_head = (b * a.Hkv + hk) * a.Tk;
  const int64_t i0 = qt * BQ, nq = BQ < a.T - i0 ? BQ : a.T - i0;

  load_tile(Qs, ld, q, q_head + i0, nq, BQ, D, tid);
  load_tile(dOs, ld, dout, q_head + i0, nq, BQ, D, tid);
  for (int r = tid; r < BQ; r += kThreads) {
    Ls[r] = r < nq ? lse[q_head + i0 + r] : 0.0f;
    Ds[r] = r < nq ? Di[q_head + i0 + r] : 0.0f;
  }
  float dq_acc[QA][MAXB];
  for (int qa = 0; qa < QA; ++qa)
    for (int cb = 0; cb < MAXB; ++cb) {
      const int r = ty + 16 * qa;
      const int64_t d = tx + 16 * cb;
      dq_acc[qa][cb] = a.blk.accumulate && r < nq && d < D ? to_float(dq[(q_head + i0 + r) * D + d]) : 0.0f;
    }

  const int64_t j_end = row_keys(a, i0 + nq - 1).end;
  for (int64_t j0 = row_keys(a, i0).begin / BK * BK; j0 < j_end; j0 += BK) {
    const int64_t nk = BK < a.Tk - j0 ? BK : a.Tk - j0;
    __syncthreads();  // Q, dO loaded; the previous tile's readers are done
    load_tile(Ks, ld, k, kv_head + j0, nk, BK, D, tid);
    load_tile(Vs, ld, v, kv_head + j0, nk, BK, D, tid);
    __syncthreads();

    float s[QA][KB], dp[QA][KB];
    score_tiles<QA, KB>(s, dp, Qs, dOs, Ks, Vs, ld, D, tx, ty);
    for (int qa = 0; qa < QA; ++qa)
      for (int kb = 0; kb < KB; ++kb) {
        const int r = ty + 16 * qa, c = tx + 16 * kb;
        const int64_t i = i0 + r, j = j0 + c;
        float ds = 0.0f;
        if (r < nq && c < nk && visible(a, i, j)) {
          const float pc = expf(a.scale * s[qa][kb] - Ls[r]);
          const float z = a.p > 0.0f ? dropout_z(a, b, h, i, j) : 1.0f;
          ds = pc * (dp[qa][kb] * z - Ds[r]) * a.scale;
        }
        dSs[r * (BK + 1) + c] = ds;
      }
    __syncthreads();

    for (int c = 0; c < BK; ++c) {
      float sa[QA];
      for (int qa = 0; qa < QA; ++qa) sa[qa] = dSs[(ty + 16 * qa) * (BK + 1) + c];
      for (int cb = 0; cb < MAXB; ++cb) {
        const int64_t d = tx + 16 * cb;
        if (d >= D) break;
        const float kv = Ks[c * ld + d];
        for (int qa = 0; qa < QA; ++qa) dq_acc[qa][cb] += sa[qa] * kv;
      }
    }
  }

  for (int qa = 0; qa < QA; ++qa) {
    const int r = ty + 16 * qa;
    if (r >= nq) continue;
    for (int cb = 0; cb < MAXB; ++cb) {
      const int64_t d = tx + 16 * cb;
      if (d >= D) break;
      dq[(q_head + i0 + r) * D + d] = from_float<E>(dq_acc[qa][cb]);
    }
  }
}

// ---- host side ----

FlashTiles tiles_or_throw(const AttnShape& s, const char* op) {
  const auto t = cuda_launch::flash_tiles(s.D);
  if (!t)
    throw std::invalid_argument(std::string(op) + ": head dim " + std::to_string(s.D) +
                                " is not supported by the CUDA kernels (at most 256)");
  return *t;
}

void check_smem(int64_t need_bytes, int64_t limit_bytes, const AttnShape& s, const char* op) {
  if (need_bytes > limit_bytes)
    throw std::invalid_argument(std::string(op) + ": head dim " + std::to_string(s.D) + " needs " +
                                std::to_string(need_bytes) + " bytes of shared memory per block; this GPU allows " +
                                std::to_string(limit_bytes));
}

FlashArgs make_args(const AttnShape& s, float p, RngKey key, const AttnBlock& blk) {
  FlashArgs a{};
  a.B = s.B;
  a.Hq = s.Hq;
  a.Hkv = s.Hkv;
  a.T = s.T;
  a.Tk = blk.Tk;
  a.D = s.D;
  a.window = s.window ? *s.window : 0;
  a.scale = s.scale();
  a.p = p;
  a.keep_scale = p < 1.0f ? 1.0f / (1.0f - p) : 0.0f;
  a.seed = key.seed;
  a.stream = key.stream;
  a.blk = blk;
  return a;
}

// Calls f(std::integral_constant<int, max_b>{}) for the instantiated max_b values.
template <class F>
void with_max_b(int max_b, F&& f) {
  switch (max_b) {
    case 4: f(std::integral_constant<int, 4>{}); return;
    case 8: f(std::integral_constant<int, 8>{}); return;
    case 16: f(std::integral_constant<int, 16>{}); return;
  }
  throw std::logic_error("flash attention: no kernel for max_b " + std::to_string(max_b));
}

}  // namespace

void SimtDevice::flash_attention_forward_impl(void* out, float* lse, const void* q, const void* k, const void* v,
                                              DType t, const AttnShape& s, float p, RngKey key, const AttnBlock& blk) {
  const char* op = "flash_attention_forward";
  const FlashTiles tiles = tiles_or_throw(s, op);
  const int64_t smem = cuda_launch::flash_fwd_smem_bytes(tiles, s.D);
  check_smem(smem, max_smem_per_block_bytes_, s, op);
  const FlashArgs a = make_args(s, p, key, blk);
  const int64_t q_tiles = cuda_launch::ceil_div(s.T, tiles.fwd_br);
  dispatch(t, [&](auto tag) {
    using E = decltype(tag);
    with_max_b(tiles.max_b, [&](auto mb) {
      launch_kernel(flash_forward_kernel<E, decltype(mb)::value>, grid1d(s.B * s.Hq * q_tiles), dim3(kTX, kTY),
                    static_cast<size_t>(smem), stream(), static_cast<E*>(out), lse, static_cast<const E*>(q),
                    static_cast<const E*>(k), static_cast<const E*>(v), a, q_tiles);
    });
  });
}

void SimtDevice::flash_attention_backward_impl(void* dq, void* dk, void* dv, const void* dout, const void* q,
                                               const void* k, const void* v, const void* out, const float* lse, DType t,
                                               const AttnShape& s, float p, RngKey key, const AttnBlock& blk) {
  const char* op = "flash_attention_backward";
  const FlashTiles tiles = tiles_or_throw(s, op);
  const int64_t smem_kv = cuda_launch::flash_bwd_kv_smem_bytes(tiles, s.D);
  const int64_t smem_q = cuda_launch::flash_bwd_q_smem_bytes(tiles, s.D);
  check_smem(smem_kv > smem_q ? smem_kv : smem_q, max_smem_per_block_bytes_, s, op);
  const FlashArgs a = make_args(s, p, key, blk);
  const int64_t rows = s.B * s.Hq * s.T;
  Buffer di = alloc(rows * 4, Account::kWorkspace, "flash_attention_backward.D_i");
  const int64_t k_tiles = cuda_launch::ceil_div(blk.Tk, tiles.kv_bk);
  const int64_t q_tiles = cuda_launch::ceil_div(s.T, tiles.q_bq);
  dispatch(t, [&](auto tag) {
    using E = decltype(tag);
    launch_kernel(flash_rowdot_kernel<E>, grid1d(cuda_launch::ceil_div(rows, 8)), dim3(256), 0, stream(),
                  di.as<float>(), static_cast<const E*>(dout), static_cast<const E*>(out), rows, s.D);
    with_max_b(tiles.max_b, [&](auto mb) {
      constexpr int kMaxB = decltype(mb)::value;
      launch_kernel(flash_backward_dkdv_kernel<E, kMaxB>, grid1d(s.B * s.Hkv * k_tiles), dim3(kTX, kTY),
                    static_cast<size_t>(smem_kv), stream(), static_cast<E*>(dk), static_cast<E*>(dv),
                    static_cast<const E*>(q), static_cast<const E*>(k), static_cast<const E*>(v),
                    static_cast<const E*>(dout), lse, static_cast<const float*>(di.as<float>()), a);
      launch_kernel(flash_backward_dq_kernel<E, kMaxB>, grid1d(s.B * s.Hq * q_tiles), dim3(kTX, kTY),
                    static_cast<size_t>(smem_q), stream(), static_cast<E*>(dq), static_cast<const E*>(q),
                    static_cast<const E*>(k), static_cast<const E*>(v), static_cast<const E*>(dout), lse,
                    static_cast<const float*>(di.as<float>()), a, q_tiles);
    });
  });
}

}  // namespace GPL_SIMT_NAMESPACE
}  // namespace gpuledger
