// CUDA token (+ learned position) embedding, forward and backward, with the
// CPU reference's semantics and rounding (kernels/cpu/ops_embedding.cpp).
// Forward: out[b, t] = wte[ids[b, t]] + wpe[position(t)], summed in fp32,
// rounded once. Backward groups the tokens by id as the CPU does — the ids are
// read back to the host (B·T int32: one small synchronous copy per call), a
// stable sort orders each id's tokens by position, and one block per id sums
// its rows in that order and adds the sum to the dwte row once. No atomics, so
// the result is deterministic and each dwte row is rounded once, even in bf16.
#include <algorithm>
#include <numeric>
#include <vector>

#include "kernels/cuda/launch_config.h"
#include "kernels/cuda/simt_device.cuh"

namespace gpuledger {
inline namespace GPL_SIMT_NAMESPACE {
namespace {

using namespace simt;

constexpr int kColsPerBlock = 256;

template <class T>
__global__ void embedding_forward_kernel(T* out, const int32_t* ids, const T* wte, const T* wpe, int64_t rows,
                                         int64_t T_, int64_t C, TokenSpans positions) {
  const int64_t n = rows * C;
  for (int64_t e = global_thread(); e < n; e += grid_threads()) {
    const int64_t r = e / C, c = e % C;
    float v = to_float(wte[static_cast<int64_t>(ids[r]) * C + c]);
    if (wpe) v += to_float(wpe[positions.position(r % T_) * C + c]);
    out[e] = from_float<T>(v);
  }
}

// Block (group g, column slice): dwte[id_g] += Σ_{i in group g} dout[order[i]], in order.
template <class G, class T>
__global__ void embedding_backward_wte_kernel(G* dwte, const T* dout, const int32_t* ids, const int32_t* order,
                                              const int32_t* group_start, int64_t C) {
  const int64_t g = blockIdx.x;
  const int64_t c = static_cast<int64_t>(blockIdx.y) * kColsPerBlock + threadIdx.x;
  if (c >= C) return;
  const int32_t i0 = group_start[g], i1 = group_start[g + 1];
  float sum = 0.0f;
  for (int32_t i = i0; i < i1; ++i) sum += to_float(dout[static_cast<int64_t>(order[i]) * C + c]);
  G* row = dwte + static_cast<int64_t>(ids[order[i0]]) * C;
  row[c] = from_float<G>(to_float(row[c]) + sum);
}

// dwpe[position(t)] += Σ_b dout[b, t], b in order.
template <class G, class T>
__global__ void embedding_backward_wpe_kernel(G* dwpe, const T* dout, int64_t B, int64_t T_, int64_t C,
                                              TokenSpans positions) {
  const int64_t n = T_ * C;
  for (int64_t e = global_thread(); e < n; e += grid_threads()) {
    const int64_t t = e / C, c = e % C;
    float sum = 0.0f;
    for (int64_t b = 0; b < B; ++b) sum += to_float(dout[(b * T_ + t) * C + c]);
    G* p = dwpe + positions.position(t) * C + c;
    *p = from_float<G>(to_float(*p) + sum);
  }
}

}  // namespace

void SimtDevice::embedding_forward_impl(void* out, const int32_t* ids, const void* wte, const void* wpe, DType t,
                                        int64_t B, int64_t T, int64_t C, const TokenSpans& positions) {
  if (B <= 0 || T <= 0 || C <= 0) return;
  const auto l = cuda_launch::elementwise(B * T * C);
  dispatch(t, [&](auto tag) {
    using E = decltype(tag);
    launch_kernel(embedding_forward_kernel<E>, grid1d(l.blocks), dim3(l.threads), 0, stream(), static_cast<E*>(out),
                  ids, static_cast<const E*>(wte), static_cast<const E*>(wpe), B * T, T, C, positions);
  });
}

void SimtDevice::embedding_backward_impl(void* dwte, void* dwpe, DType grad_t, const void* dout, DType t,
                                         const int32_t* ids, int64_t B, int64_t T, int64_t C,
                                         const TokenSpans& positions) {
  if (B <= 0 || T <= 0 || C <= 0) return;
  const int64_t rows = B * T;

  if (dwte) {
    // Token rows ordered by id, ties in token order; group_start[g] is where group g starts.
    std::vector<int32_t> host_ids(static_cast<size_t>(rows));
    copy_to_host(host_ids.data(), ids, rows * 4);
    std::vector<int32_t> order(static_cast<size_t>(rows));
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return host_ids[a] < host_ids[b]; });
    std::vector<int32_t> group_start;
    for (int64_t i = 0; i < rows; ++i)
      if (i == 0 || host_ids[order[i]] != host_ids[order[i - 1]]) group_start.push_back(static_cast<int32_t>(i));
    group_start.push_back(static_cast<int32_t>(rows));
    const int64_t groups = static_cast<int64_t>(group_start.size()) - 1;

    Buffer d_order = alloc(rows * 4, Account::kWorkspace, "embedding_backward.order");
    Buffer d_start = alloc((groups + 1) * 4, Account::kWorkspace, "embedding_backward.group_start");
    copy_from_host(d_order.data(), order.data(), rows * 4);
    copy_from_host(d_start.data(), group_start.data(), (groups + 1) * 4);
    const dim3 grid(static_cast<unsigned>(groups), static_cast<unsigned>(cuda_launch::ceil_div(C, kColsPerBlock)));
    dispatch2(grad_t, t, [&](auto gt, auto et) {
      using G = decltype(gt);
      using E = decltype(et);
      launch_kernel(embedding_backward_wte_kernel<G, E>, grid, dim3(kColsPerBlock), 0, stream(), static_cast<G*>(dwte),
                    static_cast<const E*>(dout), ids, d_order.as<const int32_t>(), d_start.as<const int32_t>(), C);
    });
  }

  if (dwpe) {
    const auto l = cuda_launch::elementwise(T * C);
    dispatch2(grad_t, t, [&](auto gt, auto et) {
      using G = decltype(gt);
      using E = decltype(et);
      launch_kernel(embedding_backward_wpe_kernel<G, E>, grid1d(l.blocks), dim3(l.threads), 0, stream(),
                    static_cast<G*>(dwpe), static_cast<const E*>(dout), B, T, C, positions);
    });
  }
}

}  // namespace GPL_SIMT_NAMESPACE
}  // namespace gpuledger
