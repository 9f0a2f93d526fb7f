// A naive, double-precision attention written for the tests only: the
// materialized definition (scores = QKᵀ·scale, causal / window mask, softmax,
// dropout on the probabilities, ·V) and its backward by the chain rule. The
// dropout multipliers come straight from the device.h rule (keep element e of
// the (B, Hq, T, T) probabilities iff philox_uniform(key, e) >= p). Shares no
// code with the kernels under test but philox.h (tested on its own against
// Random123's known answers).
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "kernels/device.h"
#include "kernels/philox.h"

namespace gpuledger::test {

struct AttnReference {
  std::vector<double> out;  // (B, Hq, T, D)
  std::vector<double> lse;  // (B, Hq, T): log Σ_visible exp(scale·s)
  std::vector<double> P;    // (B, Hq, T, T): softmax probabilities (0 where masked)
  std::vector<double> Z;    // (B, Hq, T, T): dropout multipliers, 1/(1 − p) or 0
};

struct AttnGrads {
  std::vector<double> dq, dk, dv;
};

inline bool visible(const AttnShape& s, int64_t i, int64_t j) { return j <= i && (!s.window || i - *s.window < j); }

// q (B, Hq, T, D), k, v (B, Hkv, T, D); query head h reads KV head h / (Hq / Hkv).
inline AttnReference attention_reference(const std::vector<float>& q, const std::vector<float>& k,
                                         const std::vector<float>& v, const AttnShape& s, double p, RngKey key) {
  const int64_t B = s.B, Hq = s.Hq, Hkv = s.Hkv, T = s.T, D = s.D, group = Hq / Hkv;
  const double scale = 1.0 / std::sqrt(static_cast<double>(D));
  AttnReference r;
  r.out.assign(B * Hq * T * D, 0.0);
  r.lse.assign(B * Hq * T, 0.0);
  r.P.assign(B * Hq * T * T, 0.0);
  r.Z.assign(B * Hq * T * T, 1.0);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < Hq; ++h) {
      const int64_t g = h / group;
      const float* qh = &q[(b * Hq + h) * T * D];
      const float* kh = &k[(b * Hkv + g) * T * D];
      const float* vh = &v[(b * Hkv + g) * T * D];
      for (int64_t i = 0; i < T; ++i) {
        std::vector<double> sc(T, 0.0);
        double mx = -INFINITY;
        for (int64_t j = 0; j < T; ++j) {
          if (!visible(s, i, j)) continue;
          double dot = 0;
          for (int64_t d = 0; d < D; ++d) dot += static_cast<double>(qh[i * D + d]) * kh[j * D + d];
          sc[j] = scale * dot;
          mx = std::max(mx, sc[j]);
        }
        double sum = 0;
        for (int64_t j = 0; j < T; ++j)
          if (visible(s, i, j)) sum += std::exp(sc[j] - mx);
        const int64_t row = ((b * Hq + h) * T + i) * T;
        r.lse[(b * Hq + h) * T + i] = mx + std::log(sum);
        for (int64_t j = 0; j < T; ++j) {
          if (p > 0) {
            const bool keep = philox_uniform(key.seed, key.stream, static_cast<uint64_t>(row + j)) >= p;
            r.Z[row + j] = keep ? 1.0 / (1.0 - p) : 0.0;
          }
          if (!visible(s, i, j)) continue;
          r.P[row + j] = std::exp(sc[j] - mx) / sum;
          const double w = r.P[row + j] * r.Z[row + j];
          for (int64_t d = 0; d < D; ++d) r.out[((b * Hq + h) * T + i) * D + d] += w * vh[j * D + d];
        }
      }
    }
  return r;
}

// Backward of the materialized chain for upstream gradient dout (B, Hq, T, D):
// dV = (P∘Z)ᵀ·dO; dP = (dO·Vᵀ)∘Z; dS = P∘(dP − Σ_j P∘dP)·scale; dQ = dS·K; dK = dSᵀ·Q.
inline AttnGrads attention_reference_backward(const std::vector<float>& dout, const std::vector<float>& q,
                                              const std::vector<float>& k, const std::vector<float>& v,
                                              const AttnShape& s, const AttnReference& fwd) {
  const int64_t B = s.B, Hq = s.Hq, Hkv = s.Hkv, T = s.T, D = s.D, group = Hq / Hkv;
  const double scale = 1.0 / std::sqrt(static_cast<double>(D));
  AttnGrads g;
  g.dq.assign(B * Hq * T * D, 0.0);
  g.dk.assign(B * Hkv * T * D, 0.0);
  g.dv.assign(B * Hkv * T * D, 0.0);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < Hq; ++h) {
      const int64_t kvh = (b * Hkv + h / group) * T * D, qh = (b * Hq + h) * T * D;
      for (int64_t i = 0; i < T; ++i) {
        const int64_t row = ((b * Hq + h) * T + i) * T;
        std::vector<double> dP(T, 0.0);
        double dot = 0;
        for (int64_t j = 0; j < T; ++j) {
          if (!visible(s, i, j)) continue;
          double dpd = 0;
          for (int64_t d = 0; d < D; ++d) dpd += static_cast<double>(dout[qh + i * D + d]) * v[kvh + j * D + d];
          dP[j] = dpd * fwd.Z[row + j];
          dot += dP[j] * fwd.P[row + j];
          const double w = fwd.P[row + j] * fwd.Z[row + j];
          for (int64_t d = 0; d < D; ++d) g.dv[kvh + j * D + d] += w * dout[qh + i * D + d];
        }
        for (int64_t j = 0; j < T; ++j) {
          if (!visible(s, i, j)) continue;
          const double ds = fwd.P[row + j] * (dP[j] - dot) * scale;
          for (int64_t d = 0; d < D; ++d) {
            g.dq[qh + i * D + d] += ds * k[kvh + j * D + d];
            g.dk[kvh + j * D + d] += ds * q[qh + i * D + d];
          }
        }
      }
    }
  return g;
}

}  // namespace gpuledger::test
