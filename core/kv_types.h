// The KV-cache vocabulary shared by the cache (models/kv, kernels/kv_storage.h),
// its budget (analytic/kv_cache.h) and the command line: the value format, the
// scale granularity and the reservation layout, with their names. One
// definition, so a name parsed once means the same on both sides.
#pragma once
#include <cstdint>
#include <optional>
#include <string_view>

namespace gpuledger {

// Value formats: bf16, OCP FP8 E4M3, symmetric int8 (kernels/kv_storage.h has the codecs).
enum class KvFormat : int { kBF16 = 0, kFP8E4M3, kInt8 };
// Where quantization scales live: one per layer and K/V (tensor), one per token
// and KV head (token-head), one per KV channel (channel).
enum class KvScales : int { kPerTensor = 0, kPerTokenHead, kPerChannel };
// Reservation: a max_model_len slab per sequence (contiguous) or blocks on demand (paged, vLLM).
enum class KvLayout : int { kContiguous = 0, kPaged };

inline constexpr int64_t kv_format_bytes(KvFormat f) { return f == KvFormat::kBF16 ? 2 : 1; }
inline constexpr bool kv_quantized(KvFormat f) { return f != KvFormat::kBF16; }
inline constexpr int64_t kKvScaleBytes = 4;  // every scale is one fp32

std::string_view kv_format_name(KvFormat f);                         // "bf16" | "fp8" | "int8"
std::string_view kv_scales_name(KvScales s);                         // "tensor" | "token-head" | "channel"
std::string_view kv_layout_name(KvLayout k);                         // "contiguous" | "paged"
std::optional<KvFormat> kv_format_from_name(std::string_view name);  // also "fp8-e4m3", "e4m3"
std::optional<KvScales> kv_scales_from_name(std::string_view name);  // also "per-tensor", …
std::optional<KvLayout> kv_layout_from_name(std::string_view name);

}  // namespace gpuledger
