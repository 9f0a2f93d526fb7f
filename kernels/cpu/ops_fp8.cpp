// CpuDevice FP8 emulation: the per-tensor current-amax scale (or each block's
// power-of-2 scale, the blockwise recipe), then each value cast to FP8 (core/fp8.h: round to nearest even, saturating)
// and back to fp32 times the inverse scale — what an FP8 GEMM's operand holds, so that an fp32 GEMM of two such
// operands is the FP8 GEMM with fp32 accumulation.
#include <algorithm>
#include <cmath>
#include <vector>

#include "core/int_math.h"
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

// The blockwise cast: each block's amax, its power-of-2 scale, the block cast.
void CpuDevice::fp8_quantize_dequantize_blocks_impl(float* dst, const void* src, DType t, int64_t rows, int64_t cols,
                                                    int64_t block_rows, int64_t block_cols, Fp8Format f) {
  convert_to_fp32(src, t, dst, rows * cols);
  const int64_t br_n = ceil_div(rows, block_rows), bc_n = ceil_div(cols, block_cols);
#pragma omp parallel for collapse(2) if (rows * cols > (1 << 15))
  for (int64_t bi = 0; bi < br_n; ++bi)
    for (int64_t bj = 0; bj < bc_n; ++bj) {
      const int64_t r0 = bi * block_rows, r1 = std::min(rows, r0 + block_rows);
      const int64_t c0 = bj * block_cols, c1 = std::min(cols, c0 + block_cols);
      float amax = 0.0f;
      for (int64_t r = r0; r < r1; ++r)
        for (int64_t c = c0; c < c1; ++c) amax = std::max(amax, std::fabs(dst[r * cols + c]));
      const float scale = fp8_block_scale(amax, f), scale_inv = 1.0f / scale;  // a power of 2: exact
      for (int64_t r = r0; r < r1; ++r)
        for (int64_t c = c0; c < c1; ++c) {
          float& x = dst[r * cols + c];
          x = fp8_to_fp32(fp32_to_fp8(x * scale, f), f) * scale_inv;
        }
    }
}

}  // namespace gpuledger
