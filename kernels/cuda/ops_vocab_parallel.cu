// CUDA vocabulary-parallel embedding and cross-entropy (device.h, the end of
// the op table): Megatron's VocabParallelEmbedding and
// vocab_parallel_cross_entropy (Shoeybi et al. 2019 §3), with the semantics
// and rounding points of the CPU reference (kernels/cpu/ops_vocab_parallel.cpp).
// A TP rank holds rows / columns [begin, begin + rows) of the padded
// vocabulary; the caller all-reduces the per-row partials between the ops.
//
//   - embedding forward: one thread per output element, a copy of the owned
//     row or 0 (bit-identical to the CPU);
//   - embedding backward: as ops_embedding.cu, the ids are read back to the
//     host (N int32, one small synchronous copy), the owned tokens grouped by
//     id in token order, and one block per (owned id, column slice) adds its
//     tokens' rows in that order. Each token's add is rounded to grad_t, as
//     the CPU's sequential loop rounds it, so even bf16 gradients match bit
//     for bit. No atomics: deterministic, and checkable on the SIMT emulator;
//   - ce_stats and ce_exp: one block per row (launch_config.h, row_threads):
//     the max over the valid columns (fmaxf: order-free, exact), the target
//     logit; exp(x − max) written in place and its sum accumulated in double
//     (as the CPU) then rounded to fp32;
//   - ce_normalize and ce_backward: one thread per element, the CPU's
//     expressions (1/sum, then a product; probs·scale, minus scale at the target).
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

// Columns < V of a block holding global columns col_begin … col_begin + Vl − 1.
constexpr int64_t valid_columns(int64_t Vl, int64_t col_begin, int64_t V) {
  return std::max<int64_t>(0, std::min(Vl, V - col_begin));
}

// ---- embedding ----

// out (N, C) = wte[ids[i] − row_begin] for owned ids, else 0.
template <class T>
__global__ void vocab_embedding_forward_kernel(T* out, const int32_t* ids, const T* wte, int64_t N, int64_t C,
                                               int64_t row_begin, int64_t rows) {
  const int64_t n = N * C;
  for (int64_t e = global_thread(); e < n; e += grid_threads()) {
    const int64_t i = e / C, c = e % C;
    const int64_t r = static_cast<int64_t>(ids[i]) - row_begin;
    out[e] = (r >= 0 && r < rows) ? wte[r * C + c] : from_float<T>(0.0f);
  }
}

// Block (group g, column slice): for the tokens order[group_start[g]] … in
// token order, dwte[row_g] = round(dwte[row_g] + dout[token]) — one rounding
// per token, the CPU's sequence.
template <class G, class T>
__global__ void vocab_embedding_backward_kernel(G* dwte, const T* dout, const int32_t* order,
                                                const int32_t* group_start, const int32_t* group_row, int64_t C) {
  const int64_t g = blockIdx.x;
  const int64_t c = static_cast<int64_t>(blockIdx.y) * kColsPerBlock + threadIdx.x;
  if (c >= C) return;
  G* p = dwte + static_cast<int64_t>(group_row[g]) * C + c;
  G acc = *p;
  for (int32_t k = group_start[g]; k < group_start[g + 1]; ++k)
    acc = from_float<G>(to_float(acc) + to_float(dout[static_cast<int64_t>(order[k]) * C + c]));
  *p = acc;
}

// ---- cross-entropy ----

// One block per row: row_max over the valid columns (−inf when none), the
// target's logit when this block holds its column, else 0.
__global__ void vocab_ce_stats_kernel(float* row_max, float* target_logit, const float* logits, const int32_t* targets,
                                      int64_t Vl, int64_t col_begin, int64_t valid) {
  GPL_SHARED float scratch[32];
  const int64_t i = blockIdx.x;
  const float* x = logits + i * Vl;
  float mx = -INFINITY;
  for (int64_t j = threadIdx.x; j < valid; j += blockDim.x) mx = fmaxf(mx, x[j]);
  mx = block_reduce(mx, scratch, MaxOp{});
  if (threadIdx.x == 0) {
    row_max[i] = mx;
    const int64_t c = static_cast<int64_t>(targets[i]) - col_begin;
    target_logit[i] = (c >= 0 && c < valid) ? x[c] : 0.0f;
  }
}

// One block per row, in place: x ← exp(x − row_max) on valid columns, 0 on
// padding; sum_exp = Σ (double, rounded once).
__global__ void vocab_ce_exp_kernel(float* logits, float* sum_exp, const float* row_max, int64_t Vl, int64_t valid) {
  GPL_SHARED double scratch[32];
  const int64_t i = blockIdx.x;
  float* x = logits + i * Vl;
  const float mx = row_max[i];
  double s = 0.0;
  for (int64_t j = threadIdx.x; j < Vl; j += blockDim.x) {
    if (j < valid) {
      const float e = expf(x[j] - mx);
      x[j] = e;
      s += e;
    } else {
      x[j] = 0.0f;  // padding: never a probability
    }
  }
  s = block_reduce(s, scratch, SumOp{});
  if (threadIdx.x == 0) sum_exp[i] = static_cast<float>(s);
}

__global__ void vocab_ce_normalize_kernel(float* probs, const float* sum_exp, int64_t N, int64_t Vl) {
  const int64_t n = N * Vl;
  for (int64_t e = global_thread(); e < n; e += grid_threads()) {
    const float inv = 1.0f / sum_exp[e / Vl];
    probs[e] *= inv;
  }
}

// dlogits = probs·scale − scale at the target's column when held here. Each
// element is read and written by one thread, so dlogits may alias probs.
__global__ void vocab_ce_backward_kernel(float* dlogits, const float* probs, const int32_t* targets, int64_t N,
                                         int64_t Vl, int64_t col_begin, float scale) {
  const int64_t n = N * Vl;
  for (int64_t e = global_thread(); e < n; e += grid_threads()) {
    const int64_t i = e / Vl, j = e % Vl;
    float d = probs[e] * scale;
    if (static_cast<int64_t>(targets[i]) - col_begin == j) d -= scale;
    dlogits[e] = d;
  }
}

}  // namespace

void SimtDevice::vocab_embedding_forward_impl(void* out, const int32_t* ids, const void* wte, DType t, int64_t N,
                                              int64_t C, int64_t row_begin, int64_t rows) {
  if (N <= 0 || C <= 0) return;
  const auto l = cuda_launch::elementwise(N * C);
  dispatch(t, [&](auto tag) {
    using E = decltype(tag);
    launch_kernel(vocab_embedding_forward_kernel<E>, grid1d(l.blocks), dim3(l.threads), 0, stream(),
                  static_cast<E*>(out), ids, static_cast<const E*>(wte), N, C, row_begin, rows);
  });
}

void SimtDevice::vocab_embedding_backward_impl(void* dwte, DType grad_t, const void* dout, DType t, const int32_t* ids,
                                               int64_t N, int64_t C, int64_t row_begin, int64_t rows) {
  if (N <= 0 || C <= 0 || rows <= 0) return;
  // The owned tokens ordered by id, ties in token order; group g covers
  // order[group_start[g] … group_start[g + 1]) and adds into local row group_row[g].
  std::vector<int32_t> host_ids(static_cast<size_t>(N));
  copy_to_host(host_ids.data(), ids, N * 4);
  std::vector<int32_t> order;
  for (int64_t i = 0; i < N; ++i) {
    const int64_t r = static_cast<int64_t>(host_ids[i]) - row_begin;
    if (r >= 0 && r < rows) order.push_back(static_cast<int32_t>(i));
  }
  if (order.empty()) return;  // no token of this rank's rows: dwte unchanged
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return host_ids[a] < host_ids[b]; });
  std::vector<int32_t> group_start, group_row;
  for (size_t k = 0; k < order.size(); ++k)
    if (k == 0 || host_ids[order[k]] != host_ids[order[k - 1]]) {
      group_start.push_back(static_cast<int32_t>(k));
      group_row.push_back(static_cast<int32_t>(host_ids[order[k]] - row_begin));
    }
  group_start.push_back(static_cast<int32_t>(order.size()));
  const int64_t owned = static_cast<int64_t>(order.size());
  const int64_t groups = static_cast<int64_t>(group_row.size());

  Buffer d_order = alloc(owned * 4, Account::kWorkspace, "vocab_embedding_backward.order");
  Buffer d_start = alloc((groups + 1) * 4, Account::kWorkspace, "vocab_embedding_backward.group_start");
  Buffer d_row = alloc(groups * 4, Account::kWorkspace, "vocab_embedding_backward.group_row");
  copy_from_host(d_order.data(), order.data(), owned * 4);
  copy_from_host(d_start.data(), group_start.data(), (groups + 1) * 4);
  copy_from_host(d_row.data(), group_row.data(), groups * 4);
  const dim3 grid(static_cast<unsigned>(groups), static_cast<unsigned>(cuda_launch::ceil_div(C, kColsPerBlock)));
  dispatch2(grad_t, t, [&](auto gt, auto et) {
    using G = decltype(gt);
    using E = decltype(et);
    launch_kernel(vocab_embedding_backward_kernel<G, E>, grid, dim3(kColsPerBlock), 0, stream(), static_cast<G*>(dwte),
                  static_cast<const E*>(dout), d_order.as<const int32_t>(), d_start.as<const int32_t>(),
                  d_row.as<const int32_t>(), C);
  });
}

void SimtDevice::vocab_ce_stats_impl(float* row_max, float* target_logit, const float* logits, const int32_t* targets,
                                     int64_t N, int64_t Vl, int64_t col_begin, int64_t V) {
  if (N <= 0) return;
  const int64_t valid = valid_columns(Vl, col_begin, V);
  launch_kernel(vocab_ce_stats_kernel, grid1d(N), dim3(cuda_launch::row_threads(valid)), 0, stream(), row_max,
                target_logit, logits, targets, Vl, col_begin, valid);
}

void SimtDevice::vocab_ce_exp_impl(float* logits, float* sum_exp, const float* row_max, int64_t N, int64_t Vl,
                                   int64_t col_begin, int64_t V) {
  if (N <= 0) return;
  launch_kernel(vocab_ce_exp_kernel, grid1d(N), dim3(cuda_launch::row_threads(Vl)), 0, stream(), logits, sum_exp,
                row_max, Vl, valid_columns(Vl, col_begin, V));
}

void SimtDevice::vocab_ce_normalize_impl(float* probs, const float* sum_exp, int64_t N, int64_t Vl) {
  if (N <= 0 || Vl <= 0) return;
  const auto l = cuda_launch::elementwise(N * Vl);
  launch_kernel(vocab_ce_normalize_kernel, grid1d(l.blocks), dim3(l.threads), 0, stream(), probs, sum_exp, N, Vl);
}

void SimtDevice::vocab_ce_backward_impl(float* dlogits, const float* probs, const int32_t* targets, int64_t N,
                                        int64_t Vl, int64_t col_begin, float scale) {
  if (N <= 0 || Vl <= 0) return;
  const auto l = cuda_launch::elementwise(N * Vl);
  launch_kernel(vocab_ce_backward_kernel, grid1d(l.blocks), dim3(l.threads), 0, stream(), dlogits, probs, targets, N,
                Vl, col_begin, scale);
}

}  // namespace GPL_SIMT_NAMESPACE
}  // namespace gpuledger
