// CpuDevice element-wise ops: convert, add, accumulate, scale, bias_add,
// bias_backward. Values are widened to fp32 in fixed-size chunks (on the
// stack), combined in fp32, and rounded once to the destination dtype, so a
// 16-bit result differs from the exact one by at most half an ulp of it.
#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels/cpu/cpu_device.h"

namespace gpuledger {

namespace {

// Elements per chunk: three fp32 chunks (12 KiB) fit L1 beside the operands.
constexpr int64_t kChunk = 1024;
// Below this many elements one thread does the whole loop.
constexpr int64_t kParallelMinElems = 1 << 15;

const char* at(const void* p, DType t, int64_t i) { return static_cast<const char*>(p) + i * dtype_bytes(t); }
char* at(void* p, DType t, int64_t i) { return static_cast<char*>(p) + i * dtype_bytes(t); }

// Runs body(begin, count) over [0, n) in chunks of kChunk, chunks in parallel.
template <class Body>
void for_chunks(int64_t n, Body body) {
  const int64_t chunks = (n + kChunk - 1) / kChunk;
#pragma omp parallel for if (n > kParallelMinElems)
  for (int64_t c = 0; c < chunks; ++c) {
    const int64_t begin = c * kChunk;
    body(begin, std::min(kChunk, n - begin));
  }
}

}  // namespace

void CpuDevice::convert_impl(void* dst, DType dst_t, const void* src, DType src_t, int64_t n) {
  if (n <= 0) return;
  if (dst_t == src_t) {  // same storage: a bit-exact copy
    std::memmove(dst, src, static_cast<size_t>(n * dtype_bytes(dst_t)));
    return;
  }
  for_chunks(n, [&](int64_t i0, int64_t len) {
    float buf[kChunk];
    convert_to_fp32(at(src, src_t, i0), src_t, buf, len);
    convert_from_fp32(buf, at(dst, dst_t, i0), dst_t, len);
  });
}

void CpuDevice::add_impl(void* out, const void* a, const void* b, DType t, int64_t n) {
  if (n <= 0) return;
  for_chunks(n, [&](int64_t i0, int64_t len) {
    float fa[kChunk], fb[kChunk];
    convert_to_fp32(at(a, t, i0), t, fa, len);
    convert_to_fp32(at(b, t, i0), t, fb, len);
    for (int64_t i = 0; i < len; ++i) fa[i] += fb[i];
    convert_from_fp32(fa, at(out, t, i0), t, len);  // out may alias a or b: both already read
  });
}

void CpuDevice::accumulate_impl(void* dst, DType dst_t, const void* src, DType src_t, int64_t n) {
  if (n <= 0) return;
  for_chunks(n, [&](int64_t i0, int64_t len) {
    float fd[kChunk], fs[kChunk];
    convert_to_fp32(at(dst, dst_t, i0), dst_t, fd, len);
    convert_to_fp32(at(src, src_t, i0), src_t, fs, len);
    for (int64_t i = 0; i < len; ++i) fd[i] += fs[i];
    convert_from_fp32(fd, at(dst, dst_t, i0), dst_t, len);
  });
}

void CpuDevice::scale_impl(void* x, DType t, float alpha, int64_t n) {
  if (n <= 0) return;
  for_chunks(n, [&](int64_t i0, int64_t len) {
    float fx[kChunk];
    convert_to_fp32(at(x, t, i0), t, fx, len);
    for (int64_t i = 0; i < len; ++i) fx[i] *= alpha;
    convert_from_fp32(fx, at(x, t, i0), t, len);
  });
}

void CpuDevice::bias_add_impl(void* out, const void* bias, DType t, int64_t rows, int64_t cols) {
  if (rows <= 0 || cols <= 0) return;
  std::vector<float> fb(static_cast<size_t>(cols));
  convert_to_fp32(bias, t, fb.data(), cols);
#pragma omp parallel if (rows * cols > kParallelMinElems)
  {
    std::vector<float> row(static_cast<size_t>(cols));
#pragma omp for
    for (int64_t r = 0; r < rows; ++r) {
      void* o = at(out, t, r * cols);
      convert_to_fp32(o, t, row.data(), cols);
      for (int64_t c = 0; c < cols; ++c) row[c] += fb[c];
      convert_from_fp32(row.data(), o, t, cols);
    }
  }
}

void CpuDevice::bias_backward_impl(void* dbias, DType grad_t, const void* dout, DType t, int64_t rows, int64_t cols,
                                   bool accumulate) {
  if (cols <= 0) return;
  // Each task owns a block of columns and sums every row into it in order:
  // no reduction across threads, so the result does not depend on their
  // number. Sums in double: this is the reference the GPU is compared with.
  const int64_t blocks = (cols + kChunk - 1) / kChunk;
#pragma omp parallel for if (rows * cols > kParallelMinElems)
  for (int64_t bk = 0; bk < blocks; ++bk) {
    const int64_t c0 = bk * kChunk, len = std::min(kChunk, cols - c0);
    double sum[kChunk] = {};
    float row[kChunk];
    for (int64_t r = 0; r < rows; ++r) {
      convert_to_fp32(at(dout, t, r * cols + c0), t, row, len);
      for (int64_t c = 0; c < len; ++c) sum[c] += row[c];
    }
    float res[kChunk];
    if (accumulate)
      convert_to_fp32(at(dbias, grad_t, c0), grad_t, res, len);
    else
      std::fill(res, res + len, 0.0f);
    for (int64_t c = 0; c < len; ++c) res[c] = static_cast<float>(res[c] + sum[c]);
    convert_from_fp32(res, at(dbias, grad_t, c0), grad_t, len);
  }
}

}  // namespace gpuledger
