// The KV-cache options shared by kv and infer: registration and resolution (see config_options.h).
#include <CLI/CLI.hpp>

#include <string>

#include "bench/cli/config_options.h"
#include "core/attention_pattern.h"
#include "core/limits.h"
#include "core/model_config.h"

namespace gpuledger::cli {

namespace {
// Named apart from config_options.cpp's ranges: the unity build (bench/CMakeLists.txt)
// may compile both files as one.
const auto kKvTokenRange = CLI::Range(int64_t{1}, limits::kMaxTokens);
const auto kKvBatchRange = CLI::Range(int64_t{1}, limits::kMaxBatch);
}  // namespace

void add_kv_cache_options(CLI::App& app, KvCacheOptions& o) {
  const char* g = kKvCacheGroup;
  app.add_option("--context", o.context, "tokens per sequence (default: --seq)")->check(kKvTokenRange)->group(g);
  app.add_option("--max-model-len", o.max_model_len, "contiguous reservation per sequence (default: model max_seq)")
      ->check(kKvTokenRange)
      ->group(g);
  app.add_option("--kv", o.kv_layout, "cache layout")
      ->capture_default_str()
      ->check(CLI::IsMember({"contiguous", "paged"}))
      ->group(g);
  app.add_option("--block", o.block, "tokens per block (paged)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20))
      ->group(g);
  app.add_option("--kv-dtype", o.kv_dtype, "KV dtype")
      ->capture_default_str()
      ->check(CLI::IsMember({"bf16", "fp8", "int8", "int4"}))
      ->group(g);
  app.add_option("--kv-scales", o.kv_scales, "scales: fp8/int8 token-head (default), tensor, channel; int4 group")
      ->check(CLI::IsMember({"tensor", "token-head", "channel", "group"}))
      ->group(g);
  app.add_option("--kv-group-size", o.kv_group_size,
                 "int4: channels per scale group (an fp16 scale and zero point each); even, divides head_dim")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{2}, int64_t{1} << 20))
      ->group(g);
  app.add_option("--kv-policy", o.kv_policy,
                 "which tokens a sequence keeps under --kv-budget: full (all), window (the most recent), sink "
                 "(StreamingLLM: the first --kv-sink-tokens and the most recent), h2o (heavy hitters by accumulated "
                 "attention and the most recent, half each)")
      ->capture_default_str()
      ->check(CLI::IsMember({"full", "window", "sink", "h2o"}))
      ->group(g);
  app.add_option("--kv-budget", o.kv_budget, "tokens kept per sequence (and per layer) under --kv-policy")
      ->check(kKvTokenRange)
      ->group(g);
  app.add_option("--kv-sink-tokens", o.kv_sink_tokens, "sink: initial tokens always kept (fewer than --kv-budget)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{0}, limits::kMaxTokens))
      ->group(g);
  app.add_option("--requests", o.requests, "concurrent sequences")
      ->capture_default_str()
      ->check(kKvBatchRange)
      ->group(g);
  finite_in(
      app.add_option("--memory-utilization", o.memory_utilization, "fraction of device memory the engine may use"),
      0.01, 1.0)
      ->capture_default_str()
      ->group(g);
  app.add_option("--overhead", o.overhead, "bytes outside the ledger (CUDA context, libraries)")
      ->capture_default_str()
      ->group(g);
}

KvEviction resolve_kv_eviction(const KvCacheOptions& o, const ModelConfig& m) {
  KvEviction e;
  e.policy = *kv_policy_from_name(o.kv_policy);
  e.budget = o.kv_budget;
  e.sink_tokens = o.kv_sink_tokens;
  if (!e.evicts()) {
    if (o.kv_budget > 0)
      throw ConfigError("kv-budget", "--kv-budget " + std::to_string(o.kv_budget) +
                                         " needs --kv-policy window, sink or h2o (the policy is full)");
    return e;
  }
  if (o.kv_budget < 1)
    throw ConfigError("kv-budget", "--kv-policy " + o.kv_policy + " needs --kv-budget N (tokens kept per sequence)");
  if (e.policy == KvPolicy::kSink && e.sink_tokens >= e.budget)
    throw ConfigError("kv-sink-tokens", "--kv-sink-tokens " + std::to_string(e.sink_tokens) +
                                            " must be fewer than --kv-budget " + std::to_string(e.budget));
  if (any_sliding(m) && e.policy != KvPolicy::kWindow)
    throw ConfigError("kv-policy", "--kv-policy " + o.kv_policy + " on " + m.name + ", a sliding-window model (" +
                                       (m.attention_pattern.empty() ? "window " + std::to_string(*m.sliding_window)
                                                                    : std::string("sliding-window layers")) +
                                       "): its window already bounds the cache; use --kv-policy window or full");
  return e;
}

analytic::KvOptions resolve_kv_options(const KvCacheOptions& o, const ModelConfig& m) {
  analytic::KvOptions k;
  k.layout = *kv_layout_from_name(o.kv_layout);
  k.dtype = *kv_format_from_name(o.kv_dtype);
  const bool int4 = k.dtype == KvFormat::kInt4;
  if (m.is_mla() && kv_quantized(k.dtype))
    throw ConfigError("kv-dtype", "--kv-dtype " + o.kv_dtype + ": model '" + m.name +
                                      "' caches a multi-head latent attention latent, sized in bf16 only");
  k.scales =
      o.kv_scales.empty() ? (int4 ? KvScales::kPerGroup : KvScales::kPerTokenHead) : *kv_scales_from_name(o.kv_scales);
  if (int4 != (k.scales == KvScales::kPerGroup))
    throw ConfigError("kv-scales", "--kv-scales " + o.kv_scales + " with --kv-dtype " + o.kv_dtype +
                                       ": int4 is stored with per-group scales (group), and group is for int4 only");
  k.group = o.kv_group_size;
  if (int4 && (k.group % 2 != 0 || m.head_dim % k.group != 0))
    throw ConfigError("kv-group-size", "--kv-group-size " + std::to_string(k.group) +
                                           ": an int4 group must be even (two codes per byte) and divide the head "
                                           "dim " +
                                           std::to_string(m.head_dim));
  k.block = o.block;
  k.max_model_len = o.max_model_len > 0 ? o.max_model_len : m.max_seq;
  k.eviction = resolve_kv_eviction(o, m);
  return k;
}

}  // namespace gpuledger::cli
