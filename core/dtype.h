// Storage dtypes and their sizes; bf16/fp16 <-> fp32 conversion
// (round-to-nearest-even). Compute on the CPU is always fp32; 16-bit values are
// only a storage format, so a CPU run's ledger matches a GPU run's.
#pragma once
#include <cstdint>
#include <optional>
#include <string_view>

namespace gpuledger {

enum class DType : int { kBF16 = 0, kFP16, kFP32 };

inline constexpr int64_t dtype_bytes(DType t) { return t == DType::kFP32 ? 4 : 2; }
std::string_view dtype_name(DType t);  // "bf16" | "fp16" | "fp32"
std::optional<DType> dtype_from_name(std::string_view name);

// ---- scalar conversions (round-to-nearest-even; NaN stays NaN, overflow -> inf) ----
uint16_t fp32_to_bf16(float x);
float bf16_to_fp32(uint16_t x);
uint16_t fp32_to_fp16(float x);
float fp16_to_fp32(uint16_t x);

// ---- bulk conversions between a typed buffer and fp32 (n elements) ----
void convert_to_fp32(const void* src, DType src_type, float* dst, int64_t n);
void convert_from_fp32(const float* src, void* dst, DType dst_type, int64_t n);

}  // namespace gpuledger
