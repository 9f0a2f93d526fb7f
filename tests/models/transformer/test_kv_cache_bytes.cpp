// KV caches (models/kv/kv_cache.h) against the analytic KV budget
// (analytic/kv_cache.h) and docs/formulas/kv.md's worked examples, to
// the byte: the paged pool booked in the ledger, the bytes assigned to the
// sequences in flight (the null block and fixed scales included), the
// contiguous reservations, sliding-window caps, waste, capacity measured by
// filling the pool under vLLM's rule; and the device write's memory layout and
// codes against the host quantizer.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <stdexcept>
#include <vector>

#include "analytic/kv_cache.h"
#include "core/model_config.h"
#include "kernels/device.h"
#include "kernels/registry/registry.h"
#include "models/kv/kv_cache.h"
#include "tests/models/transformer/kv_rig.h"

namespace gpuledger::kv {
namespace {

using testing::analytic_options;

constexpr int64_t MiB = int64_t{1} << 20;
constexpr int64_t GiB = int64_t{1} << 30;

struct Case {
  const char* model;
  int64_t tp, pp;
  KvFormat format;
  KvScales scales;
};

const Case kCases[] = {
    {"llama3-8b", 1, 1, KvFormat::kBF16, KvScales::kPerTokenHead},
    {"llama3-8b", 2, 2, KvFormat::kFP8E4M3, KvScales::kPerTokenHead},
    {"llama3-8b", 16, 1, KvFormat::kInt8, KvScales::kPerChannel},
    {"qwen2.5-7b", 1, 1, KvFormat::kFP8E4M3, KvScales::kPerTensor},
    {"llama2-7b", 4, 1, KvFormat::kInt8, KvScales::kPerTokenHead},
    {"mistral-7b", 1, 1, KvFormat::kBF16, KvScales::kPerTokenHead},  // window 4096
    {"mistral-7b", 2, 1, KvFormat::kFP8E4M3, KvScales::kPerChannel},
    {"llama3-8b", 2, 1, KvFormat::kInt4, KvScales::kPerGroup},  // group 32
    {"mistral-7b", 1, 2, KvFormat::kInt4, KvScales::kPerGroup},
};

KvGeometry geometry(const Case& c) {
  Layout l;
  l.tp = c.tp;
  l.pp = c.pp;
  return kv_geometry(load_model(c.model), l, c.format, c.scales);
}
Layout layout(const Case& c) {
  Layout l;
  l.tp = c.tp;
  l.pp = c.pp;
  return l;
}

// ---- paged ----

TEST(PagedKvCache, WorkedExampleLlama3_8B) {
  // docs/formulas/kv.md: 3 sequences of 100 tokens, bf16, B = 16: (3·7 + 1)
  // blocks of 2 MiB = 46,137,344 B.
  Ledger ledger;
  auto dev = make_device("meta", ledger);
  const ModelConfig m = load_model("llama3-8b");
  const KvGeometry g = kv_geometry(m, Layout{}, KvFormat::kBF16);
  PagedKvCache cache(*dev, g, 22, 16);
  EXPECT_EQ(cache.block_bytes(), 2 * MiB);
  EXPECT_EQ(ledger.live(Account::kKv), 46137344);
  EXPECT_EQ(cache.pool_bytes(), 46137344);
  EXPECT_EQ(cache.assigned_bytes(), 2 * MiB);  // the null block alone
  for (SeqId id = 0; id < 3; ++id) ASSERT_TRUE(cache.add_sequence(id, 100));
  EXPECT_EQ(cache.assigned_bytes(), 46137344);
  EXPECT_FALSE(cache.can_admit(1));
  EXPECT_EQ(cache.token_bytes(), 300 * 131072);
  EXPECT_EQ(ledger.live(Account::kKv), 46137344);  // the pool never moves
}

TEST(PagedKvCache, PoolAndAssignedBytesEqualTheAnalyticReservation) {
  for (const Case& c : kCases) {
    const KvGeometry g = geometry(c);
    const ModelConfig m = load_model(c.model);
    for (int64_t block : {1, 16, 32})
      for (int64_t requests : {1, 3, 8})
        for (int64_t context : {1, 100, 4096, 10000}) {
          SCOPED_TRACE(std::string(c.model) + " B " + std::to_string(block) + " R " + std::to_string(requests) + " c " +
                       std::to_string(context));
          const auto o = analytic_options(KvLayout::kPaged, g, block);
          const int64_t expect = analytic::kv_reserved_bytes(m, layout(c), o, requests, context);
          const int64_t kept = analytic::kv_tokens_kept(m, {}, context);
          const int64_t blocks = requests * ((kept + block - 1) / block) + 1;
          Ledger ledger;
          auto dev = make_device("meta", ledger);
          PagedKvCache cache(*dev, g, blocks, block, m.sliding_window);
          // The pool booked for exactly those blocks is the analytic reservation.
          EXPECT_EQ(ledger.live(Account::kKv), expect);
          EXPECT_EQ(cache.pool_bytes(), expect);
          EXPECT_EQ(cache.block_bytes(), analytic::kv_block_bytes(m, layout(c), o));
          for (SeqId id = 0; id < requests; ++id) ASSERT_TRUE(cache.add_sequence(id, context));
          EXPECT_EQ(cache.assigned_bytes(), expect);
          EXPECT_EQ(cache.blocks().free_blocks(), 0);
          EXPECT_EQ(cache.token_bytes(), requests * kept * g.token_bytes());
          // Waste: under one block per sequence, plus the null block and the fixed scales.
          EXPECT_LT(cache.assigned_bytes() - cache.token_bytes(),
                    (requests + 1) * cache.block_bytes() + g.fixed_scale_bytes());
        }
  }
}

TEST(PagedKvCache, SlidingWindowCapsAtTheWindow) {
  // docs/formulas/kv.md: one 10,000-token Mistral sequence keeps 4096 tokens, 256 + 1 blocks.
  Ledger ledger;
  auto dev = make_device("meta", ledger);
  const ModelConfig m = load_model("mistral-7b");
  ASSERT_EQ(m.sliding_window.value_or(0), 4096);
  const KvGeometry g = kv_geometry(m, Layout{}, KvFormat::kBF16);
  PagedKvCache cache(*dev, g, 1000, 16, m.sliding_window);
  ASSERT_TRUE(cache.add_sequence(0, 4000));
  for (int i = 0; i < 6000; ++i) ASSERT_TRUE(cache.append_tokens(0, 1));
  EXPECT_EQ(cache.length(0), 10000);
  EXPECT_EQ(cache.blocks().blocks_in_use(), 256);
  EXPECT_EQ(cache.tokens_stored(), 4096);
  EXPECT_EQ(cache.assigned_bytes(),
            analytic::kv_reserved_bytes(m, Layout{}, analytic_options(KvLayout::kPaged, g), 1, 10000));
  EXPECT_EQ(cache.assigned_bytes(), 257 * 16 * g.token_bytes());
}

TEST(PagedKvCache, PeaksAndFreeing) {
  Ledger ledger;
  auto dev = make_device("meta", ledger);
  const KvGeometry g = kv_geometry(load_model("llama3-8b"), Layout{}, KvFormat::kFP8E4M3, KvScales::kPerTensor);
  PagedKvCache cache(*dev, g, 101, 16);
  const int64_t bb = cache.block_bytes(), fixed = g.fixed_scale_bytes();
  EXPECT_EQ(fixed, 256);
  ASSERT_TRUE(cache.add_sequence(1, 40));  // 3 blocks
  ASSERT_TRUE(cache.add_sequence(2, 17));  // 2 blocks
  cache.free_sequence(1);
  EXPECT_EQ(cache.assigned_bytes(), fixed + 3 * bb);
  EXPECT_EQ(cache.peak_assigned_bytes(), fixed + 6 * bb);
  EXPECT_EQ(cache.token_bytes(), 17 * g.token_bytes());
  EXPECT_EQ(cache.peak_token_bytes(), 57 * g.token_bytes());
  EXPECT_EQ(ledger.live(Account::kKv), fixed + 101 * bb);
}

// ---- contiguous ----

TEST(ContiguousKvCache, ReservationsEqualTheAnalyticReservation) {
  for (const Case& c : kCases) {
    const KvGeometry g = geometry(c);
    const ModelConfig m = load_model(c.model);
    for (int64_t mml : {int64_t{2048}, int64_t{8192}})
      for (int64_t requests : {1, 5}) {
        SCOPED_TRACE(std::string(c.model) + " max_model_len " + std::to_string(mml));
        Ledger ledger;
        auto dev = make_device("meta", ledger);
        ContiguousKvCache cache(*dev, g, mml, m.sliding_window);
        EXPECT_EQ(ledger.live(Account::kKv), g.fixed_scale_bytes());
        EXPECT_EQ(cache.reservation_tokens(), analytic::kv_tokens_kept(m, {}, mml));
        const int64_t context = 1000;
        for (SeqId id = 0; id < requests; ++id) ASSERT_TRUE(cache.add_sequence(id, context));
        const auto o = analytic_options(KvLayout::kContiguous, g, 16, mml);
        const int64_t expect = analytic::kv_reserved_bytes(m, layout(c), o, requests, context);
        EXPECT_EQ(ledger.live(Account::kKv), expect);
        EXPECT_EQ(cache.pool_bytes(), expect);
        EXPECT_EQ(cache.assigned_bytes(), expect);
        EXPECT_EQ(expect, requests * analytic::kv_tokens_kept(m, {}, mml) * g.token_bytes() + g.fixed_scale_bytes());
        // Waste: every slot past the sequence's length.
        EXPECT_EQ(cache.assigned_bytes() - cache.token_bytes(),
                  g.fixed_scale_bytes() + requests * (cache.reservation_tokens() - context) * g.token_bytes());
        for (SeqId id = 0; id < requests; ++id) cache.free_sequence(id);
        EXPECT_EQ(ledger.live(Account::kKv), g.fixed_scale_bytes());
        EXPECT_EQ(cache.peak_assigned_bytes(), expect);
      }
  }
}

TEST(ContiguousKvCache, OneGibPerSequenceAndTheLengthLimit) {
  Ledger ledger;
  auto dev = make_device("meta", ledger);
  const KvGeometry g = kv_geometry(load_model("llama3-8b"), Layout{}, KvFormat::kBF16);
  ContiguousKvCache cache(*dev, g, 8192);
  EXPECT_EQ(cache.reservation_bytes(), GiB);  // 8192 · 128 KiB (docs/formulas/kv.md)
  ASSERT_TRUE(cache.add_sequence(0, 8000));
  EXPECT_TRUE(cache.append_tokens(0, 192));
  EXPECT_THROW(cache.append_tokens(0, 1), std::invalid_argument);
  EXPECT_THROW(cache.add_sequence(1, 8193), std::invalid_argument);
  // A prefix is never shared by private reservations.
  ASSERT_TRUE(cache.add_sequence(2, 100, PrefixRef{0, 64}));
  EXPECT_EQ(cache.cached_tokens(2), 0);
}

// ---- capacity under vLLM's rule, measured by filling the pool ----

TEST(KvCapacity, FillingThePoolMatchesTheFormula) {
  // Llama-3-8B on an 80 GiB H100 at utilization 0.9 (docs/formulas/kv.md's
  // rule), 16,060,522,496 B of weights, 1 GiB activation peak, 512 MiB overhead:
  // pool 59,638,276,096 B, 28,437 blocks, 55 sequences of 8192 tokens.
  const ModelConfig m = load_model("llama3-8b");
  const KvGeometry g = kv_geometry(m, Layout{}, KvFormat::kBF16);
  const int64_t device_bytes = 80 * GiB, weights = 16060522496, act = GiB, overhead = 512 * MiB;
  const auto o = analytic_options(KvLayout::kPaged, g);
  const auto cap = analytic::kv_capacity(m, Layout{}, o, device_bytes, 0.9, weights, act, overhead, 8192);
  ASSERT_EQ(cap.pool_bytes, 59638276096);
  ASSERT_EQ(cap.sequences, 55);

  Ledger ledger;
  auto dev = make_device("meta", ledger);
  const int64_t blocks = PagedKvCache::blocks_in(cap.pool_bytes, g, 16);
  EXPECT_EQ(blocks, 28437);
  PagedKvCache paged(*dev, g, blocks, 16);
  int64_t admitted = 0;
  while (paged.add_sequence(admitted, 8192)) ++admitted;
  EXPECT_EQ(admitted, 55);
  EXPECT_EQ(paged.blocks().free_blocks(), 28436 - 55 * 512);
  EXPECT_LE(ledger.live(Account::kKv), cap.pool_bytes);

  // Contiguous with max_model_len 8192: 1 GiB per sequence, also 55.
  Ledger ledger2;
  auto dev2 = make_device("meta", ledger2);
  ContiguousKvCache contiguous(*dev2, g, 8192, std::nullopt, cap.pool_bytes);
  int64_t admitted2 = 0;
  while (contiguous.add_sequence(admitted2, 8192)) ++admitted2;
  const auto cap2 = analytic::kv_capacity(m, Layout{}, analytic_options(KvLayout::kContiguous, g, 16, 8192),
                                          device_bytes, 0.9, weights, act, overhead, 8192);
  EXPECT_EQ(admitted2, cap2.sequences);
  EXPECT_EQ(admitted2, 55);
  EXPECT_LE(ledger2.live(Account::kKv), cap.pool_bytes);
}

// ---- cpu and meta book the same bytes ----

TEST(KvCacheLedger, CpuAndMetaBookTheSameBytes) {
  const ModelConfig m = load_model("tiny-llama");
  const std::pair<KvFormat, KvScales> formats[] = {{KvFormat::kBF16, KvScales::kPerTokenHead},
                                                   {KvFormat::kInt8, KvScales::kPerTensor},
                                                   {KvFormat::kInt8, KvScales::kPerTokenHead},
                                                   {KvFormat::kInt8, KvScales::kPerChannel},
                                                   {KvFormat::kInt4, KvScales::kPerGroup}};
  for (const auto& [f, s] : formats) {
    const KvGeometry g = kv_geometry(m, Layout{}, f, s, 0, 8);
    Ledger lc, lm;
    auto cpu = make_device("cpu", lc);
    auto meta = make_device("meta", lm);
    PagedKvCache a(*cpu, g, 9, 4), b(*meta, g, 9, 4);
    ContiguousKvCache c(*cpu, g, 64), d(*meta, g, 64);
    ASSERT_TRUE(c.add_sequence(0, 5));
    ASSERT_TRUE(d.add_sequence(0, 5));
    EXPECT_EQ(lc.live(Account::kKv), lm.live(Account::kKv));
    EXPECT_EQ(lc.count(Account::kKv), lm.count(Account::kKv));
    EXPECT_EQ(lc.live(Account::kKv), 2 * g.fixed_scale_bytes() + 9 * 4 * g.token_bytes() + 64 * g.token_bytes());
  }
}

// ---- the device write: layout and codes against the host quantizer ----

TEST(KvCacheWrite, CodesAndScalesMatchTheHostQuantizer) {
  // Two layers, 2 KV heads of 8; two sequences of 6 and 3 prompt tokens written
  // at layer 1 in one step (the calibrating first write), then read back raw.
  KvGeometry g;
  g.layers = 2;
  g.kv_heads = 2;
  g.head_dim = 8;
  g.group = 4;  // int4: two groups per head
  const int64_t H = g.kv_heads, D = g.head_dim, B = 4;
  const std::vector<int64_t> lens = {6, 3};
  std::vector<std::pair<KvFormat, KvScales>> formats = {{KvFormat::kInt4, KvScales::kPerGroup}};
  for (KvFormat f : {KvFormat::kBF16, KvFormat::kFP8E4M3, KvFormat::kInt8})
    for (KvScales s : {KvScales::kPerTensor, KvScales::kPerTokenHead, KvScales::kPerChannel}) formats.push_back({f, s});
  for (const auto& [f, s] : formats) {
    SCOPED_TRACE(std::string(kv_format_name(f)) + "/" + std::string(kv_scales_name(s)));
    g.format = f;
    g.scales = s;
    Ledger ledger;
    auto dev = make_device("cpu", ledger);
    PagedKvCache cache(*dev, g, 8, B);
    ASSERT_TRUE(cache.add_sequence(10, lens[0]));
    ASSERT_TRUE(cache.add_sequence(20, lens[1]));
    // k, v per sequence (H, n, D); the host reference takes (tokens, heads, dim) of both.
    const int64_t total = (lens[0] + lens[1]) * H * D;
    const auto k = testing::randn(static_cast<size_t>(total), 3, 2.0f);
    const auto v = testing::randn(static_cast<size_t>(total), 4, 0.5f);
    auto to_thd = [&](const std::vector<float>& x) {
      std::vector<float> y(x.size());
      int64_t off = 0, row = 0;
      for (int64_t n : lens) {
        for (int64_t h = 0; h < H; ++h)
          for (int64_t t = 0; t < n; ++t)
            for (int64_t d = 0; d < D; ++d)
              y[static_cast<size_t>(((row + t) * H + h) * D + d)] = x[static_cast<size_t>(off + (h * n + t) * D + d)];
        off += H * n * D;
        row += n;
      }
      return y;
    };
    const auto kq = quantize_kv(to_thd(k).data(), lens[0] + lens[1], H, D, f, s, g.group);
    const auto vq = quantize_kv(to_thd(v).data(), lens[0] + lens[1], H, D, f, s, g.group);
    Buffer kb = testing::upload(*dev, k, DType::kFP32), vb = testing::upload(*dev, v, DType::kFP32);
    const std::vector<SeqStep> step = {{10, lens[0]}, {20, lens[1]}};
    cache.write(1, step, kb.data(), vb.data(), DType::kFP32);

    const KvCacheView c = cache.view(1, step);
    const int64_t row_bytes = kv_values_bytes(f, D);
    int64_t row = 0;
    for (size_t b = 0; b < c.seqs.size(); ++b) {
      for (int64_t t = 0; t < lens[b]; ++t, ++row)
        for (int64_t h = 0; h < H; ++h)
          for (int is_v = 0; is_v < 2; ++is_v) {
            const QuantizedKv& ref = is_v ? vq : kq;
            const char* sec = c.section(c.seqs[b], t);
            const int64_t o = t % B;
            const size_t ri = static_cast<size_t>((row * H + h) * D);
            ASSERT_EQ(std::memcmp(sec + c.value_offset(is_v, h, o), ref.codes.data() + kv_values_bytes(f, ri),
                                  static_cast<size_t>(row_bytes)),
                      0)
                << "seq " << b << " token " << t << " head " << h << (is_v ? " V" : " K");
            if (c.token_scales()) {
              float sc;
              std::memcpy(&sc, sec + c.scale_offset(is_v, h, o), 4);
              EXPECT_EQ(sc, ref.scale_values[static_cast<size_t>(row * H + h)]);
            }
            for (int64_t gi = 0; c.group_scales() && gi < D / g.group; ++gi) {  // fp16 (scale, zero) pairs
              uint16_t sz[2];
              std::memcpy(sz, sec + c.scale_offset(is_v, h, o) + gi * kKvGroupParamBytes, 4);
              const size_t ref_group = static_cast<size_t>((row * H + h) * (D / g.group) + gi);
              EXPECT_EQ(fp16_to_fp32(sz[0]), ref.scale_values[ref_group]);
              EXPECT_EQ(fp16_to_fp32(sz[1]), ref.zero_values[ref_group]);
            }
          }
    }
    if (c.fixed_per_tensor() > 0) {
      for (int64_t i = 0; i < c.fixed_per_tensor(); ++i) {
        EXPECT_EQ(c.fixed_scales[i], kq.scale_values[static_cast<size_t>(i)]);
        EXPECT_EQ(c.fixed_scales[c.fixed_per_tensor() + i], vq.scale_values[static_cast<size_t>(i)]);
      }
    }
  }
}

TEST(KvCacheView, RejectsStepsThatCannotBeExact) {
  KvGeometry g;
  g.layers = 1;
  g.kv_heads = 1;
  g.head_dim = 4;
  Ledger ledger;
  auto dev = make_device("meta", ledger);
  PagedKvCache cache(*dev, g, 16, 4, 8);  // window 8
  ASSERT_TRUE(cache.add_sequence(0, 8));
  EXPECT_NO_THROW(cache.view(0, {{0, 8}}));  // ends within the window
  ASSERT_TRUE(cache.append_tokens(0, 2));
  EXPECT_THROW(cache.view(0, {{0, 2}}), std::invalid_argument);  // 2 tokens past the window
  EXPECT_NO_THROW(cache.view(0, {{0, 1}}));
  EXPECT_EQ(cache.max_step_tokens(0), 1);
  EXPECT_THROW(cache.view(0, {{0, 11}}), std::invalid_argument);  // more than it holds
  EXPECT_THROW(cache.view(1, {{0, 1}}), std::out_of_range);       // no layer 1
  EXPECT_THROW(cache.view(0, {{0, 1}, {0, 1}}), std::invalid_argument);
  // New tokens may not land in a shared prefix.
  PagedKvCache shared(*dev, g, 16, 4);
  ASSERT_TRUE(shared.add_sequence(0, 9));
  ASSERT_TRUE(shared.add_sequence(1, 12, PrefixRef{0, 9}));
  EXPECT_EQ(shared.cached_tokens(1), 8);
  EXPECT_THROW(shared.view(0, {{1, 12}}), std::invalid_argument);
  EXPECT_NO_THROW(shared.view(0, {{1, 4}}));
}

}  // namespace
}  // namespace gpuledger::kv
