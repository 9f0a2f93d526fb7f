// KV-cache budget (docs/formulas/kv.md): bytes per token on one rank
// (2 · layers · k_t · d · dtype bytes), quantization scales, sliding-window
// caps, contiguous and paged reservations, capacity under vLLM's memory rule
// and the decode bandwidth roofline. Pure functions of the config and layout:
// never reads models/kv/ (the engine it is compared to).
#include "analytic/kv_cache.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <stdexcept>
#include <string>

#include "analytic/kv_layers.h"
#include "analytic/mla.h"
#include "analytic/params.h"
#include "core/attention_pattern.h"
#include "core/checked_math.h"
#include "core/int_math.h"

namespace gpuledger::analytic {
namespace {

// Layers held by one rank: contiguous equal stages (layers / pp).
int64_t stage_layers(const ModelConfig& m, const Layout& l) { return layers_on_stage(m, l, 0); }

// The contiguous reservation's length per sequence: --max-model-len, else the
// model's max_seq (vLLM's max_model_len default).
int64_t max_model_len(const ModelConfig& m, const KvOptions& o) {
  return o.max_model_len > 0 ? o.max_model_len : m.max_seq;
}

// Bytes one token costs on this rank: K and V values plus per-token scales.
int64_t token_bytes(const ModelConfig& m, const Layout& l, const KvOptions& o) {
  return kv_bytes_per_token(m, l, o.dtype) + kv_scale_bytes_per_token(m, l, o);
}

// Bytes one token costs in one layer of the rank: every layer holds the same
// k_t heads of d values, so the stage's per-token bytes split evenly.
int64_t layer_token_bytes(const ModelConfig& m, const Layout& l, const KvOptions& o) {
  return token_bytes(m, l, o) / stage_layers(m, l);
}

void check_block(const KvOptions& o) {
  if (o.block < 1) throw std::invalid_argument("KV block must hold >= 1 token, got " + std::to_string(o.block));
}

}  // namespace

// ---- bytes per token ----

int64_t kv_bytes_per_token(const ModelConfig& m, const Layout& l, KvFormat dtype) {
  // K and V (2) for each of the stage's layers, k_t heads of d values each
  // (k_t = k/t, or 1 replicated head when t > k); d values are 2d bytes in
  // bf16, d in fp8 and int8, d/2 in int4 (two 4-bit codes per byte).
  if (m.is_mla()) {
    // Multi-head latent attention caches the latent instead (analytic/mla.h):
    // kv_lora_rank + qk_rope_head_dim values per token per layer, whole on
    // every TP rank. Only the 16-bit cache is sized for it.
    if (kv_quantized(dtype)) throw std::invalid_argument("a multi-head latent attention cache is sized in bf16 only");
    return checked_product({stage_layers(m, l), kv_values_bytes(dtype, mla_cache_values_per_token(m))},
                           "KV bytes per token");
  }
  if (dtype == KvFormat::kInt4 && m.head_dim % 2 != 0)
    throw std::invalid_argument("int4 KV packs two values per byte: head dim " + std::to_string(m.head_dim) +
                                " is odd");
  return checked_product(
      {2, stage_layers(m, l), kv_heads_on_rank(m.kv_heads, l.tp), kv_values_bytes(dtype, m.head_dim)},
      "KV bytes per token");
}

int64_t kv_scale_bytes_per_token(const ModelConfig& m, const Layout& l, KvOptions o) {
  // Per token-head: one fp32 scale for K and one for V, per KV head, per layer,
  // per token. Per group (int4): for each G channels of a head, an fp16 scale
  // and an fp16 zero point (4 bytes), for K and for V, per layer, per token.
  // Unquantized caches and the other granularities add nothing per token.
  if (!kv_quantized(o.dtype)) return 0;
  if (o.scales == KvScales::kPerGroup) {
    if (o.group < 1 || m.head_dim % o.group != 0)
      throw std::invalid_argument("KV scale group " + std::to_string(o.group) + " does not divide the head dim " +
                                  std::to_string(m.head_dim));
    return checked_product({2, stage_layers(m, l), kv_heads_on_rank(m.kv_heads, l.tp), m.head_dim / o.group, 4},
                           "KV scale bytes per token");
  }
  if (o.scales != KvScales::kPerTokenHead) return 0;
  return 2 * stage_layers(m, l) * kv_heads_on_rank(m.kv_heads, l.tp) * kKvScaleBytes;
}

int64_t kv_scale_bytes_fixed(const ModelConfig& m, const Layout& l, KvOptions o) {
  // Scales that do not grow with tokens, held once per rank: per tensor one for
  // K and one for V per layer; per channel one per K/V channel (k_t·d) per layer.
  if (!kv_quantized(o.dtype)) return 0;
  switch (o.scales) {
    case KvScales::kPerTensor: return 2 * stage_layers(m, l) * kKvScaleBytes;
    case KvScales::kPerChannel:
      return 2 * stage_layers(m, l) * kv_heads_on_rank(m.kv_heads, l.tp) * m.head_dim * kKvScaleBytes;
    case KvScales::kPerTokenHead:
    case KvScales::kPerGroup: return 0;
  }
  return 0;
}

int64_t kv_tokens_kept(const ModelConfig& m, const KvOptions& o, int64_t context) {
  // A sliding-window model (Mistral) attends to the last `window` tokens only;
  // older K/V are dropped, so a sequence never keeps more than the window. A
  // KV budget (window, sink, h2o) caps it the same way: whichever tokens a
  // policy keeps, it keeps `budget` of them (core/kv_types.h).
  if (context < 0) throw std::invalid_argument("context must be >= 0, got " + std::to_string(context));
  int64_t kept = 0;
  for (int64_t i = 0; i < m.layers; ++i) {
    const auto cap = kv_slot_cap(layer_window(m, i), o.eviction);
    kept = std::max(kept, cap ? std::min(context, *cap) : context);
  }
  return kept;
}

int64_t kv_sequence_bytes(const ModelConfig& m, const Layout& l, const KvOptions& o, int64_t context) {
  if (context < 0) throw std::invalid_argument("context must be >= 0, got " + std::to_string(context));
  return checked_mul(kv_layer_slots(m, l, o.stage, o.eviction, context), layer_token_bytes(m, l, o),
                     "KV bytes per sequence");
}

// ---- reservations ----

int64_t kv_block_bytes(const ModelConfig& m, const Layout& l, KvOptions o) {
  check_block(o);
  // One group's layers (all of the stage's when they share one cap): vLLM's
  // page of group_size layers (kv_layers.h).
  return checked_product({o.block, kv_groups(m, l, o.stage, o.eviction).group_size, layer_token_bytes(m, l, o)},
                         "KV block bytes");
}

int64_t kv_reserved_bytes(const ModelConfig& m, const Layout& l, KvOptions o, int64_t requests, int64_t context) {
  if (requests < 0) throw std::invalid_argument("requests must be >= 0, got " + std::to_string(requests));
  const int64_t fixed = kv_scale_bytes_fixed(m, l, o);
  if (o.layout == KvLayout::kContiguous) {
    // The naive engine: every sequence reserves max_model_len tokens up front
    // (window-capped), whatever its length.
    const int64_t len = max_model_len(m, o);
    if (context > len)
      throw LayoutError("context " + std::to_string(context) + " exceeds max_model_len " + std::to_string(len) +
                        ": a contiguous cache cannot hold the sequence");
    return checked_add(checked_mul(requests, kv_sequence_bytes(m, l, o, len), "KV reserved bytes"), fixed,
                       "KV reserved bytes");
  }
  // Paged (Kwon et al. 2023, vLLM): ⌈kept / block⌉ blocks per sequence, plus
  // the null block vLLM's BlockPool takes out of the pool at start
  // (v1/core/block_pool.py: null_block = free_block_queue.popleft()); one
  // table per KV cache group when the layers' windows differ (kv_layers.h).
  check_block(o);
  if (context < 0) throw std::invalid_argument("context must be >= 0, got " + std::to_string(context));
  const int64_t per_seq = kv_group_blocks(kv_groups(m, l, o.stage, o.eviction), context, o.block);
  const int64_t blocks = checked_add(checked_mul(requests, per_seq, "KV blocks"), 1, "KV blocks");
  return checked_add(checked_mul(blocks, kv_block_bytes(m, l, o), "KV reserved bytes"), fixed, "KV reserved bytes");
}

// ---- capacity ----

KvCapacity kv_capacity(const ModelConfig& m, const Layout& l, KvOptions o, int64_t device_bytes, double utilization,
                       int64_t weight_bytes, int64_t activation_peak_bytes, int64_t overhead_bytes, int64_t context) {
  if (!(utilization > 0.0 && utilization <= 1.0))
    throw std::invalid_argument("memory utilization must be in (0, 1], got " + std::to_string(utilization));
  if (context < 1) throw std::invalid_argument("context must be >= 1, got " + std::to_string(context));
  KvCapacity cap;
  // vLLM's rule (Worker.determine_num_available_blocks): the engine may use
  // utilization × total memory; what the weights, the profiled activation
  // peak and the memory outside the allocator leave is the KV pool. int(),
  // as vLLM casts: the floor of the product.
  const auto usable = static_cast<int64_t>(std::floor(utilization * static_cast<double>(device_bytes)));
  cap.pool_bytes = usable - weight_bytes - activation_peak_bytes - overhead_bytes;
  const int64_t avail = cap.pool_bytes - kv_scale_bytes_fixed(m, l, o);
  if (avail <= 0) return cap;
  if (o.layout == KvLayout::kContiguous) {
    // Whole max_model_len reservations; their token slots are what the pool holds.
    const int64_t len = max_model_len(m, o);
    if (context > len)
      throw LayoutError("context " + std::to_string(context) + " exceeds max_model_len " + std::to_string(len) +
                        ": a contiguous cache cannot hold the sequence");
    cap.sequences = avail / kv_sequence_bytes(m, l, o, len);
    cap.tokens = cap.sequences * kv_tokens_kept(m, o, len);
    return cap;
  }
  // Paged: ⌊avail / block bytes⌋ blocks, one of them the null block; a
  // sequence needs ⌈kept(context) / block⌉ of the rest (per group: kv_layers.h).
  const int64_t blocks = std::max<int64_t>(avail / kv_block_bytes(m, l, o) - 1, 0);
  cap.sequences = blocks / kv_group_blocks(kv_groups(m, l, o.stage, o.eviction), context, o.block);
  cap.tokens = checked_mul(blocks, o.block, "KV pool tokens");
  return cap;
}

// ---- vLLM's own figures ----

VllmKvLog vllm_kv_log(const ModelConfig& m, const Layout& l, KvOptions o, const VllmKvInputs& in) {
  if (any_sliding(m))
    throw std::invalid_argument("vLLM's log for a sliding-window model sizes requests by the window: not modelled");
  if (o.eviction.evicts()) throw std::invalid_argument("vLLM keeps every token: its log has no KV budget");
  if (o.layout != KvLayout::kPaged) throw std::invalid_argument("vLLM's cache is paged");
  check_block(o);
  if (in.max_model_len < 1) throw std::invalid_argument("max_model_len must be >= 1");
  VllmKvLog v;
  // vllm/v1/worker/gpu_worker.py (determine_available_memory, commit
  // 002f10e0): requested_memory = init_snapshot.total_memory ×
  // gpu_memory_utilization; non_kv_cache_memory = weights_memory +
  // torch_peak_increase + non_torch_increase (memory_profiling);
  // available = requested − non_kv_cache_memory − cudagraph_memory_estimate_applied,
  // returned as int().
  const double requested = static_cast<double>(in.total_memory_bytes) * in.gpu_memory_utilization;
  v.requested_bytes = static_cast<int64_t>(requested);
  const double non_kv = static_cast<double>(in.weight_bytes + in.torch_peak_increase_bytes +
                                            in.non_torch_increase_bytes + in.cuda_graph_estimate_bytes);
  v.available_bytes = static_cast<int64_t>(requested - non_kv);
  if (v.available_bytes <= 0) return v;  // vLLM raises "No available memory for the cache blocks"
  // vllm/v1/core/kv_cache_utils.py (commit 002f10e0), one group holding the
  // stage's L_i layers: get_num_blocks = available // page_size // L_i, the
  // page of one layer = block · 2 · k_t · d · bytes (+ per-token scales). The
  // same as available // (block bytes of all L_i layers) for integers.
  v.num_blocks = v.available_bytes / kv_block_bytes(m, l, o);
  // get_max_concurrency_for_kv_cache_config: num_blocks / cdiv(max_memory_usage_bytes,
  // page_size_bytes) = num_blocks / ⌈max_model_len / block⌉ for full attention
  // (the null block, held back by BlockPool, is still counted);
  // get_kv_cache_capacity: tokens = int(max_concurrency × max_model_len).
  const int64_t blocks_per_request = ceil_div(in.max_model_len, o.block);
  v.max_concurrency = static_cast<double>(v.num_blocks) / static_cast<double>(blocks_per_request);
  v.tokens = static_cast<int64_t>(v.max_concurrency * static_cast<double>(in.max_model_len));
  return v;
}

int64_t vllm_default_max_num_batched_tokens(int64_t device_memory_bytes, const std::string& device_name,
                                            bool api_server) {
  // vllm/engine/arg_utils.py EngineArgs.get_batch_defaults: the A100 is left
  // out of the large defaults (larger batches lowered its throughput).
  std::string lower = device_name;
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char ch) { return std::tolower(ch); });
  const bool large = device_memory_bytes >= 70LL * (1LL << 30) && lower.find("a100") == std::string::npos;
  if (large) return api_server ? 8192 : 16384;
  return api_server ? 2048 : 8192;
}

// ---- decode roofline ----

DecodeRoofline decode_roofline(int64_t weight_bytes, int64_t kv_bytes_per_seq, int64_t batch,
                               double bandwidth_bytes_per_s) {
  // One decode step reads every weight once and every sequence's K/V once; at
  // full bandwidth it cannot take less than bytes / bandwidth (Williams et al.
  // 2009's roofline, the memory-bound side), and yields `batch` tokens.
  if (!(bandwidth_bytes_per_s > 0)) throw std::invalid_argument("decode roofline needs a bandwidth > 0");
  if (batch < 0) throw std::invalid_argument("decode batch must be >= 0, got " + std::to_string(batch));
  DecodeRoofline d;
  d.bytes_per_step =
      checked_add(weight_bytes, checked_mul(batch, kv_bytes_per_seq, "decode bytes per step"), "decode bytes per step");
  d.step_seconds = static_cast<double>(d.bytes_per_step) / bandwidth_bytes_per_s;
  d.tokens_per_s = d.step_seconds > 0 ? static_cast<double>(batch) / d.step_seconds : 0.0;
  return d;
}

}  // namespace gpuledger::analytic
