// Device presets from datasheets: memory, dense peak FLOP/s per dtype, memory
// bandwidth, and the source of each figure. An unknown figure is std::nullopt
// (explicitly unknown), never −1.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/fp8.h"

namespace gpuledger {

struct DeviceSpec {
  std::string name;         // "h100-sxm"
  std::string description;  // "NVIDIA H100 SXM5 80GB"
  int64_t memory_bytes = 0;
  std::optional<double> peak_bf16_flops;  // dense, no sparsity
  std::optional<double> peak_fp16_flops;
  std::optional<double> peak_tf32_flops;  // what an fp32 GEMM runs at on tensor cores
  std::optional<double> peak_fp32_flops;  // non-tensor-core fp32
  std::optional<double> bandwidth_bytes_per_s;
  std::string source;
  std::vector<std::string> aliases;  // names cudaGetDeviceProperties may report
  // Dense FP8 tensor-core peak (fp32 accumulate); nullopt: no FP8 tensor cores
  // (Ampere), so --dtype fp8 is refused there (docs/formulas/fp8.md "Peak").
  std::optional<double> peak_fp8_flops = std::nullopt;
  std::string fp8_source = {};
};

const std::vector<DeviceSpec>& device_presets();
// By preset name or alias (case-insensitive); nullopt if unknown.
std::optional<DeviceSpec> find_device(const std::string& name);
// The CUDA compute capability's major version (8: A100, A10, L40S, RTX 4090;
// 9: H100, H200; 10: B200).
int device_sm_major(const DeviceSpec& d);
// PyTorch's default cuBLAS workspace per handle (aten/src/ATen/cuda/
// CublasHandlePool.cpp, parseChosenWorkspaceSize, CUBLAS_WORKSPACE_CONFIG
// unset): ":4096:2:16:8" = 4096 KiB · 2 + 16 KiB · 8 = 8,519,680 bytes, and
// 4096 KiB · 8 = 32 MiB on Hopper and Blackwell (major 9, 10, 12). It is
// allocated through the caching allocator, so it is part of "reserved".
int64_t torch_cublas_workspace_bytes(int sm_major);
// The dense peak for a compute dtype (fp32 maps to tf32 on GPUs with tensor cores).
std::optional<double> device_peak_flops(const DeviceSpec& d, DType dtype);
// The peak a run's GEMMs are taken against: the FP8 dense peak when the run
// trains in FP8 (fp8 != kNone), else the dtype's (docs/formulas/fp8.md "MFU").
std::optional<double> device_peak_flops(const DeviceSpec& d, DType dtype, Fp8Recipe fp8);
// Where that peak comes from: the preset's source, with the FP8 figure's source for an fp8 run.
std::string device_peak_source(const DeviceSpec& d, Fp8Recipe fp8);

}  // namespace gpuledger
