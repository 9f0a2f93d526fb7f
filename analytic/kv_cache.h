// KV-cache budget: 2 · layers · kv_heads · head_dim · tokens · dtype bytes
// (per rank under TP: k_t heads), contiguous and paged reservations (vLLM,
// Kwon et al. 2023), sliding-window caps, capacity under vLLM's memory rule,
// and the decode roofline.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "core/kv_types.h"
#include "core/layout.h"
#include "core/model_config.h"

namespace gpuledger::analytic {

struct KvOptions {
  KvLayout layout = KvLayout::kPaged;
  KvFormat dtype = KvFormat::kBF16;
  KvScales scales = KvScales::kPerTokenHead;
  int64_t group = kKvDefaultGroup;  // channels per scale group (int4, per-group scales)
  int64_t block = 16;               // tokens per block (paged)
  int64_t max_model_len = 0;        // contiguous reservation per sequence (0 = model max_seq)
  KvEviction eviction;              // a KV budget and its policy (core/kv_types.h)
  int64_t stage = 0;                // the pipeline stage whose layers are sized (their windows may differ)
};

// K and V bytes per token on one TP rank (layers on the rank's stage), values only
// (int4: d/2 bytes per head).
int64_t kv_bytes_per_token(const ModelConfig& m, const Layout& l, KvFormat dtype);
// Scale bytes: fp32 scales — per tensor: 2 per layer (K and V, per sequence-independent);
// per token-head: 2·k_t per token per layer; per channel: 2·k_t·d per layer;
// per group (int4): 2·k_t·(d/G) fp16 (scale, zero) pairs, 4 bytes each, per token per layer.
int64_t kv_scale_bytes_per_token(const ModelConfig& m, const Layout& l, KvOptions o);
int64_t kv_scale_bytes_fixed(const ModelConfig& m, const Layout& l, KvOptions o);

// Tokens a sequence of `context` tokens keeps: min(context, window) for
// sliding-window models, min(context, budget) under a KV budget; with layers
// of different windows, what the layer keeping the most keeps.
int64_t kv_tokens_kept(const ModelConfig& m, const KvOptions& o, int64_t context);
// Bytes of the tokens one sequence of `context` tokens keeps on the rank, layer
// by layer (analytic/kv_layers.h): Σ_l min(context, cap_l) × one layer's bytes
// per token; kept × kv_bytes_per_token (+ scales) when every layer has one cap.
int64_t kv_sequence_bytes(const ModelConfig& m, const Layout& l, const KvOptions& o, int64_t context);

// Reserved bytes for `requests` sequences of `context` tokens on one rank:
// contiguous: requests × max_model_len tokens (window-capped, layer by layer);
// paged: (Σ ceil(kept / block) + 1 null block) × block bytes (vLLM reserves
// block 0); with layers of different windows, Σ over vLLM's KV cache groups
// (analytic/kv_layers.h) of ⌈kept_g / block⌉ blocks.
int64_t kv_reserved_bytes(const ModelConfig& m, const Layout& l, KvOptions o, int64_t requests, int64_t context);
// Bytes of one block (paged): block tokens × the layers of one group (every
// layer of the stage when they share one window).
int64_t kv_block_bytes(const ModelConfig& m, const Layout& l, KvOptions o);

// vLLM's rule: pool = utilization × device_bytes − weights − activation_peak − overhead.
struct KvCapacity {
  int64_t pool_bytes = 0;  // < 0 means the model does not fit at all
  int64_t sequences = 0;   // concurrent sequences of `context` tokens that fit
  int64_t tokens = 0;      // tokens the pool holds
};
KvCapacity kv_capacity(const ModelConfig& m, const Layout& l, KvOptions o, int64_t device_bytes, double utilization,
                       int64_t weight_bytes, int64_t activation_peak_bytes, int64_t overhead_bytes, int64_t context);

// vLLM's own sizing of the pool and the two lines it logs, as its current code
// computes them (vllm-project/vllm; files, functions and commits in
// kv_cache.cpp). Full-attention models, one KV cache group (every layer of the
// rank's stage), paged:
//   requested  = total memory × gpu_memory_utilization (the CUDA context, made
//                before the baseline snapshot, is not subtracted: it lives
//                outside the KV budget, in the 1 − utilization headroom);
//   available  = int(requested − (weights + torch peak increase + non-torch
//                increase after the baseline snapshot) − CUDA-graph estimate);
//   num_blocks = available // page bytes // layers (the null block included);
//   "GPU KV cache size: int(concurrency × max_model_len) tokens";
//   "Maximum concurrency for max_model_len tokens per request:
//    num_blocks / ⌈max_model_len / block⌉" (a float, printed %.2f).
struct VllmKvInputs {
  int64_t total_memory_bytes = 0;
  double gpu_memory_utilization = 0.92;   // CacheConfig default
  int64_t weight_bytes = 0;               // model_memory_usage
  int64_t torch_peak_increase_bytes = 0;  // the profiling run's activation peak
  int64_t non_torch_increase_bytes = 0;   // NCCL buffers, custom all-reduce, … after the baseline snapshot
  int64_t cuda_graph_estimate_bytes = 0;  // applied only with VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS
  int64_t max_model_len = 0;
};
struct VllmKvLog {
  int64_t requested_bytes = 0;
  int64_t available_bytes = 0;  // "Available KV cache memory"
  int64_t num_blocks = 0;       // num_gpu_blocks, the null block included
  int64_t tokens = 0;           // "GPU KV cache size: N tokens"
  double max_concurrency = 0;   // "Maximum concurrency for L tokens per request: X.XXx"
};
// Throws std::invalid_argument for a model with sliding-window layers (vLLM
// sizes its per-request need by the window there) or a contiguous cache.
VllmKvLog vllm_kv_log(const ModelConfig& m, const Layout& l, KvOptions o, const VllmKvInputs& in);

// vLLM's default max_num_batched_tokens (EngineArgs.get_batch_defaults): with
// at least 70 GiB of device memory and not an A100, 16384 (LLM class) / 8192
// (OpenAI API server); otherwise 8192 / 2048.
int64_t vllm_default_max_num_batched_tokens(int64_t device_memory_bytes, const std::string& device_name,
                                            bool api_server);

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
