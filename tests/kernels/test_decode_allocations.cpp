// What one decode step's kernels allocate on the host heap beyond the booked
// workspace (Device::alloc under Account::kWorkspace): the skinny GEMM of a
// weight matrix and cached attention over a bf16 cache, each called once to
// warm up, then counted over 16 more calls by replacing the global operator
// new of this test binary. The cached-attention buffers are kept per thread
// from call to call (ops_cached_attention.cpp), the skinny GEMM widens the
// token into booked workspace (gemm_skinny.h), so a steady decode call pair
// allocates at most a few hundred bytes of bookkeeping.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <new>
#include <random>
#include <vector>

#include "core/dtype.h"
#include "kernels/cpu/cpu_device.h"
#include "kernels/cpu/gemm_bf16_dot.h"
#include "kernels/kv_storage.h"

namespace {
std::atomic<int64_t> g_new_bytes{0};
}  // namespace

void* operator new(std::size_t n) {
  g_new_bytes.fetch_add(static_cast<int64_t>(n), std::memory_order_relaxed);
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }

namespace gpuledger {
namespace {

constexpr int64_t kMaxBytesPerCallPair = 1024;

TEST(DecodeAllocations, SkinnyGemmAndCachedAttentionAllocateAlmostNothingPerStep) {
  Ledger ledger;
  CpuDevice dev(ledger);
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  auto bf16_values = [&](int64_t n) {
    std::vector<uint16_t> v(static_cast<size_t>(n));
    for (auto& x : v) x = fp32_to_bf16(u(rng));
    return v;
  };

  // The GEMM: one token (1×k) times a weight matrix stored n×k (trans_b), bf16.
  const int64_t n = 512, k = 256;
  const std::vector<uint16_t> w = bf16_values(n * k), x = bf16_values(k);
  std::vector<uint16_t> y(static_cast<size_t>(n));
  GemmArgs g;
  g.trans_b = true;
  g.m = 1;
  g.n = n;
  g.k = k;
  g.a = x.data();
  g.lda = k;
  g.b = w.data();
  g.ldb = k;
  g.ab_type = DType::kBF16;
  g.c = y.data();
  g.ldc = n;
  g.c_type = DType::kBF16;

  // Cached attention: one sequence of 40 tokens in 16-token blocks, GQA 8 → 2 heads, D 64, bf16.
  KvCacheView c;
  c.format = KvFormat::kBF16;
  c.Hkv = 2;
  c.D = 64;
  c.block_tokens = 16;
  c.block_bytes = c.block_tokens * c.layer_token_bytes();
  const int64_t Hq = 8, len = 40, blocks = 3;
  std::vector<uint16_t> pool = bf16_values(blocks * c.block_bytes / 2);
  KvSeqView s;
  s.base = pool.data();
  s.blocks = {2, 0, 1};
  s.len = len;
  s.n_new = 1;
  c.seqs.push_back(s);
  const std::vector<uint16_t> q = bf16_values(Hq * c.D);
  std::vector<uint16_t> out(static_cast<size_t>(Hq * c.D));

  dev.gemm(g);  // warm up: per-thread buffers, OpenMP's pool
  dev.cached_attention(out.data(), q.data(), DType::kBF16, Hq, c);
  const int64_t calls = 16, before = g_new_bytes.load();
  for (int i = 0; i < calls; ++i) {
    dev.gemm(g);
    dev.cached_attention(out.data(), q.data(), DType::kBF16, Hq, c);
  }
  const int64_t per_pair = (g_new_bytes.load() - before) / calls;
  std::printf("heap bytes per (skinny gemm + cached attention) call pair: %lld\n", static_cast<long long>(per_pair));
  EXPECT_LE(per_pair, kMaxBytesPerCallPair);
  EXPECT_EQ(ledger.live(Account::kWorkspace), 0);
  // The token widened (1 KiB), or kept bf16 for AVX512-BF16 (512 bytes): booked.
  EXPECT_EQ(ledger.peak(Account::kWorkspace), (bf16_dot_enabled() ? 2 : 4) * k);
}

}  // namespace
}  // namespace gpuledger
