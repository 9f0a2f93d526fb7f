// Device presets (core/device_spec.h): lookup by preset name and by
// the name cudaGetDeviceProperties reports, datasheet figures, and unknowns
// that stay explicitly unknown.
#include <gtest/gtest.h>

#include <set>

#include "core/device_spec.h"

namespace gpuledger {
namespace {

constexpr int64_t GiB = int64_t{1} << 30;

TEST(Devices, LookupByNameAndAlias) {
  auto h100 = find_device("h100-sxm");
  ASSERT_TRUE(h100);
  EXPECT_EQ(h100->memory_bytes, 80 * GiB);
  EXPECT_DOUBLE_EQ(*h100->peak_bf16_flops, 989.4e12);  // 1,978.9 with sparsity, halved
  EXPECT_DOUBLE_EQ(*h100->bandwidth_bytes_per_s, 3.35e12);
  // What cudaGetDeviceProperties reports, in any case.
  auto alias = find_device("NVIDIA H100 80GB HBM3");
  ASSERT_TRUE(alias);
  EXPECT_EQ(alias->name, "h100-sxm");
  EXPECT_EQ(find_device("nvidia h200")->name, "h200");
  EXPECT_EQ(find_device("H200")->name, "h200");
  EXPECT_EQ(find_device("NVIDIA A100-SXM4-80GB")->name, "a100-80gb");
  EXPECT_EQ(find_device("NVIDIA A100-SXM4-40GB")->name, "a100-40gb");
  EXPECT_EQ(find_device("NVIDIA GeForce RTX 4090")->name, "rtx4090");
}

TEST(Devices, DatasheetFigures) {
  const auto h200 = *find_device("h200");
  EXPECT_EQ(h200.memory_bytes, 141 * GiB);
  EXPECT_DOUBLE_EQ(*h200.bandwidth_bytes_per_s, 4.8e12);
  EXPECT_DOUBLE_EQ(*h200.peak_bf16_flops, 989.4e12);
  const auto a100 = *find_device("a100-80gb");
  EXPECT_DOUBLE_EQ(*a100.peak_bf16_flops, 312e12);
  EXPECT_DOUBLE_EQ(*a100.bandwidth_bytes_per_s, 2039e9);
  EXPECT_DOUBLE_EQ(*find_device("a100-40gb")->bandwidth_bytes_per_s, 1555e9);
  EXPECT_DOUBLE_EQ(*find_device("l40s")->peak_bf16_flops, 362.05e12);    // 733 with sparsity
  EXPECT_DOUBLE_EQ(*find_device("rtx4090")->peak_bf16_flops, 165.2e12);  // fp32 accumulate
  EXPECT_DOUBLE_EQ(*find_device("b200")->peak_bf16_flops, 2250e12);
  EXPECT_DOUBLE_EQ(*find_device("h100-pcie")->peak_bf16_flops, 756.5e12);
}

TEST(Devices, PeakByDtype) {
  const auto a100 = *find_device("a100-40gb");
  EXPECT_DOUBLE_EQ(*device_peak_flops(a100, DType::kBF16), 312e12);
  EXPECT_DOUBLE_EQ(*device_peak_flops(a100, DType::kFP16), 312e12);
  EXPECT_DOUBLE_EQ(*device_peak_flops(a100, DType::kFP32), 156e12);  // TF32 tensor cores
  // B200's TF32 peak is unknown: no fp32 MFU rather than a wrong one.
  EXPECT_FALSE(device_peak_flops(*find_device("b200"), DType::kFP32));
}

TEST(Devices, UnknownIsNullopt) {
  EXPECT_FALSE(find_device("tpu-v5p"));
  EXPECT_FALSE(find_device(""));
  EXPECT_FALSE(find_device("h100"));  // ambiguous (SXM or PCIe): no guess
}

TEST(Devices, A10AndA10G) {
  // A10 datasheet: 24GB GDDR6, 600 GB/s, 125 TFLOPS bf16 dense (250 sparse).
  const auto a10 = *find_device("NVIDIA A10");
  EXPECT_EQ(a10.name, "a10");
  EXPECT_EQ(a10.memory_bytes, int64_t{24} << 30);
  EXPECT_DOUBLE_EQ(*a10.bandwidth_bytes_per_s, 600e9);
  EXPECT_DOUBLE_EQ(*a10.peak_bf16_flops, 125e12);
  const auto a10g = *find_device("NVIDIA A10G");
  EXPECT_EQ(a10g.name, "a10g");
  EXPECT_EQ(a10g.memory_bytes, int64_t{24} << 30);
  EXPECT_DOUBLE_EQ(*a10g.bandwidth_bytes_per_s, 600e9);
  EXPECT_FALSE(a10g.peak_bf16_flops);
}

TEST(Devices, EveryPresetIsComplete) {
  std::set<std::string> names;
  for (const auto& d : device_presets()) {
    EXPECT_TRUE(names.insert(d.name).second) << d.name;
    for (const auto& a : d.aliases) EXPECT_TRUE(names.insert(a).second) << a;
    EXPECT_GT(d.memory_bytes, 0) << d.name;
    // The A10G's tensor peak is published nowhere (core/device_spec.cpp).
    if (d.name != "a10g") {
      EXPECT_TRUE(d.peak_bf16_flops) << d.name;
    }
    EXPECT_TRUE(d.bandwidth_bytes_per_s) << d.name;
    EXPECT_FALSE(d.source.empty()) << d.name;
    EXPECT_FALSE(d.aliases.empty()) << d.name;
  }
  for (const char* n :
       {"a10", "a10g", "a100-40gb", "a100-80gb", "h100-sxm", "h100-pcie", "h200", "l40s", "rtx4090", "b200"})
    EXPECT_TRUE(names.count(n)) << n;
}

// FP8 dense peaks (datasheets, halved from "with sparsity"; docs/formulas/fp8.md
// §4): an fp8 run is taken against them; Ampere has none.
TEST(DeviceSpec, Fp8PeaksAndTheRunPeak) {
  const double T = 1e12;
  EXPECT_DOUBLE_EQ(*find_device("h100-sxm")->peak_fp8_flops, 1978.9 * T);
  EXPECT_DOUBLE_EQ(*find_device("h200")->peak_fp8_flops, 1979 * T);
  EXPECT_DOUBLE_EQ(*find_device("b200")->peak_fp8_flops, 4500 * T);
  EXPECT_DOUBLE_EQ(*find_device("h100-pcie")->peak_fp8_flops, 1513 * T);
  for (const char* ampere : {"a10", "a10g", "a100-40gb", "a100-80gb"})
    EXPECT_FALSE(find_device(ampere)->peak_fp8_flops.has_value()) << ampere;
  for (const auto& d : device_presets()) EXPECT_EQ(d.fp8_source.empty(), !d.peak_fp8_flops.has_value()) << d.name;
  const DeviceSpec h100 = *find_device("h100-sxm");
  EXPECT_DOUBLE_EQ(*device_peak_flops(h100, DType::kBF16, Fp8Recipe::kDelayed), 1978.9 * T);
  EXPECT_DOUBLE_EQ(*device_peak_flops(h100, DType::kBF16, Fp8Recipe::kNone), 989.4 * T);
  EXPECT_EQ(device_peak_source(h100, Fp8Recipe::kNone), h100.source);
  EXPECT_EQ(device_peak_source(h100, Fp8Recipe::kDelayed).rfind(h100.fp8_source, 0), 0u);
}

}  // namespace
}  // namespace gpuledger
