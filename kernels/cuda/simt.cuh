// The kernel-side toolkit every kernels/cuda/ops_*.cu includes: storage types
// and their fp32 conversions, dtype dispatch, kernel launch, warp and block
// reductions. The same sources build two ways:
//   - by nvcc (gpl_kernels_cuda): real CUDA, in namespace gpuledger::cuda_backend;
//   - by g++ with GPL_SIMT_EMULATION=1 (tests/gpu/test_simt_emulated): on the
//     CPU emulator of simt_emu.h, in namespace gpuledger::simt_emu, so the
//     kernels' index arithmetic, masks and reductions are tested without a GPU.
// Kernels therefore write GPL_SHARED for static shared memory and
// GPL_DYNAMIC_SMEM for the dynamic kind, launch through launch_kernel (never
// <<<…>>>), and use only __syncthreads() and __shfl_xor_sync() to cooperate.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>

#include "core/dtype.h"

#if GPL_SIMT_EMULATION
#include "kernels/cuda/simt_emu.h"
#define GPL_SIMT_NAMESPACE simt_emu
#define GPL_SHARED static
#define GPL_DYNAMIC_SMEM(type, name) type* name = static_cast<type*>(::gpl_emu::Machine::get().dynamic_smem())
#define GPL_LAUNCH_BOUNDS(threads)
#else
#include "kernels/cuda/cuda_check.h"
#define GPL_SIMT_NAMESPACE cuda_backend
#define GPL_SHARED __shared__
#define GPL_DYNAMIC_SMEM(type, name)                                 \
  extern __shared__ __align__(16) unsigned char gpl_dynamic_smem_[]; \
  type* name = reinterpret_cast<type*>(gpl_dynamic_smem_)
#define GPL_LAUNCH_BOUNDS(threads) __launch_bounds__(threads)
#endif

#define GPL_DEVICE __device__ __forceinline__

namespace gpuledger {
inline namespace GPL_SIMT_NAMESPACE {
namespace simt {

using bf16 = __nv_bfloat16;
using fp16 = __half;

// ---- storage <-> fp32 (round to nearest even, as core/dtype.cpp) ----

GPL_DEVICE float to_float(float x) { return x; }
GPL_DEVICE float to_float(bf16 x) { return __bfloat162float(x); }
GPL_DEVICE float to_float(fp16 x) { return __half2float(x); }

template <class T>
GPL_DEVICE T from_float(float x);
template <>
GPL_DEVICE float from_float<float>(float x) {
  return x;
}
template <>
GPL_DEVICE bf16 from_float<bf16>(float x) {
  return __float2bfloat16_rn(x);
}
template <>
GPL_DEVICE fp16 from_float<fp16>(float x) {
  return __float2half_rn(x);
}

// Calls f(T{}) with T the storage type of t (float, bf16 or fp16).
template <class F>
void dispatch(DType t, F&& f) {
  switch (t) {
    case DType::kFP32: f(float{}); return;
    case DType::kBF16: f(bf16{}); return;
    case DType::kFP16: f(fp16{}); return;
  }
  throw std::invalid_argument("cuda: unknown dtype " + std::to_string(static_cast<int>(t)));
}

// Two dtypes at once (ops that read one and write another).
template <class F>
void dispatch2(DType a, DType b, F&& f) {
  dispatch(a, [&](auto ta) { dispatch(b, [&](auto tb) { f(ta, tb); }); });
}

// ---- launch ----

// Launches kernel(args...) on `stream`: args are converted to the kernel's
// parameter types first (cudaLaunchKernel reads each one through a pointer).
// Dynamic shared memory above the default 48 KiB is opted into per kernel.
template <class... P, class... A>
void launch_kernel(void (*kernel)(P...), dim3 grid, dim3 block, size_t smem_bytes, cudaStream_t stream, A&&... args) {
  static_assert(sizeof...(P) == sizeof...(A), "launch_kernel: wrong number of arguments");
  std::tuple<P...> params(std::forward<A>(args)...);
  if (grid.x == 0 || grid.y == 0 || grid.z == 0) return;  // nothing to do
#if GPL_SIMT_EMULATION
  (void)stream;
  ::gpl_emu::Machine::get().launch(grid, block, smem_bytes, [&] { std::apply(kernel, params); });
#else
  const void* fn = reinterpret_cast<const void*>(kernel);
  if (smem_bytes > 48 * 1024)
    CUDA_CHECK(cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem_bytes)),
               "opting a kernel into " + std::to_string(smem_bytes) + " bytes of shared memory");
  std::apply(
      [&](auto&... p) {
        void* argv[] = {static_cast<void*>(&p)...};
        CUDA_CHECK(cudaLaunchKernel(fn, grid, block, argv, smem_bytes, stream), "launching a kernel");
      },
      params);
#endif
}

inline dim3 grid1d(int64_t blocks) { return dim3(static_cast<unsigned>(blocks)); }

// ---- reductions (1-D blocks whose size is a multiple of 32) ----

struct SumOp {
  template <class T>
  GPL_DEVICE T operator()(T a, T b) const {
    return a + b;
  }
};
struct MaxOp {
  GPL_DEVICE float operator()(float a, float b) const { return fmaxf(a, b); }
};

template <class T, class Op>
GPL_DEVICE T warp_reduce(T v, Op op) {
  for (int offset = 16; offset > 0; offset >>= 1) v = op(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}

// Every thread of the block gets op over every thread's v. scratch: 32 T of
// shared memory; the leading barrier lets the caller reuse it right away.
template <class T, class Op>
GPL_DEVICE T block_reduce(T v, T* scratch, Op op) {
  v = warp_reduce(v, op);
  const int lane = static_cast<int>(threadIdx.x % 32), warp = static_cast<int>(threadIdx.x / 32);
  const int warps = static_cast<int>((blockDim.x + 31) / 32);
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  T r = scratch[0];
  for (int w = 1; w < warps; ++w) r = op(r, scratch[w]);
  return r;
}

// Global index and stride of a 1-D grid-stride loop.
GPL_DEVICE int64_t global_thread() { return static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; }
GPL_DEVICE int64_t grid_threads() { return static_cast<int64_t>(gridDim.x) * blockDim.x; }

}  // namespace simt
}  // namespace GPL_SIMT_NAMESPACE
}  // namespace gpuledger
