// The serving engine's scheduler against hand-worked schedules: mixed batches
// under max_num_batched_tokens (decodes first, then prefill chunks), prefix
// hits between requests arriving together, latency figures on a modelled
// (deterministic) step clock, timed arrivals, preemption by swap and the
// Poisson generator.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <utility>
#include <vector>

#include "kernels/registry/registry.h"
#include "models/kv/kv_cache.h"
#include "models/kv/kv_swap.h"
#include "models/transformer/infer_engine.h"
#include "models/transformer/infer_latency.h"
#include "tests/models/transformer/harness.h"

namespace gpuledger {
namespace {

using testing::Env;
using Chunks = std::vector<std::pair<int64_t, int64_t>>;

kv::KvGeometry geometry(const ModelConfig& m) {
  return kv::KvGeometry{m.layers, m.kv_heads, m.head_dim, KvFormat::kBF16, KvScales::kPerTokenHead};
}

std::vector<InferRequest> same(int64_t n, int64_t prompt, int64_t gen, int64_t vocab, int64_t prefix = 0) {
  return make_requests(std::vector<RequestShape>(static_cast<size_t>(n), RequestShape{prompt, gen, 0}), vocab, 11,
                       prefix);
}

// 0.01 s a step and 1 ms a token: a clock the test can add up by hand.
double modelled(const StepCost& c) { return 0.01 + 0.001 * static_cast<double>(c.tokens); }

// Three requests of 12 prompt tokens and 3 generated, a budget of 12 tokens a
// step, no prefix caching. By hand (decodes first, then running prefills,
// then admissions; a prefill's last chunk gives its first token):
//   step 0: admit r0, 12 tokens                      → r0 first token
//   step 1: r0 decodes (1); admit r1, 11 of 12 tokens
//   step 2: r0 decodes (1, its 3rd token: done); r1's last 1; admit r2, 10 of 12
//   step 3: r1 decodes (1); r2's last 2
//   step 4: r1 (done), r2 decode
//   step 5: r2 decodes (done)
TEST(InferScheduler, MixedBatchesCarryDecodesBesidePrefillChunksUnderTheTokenBudget) {
  Env env;
  const ModelConfig m = load_model("tiny-llama");
  InferenceModel model(*env.dev, *env.tp, m, DType::kFP32, 1);
  kv::PagedKvCache cache(*env.dev, geometry(m), 64, 4);
  EngineOptions o(8, 12, false);
  o.step_seconds = modelled;
  o.record_steps = true;
  InferenceEngine engine(model, cache, o);
  const auto res = engine.run(same(3, 12, 3, m.vocab));
  const auto& log = engine.stats().step_log;
  ASSERT_EQ(log.size(), 6u);
  const std::vector<int64_t> decodes = {0, 1, 1, 1, 2, 1};
  const std::vector<Chunks> chunks = {{{0, 12}}, {{1, 11}}, {{1, 1}, {2, 10}}, {{2, 2}}, {}, {}};
  for (size_t k = 0; k < log.size(); ++k) {
    EXPECT_EQ(log[k].decode_tokens, decodes[k]) << "step " << k;
    EXPECT_EQ(log[k].prefill_chunks, chunks[k]) << "step " << k;
    int64_t tokens = log[k].decode_tokens;
    for (const auto& c : log[k].prefill_chunks) tokens += c.second;
    EXPECT_LE(tokens, 12) << "step " << k;
  }
  const EngineStats& st = engine.stats();
  EXPECT_EQ(st.steps, 6);
  EXPECT_EQ(st.prefill_steps, 4);
  EXPECT_EQ(st.mixed_steps, 3);  // steps 1, 2 and 3 carry both
  EXPECT_EQ(st.decode_steps, 2);
  EXPECT_EQ(st.prefill_tokens, 36);
  EXPECT_EQ(st.decode_tokens, 6);
  EXPECT_EQ(st.decode_step_tokens, 3);
  for (const auto& r : res) EXPECT_EQ(r.tokens.size(), 3u);

  // The clock: steps of 12, 12, 12, 3, 2, 1 tokens end at 0.022, 0.044, 0.066,
  // 0.079, 0.091, 0.102 s. r0: first token 0.022, done 0.066; r1: 0.066, 0.091;
  // r2: 0.079, 0.102; all arrived at 0.
  const double tol = 1e-12;
  EXPECT_NEAR(st.clock_s, 0.102, tol);
  EXPECT_NEAR(res[1].first_token_s, 0.066, tol);
  EXPECT_NEAR(res[2].finish_s, 0.102, tol);
  const LatencySummary l = summarize_latency(res, st.clock_s);
  EXPECT_EQ(l.completed, 3);
  // TTFT 0.022, 0.066, 0.079: p90 at rank 1.8 = 0.066 + 0.8 · 0.013
  EXPECT_NEAR(l.ttft_s.mean, (0.022 + 0.066 + 0.079) / 3, tol);
  EXPECT_NEAR(l.ttft_s.p50, 0.066, tol);
  EXPECT_NEAR(l.ttft_s.p90, 0.0764, tol);
  EXPECT_NEAR(l.ttft_s.p99, 0.07874, tol);
  // TPOT (done − first) / 2: 0.022, 0.0125, 0.0115
  EXPECT_EQ(l.tpot_s.count, 3);
  EXPECT_NEAR(l.tpot_s.mean, (0.022 + 0.0125 + 0.0115) / 3, tol);
  EXPECT_NEAR(l.tpot_s.p50, 0.0125, tol);
  EXPECT_NEAR(l.tpot_s.p90, 0.0125 + 0.8 * 0.0095, tol);
  EXPECT_NEAR(l.tpot_s.p99, 0.0125 + 0.98 * 0.0095, tol);
  // E2E 0.066, 0.091, 0.102
  EXPECT_NEAR(l.e2e_s.mean, (0.066 + 0.091 + 0.102) / 3, tol);
  EXPECT_NEAR(l.e2e_s.p50, 0.091, tol);
  EXPECT_NEAR(l.e2e_s.p90, 0.0998, tol);
  EXPECT_NEAR(l.e2e_s.p99, 0.10178, tol);
  EXPECT_NEAR(l.request_throughput_per_s, 3 / 0.102, 1e-9);
}

// Four requests arriving together whose prompts share 8 tokens (two blocks of
// 4): one step admits them all, and the last three hit the first one's two
// prefix blocks, cached at its admission in that same step — 3 · 2 blocks,
// 24 tokens, of 48 looked up — and generate the tokens of a run without caching.
TEST(InferScheduler, SimultaneousArrivalsSharingAPrefixHitTheCacheInTheSameStep) {
  const ModelConfig m = load_model("tiny-llama");
  std::vector<std::vector<int32_t>> tokens[2];
  EngineStats stats[2];
  int64_t peak_blocks[2] = {0, 0};
  for (int caching = 0; caching < 2; ++caching) {
    Env env;
    InferenceModel model(*env.dev, *env.tp, m, DType::kFP32, 1);
    kv::PagedKvCache cache(*env.dev, geometry(m), 64, 4);
    EngineOptions o(8, 64, caching == 1);
    o.record_steps = true;
    InferenceEngine engine(model, cache, o);
    for (const auto& r : engine.run(same(4, 12, 3, m.vocab, 8))) tokens[caching].push_back(r.tokens);
    stats[caching] = engine.stats();
    peak_blocks[caching] = cache.blocks().peak_blocks_in_use();
    EXPECT_EQ(env.ledger.peak(Account::kKv), 64 * cache.block_bytes());  // the pool, booked once
  }
  EXPECT_EQ(tokens[0], tokens[1]);
  const auto& first = stats[1].step_log.front();
  EXPECT_EQ(first.prefill_chunks, (Chunks{{0, 12}, {1, 4}, {2, 4}, {3, 4}}));
  EXPECT_EQ(stats[1].prefix_tokens_shared, 24);
  EXPECT_EQ(stats[1].prefix_hit_blocks, 6);
  EXPECT_EQ(stats[1].prefix_query_tokens, 48);
  EXPECT_EQ(stats[0].prefix_tokens_shared, 0);
  EXPECT_EQ(stats[0].prefix_query_tokens, 0);  // no lookups without caching
  // At the end each holds 14 tokens: 4 blocks; with caching two of them are shared: 4 + 3 · 2.
  EXPECT_EQ(peak_blocks[0], 16);
  EXPECT_EQ(peak_blocks[1], 10);
}

// A finished request's blocks stay cached on the free queue: a later request
// with the same prefix hits them though nothing holds them any more.
TEST(InferScheduler, APrefixOutlivesItsRequestUntilEvicted) {
  Env env;
  const ModelConfig m = load_model("tiny-llama");
  InferenceModel model(*env.dev, *env.tp, m, DType::kFP32, 1);
  kv::PagedKvCache cache(*env.dev, geometry(m), 64, 4);
  auto reqs = same(2, 12, 2, m.vocab, 8);
  reqs[1].arrival = 5;  // r0 is done after step 1
  InferenceEngine engine(model, cache, EngineOptions(8, 64, true));
  const auto res = engine.run(reqs);
  EXPECT_EQ(res[0].finish_step, 1);
  EXPECT_EQ(engine.stats().prefix_tokens_shared, 8);
  EXPECT_EQ(engine.stats().prefix_hit_blocks, 2);
}

// Timed arrivals, the clock 0.1 s a step: r0 (arrives at 0) prefills in step 0
// and decodes its 2nd token in step 1; r1 arrives at 0.05 s, waits for the
// step boundary at 0.1 and is admitted in step 1 beside r0's decode: first
// token at 0.2, TTFT 0.15 (queueing counted). r2 arrives at 1.0 s: the engine
// is idle from 0.3 s (r1 done), its clock jumps to 1.0; step 3 gives r2's
// first token at 1.1.
TEST(InferScheduler, TimedArrivalsCountQueueingAndTheIdleClockJumpsToTheNextArrival) {
  Env env;
  const ModelConfig m = load_model("tiny-llama");
  InferenceModel model(*env.dev, *env.tp, m, DType::kFP32, 1);
  kv::PagedKvCache cache(*env.dev, geometry(m), 64, 4);
  auto reqs = same(3, 4, 2, m.vocab);
  reqs[1].arrival_s = 0.05;
  reqs[2].arrival_s = 1.0;
  EngineOptions o(8, 64, true);
  o.step_seconds = [](const StepCost&) { return 0.1; };
  InferenceEngine engine(model, cache, o);
  const auto res = engine.run(reqs);
  const double tol = 1e-12;
  EXPECT_EQ(res[1].first_token_step, 1);
  EXPECT_NEAR(res[1].arrival_s, 0.05, tol);
  EXPECT_NEAR(res[1].first_token_s - res[1].arrival_s, 0.15, tol);
  EXPECT_NEAR(res[1].finish_s, 0.3, tol);
  EXPECT_EQ(res[2].first_token_step, 3);
  EXPECT_NEAR(res[2].first_token_s, 1.1, tol);
  EXPECT_NEAR(res[2].finish_s, 1.2, tol);
  EXPECT_NEAR(engine.stats().clock_s, 1.2, tol);
  const LatencySummary l = summarize_latency(res, engine.stats().clock_s);
  EXPECT_NEAR(l.ttft_s.p50, 0.1, tol);  // TTFT 0.1, 0.15, 0.1
  EXPECT_NEAR(l.ttft_s.mean, 0.35 / 3, tol);
  EXPECT_NEAR(l.tpot_s.mean, 0.1, tol);
  EXPECT_NEAR(l.request_throughput_per_s, 3 / 1.2, 1e-9);
}

// Preemption by swap, by hand: a pool of 4 usable blocks of 4 tokens, two
// requests of 4 prompt tokens generating 6. Steps 0–4 take both to 8 tokens
// (2 blocks each, the pool full); in step 5 r0 needs a third block, so r1 (the
// newest) is swapped out — 2 blocks, 2 · 1024 bytes to the host — and r0
// finishes. Step 6 swaps r1 back in (its 2 blocks and a third for the next
// token fit) and it finishes, with the tokens of a run that never preempts.
TEST(InferScheduler, PreemptionBySwapMovesBlocksToHostAndBack) {
  const ModelConfig m = load_model("tiny-llama");
  const auto reqs = same(2, 4, 6, m.vocab);
  std::vector<std::vector<int32_t>> out[2];
  for (int small = 0; small < 2; ++small) {
    Env env;
    InferenceModel model(*env.dev, *env.tp, m, DType::kFP32, 1);
    kv::PagedKvCache cache(*env.dev, geometry(m), small ? 5 : 64, 4);
    ASSERT_EQ(cache.block_bytes(), 4 * 256);
    kv::KvSwapSpace swap;
    EngineOptions o(8, 64, false);
    o.swap = &swap;
    InferenceEngine engine(model, cache, o);
    for (const auto& r : engine.run(reqs)) out[small].push_back(r.tokens);
    const EngineStats& st = engine.stats();
    if (!small) {
      EXPECT_EQ(st.swap_outs, 0);
      continue;
    }
    EXPECT_EQ(st.steps, 7);
    EXPECT_EQ(st.preemptions, 1);
    EXPECT_EQ(st.swap_outs, 1);
    EXPECT_EQ(st.swap_ins, 1);
    EXPECT_EQ(swap.blocks_out(), 2);
    EXPECT_EQ(st.swap_out_bytes, 2 * cache.block_bytes());
    EXPECT_EQ(st.swap_in_bytes, 2 * cache.block_bytes());
    // The host copy, booked in the rank's own ledger under `host` while
    // swapped: 2 blocks at once, 2 · 1024 bytes; outside the device total.
    EXPECT_EQ(swap.peak_swapped_blocks(), 2);
    EXPECT_EQ(env.ledger.peak(Account::kHost), 2 * 1024);
    EXPECT_EQ(env.ledger.live(Account::kHost), 0);
    EXPECT_EQ(env.ledger.count(Account::kHost), 1);
    EXPECT_EQ(env.ledger.peak(Account::kKv), 5 * cache.block_bytes());  // the device pool, unchanged
    EXPECT_EQ(env.ledger.peak_total(), env.ledger.at_peak().device_total());
    EXPECT_EQ(cache.blocks().blocks_in_use(), 0);
  }
  EXPECT_EQ(out[0], out[1]);
}

TEST(InferLatency, PercentilesInterpolateLinearlyBetweenOrderStatistics) {
  // numpy.percentile([1, 2, 3, 4, 10], p): 50 → 3, 90 → 4 + 0.6 · 6 = 7.6, 99 → 4 + 0.96 · 6 = 9.76
  const std::vector<double> v = {10, 2, 4, 1, 3};
  EXPECT_DOUBLE_EQ(percentile(v, 50), 3.0);
  EXPECT_DOUBLE_EQ(percentile(v, 90), 7.6);
  EXPECT_NEAR(percentile(v, 99), 9.76, 1e-12);
  EXPECT_DOUBLE_EQ(percentile({5.0}, 99), 5.0);
  EXPECT_THROW(percentile({}, 50), std::invalid_argument);
  EXPECT_THROW(percentile(v, 101), std::invalid_argument);
}

TEST(PoissonArrivals, SeededTimesHaveTheMeanGapOfTheRate) {
  const double rate = 4.0;
  const int64_t n = 40000;
  const auto t = poisson_arrivals(n, rate, 7);
  ASSERT_EQ(static_cast<int64_t>(t.size()), n);
  // The first gap from the generator by hand: u from the top 53 bits of the first draw.
  std::mt19937_64 gen(7);
  const double u = static_cast<double>(gen() >> 11) / 9007199254740992.0;
  EXPECT_DOUBLE_EQ(t[0], -std::log(1 - u) / rate);
  for (size_t i = 1; i < t.size(); ++i) ASSERT_GE(t[i], t[i - 1]);
  // Mean gap 1 / rate = 0.25 s; its standard error 0.25 / √n = 0.00125: within 4 of them.
  const double mean_gap = t.back() / static_cast<double>(n);
  EXPECT_NEAR(mean_gap, 0.25, 4 * 0.25 / std::sqrt(static_cast<double>(n)));
  EXPECT_EQ(poisson_arrivals(5, rate, 7), poisson_arrivals(5, rate, 7));
  EXPECT_NE(poisson_arrivals(5, rate, 7), poisson_arrivals(5, rate, 8));
  EXPECT_THROW(poisson_arrivals(5, 0.0, 7), std::invalid_argument);
  EXPECT_THROW(poisson_arrivals(5, std::nan(""), 7), std::invalid_argument);
}

}  // namespace
}  // namespace gpuledger
