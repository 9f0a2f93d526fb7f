// The KV-cache vocabulary shared by the cache (models/kv, kernels/kv_storage.h),
// its budget (analytic/kv_cache.h) and the command line: the value format, the
// scale granularity and the reservation layout, with their names. One
// definition, so a name parsed once means the same on both sides.
#pragma once
#include <cstdint>
#include <optional>
#include <string_view>

namespace gpuledger {

// Value formats: bf16, OCP FP8 E4M3, symmetric int8, asymmetric int4 (two
// codes per byte) (kernels/kv_storage.h has the codecs).
enum class KvFormat : int { kBF16 = 0, kFP8E4M3, kInt8, kInt4 };
// Where quantization scales live: one per layer and K/V (tensor), one per token
// and KV head (token-head), one per KV channel (channel), one scale and zero
// point per `group` consecutive channels of a token's KV head (group; int4 only).
enum class KvScales : int { kPerTensor = 0, kPerTokenHead, kPerChannel, kPerGroup };
// Reservation: a max_model_len slab per sequence (contiguous) or blocks on demand (paged, vLLM).
enum class KvLayout : int { kContiguous = 0, kPaged };

// Which tokens a sequence's cache keeps once it holds `budget` of them
// (models/kv/kv_eviction.h has the rules and their sources):
//   full    every token (no budget);
//   window  the most recent `budget` (a rolling buffer, as a sliding-window model);
//   sink    the first `sink_tokens` and the most recent budget − sink_tokens
//           (StreamingLLM's attention sinks, Xiao et al. 2024);
//   h2o     the heavy hitters by accumulated attention and the most recent
//           tokens, half the budget each (H2O, Zhang et al. 2023).
// Under any budget a sequence holds at most `budget` token slots per layer:
// the cache's bytes are those of a window of `budget` tokens.
enum class KvPolicy : int { kFull = 0, kWindow, kSink, kH2O };
inline constexpr int64_t kKvDefaultSinkTokens = 4;  // StreamingLLM's four initial tokens
struct KvEviction {
  KvPolicy policy = KvPolicy::kFull;
  int64_t budget = 0;                          // tokens kept per sequence (window, sink, h2o)
  int64_t sink_tokens = kKvDefaultSinkTokens;  // sink
  bool evicts() const { return policy != KvPolicy::kFull; }
  // Slots kept by a sequence: min(tokens, budget) under a policy.
  std::optional<int64_t> cap() const { return evicts() ? std::optional<int64_t>(budget) : std::nullopt; }
  // H2O's recent window: the newer half of the budget (the older half holds heavy hitters).
  int64_t h2o_recent_tokens() const { return budget - budget / 2; }
};
// The slot cap a sequence lives under: the smaller of a sliding-window model's
// window and the policy's budget (none: every token).
inline std::optional<int64_t> kv_slot_cap(std::optional<int64_t> model_window, const KvEviction& e) {
  if (model_window && e.evicts()) return *model_window < e.budget ? *model_window : e.budget;
  return model_window ? model_window : e.cap();
}

// Bytes of n values in a format: 2n (bf16), n (fp8, int8), n/2 (int4: two
// 4-bit codes per byte, n even).
inline constexpr int64_t kv_values_bytes(KvFormat f, int64_t n) {
  return f == KvFormat::kBF16 ? 2 * n : f == KvFormat::kInt4 ? n / 2 : n;
}
inline constexpr bool kv_quantized(KvFormat f) { return f != KvFormat::kBF16; }
inline constexpr int64_t kKvScaleBytes = 4;  // a token-head, tensor or channel scale is one fp32
// An int4 group's parameters: an fp16 scale and an fp16 zero point (the
// group's minimum), as KIVI stores them (Liu et al. 2024, "KIVI: a tuning-free
// asymmetric 2bit quantization for KV cache": scale and mn kept in fp16).
inline constexpr int64_t kKvGroupParamBytes = 4;
// Default values per int4 group: KIVI's group size G = 32, the granularity at
// which its 4-bit caches keep accuracy (paper, section 4).
inline constexpr int64_t kKvDefaultGroup = 32;

std::string_view kv_format_name(KvFormat f);                         // "bf16" | "fp8" | "int8" | "int4"
std::string_view kv_scales_name(KvScales s);                         // "tensor" | "token-head" | "channel" | "group"
std::string_view kv_layout_name(KvLayout k);                         // "contiguous" | "paged"
std::optional<KvFormat> kv_format_from_name(std::string_view name);  // also "fp8-e4m3", "e4m3"
std::optional<KvScales> kv_scales_from_name(std::string_view name);  // also "per-tensor", …
std::optional<KvLayout> kv_layout_from_name(std::string_view name);
std::string_view kv_policy_name(KvPolicy p);  // "full" | "window" | "sink" | "h2o"
std::optional<KvPolicy> kv_policy_from_name(std::string_view name);

}  // namespace gpuledger
