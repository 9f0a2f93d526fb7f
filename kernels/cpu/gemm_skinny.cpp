// The skinny 16-bit GEMM (gemm_skinny.h): the run-time choice of ISA and the
// split of the output columns over the OpenMP threads. The loops live in
// gemm_skinny_body.h, compiled here once per ISA.
#include "kernels/cpu/gemm_skinny.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>

#include "core/int_math.h"
#include "kernels/device.h"

#include "kernels/cpu/cpu_isa.h"
#include "kernels/cpu/gemm_bf16_dot.h"

#ifdef _OPENMP
#include <omp.h>
#endif

// skinny_avx2::run_range and skinny_portable::run_range.
#define GPL_SIMD_BODY "kernels/cpu/gemm_skinny_body.h"
#define GPL_SIMD_NS_AVX2 skinny_avx2
#define GPL_SIMD_NS_PORTABLE skinny_portable
#include "kernels/cpu/simd_paths.h"

namespace gpuledger {

namespace {

// Below this many multiply-adds a call stays on one thread (fork/join ~ µs).
constexpr int64_t kParallelMinMacs = int64_t{1} << 18;
// Each thread's columns: a multiple of the axpy strip, so only the last range has a tail.
constexpr int64_t kColumnAlign = 16;

}  // namespace

void skinny_gemm(const SkinnyGemm& s, CpuIsa isa) {
  if (s.w_type == DType::kFP32) throw std::invalid_argument("skinny_gemm: W must be bf16 or fp16");
  if (s.w_sp != 1 && s.w_sj != 1) throw std::invalid_argument("skinny_gemm: one of W's strides must be 1");
  if (s.m > kSkinnyMaxRows) throw std::invalid_argument("skinny_gemm: m exceeds kSkinnyMaxRows");
  if (!cpu_supports(isa)) throw std::invalid_argument("skinny_gemm: this CPU lacks AVX2, FMA or F16C");
  if (s.x_bf16 != nullptr) {
    if (!cpu_has_bf16_dot()) throw std::invalid_argument("skinny_gemm: bf16 X needs a CPU with AVX512_BF16");
    if (s.w_type != DType::kBF16 || s.w_sp != 1)
      throw std::invalid_argument("skinny_gemm: bf16 X needs bf16 W rows contiguous in k (w_sp 1)");
  }
  if (s.m <= 0 || s.n <= 0) return;
  auto run = [&](int64_t lo, int64_t hi) {
    if (s.x_bf16 != nullptr) {
      bf16_dot_skinny_range(s, lo, hi);
      return;
    }
#ifdef GPL_CPU_HAVE_AVX2_PATH
    if (isa == CpuIsa::kAvx2) {
      skinny_avx2::run_range(s, lo, hi);
      return;
    }
#endif
    skinny_portable::run_range(s, lo, hi);
  };
  int threads = 1;
#ifdef _OPENMP
  if (!omp_in_parallel() && s.m * s.n * s.k >= kParallelMinMacs) threads = omp_get_max_threads();
#endif
  const int64_t block = ceil_div(ceil_div(s.n, threads), kColumnAlign) * kColumnAlign;
  const int64_t blocks = ceil_div(s.n, block);
  if (blocks <= 1) {
    run(0, s.n);
    return;
  }
#pragma omp parallel for num_threads(static_cast <int>(blocks)) schedule(static, 1)
  for (int64_t t = 0; t < blocks; ++t) run(t * block, std::min(s.n, (t + 1) * block));
}

namespace {

// rows×cols of a 16-bit matrix, element (r, p) at src[r·s_r + p·s_p] -> packed fp32 dst (row r at dst + r·cols).
void widen_packed(const uint16_t* src, DType t, int64_t s_r, int64_t s_p, int64_t rows, int64_t cols, float* dst) {
  for (int64_t r = 0; r < rows; ++r) {
    float* d = dst + r * cols;
    if (s_p == 1) {
      convert_to_fp32(src + r * s_r, t, d, cols);
      continue;
    }
    for (int64_t p = 0; p < cols; ++p) {
      const uint16_t v = src[r * s_r + p * s_p];
      d[p] = t == DType::kFP16 ? fp16_to_fp32(v) : bf16_to_fp32(v);
    }
  }
}

// rows×cols of a 16-bit matrix, element (r, p) at src[r·s_r + p·s_p] -> packed rows of the same dtype.
void copy_packed(const uint16_t* src, int64_t s_r, int64_t s_p, int64_t rows, int64_t cols, uint16_t* dst) {
  for (int64_t r = 0; r < rows; ++r) {
    uint16_t* d = dst + r * cols;
    if (s_p == 1) {
      std::memcpy(d, src + r * s_r, static_cast<size_t>(cols) * sizeof(uint16_t));
      continue;
    }
    for (int64_t p = 0; p < cols; ++p) d[p] = src[r * s_r + p * s_p];
  }
}

}  // namespace

bool run_skinny_gemm(Device& dev, const GemmArgs& g, CpuIsa isa) {
  return run_skinny_gemm(dev, g, isa, bf16_dot_enabled());
}

bool run_skinny_gemm(Device& dev, const GemmArgs& g, CpuIsa isa, bool bf16_dot) {
  if (g.ab_type == DType::kFP32 || g.k == 0 || g.alpha == 0.0f) return false;
  if (g.m > kSkinnyMaxRows && g.n > kSkinnyMaxRows) return false;
  // X = op(A) (m×k), W = op(B); or X = op(B)ᵀ (n×k), W = op(A)ᵀ and C read as Cᵀ.
  const bool x_is_a = g.m <= g.n;
  const auto* a = static_cast<const uint16_t*>(g.a);
  const auto* b = static_cast<const uint16_t*>(g.b);
  const int64_t rows = x_is_a ? g.m : g.n;
  // op(A)[i][p] = A[i·lda + p] or (trans_a) A[p·lda + i]; op(B)[p][j] = B[p·ldb + j] or (trans_b) B[j·ldb + p].
  const int64_t a_si = g.trans_a ? 1 : g.lda, a_sp = g.trans_a ? g.lda : 1;
  const int64_t b_sp = g.trans_b ? 1 : g.ldb, b_sj = g.trans_b ? g.ldb : 1;
  SkinnyGemm s;
  s.m = rows;
  s.n = x_is_a ? g.n : g.m;
  s.k = g.k;
  s.w_type = g.ab_type;
  s.w_sp = x_is_a ? b_sp : a_sp;  // W = op(A)ᵀ: W[p][j] = op(A)[j][p]
  s.w_sj = x_is_a ? b_sj : a_si;
  s.c_type = g.c_type;
  s.c_si = x_is_a ? g.ldc : 1;
  s.c_sj = x_is_a ? 1 : g.ldc;
  s.alpha = g.alpha;
  s.beta = g.beta;
  const int64_t x_stride = x_is_a ? g.stride_a : g.stride_b, w_stride = x_is_a ? g.stride_b : g.stride_a;
  const uint16_t* x_base = x_is_a ? a : b;
  const uint16_t* w_base = x_is_a ? b : a;
  // bf16 W rows contiguous in k: X stays bf16 and vdpbf16ps multiplies the pairs (gemm_bf16_dot.h).
  const bool dot = bf16_dot && g.ab_type == DType::kBF16 && s.w_sp == 1;
  Buffer xb = dot ? dev.alloc(rows * g.k * 2, Account::kWorkspace, "gemm.x_bf16")
                  : dev.alloc(rows * g.k * 4, Account::kWorkspace, "gemm.x_fp32");
  if (dot)
    s.x_bf16 = xb.as<uint16_t>();
  else
    s.x = xb.as<float>();
  // X[i][p] at x_base[i·x_si + p·x_sp]: op(A) (x_is_a), or op(B)ᵀ: X[j][p] = op(B)[p][j].
  const int64_t x_si = x_is_a ? a_si : b_sj, x_sp = x_is_a ? a_sp : b_sp;
  const int64_t c_eb = dtype_bytes(g.c_type);
  for (int64_t i = 0; i < g.batch; ++i) {
    // A stride of 0 broadcasts one X over the batch: copy it once.
    if (i == 0 || x_stride != 0) {
      const uint16_t* xi = x_base + i * x_stride;
      if (dot)
        copy_packed(xi, x_si, x_sp, rows, g.k, xb.as<uint16_t>());
      else
        widen_packed(xi, g.ab_type, x_si, x_sp, rows, g.k, xb.as<float>());
    }
    s.w = w_base + i * w_stride;
    s.c = static_cast<char*>(g.c) + i * g.stride_c * c_eb;
    skinny_gemm(s, isa);
  }
  return true;
}

}  // namespace gpuledger
