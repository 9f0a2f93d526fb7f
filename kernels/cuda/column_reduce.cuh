// Column sums over the rows of an (rows, cols) tensor — the bias gradient
// Σ_rows dout and the norm-weight gradients Σ_rows dout ⊙ x̂ — in two
// deterministic passes (launch_config.h, column_reduce): fp32 partial sums per
// chunk of rows, then, per column, the chunks added in order in double and
// added once to the gradient in its dtype (one rounding, as the CPU reference).
#pragma once
#include <cstdint>

#include "kernels/cuda/launch_config.h"
#include "kernels/cuda/simt.cuh"
#include "kernels/device.h"

namespace gpuledger {
inline namespace GPL_SIMT_NAMESPACE {
namespace simt {

// partial0/1[chunk·cols + c] = Σ_{r in chunk} f(r, c).x / .y. Block
// (kColumnTile, kColumnLanes): lanes stride the chunk's rows, then lane 0 adds
// the lanes' sums in lane order. partial1 may be null (one output).
template <class F>
__global__ void column_partials_kernel(F f, int64_t rows, int64_t cols, int64_t rows_per_chunk, float* partial0,
                                       float* partial1) {
  using cuda_launch::kColumnLanes;
  using cuda_launch::kColumnTile;
  GPL_SHARED float s0[kColumnLanes][kColumnTile + 1], s1[kColumnLanes][kColumnTile + 1];
  const int tx = static_cast<int>(threadIdx.x), ty = static_cast<int>(threadIdx.y);
  const int64_t c = static_cast<int64_t>(blockIdx.x) * kColumnTile + tx;
  const int64_t chunk = blockIdx.y;
  const int64_t r0 = chunk * rows_per_chunk;
  const int64_t r1 = r0 + rows_per_chunk < rows ? r0 + rows_per_chunk : rows;
  float a = 0.0f, b = 0.0f;
  if (c < cols)
    for (int64_t r = r0 + ty; r < r1; r += kColumnLanes) {
      const float2 v = f(r, c);
      a += v.x;
      b += v.y;
    }
  s0[ty][tx] = a;
  s1[ty][tx] = b;
  __syncthreads();
  if (ty == 0 && c < cols) {
    float t0 = 0.0f, t1 = 0.0f;
    for (int y = 0; y < kColumnLanes; ++y) {
      t0 += s0[y][tx];
      t1 += s1[y][tx];
    }
    partial0[chunk * cols + c] = t0;
    if (partial1) partial1[chunk * cols + c] = t1;
  }
}

// dst[c] = (accumulate ? dst[c] : 0) + Σ_chunks partial[chunk·cols + c].
template <class G>
__global__ void column_finalize_kernel(const float* partial, int64_t chunks, int64_t cols, G* dst, bool accumulate) {
  for (int64_t c = global_thread(); c < cols; c += grid_threads()) {
    double s = 0.0;
    for (int64_t ch = 0; ch < chunks; ++ch) s += partial[ch * cols + c];
    const float base = accumulate ? to_float(dst[c]) : 0.0f;
    dst[c] = from_float<G>(static_cast<float>(base + s));
  }
}

// dst0[c] (+)= Σ_r f(r, c).x and, when dst1 is not null, dst1[c] (+)= Σ_r f(r, c).y,
// both in grad_t. The partials are booked as workspace for the call.
template <class F>
void column_sums(Device& dev, cudaStream_t stream, const F& f, int64_t rows, int64_t cols, void* dst0, void* dst1,
                 DType grad_t, bool accumulate) {
  if (cols <= 0) return;
  const cuda_launch::ColumnReduce plan = cuda_launch::column_reduce(rows, cols);
  const int64_t partial_bytes = plan.chunks * cols * 4;
  Buffer p0 = dev.alloc(partial_bytes, Account::kWorkspace, "column_sums.partial");
  Buffer p1;
  if (dst1) p1 = dev.alloc(partial_bytes, Account::kWorkspace, "column_sums.partial");
  launch_kernel(column_partials_kernel<F>,
                dim3(static_cast<unsigned>(plan.col_blocks), static_cast<unsigned>(plan.chunks)),
                dim3(cuda_launch::kColumnTile, cuda_launch::kColumnLanes), 0, stream, f, rows, cols,
                plan.rows_per_chunk, p0.as<float>(), dst1 ? p1.as<float>() : nullptr);
  const auto fin = cuda_launch::elementwise(cols);
  dispatch(grad_t, [&](auto g) {
    using G = decltype(g);
    launch_kernel(column_finalize_kernel<G>, grid1d(fin.blocks), dim3(fin.threads), 0, stream, p0.as<float>(),
                  plan.chunks, cols, static_cast<G*>(dst0), accumulate);
    if (dst1)
      launch_kernel(column_finalize_kernel<G>, grid1d(fin.blocks), dim3(fin.threads), 0, stream, p1.as<float>(),
                    plan.chunks, cols, static_cast<G*>(dst1), accumulate);
  });
}

}  // namespace simt
}  // namespace GPL_SIMT_NAMESPACE
}  // namespace gpuledger
