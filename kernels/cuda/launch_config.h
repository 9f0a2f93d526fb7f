// Launch configurations of the CUDA kernels: grid and block sizes, chunking of
// reductions and the flash-attention tile shapes with their shared-memory
// bytes. Host-only and pure (no CUDA headers), so the arithmetic is unit-tested
// on the CPU (tests/kernels/test_cuda_launch_config.cpp) and the kernels read
// their geometry from one place.
#pragma once
#include <algorithm>
#include <cstdint>
#include <optional>

#include "core/int_math.h"

namespace gpuledger::cuda_launch {

inline constexpr int kWarpSize = 32;
inline constexpr int kElementwiseThreads = 256;
// Grid-stride loops stop adding blocks here: 4096 blocks of 256 threads is 8×
// what an H100/H200 holds at once (132 SMs × 2048 threads), enough to hide latency.
inline constexpr int64_t kMaxGridBlocks = 4096;

using ::gpuledger::ceil_div;

// ---- element-wise ----

struct Launch1D {
  int64_t blocks = 1;
  int threads = kElementwiseThreads;
};

// n work items (elements, or groups of elements) with one thread each, capped
// at kMaxGridBlocks (the kernel loops over the rest); at least one block.
constexpr Launch1D elementwise(int64_t n) {
  return {std::clamp<int64_t>(ceil_div(n, kElementwiseThreads), 1, kMaxGridBlocks), kElementwiseThreads};
}

// ---- one block per row (norms, softmax, cross-entropy) ----

// Threads of a row block: the smallest power of two giving each thread at most
// 8 elements, within [32, 1024] (one warp at least; a block at most).
constexpr int row_threads(int64_t cols) {
  int t = kWarpSize;
  while (t < 1024 && static_cast<int64_t>(t) * 8 < cols) t *= 2;
  return t;
}

// ---- column sums over rows (bias and norm-weight gradients) ----
//
// Stage 1: blocks of kColumnTile columns × kColumnLanes row lanes; the rows are
// cut into `chunks` chunks of `rows_per_chunk` (grid = col_blocks × chunks),
// each writing fp32 partial sums (chunks, cols). Stage 2 adds a column's
// chunks in order. The sum order depends only on the shape: deterministic.

inline constexpr int kColumnTile = 32;
inline constexpr int kColumnLanes = 8;
inline constexpr int64_t kMinRowsPerChunk = 64;
inline constexpr int64_t kTargetColumnBlocks = 1024;

struct ColumnReduce {
  int64_t col_blocks = 0;
  int64_t chunks = 0;
  int64_t rows_per_chunk = 0;
};

constexpr ColumnReduce column_reduce(int64_t rows, int64_t cols) {
  ColumnReduce c;
  c.col_blocks = std::max<int64_t>(1, ceil_div(cols, kColumnTile));
  // As many chunks as it takes to reach ~kTargetColumnBlocks blocks, none
  // shorter than kMinRowsPerChunk rows, at most 65535 (grid.y).
  const int64_t want = std::max<int64_t>(1, kTargetColumnBlocks / c.col_blocks);
  const int64_t most = std::max<int64_t>(1, rows / kMinRowsPerChunk);
  c.chunks = std::min<int64_t>({want, most, 65535});
  c.rows_per_chunk = std::max<int64_t>(1, ceil_div(rows, c.chunks));
  c.chunks = std::max<int64_t>(1, ceil_div(rows, c.rows_per_chunk));  // none empty
  return c;
}

// ---- full reductions (sum of squares) ----

inline constexpr int kReduceThreads = 256;

// Blocks of the first pass: one per 8 × kReduceThreads elements, at most 1024
// (the second pass is one block summing that many partials in order).
constexpr int64_t reduce_blocks(int64_t n) { return std::clamp<int64_t>(ceil_div(n, 8 * kReduceThreads), 1, 1024); }

// ---- flash attention ----
//
// Every flash kernel runs 16 × 16 = 256 threads. A thread owns a micro-tile of
// a score tile (rows ty + 16a, columns tx + 16b) and of an output tile (rows
// ty + 16a, head-dim columns tx + 16b for b < max_b, i.e. D ≤ 16·max_b). Tiles
// are held in shared memory as fp32 with a row stride of D + 1 floats (an odd
// stride puts the rows of a column in distinct banks).

inline constexpr int kFlashThreadsX = 16, kFlashThreadsY = 16;

struct FlashTiles {
  int max_b = 0;   // head-dim columns per thread: D ≤ 16·max_b
  int fwd_br = 0;  // forward: query rows per block
  int fwd_bc = 0;  //          key columns per tile
  int kv_bk = 0;   // backward dK/dV: keys per block
  int kv_bq = 0;   //                 query rows per tile
  int q_bq = 0;    // backward dQ: query rows per block
  int q_bk = 0;    //              keys per tile
};

// The tiles of the kernels instantiated for max_b ∈ {4, 8, 16}: 64-row tiles
// up to D = 128; for D ≤ 256 the key (and backward) tiles shrink to 32 so that
// every kernel stays under the 163 KiB of shared memory an sm_80 block may opt
// into (the sm_90 limit is 227 KiB).
constexpr FlashTiles flash_tiles_for_max_b(int max_b) {
  if (max_b == 16) return FlashTiles{16, 64, 32, 32, 32, 32, 32};
  return FlashTiles{max_b, 64, 64, 64, 32, 64, 64};
}

// The tiles for head dim D, or none when D > 256 (not supported).
constexpr std::optional<FlashTiles> flash_tiles(int64_t D) {
  if (D <= 0 || D > 256) return std::nullopt;
  return flash_tiles_for_max_b(D <= 64 ? 4 : D <= 128 ? 8 : 16);
}

// Shared-memory bytes of each kernel (fp32 tiles; see ops_flash.cu).
constexpr int64_t flash_fwd_smem_bytes(const FlashTiles& t, int64_t D) {
  // Q (br × D+1), K (bc × D+1), V (bc × D), S/P (br × bc+1), m, l, correction (br each)
  return 4 * (t.fwd_br * (D + 1) + t.fwd_bc * (D + 1) + t.fwd_bc * D + t.fwd_br * (t.fwd_bc + 1) + 3 * t.fwd_br);
}
constexpr int64_t flash_bwd_kv_smem_bytes(const FlashTiles& t, int64_t D) {
  // K, V (bk × D+1), Q, dO (bq × D+1), P∘Z and dS (bq × bk+1), lse and D_i (bq)
  return 4 * (2 * t.kv_bk * (D + 1) + 2 * t.kv_bq * (D + 1) + 2 * t.kv_bq * (t.kv_bk + 1) + 2 * t.kv_bq);
}
constexpr int64_t flash_bwd_q_smem_bytes(const FlashTiles& t, int64_t D) {
  // Q, dO (bq × D+1), K, V (bk × D+1), dS (bq × bk+1), lse and D_i (bq)
  return 4 * (2 * t.q_bq * (D + 1) + 2 * t.q_bk * (D + 1) + t.q_bq * (t.q_bk + 1) + 2 * t.q_bq);
}

}  // namespace gpuledger::cuda_launch
