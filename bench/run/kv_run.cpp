// The analytic KV cache per rank (see kv_run.h).
#include "bench/run/kv_run.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "analytic/inference.h"
#include "analytic/params.h"
#include "analytic/serving_plan.h"
#include "core/attention_pattern.h"
#include "core/layout.h"

namespace gpuledger::run {

int64_t inference_activation_bytes(const ResolvedConfig& c, int64_t tokens) {
  // The one formula infer's profiled peak is checked against (analytic/inference.h).
  return analytic::prefill_activation_bytes(c.model, c.layout, c.run.dtype, tokens, c.run.attention);
}

namespace {

// The cache at `tokens` per sequence: one sequence's reservation, the
// requests' reservation times the headroom, and (with device memory) the
// sequences that fit when only pool / headroom is planned for — the rest of
// the pool is passed to kv_capacity as overhead, so its rule is used as is.
KvLengthBasis length_basis(const KvRequest& q, const analytic::KvOptions& kv, const KvRankRecord& r, std::string basis,
                           int64_t tokens) {
  const auto& m = q.config.model;
  const auto& l = q.config.layout;
  const double h = q.lengths->headroom;
  KvLengthBasis b;
  b.basis = std::move(basis);
  b.tokens = tokens;
  b.sequence_reserved_bytes = analytic::kv_reserved_bytes(m, l, kv, 1, tokens) -
                              (kv.layout == KvLayout::kPaged ? analytic::kv_block_bytes(m, l, kv) : 0);
  b.requests_reserved_bytes = analytic::with_headroom(analytic::kv_reserved_bytes(m, l, kv, q.requests, tokens), h);
  if (r.capacity) {
    const int64_t pool = r.capacity->pool_bytes;
    const int64_t spare = pool > 0 ? pool - static_cast<int64_t>(std::floor(static_cast<double>(pool) / h)) : 0;
    b.capacity = analytic::kv_capacity(m, l, kv, *q.config.device_memory_bytes, q.memory_utilization, r.weight_bytes,
                                       r.activation_bytes, q.overhead_bytes + spare, tokens);
  }
  return b;
}

KvRankRecord kv_rank(const KvRequest& q, int64_t rank) {
  const auto& m = q.config.model;
  const auto& l = q.config.layout;
  KvRankRecord r;
  r.rank = rank;
  r.coords = l.coords(rank);
  // The rank's stage: its layers' windows size the cache (core/attention_pattern.h).
  analytic::KvOptions kv = q.kv;
  kv.stage = r.coords.pp;
  // MLA: the latent, one "head" whole on every TP rank (analytic/mla.h).
  r.kv_heads = m.is_mla() ? 1 : kv_heads_on_rank(m.kv_heads, l.tp);
  // A rank's view of the model: its stage's layers (kv_bytes_per_token takes the layout).
  r.kv_bytes_per_token = analytic::kv_bytes_per_token(m, l, kv.dtype);
  r.kv_scale_bytes_per_token = analytic::kv_scale_bytes_per_token(m, l, kv);
  r.reserved_bytes = analytic::kv_reserved_bytes(m, l, kv, q.requests, q.context);
  r.weight_bytes = analytic::rank_params(m, l, rank) * dtype_bytes(q.config.run.dtype);
  r.activation_bytes = inference_activation_bytes(q.config, std::min(q.context, effective_prefill_chunk(q)));
  r.tokens_kept = analytic::kv_tokens_kept(m, kv, q.context);
  r.sequence_reserved_bytes = analytic::kv_reserved_bytes(m, l, kv, 1, q.context) -
                              (kv.layout == KvLayout::kPaged ? analytic::kv_block_bytes(m, l, kv) : 0);
  r.sequence_token_bytes = analytic::kv_sequence_bytes(m, l, kv, q.context);
  const auto& device = q.config.device;
  if (q.config.device_memory_bytes)
    r.capacity = analytic::kv_capacity(m, l, kv, *q.config.device_memory_bytes, q.memory_utilization, r.weight_bytes,
                                       r.activation_bytes, q.overhead_bytes, q.context);
  if (q.lengths) {
    const auto mean = static_cast<int64_t>(std::ceil(analytic::mean_of(q.lengths->totals)));
    r.by_length.push_back(length_basis(q, kv, r, "mean", mean));
    r.by_length.push_back(length_basis(q, kv, r, fmt::format("p{:g}", q.lengths->percentile),
                                       analytic::percentile_nearest_rank(q.lengths->totals, q.lengths->percentile)));
  }
  if (!q.config.device_memory_bytes) return r;
  // vLLM's own figures: its profiling run covers max_num_batched_tokens tokens
  // (not the context), and what it logs counts max_model_len per request.
  if (kv.layout == KvLayout::kPaged && !any_sliding(m) && !kv.eviction.evicts()) {
    analytic::VllmKvInputs in;
    in.total_memory_bytes = *q.config.device_memory_bytes;
    in.gpu_memory_utilization = q.memory_utilization;
    in.weight_bytes = r.weight_bytes;
    in.torch_peak_increase_bytes = inference_activation_bytes(q.config, effective_prefill_chunk(q));
    in.non_torch_increase_bytes = q.non_torch_bytes;
    in.cuda_graph_estimate_bytes = q.cuda_graph_bytes;
    in.max_model_len = kv.max_model_len;
    r.vllm = analytic::vllm_kv_log(m, l, kv, in);
  }
  if (device && device->bandwidth_bytes_per_s) {
    KvRoofline roof;
    roof.batch = q.batch.value_or(std::max<int64_t>(r.capacity->sequences, 1));
    roof.bandwidth_bytes_per_s = *device->bandwidth_bytes_per_s;
    // A step reads the weights once (the embedding rows of its tokens only; a
    // MoE model's experts those the batch is expected to route to) and every
    // sequence's kept K/V (analytic/inference.h decode_bytes_per_step).
    const int64_t weights_read = analytic::decode_weight_bytes_expected(m, l, q.config.run.dtype, roof.batch) +
                                 analytic::kv_scale_bytes_fixed(m, l, kv);
    roof.roofline =
        analytic::decode_roofline(weights_read, r.sequence_token_bytes, roof.batch, roof.bandwidth_bytes_per_s);
    r.decode_roofline = roof;
  }
  return r;
}

}  // namespace

KvRecord run_kv(const KvRequest& q) {
  if (q.kv.layout == KvLayout::kContiguous && q.context > q.kv.max_model_len)
    throw LayoutError(
        fmt::format("--context {} exceeds --max-model-len {}: a contiguous cache reserves "
                    "max-model-len tokens per sequence",
                    q.context, q.kv.max_model_len));
  if (q.lengths) {
    if (q.lengths->totals.empty()) throw ConfigError("trace", q.lengths->source + " holds no requests");
    if (!(q.lengths->percentile > 0 && q.lengths->percentile <= 100))
      throw ConfigError("percentile", fmt::format("--percentile {} is outside (0, 100]", q.lengths->percentile));
    if (!(q.lengths->headroom >= 1 && q.lengths->headroom <= 100))
      throw ConfigError("headroom", fmt::format("--headroom {} is outside [1, 100]", q.lengths->headroom));
  }
  KvRecord rec;
  rec.request = q;
  rec.params = analytic::model_params(q.config.model);
  rec.padded_vocab = analytic::padded_vocab(q.config.model, q.config.layout.tp);
  for (int64_t rank : q.ranks) rec.ranks.push_back(kv_rank(q, rank));
  return rec;
}

}  // namespace gpuledger::run
