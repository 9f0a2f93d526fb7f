// CUDA rotary position embedding (Su et al. 2021, RoFormer), rotate-half
// convention (Llama / Hugging Face): element i of a head pairs with i + D/2,
// rotated by pos·θ^(−2i/D), in place on x (B, H, T, D) at position
// positions.position(t); backward rotates by the opposite angle. As the CPU reference
// (kernels/cpu/ops_rope.cpp), angles, cos and sin are computed in double and
// rounded once to float (fp32 angles lose ~1e-3 rad at 10⁴ rad, i.e. at long
// contexts); the rotation is fp32. A block handles one position for
// kRowsPerBlock head rows: its D/2 cos/sin pairs are computed once, in shared
// memory, and shared by those rows.
#include "kernels/cuda/launch_config.h"
#include "kernels/cuda/simt_device.cuh"

namespace gpuledger {
inline namespace GPL_SIMT_NAMESPACE {
namespace {

using namespace simt;

constexpr int kRopeThreads = 128;
constexpr int64_t kRowsPerBlock = 32;

// grid (T, ⌈B·H / kRowsPerBlock⌉); dynamic shared memory: D floats (cos | sin).
template <class E>
__global__ void rope_kernel(E* x, int64_t BH, int64_t T, int64_t D, TokenSpans positions, float theta, float sign) {
  GPL_DYNAMIC_SMEM(float, table);
  const int64_t half = D / 2, t = blockIdx.x;
  float* cs = table;
  float* sn = table + half;
  const double pos = static_cast<double>(positions.position(t));
  for (int64_t i = threadIdx.x; i < half; i += blockDim.x) {
    // inv_freq_i = θ^(−2i/D) (Su et al. 2021: θ_i = 10000^(−2(i−1)/d), i = 1…d/2)
    const double angle = pos * pow(static_cast<double>(theta), -2.0 * i / D);
    cs[i] = static_cast<float>(cos(angle));
    sn[i] = static_cast<float>(sign * sin(angle));
  }
  __syncthreads();
  const int64_t bh0 = static_cast<int64_t>(blockIdx.y) * kRowsPerBlock;
  for (int64_t e = threadIdx.x; e < kRowsPerBlock * half; e += blockDim.x) {
    const int64_t bh = bh0 + e / half, i = e % half;
    if (bh >= BH) break;  // e only grows: every later pair is past the end too
    E* row = x + (bh * T + t) * D;
    const float x1 = to_float(row[i]), x2 = to_float(row[i + half]);
    row[i] = from_float<E>(x1 * cs[i] - x2 * sn[i]);
    row[i + half] = from_float<E>(x2 * cs[i] + x1 * sn[i]);
  }
}

void rope_apply(cudaStream_t stream, void* x, DType t, int64_t B, int64_t H, int64_t T, int64_t D,
                const TokenSpans& positions, float theta, float sign) {
  if (B <= 0 || H <= 0 || T <= 0) return;
  const dim3 grid(static_cast<unsigned>(T), static_cast<unsigned>(cuda_launch::ceil_div(B * H, kRowsPerBlock)));
  dispatch(t, [&](auto tag) {
    using E = decltype(tag);
    launch_kernel(rope_kernel<E>, grid, dim3(kRopeThreads), static_cast<size_t>(D) * 4, stream, static_cast<E*>(x),
                  B * H, T, D, positions, theta, sign);
  });
}

}  // namespace

void SimtDevice::rope_forward_impl(void* x, DType t, int64_t B, int64_t H, int64_t T, int64_t D,
                                   const TokenSpans& positions, float theta) {
  rope_apply(stream(), x, t, B, H, T, D, positions, theta, +1.0f);
}

void SimtDevice::rope_backward_impl(void* dx, DType t, int64_t B, int64_t H, int64_t T, int64_t D,
                                    const TokenSpans& positions, float theta) {
  rope_apply(stream(), dx, t, B, H, T, D, positions, theta, -1.0f);
}

}  // namespace GPL_SIMT_NAMESPACE
}  // namespace gpuledger
