// The serving plan per device (see serve_plan_run.h).
#include "bench/run/serve_plan_run.h"

#include <fmt/format.h>

#include <cmath>

#include "analytic/kv_cache.h"
#include "analytic/params.h"
#include "bench/run/kv_run.h"
#include "core/attention_pattern.h"
#include "core/model_config.h"

namespace gpuledger::run {

namespace {

void check_request(const ServePlanRequest& q) {
  auto in = [](double v, double lo, double hi) { return std::isfinite(v) && v >= lo && v <= hi; };
  if (!(q.qps > 0) || !std::isfinite(q.qps)) throw ConfigError("qps", fmt::format("--qps {} must be > 0", q.qps));
  if (!(q.prompt_tokens >= 1) || !(q.output_tokens >= 1))
    throw ConfigError("prompt-tokens", "prompt and output lengths must be >= 1 token");
  if (!(q.percentile > 0 && q.percentile <= 100))
    throw ConfigError("percentile", fmt::format("--percentile {} is outside (0, 100]", q.percentile));
  if (!in(q.headroom, 1, 100))
    throw ConfigError("headroom", fmt::format("--headroom {} is outside [1, 100]", q.headroom));
  if (!(q.mbu > 0 && q.mbu <= 1)) throw ConfigError("mbu", fmt::format("--mbu {} is outside (0, 1]", q.mbu));
  if (!(q.mfu > 0 && q.mfu <= 1)) throw ConfigError("mfu", fmt::format("--mfu {} is outside (0, 1]", q.mfu));
  if (!(q.memory_utilization > 0 && q.memory_utilization <= 1))
    throw ConfigError("memory-utilization",
                      fmt::format("--memory-utilization {} is outside (0, 1]", q.memory_utilization));
  if (q.ttft_ms && !(*q.ttft_ms > 0)) throw ConfigError("ttft-ms", "--ttft-ms must be > 0");
  if (q.tpot_ms && !(*q.tpot_ms > 0)) throw ConfigError("tpot-ms", "--tpot-ms must be > 0");
  if (q.trace_totals && q.trace_totals->empty()) throw ConfigError("trace", q.trace_source + " holds no requests");
  if (q.devices.empty()) throw ConfigError("devices", "--devices names no device");
  for (const auto& d : q.devices)
    if (!d.bandwidth_bytes_per_s || d.memory_bytes <= 0)
      throw ConfigError("devices", "device " + d.name + " has no known memory bandwidth");
}

analytic::ServingModel serving_model(const ResolvedConfig& c) {
  analytic::ServingModel m;
  m.params = analytic::model_params(c.model);
  m.active_params = analytic::active_params(c.model);
  m.weight_bytes = m.params * dtype_bytes(c.run.dtype);
  // The whole model's KV at the serving dtype's 16 bits (one rank, tp = 1).
  m.kv_bytes_per_token = analytic::kv_bytes_per_token(c.model, Layout{}, KvFormat::kBF16);
  // The latent of multi-head latent attention is one "head" whole on every TP
  // rank (vLLM's ModelConfig.get_num_kv_heads returns 1 under MLA).
  m.kv_heads = c.model.is_mla() ? 1 : c.model.kv_heads;
  if (any_sliding(c.model)) m.layer_windows = layer_windows(c.model, 0, c.model.layers);
  m.heads = c.model.heads;
  return m;
}

}  // namespace

ServePlanRecord run_serve_plan(const ServePlanRequest& q) {
  check_request(q);
  ServePlanRecord rec;
  rec.request = q;
  rec.model = serving_model(q.config);
  auto& d = rec.demand;
  d.qps = q.qps;
  d.prompt_tokens = q.prompt_tokens;
  d.output_tokens = q.output_tokens;
  d.headroom = q.headroom;
  if (q.ttft_ms) d.ttft_s = *q.ttft_ms / 1e3;
  if (q.tpot_ms) d.tpot_s = *q.tpot_ms / 1e3;
  if (q.trace_totals) {
    d.kv_sizing_tokens = analytic::percentile_nearest_rank(*q.trace_totals, q.percentile);
    rec.kv_sizing_basis = fmt::format("p{:g} of the total lengths in {}", q.percentile, q.trace_source);
  } else {
    d.kv_sizing_tokens = static_cast<int64_t>(std::ceil(q.prompt_tokens + q.output_tokens));
    rec.kv_sizing_basis = "prompt + output tokens";
  }
  const int64_t activation = inference_activation_bytes(q.config, q.prefill_chunk);
  for (const auto& spec : q.devices) {
    ServeDeviceRecord r;
    r.spec = spec;
    r.terms.activation_bytes = activation;
    r.terms.cublas_workspace_bytes = torch_cublas_workspace_bytes(device_sm_major(spec));
    r.terms.cuda_context_bytes = q.cuda_context_bytes;
    auto& dev = r.device;
    dev.name = spec.name;
    dev.memory_bytes = spec.memory_bytes;
    dev.bandwidth_bytes_per_s = *spec.bandwidth_bytes_per_s;
    dev.peak_flops = device_peak_flops(spec, q.config.run.dtype);
    dev.mbu = q.mbu;
    dev.mfu = q.mfu;
    dev.memory_utilization = q.memory_utilization;
    dev.cuda_context_bytes = q.cuda_context_bytes;
    dev.workspace_bytes = r.terms.activation_bytes + r.terms.cublas_workspace_bytes;
    r.plan = analytic::plan_serving(d, rec.model, dev);
    rec.devices.push_back(r);
  }
  return rec;
}

}  // namespace gpuledger::run
