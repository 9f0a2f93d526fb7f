// CpuDevice token (+ learned position) embedding, forward and backward.
// Forward: out[b, t] = wte[ids[b, t]] + wpe[pos(t)] (wpe optional),
// summed in fp32 and rounded once. Backward groups the tokens by id (a stable
// sort, so each id's rows are summed in token order), sums each group in fp32
// and adds it to its dwte row once: one rounding per row even for 16-bit
// gradients, no races between threads (every task owns distinct rows), and a
// result that does not depend on the number of threads.
#include <algorithm>
#include <numeric>
#include <vector>

#include "kernels/cpu/cpu_device.h"

namespace gpuledger {

namespace {

constexpr int64_t kParallelMinElems = 1 << 15;

const char* row_ptr(const void* p, DType t, int64_t r, int64_t C) {
  return static_cast<const char*>(p) + r * C * dtype_bytes(t);
}
char* row_ptr(void* p, DType t, int64_t r, int64_t C) { return static_cast<char*>(p) + r * C * dtype_bytes(t); }

// dst_row (grad_t) += sum (fp32), C elements.
void add_row(void* dst_row, DType grad_t, const float* sum, int64_t C, float* scratch) {
  convert_to_fp32(dst_row, grad_t, scratch, C);
  for (int64_t c = 0; c < C; ++c) scratch[c] += sum[c];
  convert_from_fp32(scratch, dst_row, grad_t, C);
}

}  // namespace

void CpuDevice::embedding_forward_impl(void* out, const int32_t* ids, const void* wte, const void* wpe, DType t,
                                       int64_t B, int64_t T, int64_t C, const TokenSpans& positions) {
  if (B <= 0 || T <= 0 || C <= 0) return;
  const int64_t rows = B * T;
#pragma omp parallel if (rows * C > kParallelMinElems)
  {
    std::vector<float> e(C), p(C);
#pragma omp for
    for (int64_t r = 0; r < rows; ++r) {
      convert_to_fp32(row_ptr(wte, t, ids[r], C), t, e.data(), C);
      if (wpe) {
        convert_to_fp32(row_ptr(wpe, t, positions.position(r % T), C), t, p.data(), C);
        for (int64_t c = 0; c < C; ++c) e[c] += p[c];
      }
      convert_from_fp32(e.data(), row_ptr(out, t, r, C), t, C);
    }
  }
}

void CpuDevice::embedding_backward_impl(void* dwte, void* dwpe, DType grad_t, const void* dout, DType t,
                                        const int32_t* ids, int64_t B, int64_t T, int64_t C,
                                        const TokenSpans& positions) {
  if (B <= 0 || T <= 0 || C <= 0) return;
  const int64_t rows = B * T;
  const bool par = rows * C > kParallelMinElems;

  if (dwte) {
    // Token rows ordered by id, ties in token order; groups[g] is where group g starts.
    std::vector<int64_t> order(static_cast<size_t>(rows));
    std::iota(order.begin(), order.end(), int64_t{0});
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return ids[a] < ids[b]; });
    std::vector<int64_t> groups;
    for (int64_t i = 0; i < rows; ++i)
      if (i == 0 || ids[order[i]] != ids[order[i - 1]]) groups.push_back(i);
    groups.push_back(rows);
    const int64_t ngroups = static_cast<int64_t>(groups.size()) - 1;
#pragma omp parallel if (par)
    {
      std::vector<float> sum(C), row(C);
#pragma omp for schedule(dynamic, 16)
      for (int64_t g = 0; g < ngroups; ++g) {
        std::fill(sum.begin(), sum.end(), 0.0f);
        for (int64_t i = groups[g]; i < groups[g + 1]; ++i) {
          convert_to_fp32(row_ptr(dout, t, order[i], C), t, row.data(), C);
          for (int64_t c = 0; c < C; ++c) sum[c] += row[c];
        }
        add_row(row_ptr(dwte, grad_t, ids[order[groups[g]]], C), grad_t, sum.data(), C, row.data());
      }
    }
  }

  if (dwpe) {
    // Position t collects Σ_b dout[b, t]; each task owns distinct positions.
#pragma omp parallel if (par)
    {
      std::vector<float> sum(C), row(C);
#pragma omp for
      for (int64_t tt = 0; tt < T; ++tt) {
        std::fill(sum.begin(), sum.end(), 0.0f);
        for (int64_t b = 0; b < B; ++b) {
          convert_to_fp32(row_ptr(dout, t, b * T + tt, C), t, row.data(), C);
          for (int64_t c = 0; c < C; ++c) sum[c] += row[c];
        }
        add_row(row_ptr(dwpe, grad_t, positions.position(tt), C), grad_t, sum.data(), C, row.data());
      }
    }
  }
}

}  // namespace gpuledger
