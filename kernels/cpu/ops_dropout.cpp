// CPU reference dropout (Srivastava et al. 2014, inverted: kept values scaled by
// 1/(1 − p) in forward so inference needs no rescale). Element i is kept iff
// philox_uniform(key, i) >= p (kernels/philox.h), so the CPU, CUDA and flash
// attention kernels draw the same mask. Computes in fp32 on 16-bit storage.
#include <algorithm>
#include <cstdint>

#include "kernels/cpu/cpu_device.h"
#include "kernels/philox.h"

namespace gpuledger {
namespace {

// Elements per chunk: converted to fp32 on the stack, processed, stored back.
// A multiple of 4, so chunks start on Philox block boundaries.
constexpr int64_t kChunk = 1024;
// Below this many elements a loop stays on one thread: the OpenMP fork/join
// (microseconds, far more on a loaded machine) costs more than the loop.
constexpr int64_t kParallelMinElems = int64_t{1} << 15;

inline const void* at(const void* p, DType t, int64_t i) { return static_cast<const char*>(p) + i * dtype_bytes(t); }
inline void* at(void* p, DType t, int64_t i) { return static_cast<char*>(p) + i * dtype_bytes(t); }

// 1/(1 − p), or 0 when p == 1 (everything dropped: 0, not 0·inf).
inline float keep_scale(float p) { return p < 1.0f ? 1.0f / (1.0f - p) : 0.0f; }

}  // namespace

// mask may be null (nothing saved: e.g. inference or a recompute that needs only out).
void CpuDevice::dropout_forward_impl(void* out, uint8_t* mask, const void* x, DType t, int64_t n, float p, RngKey key) {
  const float sc = keep_scale(p);
#pragma omp parallel for schedule(static) if (n > kParallelMinElems)
  for (int64_t c0 = 0; c0 < n; c0 += kChunk) {
    const int64_t m = std::min(kChunk, n - c0);
    float buf[kChunk], u[kChunk];
    convert_to_fp32(at(x, t, c0), t, buf, m);
    if (p > 0.0f) {
      philox_uniform_fill(key.seed, key.stream, static_cast<uint64_t>(c0), m, u);
      for (int64_t i = 0; i < m; ++i) {
        const bool keep = u[i] >= p;
        buf[i] = keep ? buf[i] * sc : 0.0f;
        if (mask) mask[c0 + i] = keep ? 1 : 0;
      }
    } else if (mask) {
      std::fill(mask + c0, mask + c0 + m, uint8_t{1});  // p == 0: out = x exactly
    }
    convert_from_fp32(buf, at(out, t, c0), t, m);
  }
}

void CpuDevice::dropout_backward_impl(void* dx, DType dx_t, const void* dout, DType dout_t, const uint8_t* mask,
                                      int64_t n, float p) {
  const float sc = keep_scale(p);
#pragma omp parallel for schedule(static) if (n > kParallelMinElems)
  for (int64_t c0 = 0; c0 < n; c0 += kChunk) {
    const int64_t m = std::min(kChunk, n - c0);
    float buf[kChunk];
    convert_to_fp32(at(dout, dout_t, c0), dout_t, buf, m);
    if (p > 0.0f)
      for (int64_t i = 0; i < m; ++i) buf[i] = mask[c0 + i] ? buf[i] * sc : 0.0f;
    convert_from_fp32(buf, at(dx, dx_t, c0), dx_t, m);
  }
}

}  // namespace gpuledger
