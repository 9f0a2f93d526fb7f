// Serving capacity (see serving_plan.h). The formulas and their sources:
//
//   Little's law (Little 1961, "A proof for the queuing formula L = λW"): in a
//   stable system the mean number of requests in it is L = λ · W, with λ the
//   arrival rate and W the mean time a request spends in it. Here W = the
//   prefill of its prompt + n_out decode steps, W = prefill + n_out · TPOT.
//
//   The decode roofline (Williams, Waterman, Patterson 2009, "Roofline"): a
//   step takes at least max(bytes moved / bandwidth, FLOPs / peak). One decode
//   step reads every weight once and the KV of every sequence in the batch
//   (analytic/kv_cache.h decode_roofline); it does 2·P FLOPs per sequence.
//   With achieved fractions (MBU of the bandwidth, MFU of the peak) and the
//   batch equal to the concurrency L (every request in the system decodes):
//     TPOT(L) = max(a + b·L, c·L),  a = (weights/t) / (bw·mbu),
//     b = kv(prompt + output/2)/t / (bw·mbu)   (the mean context over a decode),
//     c = 2·P / (t · peak · mfu).
//   Substituting into L = λ(prefill + n_out · TPOT(L)) gives, per branch,
//     L_mem = λ(prefill + n_out·a) / (1 − λ·n_out·b),  L_flop = λ·prefill / (1 − λ·n_out·c),
//   and L = max(L_mem, L_flop): the right side is the max of two lines of slope
//   below one, so its fixed point is the larger of theirs. A slope >= 1 means
//   the decode cannot keep up at any batch: the rate must be split (replicas)
//   or the bytes (tensor parallelism).
//
//   vLLM's gpu_memory_utilization (vllm/config/cache.py, CacheConfig): "the
//   fraction of GPU memory to be used for the model executor" — weights,
//   activation peak and KV cache together; the CUDA context lies outside it
//   (analytic/kv_cache.h vllm_kv_log), in the remaining 1 − utilization.
//
// Prefill is counted once per request at the compute roof and not as time it
// takes from the decode batch: a plan near the compute roof is optimistic, and
// docs/serving-plan.md says so. Tensor-parallel communication is not counted.
#include "analytic/serving_plan.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "core/int_math.h"
#include "core/layout.h"

namespace gpuledger::analytic {

int64_t percentile_nearest_rank(std::vector<int64_t> values, double p) {
  if (values.empty()) throw std::invalid_argument("percentile of an empty list");
  if (!(p > 0 && p <= 100)) throw std::invalid_argument("percentile must be in (0, 100]");
  std::sort(values.begin(), values.end());
  const double n = static_cast<double>(values.size());
  // ceil(p/100 · n) with the product formed exactly for p given in hundredths
  // (95 · 20 / 100 = 19, not 19.000000000000004 → 20).
  const auto rank = static_cast<int64_t>(std::ceil(std::round(p * n * 1e6) / 1e8));
  return values[static_cast<size_t>(std::clamp<int64_t>(rank, 1, static_cast<int64_t>(values.size())) - 1)];
}

double mean_of(const std::vector<int64_t>& values) {
  if (values.empty()) throw std::invalid_argument("mean of an empty list");
  double s = 0;
  for (int64_t v : values) s += static_cast<double>(v);
  return s / static_cast<double>(values.size());
}

int64_t with_headroom(int64_t x, double headroom) {
  if (!(headroom >= 1)) throw std::invalid_argument("headroom must be >= 1");
  return static_cast<int64_t>(std::ceil(static_cast<double>(x) * headroom - 1e-9));
}

namespace {

void check_inputs(const ServingDemand& d, const ServingModel& m, const ServingDevice& dev, int64_t tp,
                  int64_t replicas) {
  if (!(d.qps > 0)) throw std::invalid_argument("qps must be > 0");
  if (!(d.prompt_tokens >= 1) || !(d.output_tokens >= 1) || d.kv_sizing_tokens < 1)
    throw std::invalid_argument("prompt, output and KV sizing lengths must be >= 1 token");
  if (!(dev.bandwidth_bytes_per_s > 0) || dev.memory_bytes <= 0)
    throw std::invalid_argument("device " + dev.name + ": memory and bandwidth must be known and > 0");
  if (!(dev.mbu > 0 && dev.mbu <= 1) || !(dev.mfu > 0 && dev.mfu <= 1))
    throw std::invalid_argument("mbu and mfu must be in (0, 1]");
  if (!(dev.memory_utilization > 0 && dev.memory_utilization <= 1))
    throw std::invalid_argument("memory utilization must be in (0, 1]");
  if (tp < 1 || replicas < 1 || m.kv_heads < 1) throw std::invalid_argument("tp, replicas and kv heads must be >= 1");
}

// One branch's fixed point of L = λ(intercept + n·slope·L). L is a mean and may
// be fractional, as Little's law gives it.
double fixed_point(double lambda, double intercept_s, double n_out, double slope_s) {
  return lambda * intercept_s / (1.0 - lambda * n_out * slope_s);
}

}  // namespace

double kv_kept_tokens(const ServingModel& m, double tokens) {
  // A sliding layer keeps the last `window` tokens (docs/formulas/kv.md
  // "Layers of different windows"); every layer costs the same per token.
  if (m.layer_windows.empty()) return tokens;
  double sum = 0;
  for (const auto& w : m.layer_windows) sum += w ? std::min(tokens, static_cast<double>(*w)) : tokens;
  return sum / static_cast<double>(m.layer_windows.size());
}

ServingPoint serving_point(const ServingDemand& d, const ServingModel& m, const ServingDevice& dev, int64_t tp,
                           int64_t replicas) {
  check_inputs(d, m, dev, tp, replicas);
  ServingPoint p;
  p.tp = tp;
  p.replicas = replicas;
  p.replica_qps = d.qps / static_cast<double>(replicas);
  const double t = static_cast<double>(tp);
  const double bw = dev.bandwidth_bytes_per_s * dev.mbu;
  // A rank holds kv_heads_on_rank(k, t) of the k KV heads (replicated past t > k).
  const double kv_token_per_device = static_cast<double>(m.kv_bytes_per_token) *
                                     static_cast<double>(kv_heads_on_rank(m.kv_heads, tp)) /
                                     static_cast<double>(m.kv_heads);
  const double weights_per_device = static_cast<double>(m.weight_bytes) / t;
  p.decode_fixed_s = weights_per_device / bw;
  p.decode_per_seq_s = kv_token_per_device * kv_kept_tokens(m, d.prompt_tokens + d.output_tokens / 2) / bw;
  if (dev.peak_flops) {
    // 2 FLOPs per active parameter per token (Kaplan et al. 2020 §2.1; a MoE
    // token passes through its k experts only, docs/formulas/moe.md)
    const double flops_per_s = t * *dev.peak_flops * dev.mfu;
    const double active = static_cast<double>(m.active_params > 0 ? m.active_params : m.params);
    p.prefill_s = 2.0 * active * d.prompt_tokens / flops_per_s;
    p.decode_flop_per_seq_s = 2.0 * active / flops_per_s;
  }
  const double lambda = p.replica_qps, n = d.output_tokens;
  p.stable = lambda * n * std::max(p.decode_per_seq_s, p.decode_flop_per_seq_s) < 1.0;
  if (p.stable) {
    p.concurrency = std::max(fixed_point(lambda, p.prefill_s + n * p.decode_fixed_s, n, p.decode_per_seq_s),
                             fixed_point(lambda, p.prefill_s, n, p.decode_flop_per_seq_s));
    p.tpot_s = std::max(p.decode_fixed_s + p.decode_per_seq_s * p.concurrency, p.decode_flop_per_seq_s * p.concurrency);
    p.time_in_system_s = p.prefill_s + n * p.tpot_s;
    p.sized_sequences = static_cast<int64_t>(std::ceil(p.concurrency * d.headroom - 1e-9));
  }
  p.kv_bytes = static_cast<int64_t>(
      std::llround(static_cast<double>(p.sized_sequences) * kv_kept_tokens(m, static_cast<double>(d.kv_sizing_tokens)) *
                   kv_token_per_device));
  p.need_bytes = ceil_div(m.weight_bytes, tp) + p.kv_bytes + dev.workspace_bytes;
  const auto share = static_cast<int64_t>(std::floor(dev.memory_utilization * static_cast<double>(dev.memory_bytes)));
  p.usable_bytes = std::min(share, dev.memory_bytes - dev.cuda_context_bytes);
  p.meets_ttft = !d.ttft_s || (dev.peak_flops && p.prefill_s <= *d.ttft_s);
  p.meets_tpot = !d.tpot_s || (p.stable && p.tpot_s <= *d.tpot_s);
  p.fits = p.stable && p.need_bytes <= p.usable_bytes && p.meets_ttft && p.meets_tpot;
  return p;
}

ServingPlan plan_serving(const ServingDemand& d, const ServingModel& m, const ServingDevice& dev,
                         int64_t max_replicas) {
  ServingPlan plan;
  plan.single = serving_point(d, m, dev, 1, 1);
  for (int64_t tp : {1, 2, 4, 8}) {
    if (m.heads % tp != 0) continue;
    // More replicas only lower each one's rate, so the first r that fits is
    // the fewest for this t; a larger t can only win with fewer devices.
    for (int64_t r = 1; r <= max_replicas; ++r) {
      if (plan.chosen && tp * r >= plan.chosen->tp * plan.chosen->replicas) break;
      ServingPoint p = serving_point(d, m, dev, tp, r);
      if (p.fits) {
        plan.chosen = p;
        break;
      }
      // Past this t's memory: weights and workspace alone do not fit, no r helps.
      if (ceil_div(m.weight_bytes, tp) + dev.workspace_bytes > p.usable_bytes) break;
    }
  }
  return plan;
}

}  // namespace gpuledger::analytic
