// KV-cache formats as the caches book them (docs/formulas/kv.md "Bytes per
// token", "Quantized caches: scales"): the bytes one token costs on one rank —
// its K and V values plus the scales that travel with it — the scales held
// once per rank, and a host-side quantize/dequantize of a (tokens, heads, dim)
// tensor, the reference the device ops (Device::kv_cache_write) are tested against.
//
// Formats and codecs themselves (bf16, OCP FP8 E4M3, symmetric int8) are the
// Device's (kernels/kv_storage.h); this file is the measured side's view of
// them and never reads models/analytic.
//
// ---- scale rules (fp8 and int8; a bf16 cache has no scales) ----
// A value is stored as code = encode(x / scale) and read as decode(code)·scale;
// scale = amax / qmax (qmax 448 for E4M3, 127 for int8), amax the largest |x|
// of the group the scale covers (1 when amax is 0). Values beyond qmax·scale
// saturate: ±448 in fp8, ±127 in int8.
//   - per token-head: one K and one V scale per (token, layer, KV head), from
//     that token's D values; stored in the block beside the token, so it is
//     part of the per-token bytes (2·L_i·k_t fp32).
//   - per tensor: one K and one V scale per layer (2·L_i fp32 per rank),
//     calibrated on the first write to that layer (amax over every token of
//     that first prefill batch, all heads and channels) and fixed from then on,
//     as vLLM's calculate_kv_scales option sets k_scale and v_scale from the
//     first forward pass (vLLM divides amax by a headroom constant; we use qmax).
//   - per group (int4 only, asymmetric): for each token, layer, KV head and
//     group of G consecutive channels, an fp16 scale (max − min) / 15 and an
//     fp16 zero point (min) — KIVI's per-token grouping (Liu et al. 2024),
//     applied to keys and values alike; stored beside the token, so part of
//     the per-token bytes: 2·L_i·k_t·(d/2 + (d/G)·4).
//   - per channel: one K and one V scale per (layer, KV head, dim) (2·L_i·k_t·d
//     fp32 per rank), calibrated on the first write to that layer (amax per
//     channel over its tokens) and fixed from then on. Keys have a few outlier
//     channels (KIVI, Liu et al. 2024; KVQuant, Hooper et al. 2024): a scale per
//     channel keeps them from flattening the others, which a per-tensor scale does.
// Fixed scales are one buffer per cache, booked in the kv account with the rest.
#pragma once
#include <cstdint>
#include <vector>

#include "core/layout.h"
#include "core/model_config.h"
#include "kernels/kv_storage.h"

namespace gpuledger::kv {

// The cache geometry of one rank.
struct KvGeometry {
  int64_t layers = 0;    // L_i: layers on this rank's pipeline stage
  int64_t kv_heads = 0;  // k_t: KV heads on this TP rank
  int64_t head_dim = 0;  // d
  KvFormat format = KvFormat::kBF16;
  KvScales scales = KvScales::kPerTokenHead;  // ignored for bf16
  int64_t group = kKvDefaultGroup;            // G: channels per scale group (per-group scales)

  // K and V values of one token: 2 · L_i · k_t · d · bytes(format) (d/2 bytes per head for int4).
  int64_t value_bytes_per_token() const { return 2 * layers * kv_heads * kv_values_bytes(format, head_dim); }
  // Scales that travel with a token: 2 · L_i · k_t fp32 per token-head,
  // 2 · L_i · k_t · (d/G) · 4 (fp16 scale and zero) per group, else 0.
  int64_t scale_bytes_per_token() const;
  // What a token costs in a block or a reservation: values + per-token scales.
  int64_t token_bytes() const { return value_bytes_per_token() + scale_bytes_per_token(); }
  // One layer's share of token_bytes (the stride of a layer section per slot).
  int64_t layer_token_bytes() const { return kv_layer_token_bytes(format, scales, kv_heads, head_dim, group); }
  // Fixed scales per layer for K (as many again for V): 1 per tensor, k_t·d per channel.
  int64_t fixed_scales_per_layer() const { return kv_fixed_scales_per_layer(format, scales, kv_heads, head_dim); }
  // Scales held once per rank: 2 · L_i · fixed_scales_per_layer fp32.
  int64_t fixed_scale_bytes() const { return 2 * layers * fixed_scales_per_layer() * kKvScaleBytes; }
};

// The geometry of pipeline stage `stage` under `layout` (its layers, k_t heads).
KvGeometry kv_geometry(const ModelConfig& m, const Layout& layout, KvFormat format,
                       KvScales scales = KvScales::kPerTokenHead, int64_t stage = 0, int64_t group = kKvDefaultGroup);

// ---- host quantization (the reference of the device write) ----

// A quantized (tokens, heads, dim) tensor: codes in the format (bf16: 2 bytes
// per value, little-endian) and the scales of its granularity — (tokens, heads)
// per token-head, 1 per tensor, (heads, dim) per channel, none for bf16 — each
// computed from this tensor as the first write would. int4 (per group): codes
// two per byte (even channel in the low nibble), scale_values and zero_values
// (tokens, heads, dim / group), the fp32 values of the stored fp16 ones.
struct QuantizedKv {
  KvFormat format = KvFormat::kBF16;
  KvScales scales = KvScales::kPerTokenHead;
  int64_t tokens = 0, heads = 0, dim = 0, group = kKvDefaultGroup;
  std::vector<uint8_t> codes;
  std::vector<float> scale_values, zero_values;
};

QuantizedKv quantize_kv(const float* x, int64_t tokens, int64_t heads, int64_t dim, KvFormat format, KvScales scales,
                        int64_t group = kKvDefaultGroup);
std::vector<float> dequantize_kv(const QuantizedKv& q);

}  // namespace gpuledger::kv
