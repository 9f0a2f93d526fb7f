// CpuDevice::gemm_impl: C = alpha·op(A)·op(B) + beta·C, row-major, batched with
// element strides (GemmArgs in kernels/device.h).
//
// Compute is fp32 (docs/architecture.md "Three backends": the CPU stores 16-bit values and computes in
// fp32). Three routes:
//  - 16-bit A and B with one side of C at most kSkinnyMaxRows (32) wide —
//    decode, where one operand is a few tokens and the other a weight matrix:
//    the skinny kernel (gemm_skinny.h) widens the few tokens to fp32 in a
//    booked workspace (`gemm.x_fp32`, 4·rows·k bytes) and reads the weights in
//    their 16-bit dtype, once per call.
//  - other 16-bit A and B: blocked (run_blocked_16bit below): slices of op(A)
//    and op(B) widened into fp32 workspace blocks of bounded size, one set per
//    thread reused over the call, each block product run by the fp32 GEMM; a
//    16-bit C through an fp32 tile, rounded once. bf16 operands on a CPU with
//    AVX512-BF16 (gemm_bf16_dot.h) are not widened: the slices are packed
//    as bf16 pairs and multiplied by vdpbf16ps.
//  - fp32 A and B: the fp32 GEMM in place; a 16-bit C through an fp32 copy.
// Every workspace is allocated through Device::alloc under Account::kWorkspace,
// so the ledger sees this backend-specific temporary (docs/exact-budget.md,
// "Workspace": the budget there bounds the fp32 copies of whole operands,
// which these blocks never exceed).
//
// The fp32 kernel is OpenBLAS's cblas_sgemm when built with BLAS (Debian's
// OpenBLAS has no bf16 GEMM), else a cache-blocked, OpenMP-
// parallel GEMM below, organised as Goto & van de Geijn (2008), "Anatomy of
// High-Performance Matrix Multiplication": C is cut into MC×NC tiles, the k
// dimension into KC slices; op(A) and op(B) slices are packed into MR-row and
// NR-column panels, and an MR×NR register-blocked micro-kernel runs over them.
// Those packed panels (320 KiB per thread) are the kernel's own scratch, as
// OpenBLAS's internal buffers are: not booked, like any library's internals.
#include <algorithm>
#include <climits>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/int_math.h"
#include "kernels/cpu/cpu_device.h"
#include "kernels/cpu/gemm_bf16_dot.h"
#include "kernels/cpu/gemm_skinny.h"
#include "kernels/cpu/thread_policy.h"

#if GPULEDGER_HAVE_BLAS
#include <cblas.h>
#endif
#ifdef _OPENMP
#include <omp.h>
#endif

namespace gpuledger {

namespace {

// Below this many elements a conversion or scaling loop stays on one thread:
// the fork/join costs more than the loop (a few microseconds).
constexpr int64_t kParallelMinElems = 1 << 15;

// Whether a loop of `work` elements may fork: large enough, and not already
// inside a parallel region (the blocked route runs these per thread).
bool fork_worthwhile(int64_t work) {
#ifdef _OPENMP
  return work > kParallelMinElems && !omp_in_parallel();
#else
  return work > kParallelMinElems;
#endif
}

// C (m×n, ldc) = beta·C, with beta == 0 writing zeros without reading C (BLAS
// semantics: C may hold NaN or garbage when beta is 0).
void scale_c(int64_t m, int64_t n, float beta, float* c, int64_t ldc) {
#pragma omp parallel for if (fork_worthwhile(m * n))
  for (int64_t i = 0; i < m; ++i) {
    float* row = c + i * ldc;
    if (beta == 0.0f)
      std::fill(row, row + n, 0.0f);
    else
      for (int64_t j = 0; j < n; ++j) row[j] *= beta;
  }
}

#if !GPULEDGER_HAVE_BLAS
// ---- the built-in fp32 GEMM (used when no BLAS was found) ----

constexpr int64_t kMR = 8;    // micro-tile: kMR·kNR = 128 accumulators in registers
constexpr int64_t kNR = 16;   //   (8 of AVX-512's 32 registers, 16 of AVX2's 16)
constexpr int64_t kMC = 64;   // A block kMC×kKC floats = 64 KiB: stays in L2
constexpr int64_t kNC = 256;  // B block kKC×kNC floats = 256 KiB: L2; one kNR panel (16 KiB) in L1
constexpr int64_t kKC = 256;

// op(A)[i][p] for row-major A: A is m×k (lda) or, transposed, k×m.
inline float op_a(const float* a, int64_t lda, bool ta, int64_t i, int64_t p) {
  return ta ? a[p * lda + i] : a[i * lda + p];
}
// op(B)[p][j]: B is k×n (ldb) or, transposed, n×k.
inline float op_b(const float* b, int64_t ldb, bool tb, int64_t p, int64_t j) {
  return tb ? b[j * ldb + p] : b[p * ldb + j];
}

// Packs op(A)[i0:i0+mc, p0:p0+kc] as ⌈mc/kMR⌉ panels, each kc × kMR (the kMR
// values of one p adjacent); rows past mc are zero so the micro-kernel needs
// no edge case.
void pack_a(const float* a, int64_t lda, bool ta, int64_t i0, int64_t mc, int64_t p0, int64_t kc, float* ap) {
  for (int64_t ir = 0; ir < mc; ir += kMR) {
    float* panel = ap + ir * kc;
    const int64_t rows = std::min(kMR, mc - ir);
    for (int64_t p = 0; p < kc; ++p)
      for (int64_t r = 0; r < kMR; ++r) panel[p * kMR + r] = r < rows ? op_a(a, lda, ta, i0 + ir + r, p0 + p) : 0.0f;
  }
}

// Packs op(B)[p0:p0+kc, j0:j0+nc] as ⌈nc/kNR⌉ panels, each kc × kNR.
void pack_b(const float* b, int64_t ldb, bool tb, int64_t p0, int64_t kc, int64_t j0, int64_t nc, float* bp) {
  for (int64_t jr = 0; jr < nc; jr += kNR) {
    float* panel = bp + jr * kc;
    const int64_t cols = std::min(kNR, nc - jr);
    for (int64_t p = 0; p < kc; ++p)
      for (int64_t j = 0; j < kNR; ++j) panel[p * kNR + j] = j < cols ? op_b(b, ldb, tb, p0 + p, j0 + jr + j) : 0.0f;
  }
}

// out = Σ_p ap[p]·bp[p]ᵀ over one kMR×kNR micro-tile: kMR rows of kNR floats,
// each a GCC vector (one AVX-512 register; two AVX2 or four SSE ones), updated
// by broadcasting ap[p][r] — the outer-product form of Goto's micro-kernel.
// Written once, compiled three times: for AVX-512 and for AVX2 with fused
// multiply-adds (the build targets baseline x86-64, so this is how the built-in
// GEMM reaches the vector units), and portable.
typedef float VecNR __attribute__((vector_size(kNR * sizeof(float))));

#define GPL_MICRO_TILE_BODY                                           \
  VecNR acc[kMR] = {};                                                \
  for (int64_t p = 0; p < kc; ++p) {                                  \
    VecNR bv;                                                         \
    std::memcpy(&bv, bp + p * kNR, sizeof bv);                        \
    for (int64_t r = 0; r < kMR; ++r) acc[r] += ap[p * kMR + r] * bv; \
  }                                                                   \
  std::memcpy(out, acc, sizeof acc);

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
__attribute__((target("avx512f,fma"), optimize("fp-contract=fast"))) void micro_tile_avx512(int64_t kc, const float* ap,
                                                                                            const float* bp,
                                                                                            float (&out)[kMR][kNR]) {
  GPL_MICRO_TILE_BODY
}
__attribute__((target("avx2,fma"), optimize("fp-contract=fast"))) void micro_tile_avx2(int64_t kc, const float* ap,
                                                                                       const float* bp,
                                                                                       float (&out)[kMR][kNR]) {
  GPL_MICRO_TILE_BODY
}
#define GPL_HAVE_MICRO_TILE_X86 1
#endif
void micro_tile_portable(int64_t kc, const float* ap, const float* bp, float (&out)[kMR][kNR]) { GPL_MICRO_TILE_BODY }
#undef GPL_MICRO_TILE_BODY

using MicroTileFn = void (*)(int64_t, const float*, const float*, float (&)[kMR][kNR]);

MicroTileFn pick_micro_tile() {
#ifdef GPL_HAVE_MICRO_TILE_X86
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("fma")) return micro_tile_avx512;
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return micro_tile_avx2;
#endif
  return micro_tile_portable;
}

// One micro-tile: C (rows×cols of it) gets alpha·acc; the first k slice also
// applies beta (0: C not read).
void micro_kernel(MicroTileFn tile, int64_t kc, const float* ap, const float* bp, float alpha, float beta, bool first,
                  float* c, int64_t ldc, int64_t rows, int64_t cols) {
  float acc[kMR][kNR];
  tile(kc, ap, bp, acc);
  for (int64_t r = 0; r < rows; ++r) {
    float* crow = c + r * ldc;
    for (int64_t j = 0; j < cols; ++j) {
      const float v = alpha * acc[r][j];
      if (!first)
        crow[j] += v;
      else
        crow[j] = beta == 0.0f ? v : v + beta * crow[j];
    }
  }
}

void builtin_sgemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
                   const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  const int64_t tiles_m = (m + kMC - 1) / kMC, tiles_n = (n + kNC - 1) / kNC;
  const int64_t tiles = tiles_m * tiles_n;
  static const MicroTileFn tile_fn = pick_micro_tile();
  // One C tile per task: tasks write disjoint parts of C, so no reduction and
  // a result independent of the thread count. Each task packs its own slices.
#pragma omp parallel if (tiles > 1 && fork_worthwhile(m * n * k))
  {
    // Panels hold whole micro-tiles (rows, columns rounded up); one pair per thread per call.
    constexpr int64_t kMCr = (kMC + kMR - 1) / kMR * kMR, kNCr = (kNC + kNR - 1) / kNR * kNR;
    std::vector<float> ap(static_cast<size_t>(kMCr * kKC)), bp(static_cast<size_t>(kNCr * kKC));
#pragma omp for schedule(dynamic)
    for (int64_t t = 0; t < tiles; ++t) {
      const int64_t i0 = (t / tiles_n) * kMC, j0 = (t % tiles_n) * kNC;
      const int64_t mc = std::min(kMC, m - i0), nc = std::min(kNC, n - j0);
      for (int64_t p0 = 0; p0 < k; p0 += kKC) {
        const int64_t kc = std::min(kKC, k - p0);
        pack_b(b, ldb, tb, p0, kc, j0, nc, bp.data());
        pack_a(a, lda, ta, i0, mc, p0, kc, ap.data());
        for (int64_t jr = 0; jr < nc; jr += kNR)
          for (int64_t ir = 0; ir < mc; ir += kMR)
            micro_kernel(tile_fn, kc, ap.data() + ir * kc, bp.data() + jr * kc, alpha, beta, p0 == 0,
                         c + (i0 + ir) * ldc + j0 + jr, ldc, std::min(kMR, mc - ir), std::min(kNR, nc - jr));
      }
    }
  }
}
#endif  // !GPULEDGER_HAVE_BLAS

#if GPULEDGER_HAVE_BLAS
void blas_sgemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
                const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, static_cast<int>(m),
              static_cast<int>(n), static_cast<int>(k), alpha, a, static_cast<int>(lda), b, static_cast<int>(ldb), beta,
              c, static_cast<int>(ldc));
}

// The BLAS runs one thread per call (thread_policy.h: the OpenMP pool owns the
// cores), so a large GEMM is cut here into one block of C per OpenMP thread —
// along n when C is at least as wide as tall, else along m — each block one
// BLAS call. Every element of C is still one call's full-k dot product, so the
// result does not depend on the thread count. Blocks are multiples of 16
// columns or rows (whole vector registers, whole cache lines of C).
constexpr int64_t kSplitMinFlops = int64_t{1} << 22;  // below ~4 MFLOP the fork/join costs more
constexpr int64_t kSplitAlign = 16;

void blas_sgemm_split(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
                      const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  int threads = 1;
#ifdef _OPENMP
  if (apply_cpu_thread_policy().applied && !omp_in_parallel() && 2 * m * n * k >= kSplitMinFlops)
    threads = omp_get_max_threads();
#endif
  const bool split_n = n >= m;
  const int64_t extent = split_n ? n : m;
  const int64_t block = ceil_div(ceil_div(extent, threads), kSplitAlign) * kSplitAlign;
  const int64_t blocks = ceil_div(extent, block);
  if (blocks <= 1) {
    blas_sgemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    return;
  }
#pragma omp parallel for num_threads(static_cast <int>(blocks)) schedule(static, 1)
  for (int64_t t = 0; t < blocks; ++t) {
    const int64_t lo = t * block, len = std::min(block, extent - lo);
    if (split_n)  // columns lo..lo+len of op(B) and of C
      blas_sgemm(ta, tb, m, len, k, alpha, a, lda, tb ? b + lo * ldb : b + lo, ldb, beta, c + lo, ldc);
    else  // rows lo..lo+len of op(A) and of C
      blas_sgemm(ta, tb, len, n, k, alpha, ta ? a + lo : a + lo * lda, lda, b, ldb, beta, c + lo * ldc, ldc);
  }
}
#endif

// One fp32 GEMM, row-major, cblas_sgemm's argument order and semantics.
void sgemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda, const float* b,
           int64_t ldb, float beta, float* c, int64_t ldc) {
  if (m == 0 || n == 0) return;
  if (k == 0 || alpha == 0.0f) {  // BLAS: A and B are not read
    scale_c(m, n, beta, c, ldc);
    return;
  }
#if GPULEDGER_HAVE_BLAS
  blas_sgemm_split(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
#else
  builtin_sgemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
#endif
}

// rows×cols of a 16-bit (or fp32) matrix with leading dimension ld -> packed fp32.
void matrix_to_fp32(const void* src, DType t, int64_t ld, int64_t rows, int64_t cols, float* dst) {
  const auto* s = static_cast<const char*>(src);
  const int64_t eb = dtype_bytes(t);
#pragma omp parallel for if (fork_worthwhile(rows * cols))
  for (int64_t r = 0; r < rows; ++r) convert_to_fp32(s + r * ld * eb, t, dst + r * cols, cols);
}

// packed fp32 rows×cols -> a matrix in dtype t with leading dimension ld (rounded once).
void matrix_from_fp32(const float* src, int64_t rows, int64_t cols, void* dst, DType t, int64_t ld) {
  auto* d = static_cast<char*>(dst);
  const int64_t eb = dtype_bytes(t);
#pragma omp parallel for if (fork_worthwhile(rows * cols))
  for (int64_t r = 0; r < rows; ++r) convert_from_fp32(src + r * cols, d + r * ld * eb, t, cols);
}

#if GPULEDGER_HAVE_BLAS
// cblas takes int dimensions (Device::gemm has checked the rest: op_checks.h).
void check_blas_int_range(const GemmArgs& g) {
  for (int64_t d : {g.m, g.n, g.k, g.lda, g.ldb, g.ldc})
    if (d > INT_MAX)
      throw std::invalid_argument("gemm: dimension " + std::to_string(d) + " exceeds the BLAS int range");
}
#endif

// 16-bit A and B, not skinny: C cut into tiles of at most kBlockM×kBlockN and
// k into slices of kBlockK; for each tile, each slice of op(A) and op(B) is
// widened into fp32 blocks and multiplied by the fp32 GEMM into C (or, for a
// 16-bit C, into an fp32 tile rounded once after the last slice). The tiles
// are shared out over the OpenMP threads, one parallel region per call (not
// one per block: on a loaded machine each fork/join can wait a time slice),
// each thread with its own blocks and a one-thread fp32 GEMM; when there are
// fewer tiles than threads the tiles are narrowed (multiples of 16) until
// each thread has one. The workspace, `gemm.blocks_fp32`, is bounded by the
// blocks, not by the operands: workers · 4·(mb·kb + kb·nb [+ mb·nb]) bytes
// (mb ≤ min(m, kBlockM), …; at most 3 MiB a thread). Each op(B) slice is
// widened once per row tile and each op(A) slice once per column tile:
// (1/nb + 1/mb) conversions per multiply-add. With bf16 pairs the blocks are
// `gemm.blocks_bf16`: workers · 4·(words of the A and B panels [+ mb·nb]),
// the panels' rows rounded up to 12 and columns to 32 (gemm_bf16_dot.h).
constexpr int64_t kBlockM = 512, kBlockN = 512, kBlockK = 512;

struct Blocked16 {
  const GemmArgs& g;
  float* wa;  // op(A) slice as stored (trans_a kept), packed; or (dot) its bf16 pair panels
  float* wb;  // op(B) slice, likewise
  float* wc;  // fp32 C tile when C is 16-bit, else null
  bool dot;   // bf16 pairs multiplied by vdpbf16ps (gemm_bf16_dot.h) instead of widened

  // One C tile (rows i0…i0+mc, columns j0…j0+nc) of batch entry ai, bi, ci.
  void tile(const char* ai, const char* bi, char* ci, int64_t i0, int64_t mc, int64_t j0, int64_t nc) const {
    const int64_t ab_eb = dtype_bytes(g.ab_type), c_eb = dtype_bytes(g.c_type);
    char* c_tile = ci + (i0 * g.ldc + j0) * c_eb;
    float* ct = reinterpret_cast<float*>(c_tile);
    int64_t ldct = g.ldc;
    if (wc != nullptr) {
      ct = wc;
      ldct = nc;
      // beta == 0: C is not read (it may be uninitialised), as in BLAS.
      if (g.beta != 0.0f) matrix_to_fp32(c_tile, g.c_type, g.ldc, mc, nc, ct);
    }
    if (g.k == 0 || g.alpha == 0.0f) {  // BLAS: A and B are not read
      sgemm(g.trans_a, g.trans_b, mc, nc, 0, g.alpha, nullptr, 1, nullptr, 1, g.beta, ct, ldct);
    } else {
      for (int64_t p0 = 0; p0 < g.k; p0 += kBlockK) {
        const int64_t kc = std::min(kBlockK, g.k - p0);
        // The slices as stored: op(A) rows i0… / columns p0…, op(B) rows p0… / columns j0….
        const char* a_sub = ai + (g.trans_a ? p0 * g.lda + i0 : i0 * g.lda + p0) * ab_eb;
        const char* b_sub = bi + (g.trans_b ? j0 * g.ldb + p0 : p0 * g.ldb + j0) * ab_eb;
        if (dot) {
          auto* pa = reinterpret_cast<uint32_t*>(wa);
          auto* pb = reinterpret_cast<uint32_t*>(wb);
          bf16_dot_pack_a(reinterpret_cast<const uint16_t*>(a_sub), g.lda, g.trans_a, mc, kc, pa);
          bf16_dot_pack_b(reinterpret_cast<const uint16_t*>(b_sub), g.ldb, g.trans_b, kc, nc, pb);
          bf16_dot_multiply(pa, pb, mc, nc, kc, g.alpha, p0 == 0 ? g.beta : 1.0f, ct, ldct);
          continue;
        }
        const int64_t a_cols = g.trans_a ? mc : kc, b_cols = g.trans_b ? kc : nc;
        matrix_to_fp32(a_sub, g.ab_type, g.lda, g.trans_a ? kc : mc, a_cols, wa);
        matrix_to_fp32(b_sub, g.ab_type, g.ldb, g.trans_b ? nc : kc, b_cols, wb);
        sgemm(g.trans_a, g.trans_b, mc, nc, kc, g.alpha, wa, a_cols, wb, b_cols, p0 == 0 ? g.beta : 1.0f, ct, ldct);
      }
    }
    if (wc != nullptr) matrix_from_fp32(wc, mc, nc, c_tile, g.c_type, g.ldc);
  }
};

// Below this many FLOPs (2·m·n·k·batch) the blocked route stays on one thread.
constexpr int64_t kBlockedParallelMinFlops = int64_t{1} << 22;
constexpr int64_t kTileAlign = 16;

void run_blocked_16bit(Device& dev, const GemmArgs& g) {
  int threads = 1;
#ifdef _OPENMP
  if (!omp_in_parallel() && 2 * g.m * g.n * g.k * g.batch >= kBlockedParallelMinFlops) threads = omp_get_max_threads();
#endif
  int64_t mb = std::min(g.m, kBlockM), nb = std::min(g.n, kBlockN);
  const int64_t kb = std::min(g.k, kBlockK);
  if (g.batch * ceil_div(g.m, mb) * ceil_div(g.n, nb) < threads) {  // narrow the tiles along the longer side
    if (g.n >= g.m)
      nb = std::min(nb, ceil_div(ceil_div(g.n, threads), kTileAlign) * kTileAlign);
    else
      mb = std::min(mb, ceil_div(ceil_div(g.m, threads), kTileAlign) * kTileAlign);
  }
  const int64_t tiles_m = ceil_div(g.m, mb), tiles_n = ceil_div(g.n, nb), tiles = g.batch * tiles_m * tiles_n;
  const int workers = static_cast<int>(std::min<int64_t>(threads, tiles));
  const bool conv_c = g.c_type != DType::kFP32;
  const bool dot = g.ab_type == DType::kBF16 && bf16_dot_enabled();
  const int64_t a_block = dot ? bf16_dot_a_words(mb, kb) : mb * kb;  // 4-byte words
  const int64_t b_block = dot ? bf16_dot_b_words(kb, nb) : kb * nb;
  const int64_t per_worker = a_block + b_block + (conv_c ? mb * nb : 0);
  Buffer ws = dev.alloc(workers * per_worker * 4, Account::kWorkspace, dot ? "gemm.blocks_bf16" : "gemm.blocks_fp32");
  const int64_t ab_eb = dtype_bytes(g.ab_type), c_eb = dtype_bytes(g.c_type);
  const auto* a_base = static_cast<const char*>(g.a);
  const auto* b_base = static_cast<const char*>(g.b);
  auto* c_base = static_cast<char*>(g.c);
#pragma omp parallel for num_threads(workers) schedule(dynamic)
  for (int64_t t = 0; t < tiles; ++t) {
    int worker = 0;
#ifdef _OPENMP
    worker = omp_get_thread_num();
#endif
    float* base = ws.as<float>() + worker * per_worker;
    const Blocked16 run{g, base, base + a_block, conv_c ? base + a_block + b_block : nullptr, dot};
    const int64_t i = t / (tiles_m * tiles_n), i0 = (t / tiles_n) % tiles_m * mb, j0 = t % tiles_n * nb;
    run.tile(a_base + i * g.stride_a * ab_eb, b_base + i * g.stride_b * ab_eb, c_base + i * g.stride_c * c_eb, i0,
             std::min(mb, g.m - i0), j0, std::min(nb, g.n - j0));
  }
}

}  // namespace

void CpuDevice::gemm_impl(const GemmArgs& g) {
#if GPULEDGER_HAVE_BLAS
  check_blas_int_range(g);
#endif
  const int64_t ab_eb = dtype_bytes(g.ab_type), c_eb = dtype_bytes(g.c_type);
  const auto* a_base = static_cast<const char*>(g.a);
  const auto* b_base = static_cast<const char*>(g.b);
  auto* c_base = static_cast<char*>(g.c);

  if (g.ab_type != DType::kFP32) {
    // Decode (one side of C at most kSkinnyMaxRows wide): the weights streamed once (gemm_skinny.h).
    if (run_skinny_gemm(*this, g)) return;
    run_blocked_16bit(*this, g);
    return;
  }

  // fp32 operands: the fp32 GEMM in place; a 16-bit C through an fp32 copy of one batch entry.
  const bool conv_c = g.c_type != DType::kFP32;
  Buffer wc;
  if (conv_c) wc = alloc(g.m * g.n * 4, Account::kWorkspace, "gemm.c_fp32");
  for (int64_t i = 0; i < g.batch; ++i) {
    const auto* ai = reinterpret_cast<const float*>(a_base + i * g.stride_a * ab_eb);
    const auto* bi = reinterpret_cast<const float*>(b_base + i * g.stride_b * ab_eb);
    void* ci = c_base + i * g.stride_c * c_eb;
    if (conv_c) {
      // beta == 0: C is not read (it may be uninitialised), as in BLAS.
      if (g.beta != 0.0f) matrix_to_fp32(ci, g.c_type, g.ldc, g.m, g.n, wc.as<float>());
      sgemm(g.trans_a, g.trans_b, g.m, g.n, g.k, g.alpha, ai, g.lda, bi, g.ldb, g.beta, wc.as<float>(), g.n);
      matrix_from_fp32(wc.as<float>(), g.m, g.n, ci, g.c_type, g.ldc);
    } else {
      sgemm(g.trans_a, g.trans_b, g.m, g.n, g.k, g.alpha, ai, g.lda, bi, g.ldb, g.beta, static_cast<float*>(ci), g.ldc);
    }
  }
}

}  // namespace gpuledger
