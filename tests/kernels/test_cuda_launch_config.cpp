// The CUDA backend's host-testable arithmetic, on the CPU: launch
// configurations (kernels/cuda/launch_config.h), the attention tile ranges and
// dropout index (kernels/cuda/attn_tiles.h) against brute force, and the
// device-side KV codecs (kernels/cuda/kv_codec.h) against the host codecs of
// kernels/kv_storage.cpp. These headers have no CUDA dependency, so this test
// builds and runs with or without the CUDA toolkit.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>

#include "kernels/attn_block.h"
#include "kernels/cuda/attn_tiles.h"
#include "kernels/cuda/kv_codec.h"
#include "kernels/cuda/launch_config.h"
#include "kernels/kv_storage.h"

namespace gpuledger {
namespace {

using namespace cuda_launch;

TEST(CudaLaunchConfig, Elementwise) {
  EXPECT_EQ(elementwise(0).blocks, 1);
  EXPECT_EQ(elementwise(1).blocks, 1);
  EXPECT_EQ(elementwise(256).blocks, 1);
  EXPECT_EQ(elementwise(257).blocks, 2);
  EXPECT_EQ(elementwise(4096 * 256).blocks, 4096);
  EXPECT_EQ(elementwise(int64_t{1} << 40).blocks, 4096);  // grid-stride beyond
  EXPECT_EQ(elementwise(5).threads, 256);
}

TEST(CudaLaunchConfig, RowThreads) {
  EXPECT_EQ(row_threads(1), 32);
  EXPECT_EQ(row_threads(256), 32);  // 32 threads × 8 elements
  EXPECT_EQ(row_threads(257), 64);
  EXPECT_EQ(row_threads(4096), 512);
  EXPECT_EQ(row_threads(4100), 1024);
  EXPECT_EQ(row_threads(128256), 1024);  // a Llama-3 vocabulary row: capped
  for (int64_t c = 1; c < 20000; c += 37) {
    const int t = row_threads(c);
    EXPECT_EQ(t & (t - 1), 0) << c;
    EXPECT_TRUE(t == 1024 || int64_t{t} * 8 >= c) << c;   // ≤ 8 elements per thread
    EXPECT_TRUE(t == 32 || int64_t{t} / 2 * 8 < c) << c;  // and the smallest such
  }
}

TEST(CudaLaunchConfig, ColumnReduceCoversEveryRowOnce) {
  const ColumnReduce big = column_reduce(4096, 4096);  // 128 column blocks: 8 chunks of 512 rows
  EXPECT_EQ(big.col_blocks, 128);
  EXPECT_EQ(big.chunks, 8);
  EXPECT_EQ(big.rows_per_chunk, 512);
  const ColumnReduce zero = column_reduce(0, 10);
  EXPECT_EQ(zero.chunks, 1);
  for (int64_t rows : {int64_t{0}, int64_t{1}, int64_t{63}, int64_t{64}, int64_t{65}, int64_t{1000}, int64_t{4097},
                       int64_t{1} << 20, int64_t{1} << 26})
    for (int64_t cols : {1, 7, 32, 33, 1000, 4096, 128256}) {
      const ColumnReduce c = column_reduce(rows, cols);
      EXPECT_GE(c.col_blocks * kColumnTile, cols);
      EXPECT_LT((c.col_blocks - 1) * kColumnTile, cols);
      EXPECT_GE(c.chunks, 1);
      EXPECT_LE(c.chunks, 65535);
      EXPECT_GE(c.chunks * c.rows_per_chunk, rows) << rows << " " << cols;
      if (rows > 0) {
        EXPECT_LT((c.chunks - 1) * c.rows_per_chunk, rows) << "an empty chunk";
      }
      if (rows >= kMinRowsPerChunk) {
        EXPECT_GE(c.rows_per_chunk, kMinRowsPerChunk) << rows << " " << cols;
      }
    }
}

TEST(CudaLaunchConfig, ReduceBlocks) {
  EXPECT_EQ(reduce_blocks(1), 1);
  EXPECT_EQ(reduce_blocks(2048 * 10), 10);
  EXPECT_EQ(reduce_blocks(2048 * 10 + 1), 11);
  EXPECT_EQ(reduce_blocks(3000001), 1024);
}

// sm_80's opt-in limit per block (CUDA C++ Programming Guide, "Compute
// Capabilities": 163 KB for compute capability 8.0), the smallest we build for.
constexpr int64_t kSm80SmemBytes = 163 * 1024;

TEST(CudaLaunchConfig, FlashTiles) {
  EXPECT_FALSE(flash_tiles(0));
  EXPECT_FALSE(flash_tiles(257));
  EXPECT_EQ(flash_tiles(64)->max_b, 4);
  EXPECT_EQ(flash_tiles(65)->max_b, 8);
  EXPECT_EQ(flash_tiles(128)->max_b, 8);
  EXPECT_EQ(flash_tiles(129)->max_b, 16);
  // D = 128, hand-computed from the layouts: 4·(64·129 + 64·129 + 64·128 + 64·65 + 3·64) etc.
  const FlashTiles t = *flash_tiles(128);
  EXPECT_EQ(flash_fwd_smem_bytes(t, 128), 116224);
  EXPECT_EQ(flash_bwd_kv_smem_bytes(t, 128), 115968);
  EXPECT_EQ(flash_bwd_q_smem_bytes(t, 128), 149248);
  for (int64_t D = 1; D <= 256; ++D) {
    const FlashTiles f = *flash_tiles(D);
    EXPECT_GE(16 * f.max_b, D);
    for (int tile : {f.fwd_br, f.fwd_bc, f.kv_bk, f.kv_bq, f.q_bq, f.q_bk}) EXPECT_EQ(tile % 16, 0);
    EXPECT_EQ(f.fwd_br % 32, 0) << "the forward's row statistics give each of 8 warps whole rows";
    EXPECT_LE(flash_fwd_smem_bytes(f, D), kSm80SmemBytes) << D;
    EXPECT_LE(flash_bwd_kv_smem_bytes(f, D), kSm80SmemBytes) << D;
    EXPECT_LE(flash_bwd_q_smem_bytes(f, D), kSm80SmemBytes) << D;
  }
}

// ---- attention tiles against brute force ----

TEST(CudaAttnTiles, VisibleIsTheCausalWindow) {
  for (int64_t i = 0; i < 40; ++i)
    for (int64_t j = 0; j < 40; ++j)
      for (int64_t window : {0, 1, 5, 17})
        EXPECT_EQ(attn::visible(i, j, window), j <= i && (window == 0 || i - window < j)) << i << " " << j;
}

// attn_block.h: the keys a query sees are one run [begin, end) whose ends grow
// with the query — the flash kernels' tile ranges rely on both. Against brute
// force on the positions, for one- and two-span blocks (context parallelism's
// chunks), with and without a window, and with every key visible.
TEST(CudaAttnTiles, VisibleKeysAreOneGrowingRunOfTheCausalPositions) {
  const TokenSpans spans[] = {TokenSpans(0), TokenSpans(30), TokenSpans(0, 7, 40), TokenSpans(10, 7, 17),
                              TokenSpans(3, 1, 50)};
  for (const TokenSpans& qp : spans)
    for (const TokenSpans& kp : spans)
      for (int64_t window : {0, 1, 9, 100})
        for (bool causal : {true, false}) {
          if (!causal && window > 0) continue;
          AttnBlock blk;
          blk.q_pos = qp, blk.k_pos = kp, blk.causal = causal;
          const int64_t T = 14, Tk = 14;
          attn::KeyRun prev{0, 0};
          for (int64_t i = 0; i < T; ++i) {
            const attn::KeyRun r = attn::visible_keys(blk, Tk, window, i);
            const int64_t p = qp.position(i);
            for (int64_t j = 0; j < Tk; ++j) {
              const int64_t pk = kp.position(j);
              const bool vis = !causal || (pk <= p && (window == 0 || p - window < pk));
              EXPECT_EQ(vis, j >= r.begin && j < r.end) << "query " << i << " key " << j << " window " << window;
            }
            EXPECT_GE(r.begin, prev.begin);
            EXPECT_GE(r.end, prev.end);
            prev = r;
          }
        }
}

TEST(CudaAttnTiles, ProbIndexIsTheFlatBHTTIndex) {
  const int64_t Hq = 3, T = 7;
  uint64_t expect = 0;
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t h = 0; h < Hq; ++h)
      for (int64_t i = 0; i < T; ++i)
        for (int64_t j = 0; j < T; ++j) EXPECT_EQ(attn::prob_index(b, h, i, j, Hq, T), expect++);
}

// ---- KV codecs: the device versions equal the host ones ----

TEST(CudaKvCodec, Fp8DecodeMatchesEveryCode) {
  for (int c = 0; c < 256; ++c) {
    const float host = fp8_e4m3_to_fp32(static_cast<uint8_t>(c));
    const float dev = kv_codec::fp8_e4m3_decode(static_cast<uint8_t>(c));
    if (std::isnan(host)) {
      EXPECT_TRUE(std::isnan(dev)) << c;
      EXPECT_EQ(std::signbit(host), std::signbit(dev)) << c;
    } else {
      EXPECT_EQ(std::bit_cast<uint32_t>(host), std::bit_cast<uint32_t>(dev)) << c;
    }
  }
}

TEST(CudaKvCodec, EncodersMatchTheHostOnes) {
  std::vector<float> xs = {0.0f,
                           -0.0f,
                           448.0f,
                           -448.0f,
                           449.0f,
                           464.0f,
                           480.0f,
                           1e30f,
                           std::numeric_limits<float>::infinity(),
                           -std::numeric_limits<float>::infinity(),
                           std::numeric_limits<float>::quiet_NaN(),
                           0.015625f,
                           0.0156249f,
                           1.0f / 1024,
                           3.0f / 1024,
                           126.5f,
                           127.5f,
                           -127.5f,
                           128.0f,
                           -1000.0f,
                           2.5f,
                           -3.5f};
  // Every fp8 value and the midpoints between neighbours (the rounding ties).
  for (int c = 0; c < 127; ++c) {
    const float a = fp8_e4m3_to_fp32(static_cast<uint8_t>(c)), b = fp8_e4m3_to_fp32(static_cast<uint8_t>(c + 1));
    if (std::isnan(a) || std::isnan(b)) continue;
    for (float x : {a, 0.5f * (a + b), std::nextafter(0.5f * (a + b), 0.0f), std::nextafter(0.5f * (a + b), 1e9f)})
      xs.push_back(x), xs.push_back(-x);
  }
  std::mt19937 rng(7);
  std::uniform_int_distribution<uint32_t> bits;
  for (int n = 0; n < 200000; ++n) xs.push_back(std::bit_cast<float>(bits(rng)));
  std::uniform_real_distribution<float> u(-600.0f, 600.0f);
  for (int n = 0; n < 200000; ++n) xs.push_back(u(rng));
  for (float x : xs) {
    ASSERT_EQ(kv_codec::fp8_e4m3_encode(x), fp32_to_fp8_e4m3(x)) << x;
    ASSERT_EQ(kv_codec::int8_encode(x), fp32_to_int8_sym(x)) << x;
  }
}

TEST(CudaKvCodec, ScaleFromAmaxMatchesTheHost) {
  for (KvFormat f : {KvFormat::kFP8E4M3, KvFormat::kInt8})
    for (float amax : {0.0f, -1.0f, 1e-45f, 1e-40f, 3.0f, 448.0f, 1e38f, 3.4e38f,
                       std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN()})
      EXPECT_EQ(std::bit_cast<uint32_t>(kv_codec::scale_from_amax(amax, kv_qmax(f))),
                std::bit_cast<uint32_t>(kv_scale_from_amax(amax, f)))
          << amax;
}

}  // namespace
}  // namespace gpuledger
