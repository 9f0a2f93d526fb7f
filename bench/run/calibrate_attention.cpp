// Attention's measured throughput per kind (see calibrate_attention.h).
#include "bench/run/calibrate_attention.h"

#include <fmt/format.h>

#include <algorithm>

#include "bench/peak.h"
#include "kernels/flop_counts.h"

namespace gpuledger::bench {
namespace {

using perf::AttentionKind;

struct Tensors {
  Buffer q, k, v, out, dout, dq, dk, dv, lse;
};

Tensors tensors(Device& dev, const AttnShape& s, DType t) {
  const int64_t n = s.B * s.Hq * s.T * s.D, bytes = n * dtype_bytes(t);
  auto make = [&](const char* what) { return dev.alloc(bytes, Account::kWorkspace, what); };
  Tensors x{make("calibrate.q"),
            make("calibrate.k"),
            make("calibrate.v"),
            make("calibrate.out"),
            make("calibrate.dout"),
            make("calibrate.dq"),
            make("calibrate.dk"),
            make("calibrate.dv"),
            dev.alloc(s.B * s.Hq * s.T * 4, Account::kWorkspace, "calibrate.lse")};
  for (Buffer* b : {&x.q, &x.k, &x.v, &x.dout}) fill_values(dev, *b, t, n);
  return x;
}

// One timed forward and backward pair.
struct Pair {
  double flops = 0, seconds = 0;
};

Pair time_flash(Device& dev, const AttnShape& s, DType t, int warmup, int reps) {
  Tensors x = tensors(dev, s, t);
  const RngKey key{1234, 1};
  auto forward = [&] {
    dev.flash_attention_forward(x.out.data(), x.lse.as<float>(), x.q.data(), x.k.data(), x.v.data(), t, s, 0.0f, key);
  };
  const double fwd = time_median(dev, warmup, reps, forward);
  const double bwd = time_median(dev, warmup, reps, [&] {
    dev.flash_attention_backward(x.dq.data(), x.dk.data(), x.dv.data(), x.dout.data(), x.q.data(), x.k.data(),
                                 x.v.data(), x.out.data(), x.lse.as<float>(), t, s, 0.0f, key);
  });
  return {static_cast<double>(flash_forward_flops(s) + flash_backward_flops(s)), fwd + bwd};
}

// A batched GEMM over the heads (one query head per KV head: group 1).
GemmArgs head_gemm(const AttnShape& s, DType t, DType c_t, bool trans_a, bool trans_b, int64_t m, int64_t n,
                   int64_t k) {
  GemmArgs g;
  g.trans_a = trans_a;
  g.trans_b = trans_b;
  g.m = m;
  g.n = n;
  g.k = k;
  g.lda = trans_a ? m : k;
  g.ldb = trans_b ? k : n;
  g.ldc = n;
  g.stride_a = m * k;
  g.stride_b = k * n;
  g.stride_c = m * n;
  g.ab_type = t;
  g.c_type = c_t;
  g.batch = s.B * s.Hq;
  return g;
}

Pair time_materialized(Device& dev, const AttnShape& s, DType t, int warmup, int reps) {
  Tensors x = tensors(dev, s, t);
  const int64_t T = s.T, D = s.D, scores = s.B * s.Hq * T * T;
  Buffer f32 = dev.alloc(scores * 4, Account::kWorkspace, "calibrate.scores");
  Buffer probs = dev.alloc(scores * dtype_bytes(t), Account::kWorkspace, "calibrate.probs");
  Buffer ds16;
  if (t != DType::kFP32) ds16 = dev.alloc(scores * dtype_bytes(t), Account::kWorkspace, "calibrate.dS");
  const void* ds = t != DType::kFP32 ? ds16.data() : f32.data();
  // Forward: S = Q·Kᵀ (T×D · (T×D)ᵀ, fp32), ctx = P·V (T×T · T×D).
  GemmArgs qk = head_gemm(s, t, DType::kFP32, false, true, T, T, D);
  qk.a = x.q.data(), qk.b = x.k.data(), qk.c = f32.data();
  GemmArgs pv = head_gemm(s, t, t, false, false, T, D, T);
  pv.a = probs.data(), pv.b = x.v.data(), pv.c = x.out.data();
  // Backward: dP = dctx·Vᵀ (fp32), dV = Pᵀ·dctx, dQ = dS·K, dK = dSᵀ·Q.
  GemmArgs dp = head_gemm(s, t, DType::kFP32, false, true, T, T, D);
  dp.a = x.dout.data(), dp.b = x.v.data(), dp.c = f32.data();
  GemmArgs dv = head_gemm(s, t, t, true, false, T, D, T);
  dv.a = probs.data(), dv.b = x.dout.data(), dv.c = x.dv.data();
  GemmArgs dq = head_gemm(s, t, t, false, false, T, D, T);
  dq.a = ds, dq.b = x.k.data(), dq.c = x.dq.data();
  GemmArgs dk = head_gemm(s, t, t, true, false, T, D, T);
  dk.a = ds, dk.b = x.q.data(), dk.c = x.dk.data();
  const double fwd = time_median(dev, warmup, reps, [&] {
    dev.gemm(qk);
    dev.softmax_forward(probs.data(), f32.as<float>(), t, s);
    dev.gemm(pv);
  });
  const double bwd = time_median(dev, warmup, reps, [&] {
    dev.gemm(dp);
    dev.gemm(dv);
    dev.softmax_backward(f32.as<float>(), f32.as<float>(), probs.data(), t, s);
    if (t != DType::kFP32) dev.convert(ds16.data(), t, f32.data(), DType::kFP32, scores);
    dev.gemm(dq);
    dev.gemm(dk);
  });
  double flops = 0;
  for (const GemmArgs* g : {&qk, &pv, &dp, &dv, &dq, &dk}) flops += static_cast<double>(gemm_flops(*g));
  return {flops, fwd + bwd};
}

perf::AttentionFigures measure_kind(Device& dev, const AttentionCalibration& c, AttentionKind kind, double peak,
                                    std::ostream& progress) {
  std::vector<perf::ShapePoint> points;
  for (int64_t T : c.seqs)
    for (int64_t H : c.heads)
      for (int64_t D : c.head_dims) {
        AttnShape s;
        s.B = 1;
        s.Hq = s.Hkv = H;
        s.T = T;
        s.D = D;
        const Pair p = kind == AttentionKind::kFlash ? time_flash(dev, s, c.dtype, c.warmup, c.reps)
                                                     : time_materialized(dev, s, c.dtype, c.warmup, c.reps);
        const double rate = p.seconds > 0 ? p.flops / p.seconds : 0;
        points.push_back({T, H, D, rate});
        progress << fmt::format("calibrate: attention {} {} seq={} heads={} head_dim={}: {:.3g} GFLOP/s\n",
                                perf::attention_kind_name(kind), dtype_name(c.dtype), T, H, D, rate / 1e9);
      }
  perf::AttentionFigures f;
  f.table = perf::ShapeTable(points);
  const char* what = kind == AttentionKind::kFlash
                         ? "Device::flash_attention_forward then _backward (causal, no dropout), FLOPs "
                           "flash_forward_flops + flash_backward_flops"
                         : "the materialized core (Q·Kᵀ, softmax, P·V; then dctx·Vᵀ, Pᵀ·dctx, the softmax backward, "
                           "dQ and dK; one query head per KV head, no dropout), FLOPs its six GEMMs'";
  f.table_source = fmt::format(
      "measured by gpuledger calibrate: {} on the cpu backend in {}, one sample; each point the forward's and the "
      "backward's FLOPs over their two times (each the median of {} after {} warm-up)",
      what, dtype_name(c.dtype), c.reps, c.warmup);
  const double best = f.table.best_per_s();
  f.efficiency = {std::min(1.0, best / peak),
                  fmt::format("measured: the best point of the table over the {} peak", dtype_name(c.dtype))};
  return f;
}

}  // namespace

AttentionCalibration quick_attention_calibration() {
  AttentionCalibration c;
  c.seqs = {128, 256};
  c.heads = {8};
  c.head_dims = {32};
  c.reps = 3;
  return c;
}

std::map<AttentionKind, perf::AttentionFigures> calibrate_attention(Device& dev, const AttentionCalibration& c,
                                                                    double peak_flops_per_s, std::ostream& progress) {
  std::map<AttentionKind, perf::AttentionFigures> out;
  for (AttentionKind kind : {AttentionKind::kFlash, AttentionKind::kMaterialized})
    out[kind] = measure_kind(dev, c, kind, peak_flops_per_s, progress);
  return out;
}

}  // namespace gpuledger::bench
