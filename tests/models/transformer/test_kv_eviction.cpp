// KV eviction under a budget (models/kv/kv_eviction.h, core/kv_types.h):
//   - the slot maps: StreamingLLM's sinks plus the most recent tokens, H2O's
//     smallest accumulated weight outside the recent window, the zero-score
//     maps of a sequence only counted;
//   - attention through a paged cache on the CPU backend against a naive
//     double-precision attention over the set of positions each policy keeps,
//     simulated independently here (H2O with its own accumulated weights);
//   - the weights cached_attention adds into a slot map's scores sum to one per
//     query and head;
//   - bytes: a budgeted sequence holds the blocks of `budget` tokens whatever
//     its length, equal to the analytic reservation.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <vector>

#include "analytic/kv_cache.h"
#include "kernels/registry/registry.h"
#include "models/kv/kv_cache.h"
#include "models/kv/kv_eviction.h"
#include "tests/models/transformer/kv_rig.h"

namespace gpuledger::kv {
namespace {

KvEviction policy(KvPolicy p, int64_t budget, int64_t sinks = 2) {
  KvEviction e;
  e.policy = p;
  e.budget = budget;
  e.sink_tokens = sinks;
  return e;
}

std::vector<int64_t> sorted(std::vector<int64_t> v) {
  std::sort(v.begin(), v.end());
  return v;
}

// ---- the slot maps ----

TEST(KvEvictionState, SinkKeepsTheFirstTokensAndTheMostRecentAndReusesTheOldestSlot) {
  KvEvictionState st(policy(KvPolicy::kSink, 6, 2), 3, true);
  st.add(7, 4);
  EXPECT_EQ(st.slot_positions(7, 0), (std::vector<int64_t>{0, 1, 2, 3}));
  st.append(7, 2);  // 6 tokens: full, nothing evicted
  EXPECT_EQ(st.slot_positions(7, 2), (std::vector<int64_t>{0, 1, 2, 3, 4, 5}));
  st.append(7, 1);  // position 6 takes the slot of 2, the oldest after the sinks
  EXPECT_EQ(st.slot_positions(7, 1), (std::vector<int64_t>{0, 1, 6, 3, 4, 5}));
  st.append(7, 3);  // 7, 8, 9 take the slots of 3, 4, 5
  EXPECT_EQ(st.slot_positions(7, 0), (std::vector<int64_t>{0, 1, 6, 7, 8, 9}));
  EXPECT_EQ(st.slot_positions(7, 2), st.slot_positions(7, 0));  // every layer's map evicted the same 4 positions
  EXPECT_EQ(st.scores(7, 0), nullptr);                          // sink keeps no scores
}

TEST(KvEvictionState, H2OEvictsTheSmallestAccumulatedWeightOutsideTheRecentWindow) {
  KvEvictionState st(policy(KvPolicy::kH2O, 4), 2, true);  // recent 2, heavy 2
  st.add(1, 4);
  float* s0 = st.scores(1, 0);
  float* s1 = st.scores(1, 1);
  ASSERT_NE(s0, nullptr);
  const float w0[4] = {5.0f, 0.1f, 3.0f, 0.0f}, w1[4] = {0.2f, 4.0f, 1.0f, 2.0f};
  std::copy(w0, w0 + 4, s0);
  std::copy(w1, w1 + 4, s1);
  st.append(1, 1);  // position 4: recent window {3, 4}; layer 0 evicts 1 (0.1), layer 1 evicts 0 (0.2)
  EXPECT_EQ(st.slot_positions(1, 0), (std::vector<int64_t>{0, 4, 2, 3}));
  EXPECT_EQ(st.slot_positions(1, 1), (std::vector<int64_t>{4, 1, 2, 3}));
  EXPECT_EQ(st.scores(1, 0)[1], 0.0f);  // the new token starts from 0
  st.append(1, 1);  // position 5: recent {4, 5}; layer 0: 0 (5), 2 (3), 3 (0) -> 3; layer 1: 1 (4), 2 (1), 3 (2) -> 2
  EXPECT_EQ(st.slot_positions(1, 0), (std::vector<int64_t>{0, 4, 2, 5}));
  EXPECT_EQ(st.slot_positions(1, 1), (std::vector<int64_t>{4, 1, 5, 3}));
}

TEST(KvEvictionState, ASequenceOnlyCountedKeepsTheZeroScoreSet) {
  KvEvictionState sink(policy(KvPolicy::kSink, 6, 2), 1, true), h2o(policy(KvPolicy::kH2O, 6), 1, true);
  sink.add(0, 10);
  h2o.add(0, 10);
  EXPECT_EQ(sorted(sink.slot_positions(0, 0)), (std::vector<int64_t>{0, 1, 6, 7, 8, 9}));
  EXPECT_EQ(sorted(h2o.slot_positions(0, 0)), (std::vector<int64_t>{4, 5, 6, 7, 8, 9}));
  // Without per-layer scores (a backend that reads no data) one map serves all.
  KvEvictionState shared(policy(KvPolicy::kH2O, 6), 4, false);
  shared.add(0, 3);
  EXPECT_EQ(shared.scores(0, 2), nullptr);
  EXPECT_EQ(&shared.slot_positions(0, 0), &shared.slot_positions(0, 3));
}

TEST(KvEvictionState, RefusesABudgetWithoutRoom) {
  EXPECT_THROW(KvEvictionState(policy(KvPolicy::kSink, 4, 4), 1, true), std::invalid_argument);
  EXPECT_THROW(KvEvictionState(policy(KvPolicy::kH2O, 0), 1, true), std::invalid_argument);
}

// ---- attention through the cache against an independent simulation ----

struct Data {
  int64_t L = 2, Hq = 4, Hkv = 2, D = 8, total = 0, prompt = 0;
  std::vector<std::vector<float>> q, k, v;  // [layer] (T, H, D)
};

Data make_data(int64_t prompt, int64_t total, uint32_t seed) {
  Data d;
  d.prompt = prompt;
  d.total = total;
  for (int64_t l = 0; l < d.L; ++l) {
    d.q.push_back(testing::randn(static_cast<size_t>(total * d.Hq * d.D), seed++));
    d.k.push_back(testing::randn(static_cast<size_t>(total * d.Hkv * d.D), seed++));
    d.v.push_back(testing::randn(static_cast<size_t>(total * d.Hkv * d.D), seed++));
  }
  return d;
}

// Attention of query i (all heads) over `keys` in double; adds each key's
// weight, summed over heads, into `weight` (by position). out (Hq, D).
std::vector<double> attend_ref(const Data& d, int64_t l, int64_t i, const std::vector<int64_t>& keys,
                               std::map<int64_t, double>& weight) {
  std::vector<double> out(static_cast<size_t>(d.Hq * d.D), 0.0);
  const auto& q = d.q[static_cast<size_t>(l)];
  const auto& k = d.k[static_cast<size_t>(l)];
  const auto& v = d.v[static_cast<size_t>(l)];
  for (int64_t h = 0; h < d.Hq; ++h) {
    const int64_t hk = h / (d.Hq / d.Hkv);
    std::vector<double> w;
    double m = -1e300;
    for (int64_t j : keys) {
      double dot = 0;
      for (int64_t x = 0; x < d.D; ++x)
        dot += static_cast<double>(q[static_cast<size_t>((i * d.Hq + h) * d.D + x)]) *
               k[static_cast<size_t>((j * d.Hkv + hk) * d.D + x)];
      w.push_back(dot / std::sqrt(static_cast<double>(d.D)));
      m = std::max(m, w.back());
    }
    double sum = 0;
    for (auto& x : w) sum += (x = std::exp(x - m));
    for (size_t a = 0; a < keys.size(); ++a) {
      weight[keys[a]] += w[a] / sum;
      for (int64_t x = 0; x < d.D; ++x)
        out[static_cast<size_t>(h * d.D + x)] += w[a] / sum * v[static_cast<size_t>((keys[a] * d.Hkv + hk) * d.D + x)];
    }
  }
  return out;
}

// The positions each policy keeps, simulated from its definition: per layer,
// outputs (T, Hq, D) of every query. Steps as the engine's: a first chunk of
// min(prompt, budget), then one token at a time.
std::vector<std::vector<double>> simulate(const Data& d, const KvEviction& e) {
  std::vector<std::vector<double>> out(static_cast<size_t>(d.L));
  for (int64_t l = 0; l < d.L; ++l) {
    std::vector<int64_t> kept;
    std::map<int64_t, double> weight;
    out[static_cast<size_t>(l)].assign(static_cast<size_t>(d.total * d.Hq * d.D), 0.0);
    const int64_t first = std::min(d.prompt, e.budget);
    for (int64_t i = 0; i < d.total; ++i) {
      if (i >= first && static_cast<int64_t>(kept.size()) == e.budget) {
        auto victim = kept.end();
        for (auto it = kept.begin(); it != kept.end(); ++it) {
          if (e.policy == KvPolicy::kWindow) {
            if (victim == kept.end() || *it < *victim) victim = it;
          } else if (e.policy == KvPolicy::kSink) {
            if (*it >= e.sink_tokens && (victim == kept.end() || *it < *victim)) victim = it;
          } else if (*it < i - e.h2o_recent_tokens() + 1 && (victim == kept.end() || weight[*it] < weight[*victim] ||
                                                             (weight[*it] == weight[*victim] && *it < *victim))) {
            victim = it;
          }
        }
        weight.erase(*victim);
        kept.erase(victim);
      }
      kept.push_back(i);
      // In the first chunk query i sees 0 … i; its later keys are written but masked.
      std::vector<int64_t> visible;
      for (int64_t j : kept)
        if (j <= i) visible.push_back(j);
      const auto o = attend_ref(d, l, i, visible, weight);
      std::copy(o.begin(), o.end(), out[static_cast<size_t>(l)].begin() + i * d.Hq * d.D);
    }
  }
  return out;
}

void pack(const std::vector<float>& src, int64_t H, int64_t D, int64_t p0, int64_t n, std::vector<float>& dst) {
  for (int64_t h = 0; h < H; ++h)
    for (int64_t t = p0; t < p0 + n; ++t)
      for (int64_t x = 0; x < D; ++x) dst.push_back(src[static_cast<size_t>((t * H + h) * D + x)]);
}

// Runs sequence 0 through `cache` as the engine steps it; outputs per layer (T, Hq, D).
std::vector<std::vector<float>> run(const Data& d, KvCache& cache, Device& dev) {
  const DType t = DType::kFP32;
  std::vector<std::vector<float>> out(static_cast<size_t>(d.L),
                                      std::vector<float>(static_cast<size_t>(d.total * d.Hq * d.D), 0.0f));
  int64_t done = 0;
  while (done < d.total) {
    int64_t n = 0;
    if (done == 0) {
      n = std::min(d.prompt, cache.slot_cap().value_or(d.prompt));
      EXPECT_TRUE(cache.add_sequence(0, n));
    } else {
      n = done < d.prompt ? std::min(d.prompt - done, cache.max_step_tokens(0)) : 1;
      EXPECT_TRUE(cache.append_tokens(0, n));
    }
    const std::vector<SeqStep> step{{0, n}};
    for (int64_t l = 0; l < d.L; ++l) {
      std::vector<float> q, k, v;
      pack(d.q[static_cast<size_t>(l)], d.Hq, d.D, done, n, q);
      pack(d.k[static_cast<size_t>(l)], d.Hkv, d.D, done, n, k);
      pack(d.v[static_cast<size_t>(l)], d.Hkv, d.D, done, n, v);
      Buffer qb = testing::upload(dev, q, t), kb = testing::upload(dev, k, t), vb = testing::upload(dev, v, t);
      Buffer ob = dev.alloc(static_cast<int64_t>(q.size()) * 4, Account::kWorkspace, "test.out");
      cache.write(l, step, kb.data(), vb.data(), t);
      cache.attend(l, step, ob.data(), qb.data(), t, d.Hq);
      const auto o = testing::download(dev, ob, t, static_cast<int64_t>(q.size()));
      size_t at = 0;  // (Hq, n, D) -> (T, Hq, D)
      for (int64_t h = 0; h < d.Hq; ++h)
        for (int64_t r = 0; r < n; ++r)
          for (int64_t x = 0; x < d.D; ++x)
            out[static_cast<size_t>(l)][static_cast<size_t>(((done + r) * d.Hq + h) * d.D + x)] = o[at++];
    }
    done += n;
  }
  return out;
}

KvGeometry geometry(const Data& d) {
  KvGeometry g;
  g.layers = d.L;
  g.kv_heads = d.Hkv;
  g.head_dim = d.D;
  g.format = KvFormat::kBF16;
  return g;
}

class KvEvictionAttention : public ::testing::TestWithParam<KvPolicy> {};

// bf16 storage of fp32 inputs: the simulation reads the same rounded K and V.
Data rounded(Data d) {
  for (auto& k : d.k) k = testing::rounded(k, DType::kBF16);
  for (auto& v : d.v) v = testing::rounded(v, DType::kBF16);
  return d;
}

TEST_P(KvEvictionAttention, EqualsTheKeptSetsAttentionAtEveryPosition) {
  const KvEviction e = policy(GetParam(), 8, 2);
  Ledger ledger;
  auto dev = make_device("cpu", ledger);
  for (const auto& [prompt, total] : std::vector<std::pair<int64_t, int64_t>>{{5, 30}, {13, 40}}) {
    const Data d = rounded(make_data(prompt, total, 11 + static_cast<uint32_t>(prompt)));
    PagedKvCache cache(*dev, geometry(d), 8, 4, std::nullopt, e);  // 7 usable blocks of 4 slots
    const auto got = run(d, cache, *dev);
    const auto want = simulate(d, e);
    double err = 0;
    for (int64_t l = 0; l < d.L; ++l)
      for (size_t x = 0; x < got[static_cast<size_t>(l)].size(); ++x)
        err = std::max(err, std::fabs(got[static_cast<size_t>(l)][x] - want[static_cast<size_t>(l)][x]));
    EXPECT_LT(err, 2e-5) << kv_policy_name(e.policy) << " prompt " << prompt;
    // A sequence of any length holds the blocks of `budget` slots: 2 of 4.
    EXPECT_EQ(cache.blocks().blocks_in_use(), 2);
    EXPECT_EQ(cache.evicted_tokens(), total - e.budget);
  }
}

INSTANTIATE_TEST_SUITE_P(Policies, KvEvictionAttention,
                         ::testing::Values(KvPolicy::kWindow, KvPolicy::kSink, KvPolicy::kH2O),
                         [](const auto& info) { return std::string(kv_policy_name(info.param)); });

TEST(KvEvictionAttention, ScoresSumToOnePerQueryAndHead) {
  const KvEviction e = policy(KvPolicy::kH2O, 16);
  Ledger ledger;
  auto dev = make_device("cpu", ledger);
  const Data d = rounded(make_data(6, 6, 3));
  PagedKvCache cache(*dev, geometry(d), 6, 4, std::nullopt, e);
  run(d, cache, *dev);  // one chunk of 6 queries
  // Each layer's scores: 6 queries × 4 heads, each query's weights summing to 1.
  ASSERT_EQ(cache.length(0), 6);
  const KvCacheView view = cache.view(1, {{0, 0}});
  ASSERT_EQ(view.seqs[0].slot_positions.size(), 6u);
  const float* s = view.seqs[0].slot_scores;
  ASSERT_NE(s, nullptr);
  EXPECT_NEAR(std::accumulate(s, s + 6, 0.0), 6.0 * d.Hq, 1e-4);
  // The first key is seen by every query; the last only by itself.
  EXPECT_GT(s[0], s[5]);
}

// ---- bytes ----

TEST(KvEvictionBytes, ASequenceHoldsTheBudgetsBlocksAsTheAnalyticReservation) {
  ModelConfig m;
  m.name = "t";
  m.layers = 2;
  m.hidden = 64;
  m.heads = 4;
  m.kv_heads = 2;
  m.head_dim = 16;
  Layout l;
  Ledger ledger;
  auto dev = make_device("meta", ledger);
  const KvGeometry g = kv_geometry(m, l, KvFormat::kBF16, KvScales::kPerTokenHead, 0, kKvDefaultGroup);
  for (KvPolicy p : {KvPolicy::kWindow, KvPolicy::kSink, KvPolicy::kH2O}) {
    const KvEviction e = policy(p, 100, 4);
    PagedKvCache cache(*dev, g, 64, 16, std::nullopt, e);
    ASSERT_TRUE(cache.add_sequence(0, 100));
    ASSERT_TRUE(cache.add_sequence(1, 37));
    for (int i = 0; i < 500; ++i) ASSERT_TRUE(cache.append_tokens(0, 1));
    analytic::KvOptions o = testing::analytic_options(KvLayout::kPaged, g, 16);
    o.eviction = e;
    // ⌈100/16⌉ = 7 blocks for the long one, ⌈37/16⌉ = 3 for the short, + the null block.
    EXPECT_EQ(cache.assigned_bytes(), analytic::kv_reserved_bytes(m, l, o, 1, 600) +
                                          analytic::kv_reserved_bytes(m, l, o, 1, 37) -
                                          analytic::kv_block_bytes(m, l, o) - g.fixed_scale_bytes());
    EXPECT_EQ(cache.assigned_bytes(), (7 + 3 + 1) * cache.block_bytes()) << kv_policy_name(p);
    EXPECT_EQ(analytic::kv_tokens_kept(m, o, 600), 100);
  }
}

}  // namespace
}  // namespace gpuledger::kv
