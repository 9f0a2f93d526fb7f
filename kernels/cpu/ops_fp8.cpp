// CpuDevice FP8 emulation: the per-tensor current-amax scale, then each value
// cast to FP8 (core/fp8.h: round to nearest even, saturating) and back to
// fp32 times the inverse scale — what an FP8 GEMM's operand holds, so that an
// fp32 GEMM of two such operands is the FP8 GEMM with fp32 accumulation.
#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/cpu/cpu_device.h"

namespace gpuledger {

void CpuDevice::fp8_quantize_dequantize_impl(float* dst, const void* src, DType t, int64_t n, Fp8Format f) {
  convert_to_fp32(src, t, dst, n);  // dst holds the fp32 values, then their FP8 images
  float amax = 0.0f;
#pragma omp parallel for reduction(max : amax) if (n > (1 << 15))
  for (int64_t i = 0; i < n; ++i) amax = std::max(amax, std::fabs(dst[i]));
  const float scale = fp8_scale_from_amax(amax, f, /*margin=*/0, /*previous_scale=*/1.0f);
  const float scale_inv = 1.0f / scale;
#pragma omp parallel for if (n > (1 << 15))
  for (int64_t i = 0; i < n; ++i) dst[i] = fp8_to_fp32(fp32_to_fp8(dst[i] * scale, f), f) * scale_inv;
}

}  // namespace gpuledger
