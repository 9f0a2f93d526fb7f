// CPU reference rotary position embedding (Su et al. 2021, RoFormer), in the
// rotate-half convention of Llama / Hugging Face: element i of a head pairs with
// element i + D/2, rotated by angle pos · θ^(−2i/D), i < D/2. In place on
// x (B, H, T, D), token t at positions.position(t) (pos_offset + t for one span). Backward applies the transpose of the
// rotation, i.e. the rotation by the opposite angle.
#include <cmath>
#include <vector>

#include "kernels/cpu/cpu_device.h"

namespace gpuledger {
namespace {

// Below this many elements a loop stays on one thread: the OpenMP fork/join
// (microseconds, far more on a loaded machine) costs more than the loop.
constexpr int64_t kParallelMinElems = int64_t{1} << 15;

// Rotates every head row of x by +angle (sign = +1) or −angle (sign = −1).
// Angles, cos and sin are computed in double and rounded once to float: the
// reference should not inherit fp32's loss of angle precision at large positions
// (pos · inv_freq reaches 10⁴ rad at long contexts); the rotation itself is fp32.
void rope_apply(void* x, DType t, int64_t B, int64_t H, int64_t T, int64_t D, const TokenSpans& positions, float theta,
                int sign) {
  const int64_t half = D / 2, eb = dtype_bytes(t);
  char* base = static_cast<char*>(x);
#pragma omp parallel if (B * H * T * D > kParallelMinElems)
  {
    std::vector<float> cs(static_cast<size_t>(half)), sn(static_cast<size_t>(half)), row(static_cast<size_t>(D));
#pragma omp for schedule(static)
    for (int64_t tt = 0; tt < T; ++tt) {
      const double pos = static_cast<double>(positions.position(tt));
      for (int64_t i = 0; i < half; ++i) {
        // inv_freq_i = θ^(−2i/D): Su et al. 2021 θ_i = 10000^(−2(i−1)/d), i = 1…d/2
        const double angle = pos * std::pow(static_cast<double>(theta), -2.0 * i / D);
        cs[i] = static_cast<float>(std::cos(angle));
        sn[i] = static_cast<float>(sign * std::sin(angle));
      }
      for (int64_t b = 0; b < B; ++b)
        for (int64_t h = 0; h < H; ++h) {
          char* rp = base + (((b * H + h) * T + tt) * D) * eb;
          convert_to_fp32(rp, t, row.data(), D);
          for (int64_t i = 0; i < half; ++i) {
            const float x1 = row[i], x2 = row[i + half];
            row[i] = x1 * cs[i] - x2 * sn[i];
            row[i + half] = x2 * cs[i] + x1 * sn[i];
          }
          convert_from_fp32(row.data(), rp, t, D);
        }
    }
  }
}

}  // namespace

void CpuDevice::rope_forward_impl(void* x, DType t, int64_t B, int64_t H, int64_t T, int64_t D,
                                  const TokenSpans& positions, float theta) {
  rope_apply(x, t, B, H, T, D, positions, theta, +1);
}

void CpuDevice::rope_backward_impl(void* dx, DType t, int64_t B, int64_t H, int64_t T, int64_t D,
                                   const TokenSpans& positions, float theta) {
  rope_apply(dx, t, B, H, T, D, positions, theta, -1);
}

}  // namespace gpuledger
