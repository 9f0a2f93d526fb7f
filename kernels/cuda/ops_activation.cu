// CUDA activations, element-wise in fp32 on the storage dtype, with the CPU
// reference's formulas (kernels/cpu/ops_activation.cpp):
//   GELU, tanh approximation (Hendrycks & Gimpel 2016; GPT-2):
//     gelu(x) = ½x(1 + tanh u), u = √(2/π)(x + 0.044715x³)
//     gelu'(x) = ½(1 + tanh u) + ½x(1 − tanh²u)·√(2/π)(1 + 3·0.044715x²)
//   SwiGLU (Shazeer 2020): out = silu(g)·up, silu(g) = g·σ(g);
//     dgate = dout·up·σ(g)(1 + g(1 − σ(g))), dup = dout·silu(g).
#include "kernels/cuda/launch_config.h"
#include "kernels/cuda/simt_device.cuh"

namespace gpuledger {
inline namespace GPL_SIMT_NAMESPACE {
namespace {

using namespace simt;

constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kGeluC = 0.044715f;

GPL_DEVICE float sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }

template <class E>
__global__ void gelu_forward_kernel(E* out, const E* x, int64_t n) {
  for (int64_t i = global_thread(); i < n; i += grid_threads()) {
    const float v = to_float(x[i]);
    out[i] = from_float<E>(0.5f * v * (1.0f + tanhf(kSqrt2OverPi * (v + kGeluC * v * v * v))));
  }
}

template <class E>
__global__ void gelu_backward_kernel(E* dx, const E* dout, const E* x, int64_t n) {
  for (int64_t i = global_thread(); i < n; i += grid_threads()) {
    const float v = to_float(x[i]);
    const float th = tanhf(kSqrt2OverPi * (v + kGeluC * v * v * v));
    const float du = kSqrt2OverPi * (1.0f + 3.0f * kGeluC * v * v);
    dx[i] = from_float<E>(to_float(dout[i]) * (0.5f * (1.0f + th) + 0.5f * v * (1.0f - th * th) * du));
  }
}

template <class E>
__global__ void swiglu_forward_kernel(E* out, const E* gate, const E* up, int64_t n) {
  for (int64_t i = global_thread(); i < n; i += grid_threads()) {
    const float g = to_float(gate[i]);
    out[i] = from_float<E>(to_float(up[i]) * (g * sigmoid(g)));
  }
}

template <class E>
__global__ void swiglu_backward_kernel(E* dgate, E* dup, const E* dout, const E* gate, const E* up, int64_t n) {
  for (int64_t i = global_thread(); i < n; i += grid_threads()) {
    const float g = to_float(gate[i]), u = to_float(up[i]), d = to_float(dout[i]);
    const float sg = sigmoid(g);
    dgate[i] = from_float<E>(d * u * sg * (1.0f + g * (1.0f - sg)));
    dup[i] = from_float<E>(d * g * sg);
  }
}

// gpt-oss's clamped SwiGLU (device.h; CPU reference kernels/cpu/ops_activation.cpp).
template <class E>
__global__ void swiglu_clamped_forward_kernel(E* out, const E* gate, const E* up, int64_t n, float alpha, float limit) {
  for (int64_t i = global_thread(); i < n; i += grid_threads()) {
    const float g = fminf(to_float(gate[i]), limit), u = fminf(fmaxf(to_float(up[i]), -limit), limit);
    out[i] = from_float<E>((u + 1.0f) * (g * sigmoid(alpha * g)));
  }
}

template <class E>
__global__ void swiglu_clamped_backward_kernel(E* dgate, E* dup, const E* dout, const E* gate, const E* up, int64_t n,
                                               float alpha, float limit) {
  for (int64_t i = global_thread(); i < n; i += grid_threads()) {
    const float gr = to_float(gate[i]), ur = to_float(up[i]), d = to_float(dout[i]);
    const float g = fminf(gr, limit), u = fminf(fmaxf(ur, -limit), limit);
    const float sg = sigmoid(alpha * g);
    dgate[i] = from_float<E>(gr <= limit ? d * (u + 1.0f) * sg * (1.0f + alpha * g * (1.0f - sg)) : 0.0f);
    dup[i] = from_float<E>(ur >= -limit && ur <= limit ? d * g * sg : 0.0f);
  }
}

}  // namespace

void SimtDevice::swiglu_clamped_forward_impl(void* out, const void* gate, const void* up, DType t, int64_t n,
                                             float alpha, float limit) {
  if (n <= 0) return;
  const auto l = cuda_launch::elementwise(n);
  dispatch(t, [&](auto tag) {
    using E = decltype(tag);
    launch_kernel(swiglu_clamped_forward_kernel<E>, grid1d(l.blocks), dim3(l.threads), 0, stream(),
                  static_cast<E*>(out), static_cast<const E*>(gate), static_cast<const E*>(up), n, alpha, limit);
  });
}

void SimtDevice::swiglu_clamped_backward_impl(void* dgate, void* dup, const void* dout, const void* gate,
                                              const void* up, DType t, int64_t n, float alpha, float limit) {
  if (n <= 0) return;
  const auto l = cuda_launch::elementwise(n);
  dispatch(t, [&](auto tag) {
    using E = decltype(tag);
    launch_kernel(swiglu_clamped_backward_kernel<E>, grid1d(l.blocks), dim3(l.threads), 0, stream(),
                  static_cast<E*>(dgate), static_cast<E*>(dup), static_cast<const E*>(dout),
                  static_cast<const E*>(gate), static_cast<const E*>(up), n, alpha, limit);
  });
}

void SimtDevice::gelu_forward_impl(void* out, const void* x, DType t, int64_t n) {
  if (n <= 0) return;
  const auto l = cuda_launch::elementwise(n);
  dispatch(t, [&](auto tag) {
    using E = decltype(tag);
    launch_kernel(gelu_forward_kernel<E>, grid1d(l.blocks), dim3(l.threads), 0, stream(), static_cast<E*>(out),
                  static_cast<const E*>(x), n);
  });
}

void SimtDevice::gelu_backward_impl(void* dx, const void* dout, const void* x, DType t, int64_t n) {
  if (n <= 0) return;
  const auto l = cuda_launch::elementwise(n);
  dispatch(t, [&](auto tag) {
    using E = decltype(tag);
    launch_kernel(gelu_backward_kernel<E>, grid1d(l.blocks), dim3(l.threads), 0, stream(), static_cast<E*>(dx),
                  static_cast<const E*>(dout), static_cast<const E*>(x), n);
  });
}

void SimtDevice::swiglu_forward_impl(void* out, const void* gate, const void* up, DType t, int64_t n) {
  if (n <= 0) return;
  const auto l = cuda_launch::elementwise(n);
  dispatch(t, [&](auto tag) {
    using E = decltype(tag);
    launch_kernel(swiglu_forward_kernel<E>, grid1d(l.blocks), dim3(l.threads), 0, stream(), static_cast<E*>(out),
                  static_cast<const E*>(gate), static_cast<const E*>(up), n);
  });
}

void SimtDevice::swiglu_backward_impl(void* dgate, void* dup, const void* dout, const void* gate, const void* up,
                                      DType t, int64_t n) {
  if (n <= 0) return;
  const auto l = cuda_launch::elementwise(n);
  dispatch(t, [&](auto tag) {
    using E = decltype(tag);
    launch_kernel(swiglu_backward_kernel<E>, grid1d(l.blocks), dim3(l.threads), 0, stream(), static_cast<E*>(dgate),
                  static_cast<E*>(dup), static_cast<const E*>(dout), static_cast<const E*>(gate),
                  static_cast<const E*>(up), n);
  });
}

}  // namespace GPL_SIMT_NAMESPACE
}  // namespace gpuledger
