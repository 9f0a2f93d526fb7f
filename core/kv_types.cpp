// Names of the KV-cache vocabulary (core/kv_types.h).
#include "core/kv_types.h"

namespace gpuledger {

std::string_view kv_format_name(KvFormat f) {
  switch (f) {
    case KvFormat::kBF16: return "bf16";
    case KvFormat::kFP8E4M3: return "fp8";
    case KvFormat::kInt8: return "int8";
    case KvFormat::kInt4: return "int4";
  }
  return "?";
}

std::string_view kv_scales_name(KvScales s) {
  switch (s) {
    case KvScales::kPerTensor: return "tensor";
    case KvScales::kPerTokenHead: return "token-head";
    case KvScales::kPerChannel: return "channel";
    case KvScales::kPerGroup: return "group";
  }
  return "?";
}

std::string_view kv_layout_name(KvLayout k) { return k == KvLayout::kContiguous ? "contiguous" : "paged"; }

std::optional<KvFormat> kv_format_from_name(std::string_view n) {
  if (n == "bf16") return KvFormat::kBF16;
  if (n == "fp8" || n == "fp8-e4m3" || n == "e4m3") return KvFormat::kFP8E4M3;
  if (n == "int8") return KvFormat::kInt8;
  if (n == "int4") return KvFormat::kInt4;
  return std::nullopt;
}

std::optional<KvScales> kv_scales_from_name(std::string_view n) {
  if (n == "tensor" || n == "per-tensor") return KvScales::kPerTensor;
  if (n == "token-head" || n == "per-token-head") return KvScales::kPerTokenHead;
  if (n == "channel" || n == "per-channel") return KvScales::kPerChannel;
  if (n == "group" || n == "per-group") return KvScales::kPerGroup;
  return std::nullopt;
}

std::optional<KvLayout> kv_layout_from_name(std::string_view n) {
  if (n == "contiguous") return KvLayout::kContiguous;
  if (n == "paged") return KvLayout::kPaged;
  return std::nullopt;
}

std::string_view kv_policy_name(KvPolicy p) {
  switch (p) {
    case KvPolicy::kFull: return "full";
    case KvPolicy::kWindow: return "window";
    case KvPolicy::kSink: return "sink";
    case KvPolicy::kH2O: return "h2o";
  }
  return "?";
}

std::optional<KvPolicy> kv_policy_from_name(std::string_view n) {
  if (n == "full") return KvPolicy::kFull;
  if (n == "window") return KvPolicy::kWindow;
  if (n == "sink" || n == "streaming-llm") return KvPolicy::kSink;
  if (n == "h2o") return KvPolicy::kH2O;
  return std::nullopt;
}

}  // namespace gpuledger
