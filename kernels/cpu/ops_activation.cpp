// CPU reference activations: GELU (tanh approximation, Hendrycks & Gimpel 2016,
// as GPT-2 uses it), SwiGLU (Shazeer 2020, "GLU variants improve
// transformer", silu(gate) · up as Llama's MLP) and gpt-oss's clamped GLU. Element-wise; computes in fp32
// on chunks converted from the storage dtype.
#include <algorithm>
#include <cmath>
#include <cstdint>

#include "kernels/cpu/cpu_device.h"

namespace gpuledger {
namespace {

constexpr int64_t kChunk = 1024;  // elements converted to fp32 at a time (on the stack)
// Below this many elements a loop stays on one thread: the OpenMP fork/join
// (microseconds, far more on a loaded machine) costs more than the loop.
constexpr int64_t kParallelMinElems = int64_t{1} << 15;

inline const void* at(const void* p, DType t, int64_t i) { return static_cast<const char*>(p) + i * dtype_bytes(t); }
inline void* at(void* p, DType t, int64_t i) { return static_cast<char*>(p) + i * dtype_bytes(t); }

// gelu(x) = ½·x·(1 + tanh(u)), u = √(2/π)·(x + 0.044715·x³) (Hendrycks & Gimpel
// 2016, their tanh approximation).
constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kGeluC = 0.044715f;

inline float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }

}  // namespace

void CpuDevice::gelu_forward_impl(void* out, const void* x, DType t, int64_t n) {
#pragma omp parallel for schedule(static) if (n > kParallelMinElems)
  for (int64_t c0 = 0; c0 < n; c0 += kChunk) {
    const int64_t m = std::min(kChunk, n - c0);
    float xb[kChunk];
    convert_to_fp32(at(x, t, c0), t, xb, m);
    for (int64_t i = 0; i < m; ++i) {
      const float v = xb[i];
      xb[i] = 0.5f * v * (1.0f + std::tanh(kSqrt2OverPi * (v + kGeluC * v * v * v)));
    }
    convert_from_fp32(xb, at(out, t, c0), t, m);
  }
}

// d gelu/dx = ½(1 + tanh u) + ½·x·(1 − tanh² u)·√(2/π)·(1 + 3·0.044715·x²).
void CpuDevice::gelu_backward_impl(void* dx, const void* dout, const void* x, DType t, int64_t n) {
#pragma omp parallel for schedule(static) if (n > kParallelMinElems)
  for (int64_t c0 = 0; c0 < n; c0 += kChunk) {
    const int64_t m = std::min(kChunk, n - c0);
    float xb[kChunk], gb[kChunk];
    convert_to_fp32(at(x, t, c0), t, xb, m);
    convert_to_fp32(at(dout, t, c0), t, gb, m);
    for (int64_t i = 0; i < m; ++i) {
      const float v = xb[i];
      const float th = std::tanh(kSqrt2OverPi * (v + kGeluC * v * v * v));
      const float du = kSqrt2OverPi * (1.0f + 3.0f * kGeluC * v * v);
      gb[i] *= 0.5f * (1.0f + th) + 0.5f * v * (1.0f - th * th) * du;
    }
    convert_from_fp32(gb, at(dx, t, c0), t, m);
  }
}

namespace {

// The chunked frame of the gated ops: each chunk of gate and up (and, in a
// backward, dout) widened to fp32, f(g, u, d, m) rewriting g and u in place,
// then u stored to out_u and, when given, g to out_g (a backward's dgate,
// which may be dout's buffer: each chunk is read before it is written).
template <class F>
void glu_chunks(int64_t n, DType t, const void* gate, const void* up, const void* dout, void* out_g, void* out_u, F f) {
#pragma omp parallel for schedule(static) if (n > kParallelMinElems)
  for (int64_t c0 = 0; c0 < n; c0 += kChunk) {
    const int64_t m = std::min(kChunk, n - c0);
    float gb[kChunk], ub[kChunk], db[kChunk];
    convert_to_fp32(at(gate, t, c0), t, gb, m);
    convert_to_fp32(at(up, t, c0), t, ub, m);
    if (dout) convert_to_fp32(at(dout, t, c0), t, db, m);
    f(gb, ub, db, m);
    if (out_g) convert_from_fp32(gb, at(out_g, t, c0), t, m);
    convert_from_fp32(ub, at(out_u, t, c0), t, m);
  }
}

}  // namespace

// out = silu(gate) · up, silu(g) = g·σ(g).
void CpuDevice::swiglu_forward_impl(void* out, const void* gate, const void* up, DType t, int64_t n) {
  glu_chunks(n, t, gate, up, nullptr, nullptr, out, [](float* gb, float* ub, const float*, int64_t m) {
    for (int64_t i = 0; i < m; ++i) ub[i] *= gb[i] * sigmoid(gb[i]);
  });
}

// dgate = dout · up · σ(g)·(1 + g·(1 − σ(g)))  (d silu/dg), dup = dout · silu(g).
void CpuDevice::swiglu_backward_impl(void* dgate, void* dup, const void* dout, const void* gate, const void* up,
                                     DType t, int64_t n) {
  glu_chunks(n, t, gate, up, dout, dgate, dup, [](float* gb, float* ub, const float* db, int64_t m) {
    for (int64_t i = 0; i < m; ++i) {
      const float g = gb[i], sg = sigmoid(g), d = db[i];
      gb[i] = d * ub[i] * sg * (1.0f + g * (1.0f - sg));
      ub[i] = d * g * sg;
    }
  });
}

// gpt-oss's clamped SwiGLU (device.h): out = (u + 1)·g·σ(α·g), g and u clamped.
void CpuDevice::swiglu_clamped_forward_impl(void* out, const void* gate, const void* up, DType t, int64_t n,
                                            float alpha, float limit) {
  glu_chunks(n, t, gate, up, nullptr, nullptr, out, [&](float* gb, float* ub, const float*, int64_t m) {
    for (int64_t i = 0; i < m; ++i) {
      const float g = std::min(gb[i], limit), u = std::clamp(ub[i], -limit, limit);
      ub[i] = (u + 1.0f) * (g * sigmoid(alpha * g));
    }
  });
}

// Its backward: zero past a clamp's bound, the formula's derivative inside (bounds included).
void CpuDevice::swiglu_clamped_backward_impl(void* dgate, void* dup, const void* dout, const void* gate, const void* up,
                                             DType t, int64_t n, float alpha, float limit) {
  glu_chunks(n, t, gate, up, dout, dgate, dup, [&](float* gb, float* ub, const float* db, int64_t m) {
    for (int64_t i = 0; i < m; ++i) {
      const float g = std::min(gb[i], limit), u = std::clamp(ub[i], -limit, limit), d = db[i];
      const float sg = sigmoid(alpha * g);
      const bool g_in = gb[i] <= limit, u_in = ub[i] >= -limit && ub[i] <= limit;
      gb[i] = g_in ? d * (u + 1.0f) * sg * (1.0f + alpha * g * (1.0f - sg)) : 0.0f;
      ub[i] = u_in ? d * g * sg : 0.0f;
    }
  });
}

}  // namespace gpuledger
