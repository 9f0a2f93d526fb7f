// CpuDevice LayerNorm (Ba et al. 2016) and RMSNorm (Zhang & Sennrich 2019),
// forward and backward over the rows of an (N, C) tensor.
//
// Statistics are computed with double sums and stored as fp32 (mean, rstd),
// and the forward output is computed from the stored fp32 values, so backward
// sees exactly the normalisation forward applied. The backward formulas are
// the row-wise closed forms (as in llm.c's layernorm_backward):
//   LayerNorm: x̂ = (x − μ)·r, g = dout ⊙ w,
//              dx = r · (g − mean(g) − x̂ · mean(g ⊙ x̂)),
//   RMSNorm:   x̂ = x·r,       dx = r · (g − x̂ · mean(g ⊙ x̂)),
//   dw += Σ_rows dout ⊙ x̂,  dbias += Σ_rows dout.
// dx is computed row-parallel; dw and dbias column-block-parallel (every task
// owns some columns and sums all rows in order), so no result depends on the
// number of threads.
#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/cpu/cpu_device.h"

namespace gpuledger {

namespace {

constexpr int64_t kParallelMinElems = 1 << 15;
constexpr int64_t kColBlock = 512;

const char* row_ptr(const void* p, DType t, int64_t r, int64_t C) {
  return static_cast<const char*>(p) + r * C * dtype_bytes(t);
}
char* row_ptr(void* p, DType t, int64_t r, int64_t C) { return static_cast<char*>(p) + r * C * dtype_bytes(t); }

std::vector<float> to_fp32(const void* src, DType t, int64_t n) {
  std::vector<float> v(static_cast<size_t>(n));
  convert_to_fp32(src, t, v.data(), n);
  return v;
}

// Writes dx for one row: replaces it, or adds to what is there.
void store_dx(const float* dx, void* dst, DType t, int64_t C, bool accumulate, float* scratch) {
  if (accumulate) {
    convert_to_fp32(dst, t, scratch, C);
    for (int64_t c = 0; c < C; ++c) scratch[c] += dx[c];
    convert_from_fp32(scratch, dst, t, C);
  } else {
    convert_from_fp32(dx, dst, t, C);
  }
}

// dw += Σ_r dout[r]·x̂[r] and dbias += Σ_r dout[r], with x̂ = (x − mean)·rstd
// (mean == nullptr for RMSNorm). dw or dbias may be null (not wanted).
void weight_grads(void* dw, void* dbias, DType grad_t, const void* dout, const void* x, const float* mean,
                  const float* rstd, DType t, int64_t N, int64_t C) {
  if (dw == nullptr && dbias == nullptr) return;
  const int64_t blocks = (C + kColBlock - 1) / kColBlock;
#pragma omp parallel for if (N * C > kParallelMinElems)
  for (int64_t bk = 0; bk < blocks; ++bk) {
    const int64_t c0 = bk * kColBlock, len = std::min(kColBlock, C - c0);
    double sw[kColBlock] = {}, sb[kColBlock] = {};
    float fx[kColBlock], fd[kColBlock];
    for (int64_t r = 0; r < N; ++r) {
      convert_to_fp32(row_ptr(x, t, r, C) + c0 * dtype_bytes(t), t, fx, len);
      convert_to_fp32(row_ptr(dout, t, r, C) + c0 * dtype_bytes(t), t, fd, len);
      const float mu = mean ? mean[r] : 0.0f, rs = rstd[r];
      for (int64_t c = 0; c < len; ++c) {
        sw[c] += static_cast<double>(fd[c]) * ((fx[c] - mu) * rs);
        sb[c] += fd[c];
      }
    }
    float acc[kColBlock];
    const int64_t gb = dtype_bytes(grad_t);
    if (dw) {
      char* p = static_cast<char*>(dw) + c0 * gb;
      convert_to_fp32(p, grad_t, acc, len);
      for (int64_t c = 0; c < len; ++c) acc[c] = static_cast<float>(acc[c] + sw[c]);
      convert_from_fp32(acc, p, grad_t, len);
    }
    if (dbias) {
      char* p = static_cast<char*>(dbias) + c0 * gb;
      convert_to_fp32(p, grad_t, acc, len);
      for (int64_t c = 0; c < len; ++c) acc[c] = static_cast<float>(acc[c] + sb[c]);
      convert_from_fp32(acc, p, grad_t, len);
    }
  }
}

}  // namespace

void CpuDevice::layernorm_forward_impl(void* out, float* mean, float* rstd, const void* x, const void* w,
                                       const void* bias, DType t, int64_t N, int64_t C, float eps) {
  if (N <= 0 || C <= 0) return;
  const std::vector<float> fw = to_fp32(w, t, C);
  const std::vector<float> fb = bias ? to_fp32(bias, t, C) : std::vector<float>(C, 0.0f);
#pragma omp parallel if (N * C > kParallelMinElems)
  {
    std::vector<float> row(static_cast<size_t>(C));
#pragma omp for
    for (int64_t r = 0; r < N; ++r) {
      convert_to_fp32(row_ptr(x, t, r, C), t, row.data(), C);
      double s = 0.0;
      for (int64_t c = 0; c < C; ++c) s += row[c];
      const double mu = s / static_cast<double>(C);
      double ss = 0.0;  // two passes: no cancellation in E[x²] − E[x]²
      for (int64_t c = 0; c < C; ++c) ss += (row[c] - mu) * (row[c] - mu);
      const float m32 = static_cast<float>(mu);
      const float r32 = static_cast<float>(1.0 / std::sqrt(ss / static_cast<double>(C) + eps));
      if (mean) mean[r] = m32;
      if (rstd) rstd[r] = r32;
      for (int64_t c = 0; c < C; ++c) row[c] = (row[c] - m32) * r32 * fw[c] + fb[c];
      convert_from_fp32(row.data(), row_ptr(out, t, r, C), t, C);
    }
  }
}

void CpuDevice::layernorm_backward_impl(void* dx, void* dw, void* dbias, DType grad_t, const void* dout, const void* x,
                                        const void* w, const float* mean, const float* rstd, DType t, int64_t N,
                                        int64_t C, bool accumulate_dx) {
  if (N <= 0 || C <= 0) return;
  const std::vector<float> fw = to_fp32(w, t, C);
  if (dx) {
#pragma omp parallel if (N * C > kParallelMinElems)
    {
      std::vector<float> fx(C), g(C), scratch(C);
#pragma omp for
      for (int64_t r = 0; r < N; ++r) {
        convert_to_fp32(row_ptr(x, t, r, C), t, fx.data(), C);
        convert_to_fp32(row_ptr(dout, t, r, C), t, g.data(), C);
        const float mu = mean[r], rs = rstd[r];
        double sg = 0.0, sgx = 0.0;
        for (int64_t c = 0; c < C; ++c) {
          fx[c] = (fx[c] - mu) * rs;  // x̂
          g[c] *= fw[c];              // g = dout ⊙ w
          sg += g[c];
          sgx += static_cast<double>(g[c]) * fx[c];
        }
        const float mg = static_cast<float>(sg / C), mgx = static_cast<float>(sgx / C);
        for (int64_t c = 0; c < C; ++c) g[c] = (g[c] - mg - fx[c] * mgx) * rs;
        store_dx(g.data(), row_ptr(dx, t, r, C), t, C, accumulate_dx, scratch.data());
      }
    }
  }
  weight_grads(dw, dbias, grad_t, dout, x, mean, rstd, t, N, C);
}

void CpuDevice::rmsnorm_forward_impl(void* out, float* rstd, const void* x, const void* w, DType t, int64_t N,
                                     int64_t C, float eps) {
  if (N <= 0 || C <= 0) return;
  const std::vector<float> fw = to_fp32(w, t, C);
#pragma omp parallel if (N * C > kParallelMinElems)
  {
    std::vector<float> row(static_cast<size_t>(C));
#pragma omp for
    for (int64_t r = 0; r < N; ++r) {
      convert_to_fp32(row_ptr(x, t, r, C), t, row.data(), C);
      double ss = 0.0;
      for (int64_t c = 0; c < C; ++c) ss += static_cast<double>(row[c]) * row[c];
      const float r32 = static_cast<float>(1.0 / std::sqrt(ss / static_cast<double>(C) + eps));
      if (rstd) rstd[r] = r32;
      for (int64_t c = 0; c < C; ++c) row[c] = row[c] * r32 * fw[c];
      convert_from_fp32(row.data(), row_ptr(out, t, r, C), t, C);
    }
  }
}

void CpuDevice::rmsnorm_backward_impl(void* dx, void* dw, DType grad_t, const void* dout, const void* x, const void* w,
                                      const float* rstd, DType t, int64_t N, int64_t C, bool accumulate_dx) {
  if (N <= 0 || C <= 0) return;
  const std::vector<float> fw = to_fp32(w, t, C);
  if (dx) {
#pragma omp parallel if (N * C > kParallelMinElems)
    {
      std::vector<float> fx(C), g(C), scratch(C);
#pragma omp for
      for (int64_t r = 0; r < N; ++r) {
        convert_to_fp32(row_ptr(x, t, r, C), t, fx.data(), C);
        convert_to_fp32(row_ptr(dout, t, r, C), t, g.data(), C);
        const float rs = rstd[r];
        double sgx = 0.0;
        for (int64_t c = 0; c < C; ++c) {
          fx[c] *= rs;  // x̂
          g[c] *= fw[c];
          sgx += static_cast<double>(g[c]) * fx[c];
        }
        const float mgx = static_cast<float>(sgx / C);
        for (int64_t c = 0; c < C; ++c) g[c] = (g[c] - fx[c] * mgx) * rs;
        store_dx(g.data(), row_ptr(dx, t, r, C), t, C, accumulate_dx, scratch.data());
      }
    }
  }
  weight_grads(dw, nullptr, grad_t, dout, x, nullptr, rstd, t, N, C);
}

}  // namespace gpuledger
