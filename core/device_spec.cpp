// Device presets from NVIDIA datasheets and architecture whitepapers: memory,
// dense (no 2:4 sparsity) peak FLOP/s per dtype, memory bandwidth, and where
// each figure comes from. docs/formulas/devices.md explains the choices.
//
// Conventions
//   - Peaks are dense. Datasheets print the sparse figure with an asterisk;
//     the dense one is half of it.
//   - bf16/fp16 peaks are with fp32 accumulation (what our GEMMs ask for); on
//     GeForce parts fp16 with fp16 accumulation is twice as fast and not used.
//   - memory_bytes reads the datasheet's "GB" as GiB (2³⁰): HBM and GDDR parts
//     are built in binary sizes (A100 80GB: nvidia-smi shows 81920 MiB).
//     cudaMemGetInfo reports a little less (e.g. H100 SXM ≈ 79.6 GiB, H200 ≈
//     140.4 GiB); a CUDA run's report carries what the device says.
//   - Bandwidth in bytes/s with decimal prefixes (TB/s = 1e12), as printed.
//   - A figure we could not pin to one published value is std::nullopt.
#include "core/device_spec.h"

#include <algorithm>
#include <cctype>
#include <string>
#include <utility>

namespace gpuledger {
namespace {

constexpr int64_t kGiB = int64_t{1} << 30;
constexpr double kT = 1e12;  // tera

void with_fp8(DeviceSpec& d, double peak_fp8_flops, std::string source) {
  d.peak_fp8_flops = peak_fp8_flops;
  d.fp8_source = std::move(source);
}

std::vector<DeviceSpec> make_presets() {
  // One preset per block, its fields in the order of DeviceSpec.
  // clang-format off
  std::vector<DeviceSpec> v;
  // NVIDIA A100 datasheet (nvidia-a100-datasheet-us-nvidia-1758950-r4-web):
  // BF16/FP16 Tensor Core 312 TFLOPS (624 sparse), TF32 156 (312 sparse),
  // FP32 19.5; 40GB HBM2 1,555 GB/s; 80GB HBM2e 2,039 GB/s (SXM).
  v.push_back({"a100-40gb", "NVIDIA A100 40GB (SXM4 / PCIe)", 40 * kGiB, 312 * kT, 312 * kT, 156 * kT,
               19.5 * kT, 1555e9,
               "NVIDIA A100 datasheet: 312 TFLOPS bf16/fp16, 156 tf32, 19.5 fp32 (dense); 40GB, 1,555 GB/s",
               {"NVIDIA A100-SXM4-40GB", "NVIDIA A100-PCIE-40GB"}});
  // NVIDIA A10 datasheet (nvidia-a10-datasheet): BF16/FP16 Tensor Core 125
  // TFLOPS (250 sparse), TF32 62.5 (125 sparse), FP32 31.2; 24GB GDDR6, 600 GB/s.
  v.push_back({"a10", "NVIDIA A10 24GB", 24 * kGiB, 125 * kT, 125 * kT, 62.5 * kT, 31.2 * kT, 600e9,
               "NVIDIA A10 datasheet: 125 TFLOPS bf16/fp16, 62.5 tf32, 31.2 fp32 (dense); 24GB GDDR6, 600 GB/s",
               {"NVIDIA A10"}});
  // NVIDIA A10G (AWS EC2 G5 instances): AWS's G5 page gives 24 GB of GPU
  // memory per A10G. Its bandwidth is taken as the A10's (the same GA102 chip
  // with 24GB GDDR6 at 600 GB/s), a widely reported figure that no vendor
  // datasheet prints for the A10G. Neither AWS nor NVIDIA publishes its
  // tensor-core peak (its clocks differ from the A10's): unknown rather than
  // borrowed from the A10.
  v.push_back({"a10g", "NVIDIA A10G 24GB (AWS G5)", 24 * kGiB, std::nullopt, std::nullopt, std::nullopt,
               std::nullopt, 600e9,
               "AWS EC2 G5: 24 GB per NVIDIA A10G; 600 GB/s taken from the A10 datasheet (same GA102 "
               "GDDR6); tensor peaks unpublished (unknown)",
               {"NVIDIA A10G"}});
  v.push_back({"a100-80gb", "NVIDIA A100 80GB SXM4", 80 * kGiB, 312 * kT, 312 * kT, 156 * kT, 19.5 * kT,
               2039e9,
               "NVIDIA A100 datasheet: 312 TFLOPS bf16/fp16, 156 tf32, 19.5 fp32 (dense); 80GB SXM, 2,039 GB/s",
               {"NVIDIA A100-SXM4-80GB"}});
  // NVIDIA H100 Tensor Core GPU Architecture whitepaper (Table: H100 SXM5):
  // BF16/FP16 989.4 TFLOPS (1,978.9 sparse), TF32 494.7, FP32 66.9; datasheet:
  // 80GB HBM3, 3.35 TB/s.
  v.push_back({"h100-sxm", "NVIDIA H100 SXM5 80GB", 80 * kGiB, 989.4 * kT, 989.4 * kT, 494.7 * kT,
               66.9 * kT, 3.35e12,
               "NVIDIA H100 whitepaper (SXM5): 989.4 TFLOPS bf16/fp16, 494.7 tf32, 66.9 fp32 (dense); "
               "H100 datasheet: 80GB HBM3, 3.35 TB/s",
               {"NVIDIA H100 80GB HBM3"}});
  // FP8 (E4M3/E5M2) 1,978.9 TFLOPS dense (3,957.8 sparse): the same whitepaper's table.
  with_fp8(v.back(), 1978.9 * kT, "NVIDIA H100 whitepaper (SXM5): FP8 1,978.9 TFLOPS dense (3,957.8 sparse)");
  // NVIDIA H100 datasheet, PCIe column: BF16/FP16 1,513 TFLOPS sparse, TF32 756
  // sparse, FP32 51 TFLOPS; 80GB HBM2e, 2 TB/s.
  v.push_back({"h100-pcie", "NVIDIA H100 PCIe 80GB", 80 * kGiB, 756.5 * kT, 756.5 * kT, 378 * kT, 51 * kT,
               2.0e12,
               "NVIDIA H100 datasheet (PCIe): 1,513 TFLOPS bf16/fp16 and 756 tf32 with sparsity, halved; "
               "51 fp32; 80GB HBM2e, 2 TB/s",
               {"NVIDIA H100 PCIe"}});
  with_fp8(v.back(), 1513 * kT, "NVIDIA H100 datasheet (PCIe): FP8 3,026 TFLOPS with sparsity, halved");
  // NVIDIA H200 datasheet (SXM): the H100 SXM5's compute (BF16 1,979 TFLOPS
  // sparse) with 141GB HBM3e at 4.8 TB/s.
  v.push_back({"h200", "NVIDIA H200 SXM 141GB", 141 * kGiB, 989.4 * kT, 989.4 * kT, 494.7 * kT, 66.9 * kT,
               4.8e12,
               "NVIDIA H200 datasheet (SXM): 1,979 TFLOPS bf16/fp16 sparse = H100 SXM5's 989.4 dense, "
               "494.7 tf32, 66.9 fp32; 141GB HBM3e, 4.8 TB/s",
               {"NVIDIA H200"}});
  with_fp8(v.back(), 1979 * kT, "NVIDIA H200 datasheet (SXM): FP8 3,958 TFLOPS with sparsity, halved");
  // NVIDIA L40S datasheet: BF16/FP16 362.05 TFLOPS (733 sparse), TF32 183 (366
  // sparse), FP32 91.6; 48GB GDDR6, 864 GB/s.
  v.push_back({"l40s", "NVIDIA L40S 48GB", 48 * kGiB, 362.05 * kT, 362.05 * kT, 183 * kT, 91.6 * kT,
               864e9,
               "NVIDIA L40S datasheet: 362.05 TFLOPS bf16/fp16, 183 tf32, 91.6 fp32 (dense); 48GB GDDR6, 864 GB/s",
               {"NVIDIA L40S"}});
  with_fp8(v.back(), 733 * kT, "NVIDIA L40S datasheet: FP8 1,466 TFLOPS with sparsity, halved");
  // NVIDIA Ada GPU Architecture whitepaper, Appendix A (GeForce RTX 4090):
  // FP16/BF16 Tensor with FP32 accumulate 165.2 TFLOPS (330.4 sparse; 330.3
  // dense with FP16 accumulate), TF32 82.6, FP32 82.6; 24GB GDDR6X, 1,008 GB/s.
  v.push_back({"rtx4090", "NVIDIA GeForce RTX 4090 24GB", 24 * kGiB, 165.2 * kT, 165.2 * kT, 82.6 * kT,
               82.6 * kT, 1008e9,
               "NVIDIA Ada whitepaper, App. A: 165.2 TFLOPS bf16/fp16 with fp32 accumulate (dense), 82.6 tf32, "
               "82.6 fp32; 24GB GDDR6X, 1,008 GB/s",
               {"NVIDIA GeForce RTX 4090"}});
  with_fp8(v.back(), 330.3 * kT,
           "NVIDIA Ada whitepaper, App. A: FP8 with fp32 accumulate 330.3 TFLOPS dense (660.6 sparse)");
  // NVIDIA HGX B200 (per GPU, 1,000 W): FP16/BF16 Tensor 4.5 PFLOPS sparse ->
  // 2.25 dense; 180GB HBM3e; 8 TB/s (DGX B200: 64 TB/s over 8 GPUs). TF32 is
  // printed as 2.2 and as 2.25 PFLOPS sparse, FP32 as 75 and 80 TFLOPS in
  // NVIDIA's own material: left unknown rather than guessed.
  v.push_back({"b200", "NVIDIA B200 180GB (HGX)", 180 * kGiB, 2250 * kT, 2250 * kT, std::nullopt,
               std::nullopt, 8.0e12,
               "NVIDIA HGX/DGX B200 datasheet: 4.5 PFLOPS bf16/fp16 with sparsity, halved; 180GB HBM3e, "
               "8 TB/s; tf32/fp32 peaks published inconsistently (unknown)",
               {"NVIDIA B200"}});
  with_fp8(v.back(), 4500 * kT, "NVIDIA HGX/DGX B200 datasheet: FP8 9 PFLOPS with sparsity, halved");
  return v;
  // clang-format on
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

}  // namespace

const std::vector<DeviceSpec>& device_presets() {
  static const std::vector<DeviceSpec> presets = make_presets();
  return presets;
}

std::optional<DeviceSpec> find_device(const std::string& name) {
  const std::string key = lower(name);
  for (const auto& d : device_presets()) {
    if (lower(d.name) == key) return d;
    for (const auto& a : d.aliases)
      if (lower(a) == key) return d;
  }
  return std::nullopt;
}

int device_sm_major(const DeviceSpec& d) {
  // From the architecture each datasheet names: Ampere (A100 8.0, A10/A10G
  // 8.6), Ada (L40S, RTX 4090 8.9), Hopper (H100, H200 9.0), Blackwell (B200 10.0).
  const std::string n = lower(d.name);
  if (n.rfind("h100", 0) == 0 || n == "h200") return 9;
  if (n == "b200") return 10;
  return 8;
}

int64_t torch_cublas_workspace_bytes(int sm_major) {
  if (sm_major == 9 || sm_major == 10 || sm_major == 12) return int64_t{4096} * 1024 * 8;
  return int64_t{4096} * 1024 * 2 + int64_t{16} * 1024 * 8;
}

std::optional<double> device_peak_flops(const DeviceSpec& d, DType dtype, Fp8Recipe fp8) {
  return fp8 != Fp8Recipe::kNone ? d.peak_fp8_flops : device_peak_flops(d, dtype);
}

std::string device_peak_source(const DeviceSpec& d, Fp8Recipe fp8) {
  return fp8 != Fp8Recipe::kNone ? d.fp8_source + "; " + d.source : d.source;
}

std::optional<double> device_peak_flops(const DeviceSpec& d, DType dtype) {
  switch (dtype) {
    case DType::kBF16: return d.peak_bf16_flops;
    case DType::kFP16: return d.peak_fp16_flops;
    // Every preset has tensor cores: an fp32 GEMM is taken against the TF32
    // peak (cuBLAS with TF32 tensor-op math). Unknown TF32 stays unknown: the
    // non-tensor fp32 peak would understate the peak and overstate MFU.
    case DType::kFP32: return d.peak_tf32_flops;
  }
  return std::nullopt;
}

}  // namespace gpuledger
