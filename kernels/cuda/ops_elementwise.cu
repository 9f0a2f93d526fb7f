// CUDA element-wise ops: convert, add, accumulate, scale, bias_add,
// bias_backward, and the GEMM's beta-only case (scale_matrices). Each element
// is widened to fp32, combined in fp32 and rounded once to the destination
// dtype — the CPU reference's rounding points (kernels/cpu/ops_elementwise.cpp).
// Grid-stride loops (launch_config.h, elementwise).
#include "kernels/cuda/column_reduce.cuh"
#include "kernels/cuda/launch_config.h"
#include "kernels/cuda/simt_device.cuh"

namespace gpuledger {
inline namespace GPL_SIMT_NAMESPACE {
namespace {

using namespace simt;

template <class D, class S>
__global__ void convert_kernel(D* dst, const S* src, int64_t n) {
  for (int64_t i = global_thread(); i < n; i += grid_threads()) dst[i] = from_float<D>(to_float(src[i]));
}

template <class T>
__global__ void add_kernel(T* out, const T* a, const T* b, int64_t n) {
  for (int64_t i = global_thread(); i < n; i += grid_threads()) out[i] = from_float<T>(to_float(a[i]) + to_float(b[i]));
}

template <class D, class S>
__global__ void accumulate_kernel(D* dst, const S* src, int64_t n) {
  for (int64_t i = global_thread(); i < n; i += grid_threads())
    dst[i] = from_float<D>(to_float(dst[i]) + to_float(src[i]));
}

template <class T>
__global__ void scale_kernel(T* x, float alpha, int64_t n) {
  for (int64_t i = global_thread(); i < n; i += grid_threads()) x[i] = from_float<T>(to_float(x[i]) * alpha);
}

template <class T>
__global__ void bias_add_kernel(T* out, const T* bias, int64_t rows, int64_t cols) {
  const int64_t n = rows * cols;
  for (int64_t i = global_thread(); i < n; i += grid_threads())
    out[i] = from_float<T>(to_float(out[i]) + to_float(bias[i % cols]));
}

// C_b[i, j] (ldc, stride_c apart) = beta·C_b[i, j]; beta == 0 writes zeros.
template <class T>
__global__ void scale_matrices_kernel(T* c, int64_t m, int64_t n, int64_t ldc, int64_t stride_c, int64_t batch,
                                      float beta) {
  const int64_t total = batch * m * n;
  for (int64_t e = global_thread(); e < total; e += grid_threads()) {
    const int64_t b = e / (m * n), i = e / n % m, j = e % n;
    T* p = c + b * stride_c + i * ldc + j;
    *p = beta == 0.0f ? from_float<T>(0.0f) : from_float<T>(to_float(*p) * beta);
  }
}

// The bias gradient's value at (r, c): dout[r, c].
template <class T>
struct BiasGradValue {
  const T* dout;
  int64_t cols;
  GPL_DEVICE float2 operator()(int64_t r, int64_t c) const { return make_float2(to_float(dout[r * cols + c]), 0.0f); }
};

}  // namespace

void SimtDevice::convert_impl(void* dst, DType dst_t, const void* src, DType src_t, int64_t n) {
  if (n <= 0) return;
  if (dst_t == src_t) {  // same storage: a bit-exact copy
    copy(dst, src, n * dtype_bytes(dst_t));
    return;
  }
  const auto l = cuda_launch::elementwise(n);
  dispatch2(dst_t, src_t, [&](auto d, auto s) {
    using D = decltype(d);
    using S = decltype(s);
    launch_kernel(convert_kernel<D, S>, grid1d(l.blocks), dim3(l.threads), 0, stream(), static_cast<D*>(dst),
                  static_cast<const S*>(src), n);
  });
}

void SimtDevice::add_impl(void* out, const void* a, const void* b, DType t, int64_t n) {
  if (n <= 0) return;
  const auto l = cuda_launch::elementwise(n);
  dispatch(t, [&](auto tag) {
    using T = decltype(tag);
    launch_kernel(add_kernel<T>, grid1d(l.blocks), dim3(l.threads), 0, stream(), static_cast<T*>(out),
                  static_cast<const T*>(a), static_cast<const T*>(b), n);
  });
}

void SimtDevice::accumulate_impl(void* dst, DType dst_t, const void* src, DType src_t, int64_t n) {
  if (n <= 0) return;
  const auto l = cuda_launch::elementwise(n);
  dispatch2(dst_t, src_t, [&](auto d, auto s) {
    using D = decltype(d);
    using S = decltype(s);
    launch_kernel(accumulate_kernel<D, S>, grid1d(l.blocks), dim3(l.threads), 0, stream(), static_cast<D*>(dst),
                  static_cast<const S*>(src), n);
  });
}

void SimtDevice::scale_impl(void* x, DType t, float alpha, int64_t n) {
  if (n <= 0) return;
  const auto l = cuda_launch::elementwise(n);
  dispatch(t, [&](auto tag) {
    using T = decltype(tag);
    launch_kernel(scale_kernel<T>, grid1d(l.blocks), dim3(l.threads), 0, stream(), static_cast<T*>(x), alpha, n);
  });
}

void SimtDevice::bias_add_impl(void* out, const void* bias, DType t, int64_t rows, int64_t cols) {
  if (rows <= 0 || cols <= 0) return;
  const auto l = cuda_launch::elementwise(rows * cols);
  dispatch(t, [&](auto tag) {
    using T = decltype(tag);
    launch_kernel(bias_add_kernel<T>, grid1d(l.blocks), dim3(l.threads), 0, stream(), static_cast<T*>(out),
                  static_cast<const T*>(bias), rows, cols);
  });
}

void SimtDevice::bias_backward_impl(void* dbias, DType grad_t, const void* dout, DType t, int64_t rows, int64_t cols,
                                    bool accumulate) {
  if (cols <= 0) return;
  dispatch(t, [&](auto tag) {
    using T = decltype(tag);
    column_sums(*this, stream(), BiasGradValue<T>{static_cast<const T*>(dout), cols}, rows > 0 ? rows : 0, cols, dbias,
                nullptr, grad_t, accumulate);
  });
}

void SimtDevice::scale_matrices(void* c, DType t, int64_t m, int64_t n, int64_t ldc, int64_t stride_c, int64_t batch,
                                float beta) {
  if (m <= 0 || n <= 0 || batch <= 0) return;
  const auto l = cuda_launch::elementwise(batch * m * n);
  dispatch(t, [&](auto tag) {
    using T = decltype(tag);
    launch_kernel(scale_matrices_kernel<T>, grid1d(l.blocks), dim3(l.threads), 0, stream(), static_cast<T*>(c), m, n,
                  ldc, stride_c, batch, beta);
  });
}

}  // namespace GPL_SIMT_NAMESPACE
}  // namespace gpuledger
