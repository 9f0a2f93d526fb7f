// KV-cache budget: 2 · layers · kv_heads · head_dim · tokens · dtype bytes
// (per rank under TP: k_t heads), contiguous and paged reservations (vLLM,
// Kwon et al. 2023), sliding-window caps, capacity under vLLM's memory rule,
// and the decode roofline.
#pragma once
#include <cstdint>
#include <optional>
#include <string_view>

#include "core/kv_types.h"
#include "core/layout.h"
#include "core/model_config.h"

namespace gpuledger::analytic {

struct KvOptions {
  KvLayout layout = KvLayout::kPaged;
  KvFormat dtype = KvFormat::kBF16;
  KvScales scales = KvScales::kPerTokenHead;
  int64_t block = 16;         // tokens per block (paged)
  int64_t max_model_len = 0;  // contiguous reservation per sequence (0 = model max_seq)
};

// K and V bytes per token on one TP rank (layers on the rank's stage), values only.
int64_t kv_bytes_per_token(const ModelConfig& m, const Layout& l, KvFormat dtype);
// Scale bytes: fp32 scales — per tensor: 2 per layer (K and V, per sequence-independent);
// per token-head: 2·k_t per token per layer; per channel: 2·k_t·d per layer.
int64_t kv_scale_bytes_per_token(const ModelConfig& m, const Layout& l, KvOptions o);
int64_t kv_scale_bytes_fixed(const ModelConfig& m, const Layout& l, KvOptions o);

// Tokens a sequence of `context` tokens keeps (min(context, window) for sliding-window models).
int64_t kv_tokens_kept(const ModelConfig& m, int64_t context);

// Reserved bytes for `requests` sequences of `context` tokens on one rank:
// contiguous: requests × max_model_len tokens (window-capped);
// paged: (Σ ceil(kept / block) + 1 null block) × block bytes (vLLM reserves block 0).
int64_t kv_reserved_bytes(const ModelConfig& m, const Layout& l, KvOptions o, int64_t requests, int64_t context);
// Bytes of one block (paged).
int64_t kv_block_bytes(const ModelConfig& m, const Layout& l, KvOptions o);

// vLLM's rule: pool = utilization × device_bytes − weights − activation_peak − overhead.
struct KvCapacity {
  int64_t pool_bytes = 0;  // < 0 means the model does not fit at all
  int64_t sequences = 0;   // concurrent sequences of `context` tokens that fit
  int64_t tokens = 0;      // tokens the pool holds
};
KvCapacity kv_capacity(const ModelConfig& m, const Layout& l, KvOptions o, int64_t device_bytes, double utilization,
                       int64_t weight_bytes, int64_t activation_peak_bytes, int64_t overhead_bytes, int64_t context);

// Decode roofline: one decode step reads every weight once and the KV of every
// sequence in the batch; tokens/s ≤ batch / ((weights + batch·kv(context)) / bandwidth).
struct DecodeRoofline {
  int64_t bytes_per_step = 0;
  double step_seconds = 0;
  double tokens_per_s = 0;
};
DecodeRoofline decode_roofline(int64_t weight_bytes, int64_t kv_bytes_per_seq, int64_t batch,
                               double bandwidth_bytes_per_s);

}  // namespace gpuledger::analytic
