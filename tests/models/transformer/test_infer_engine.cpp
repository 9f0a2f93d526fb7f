// The serving engine over real caches: reserved bytes equal the formula to
// the byte (contiguous: requests × max-model-len × per-token bytes; paged:
// blocks in use × block bytes, waste under one block per sequence; prefix
// sharing stores shared blocks once), and preemption by recompute loses no
// request — every request of a trace that overflows the pool completes with
// the tokens of a run with room to spare.
//
// Per-token bytes by hand for tiny-llama (2 layers, 2 KV heads, head dim 16),
// bf16 cache: 2 (K, V) · 2 · 2 · 16 · 2 bytes = 256.
#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include "analytic/kv_cache.h"
#include "models/kv/kv_cache.h"
#include "models/transformer/infer_engine.h"
#include "tests/models/transformer/harness.h"

namespace gpuledger {
namespace {

using testing::Env;

constexpr int64_t kTokenBytes = 256;

kv::KvGeometry geometry(const ModelConfig& m, KvFormat f = KvFormat::kBF16) {
  return kv::KvGeometry{m.layers, m.kv_heads, m.head_dim, f, KvScales::kPerTokenHead};
}

std::vector<InferRequest> fixed(int64_t n, int64_t prompt, int64_t gen, int64_t vocab, int64_t prefix = 0) {
  return make_requests(std::vector<RequestShape>(static_cast<size_t>(n), RequestShape{prompt, gen, 0}), vocab, 11,
                       prefix);
}

Layout one() {
  Layout l;
  l.dp = l.tp = l.pp = 1;
  return l;
}

TEST(InferEngine, ContiguousReservesMaxModelLenPerRequest) {
  Env env;
  const ModelConfig m = load_model("tiny-llama");
  ASSERT_EQ(geometry(m).token_bytes(), kTokenBytes);
  InferenceModel model(*env.dev, *env.tp, m, DType::kFP32, 1);
  kv::ContiguousKvCache cache(*env.dev, geometry(m), 48);
  InferenceEngine engine(model, cache, {8, 64, 0});
  const auto res = engine.run(fixed(4, 10, 6, m.vocab));
  for (const auto& r : res) EXPECT_EQ(r.tokens.size(), 6u);
  // all four run together: 4 reservations of 48 tokens
  EXPECT_EQ(env.ledger.peak(Account::kKv), 4 * 48 * kTokenBytes);
  EXPECT_EQ(cache.peak_assigned_bytes(), 4 * 48 * kTokenBytes);
  EXPECT_EQ(cache.peak_token_bytes(), 4 * (10 + 6 - 1) * kTokenBytes);  // the last token's K/V is never written
  analytic::KvOptions o;
  o.layout = KvLayout::kContiguous;
  o.max_model_len = 48;
  EXPECT_EQ(cache.peak_assigned_bytes(), analytic::kv_reserved_bytes(m, one(), o, 4, 15));
  EXPECT_EQ(env.ledger.live(Account::kKv), 0);  // every reservation freed at completion
}

TEST(InferEngine, PagedReservesBlocksInUseWithUnderABlockOfWastePerSequence) {
  Env env;
  const ModelConfig m = load_model("tiny-llama");
  InferenceModel model(*env.dev, *env.tp, m, DType::kFP32, 1);
  const int64_t B = 4, blocks = 64, block_bytes = B * kTokenBytes;
  kv::PagedKvCache cache(*env.dev, geometry(m), blocks, B);
  EXPECT_EQ(env.ledger.live(Account::kKv), blocks * block_bytes);  // the pool, up front
  InferenceEngine engine(model, cache, {8, 64, 0});
  engine.run(fixed(4, 10, 6, m.vocab));
  // one prefill step (40 tokens), then 5 decode steps of 4 sequences: the first token comes from the prefill
  EXPECT_EQ(engine.stats().prefill_steps, 1);
  EXPECT_EQ(engine.stats().prefill_tokens, 40);
  EXPECT_EQ(engine.stats().decode_steps, 5);
  EXPECT_EQ(engine.stats().decode_tokens, 20);
  // 15 tokens each at the end: ⌈15/4⌉ = 4 blocks per sequence, + the null block
  EXPECT_EQ(cache.blocks().peak_blocks_in_use(), 16);
  EXPECT_EQ(cache.peak_assigned_bytes(), (16 + 1) * block_bytes);
  EXPECT_EQ(cache.peak_token_bytes(), 4 * 15 * kTokenBytes);
  const int64_t waste = cache.peak_assigned_bytes() - block_bytes - cache.peak_token_bytes();
  EXPECT_GE(waste, 0);
  EXPECT_LT(waste, 4 * block_bytes);  // under one block per sequence
  analytic::KvOptions o;
  o.block = B;
  EXPECT_EQ(cache.peak_assigned_bytes(), analytic::kv_reserved_bytes(m, one(), o, 4, 15));
  EXPECT_EQ(env.ledger.peak(Account::kKv), blocks * block_bytes);
}

TEST(InferEngine, PrefixSharingStoresSharedBlocksOnceAndGivesTheSameTokens) {
  const ModelConfig m = load_model("tiny-llama");
  std::vector<std::vector<int32_t>> tokens[2];
  int64_t peak_blocks[2] = {0, 0}, shared[2] = {0, 0};
  for (int share = 0; share < 2; ++share) {
    Env env;
    InferenceModel model(*env.dev, *env.tp, m, DType::kFP32, 1);
    kv::PagedKvCache cache(*env.dev, geometry(m), 64, 4);
    // prompts share their first 8 tokens either way (make_requests' prefix); caching on or off
    InferenceEngine engine(model, cache, {8, 12, share == 1});
    for (const auto& r : engine.run(fixed(3, 12, 3, m.vocab, 8))) tokens[share].push_back(r.tokens);
    peak_blocks[share] = cache.blocks().peak_blocks_in_use();
    shared[share] = engine.stats().prefix_tokens_shared;
  }
  EXPECT_EQ(tokens[0], tokens[1]);
  EXPECT_EQ(shared[0], 0);
  EXPECT_EQ(shared[1], 2 * 8);  // requests 1 and 2 each take request 0's two full blocks
  // The schedule (budget 12 tokens a step, blocks of 4): step 0 admits r0
  // (12 tokens, 3 blocks); step 1 decodes r0 (13 tokens: 4 blocks) and admits
  // r1. Without caching r1 takes 11 tokens (3 blocks); step 2 grows r0 to 14,
  // r1 to 12 and admits r2 with 10 (3 blocks): 4 + 3 + 3 = 10 at the peak.
  // With caching r1 and r2 both come in at step 1, each hitting r0's two
  // prefix blocks and computing 4 tokens (1 block each); step 2 grows every one
  // by a token: r0 4 blocks, r1 and r2 2 private each — 4 + 2 + 2 = 8.
  EXPECT_EQ(peak_blocks[0], 10);
  EXPECT_EQ(peak_blocks[1], 8);
}

TEST(InferEngine, PreemptionByRecomputeLosesNoRequest) {
  const ModelConfig m = load_model("tiny-llama");
  // arrivals spread over the first steps, lengths mixed
  std::vector<RequestShape> shapes;
  for (int i = 0; i < 6; ++i) shapes.push_back({9 + 3 * (i % 3), 10 + 2 * (i % 2), i / 2});
  const auto reqs = make_requests(shapes, m.vocab, 5);
  std::vector<std::vector<int32_t>> out[2];
  int64_t preempted[2] = {0, 0};
  for (int small = 0; small < 2; ++small) {
    Env env;
    InferenceModel model(*env.dev, *env.tp, m, DType::kFP32, 2);
    // enough: 6 · ⌈(15 + 11) / 4⌉ blocks; small: 12 blocks (11 usable), two sequences at a time at most
    kv::PagedKvCache cache(*env.dev, geometry(m), small ? 12 : 64, 4);
    InferenceEngine engine(model, cache, {8, 16, 0});
    const auto res = engine.run(reqs);
    for (size_t i = 0; i < res.size(); ++i) {
      EXPECT_EQ(static_cast<int64_t>(res[i].tokens.size()), shapes[i].gen_len);
      out[small].push_back(res[i].tokens);
    }
    preempted[small] = engine.stats().preemptions;
    EXPECT_EQ(cache.sequences(), 0);
    EXPECT_EQ(cache.blocks().blocks_in_use(), 0);
  }
  EXPECT_EQ(preempted[0], 0);
  EXPECT_GT(preempted[1], 0);
  EXPECT_EQ(out[0], out[1]);
}

// Chunked prefill changes the steps, not the tokens — also for a sliding-
// window model, whose rolling buffer bounds every step (window 8, prompts of 20).
TEST(InferEngine, PrefillChunkingAndSlidingWindowKeepTheTokens) {
  for (std::optional<int64_t> window : {std::optional<int64_t>{}, std::optional<int64_t>{8}}) {
    ModelConfig m = load_model("tiny-llama");
    m.sliding_window = window;
    std::vector<std::vector<int32_t>> out[2];
    int64_t i = 0;
    for (int64_t chunk : {3, 64}) {
      Env env;
      InferenceModel model(*env.dev, *env.tp, m, DType::kFP32, 4);
      kv::PagedKvCache cache(*env.dev, geometry(m), 64, 4, window);
      InferenceEngine engine(model, cache, {4, chunk, 0});
      for (const auto& r : engine.run(fixed(3, 20, 10, m.vocab))) out[i].push_back(r.tokens);
      if (window) {
        EXPECT_LE(cache.blocks().peak_blocks_in_use(), 3 * 2);  // ⌈8/4⌉ blocks per sequence
      }
      ++i;
    }
    EXPECT_EQ(out[0], out[1]) << (window ? "window" : "no window");
  }
}

TEST(InferEngine, ARequestLongerThanTheWholePoolIsAnError) {
  Env env;
  const ModelConfig m = load_model("tiny-llama");
  InferenceModel model(*env.dev, *env.tp, m, DType::kFP32, 2);
  kv::PagedKvCache cache(*env.dev, geometry(m), 4, 4);  // 3 usable blocks: 12 tokens
  InferenceEngine engine(model, cache, {4, 16, 0});
  EXPECT_THROW(engine.run(fixed(1, 8, 10, m.vocab)), std::runtime_error);
}

TEST(InferEngine, TraceReaderAndSharedPrefix) {
  const std::string path = ::testing::TempDir() + "/trace.jsonl";
  {
    std::FILE* f = std::fopen(path.c_str(), "w");
    std::fputs("{\"prompt_len\": 5, \"gen_len\": 2, \"arrival\": 3}\n\n{\"prompt_len\": 7, \"gen_len\": 1}\n", f);
    std::fclose(f);
  }
  const auto shapes = read_trace(path);
  ASSERT_EQ(shapes.size(), 2u);
  EXPECT_EQ(shapes[0].prompt_len, 5);
  EXPECT_EQ(shapes[0].arrival, 3);
  EXPECT_EQ(shapes[1].arrival, 0);
  const auto reqs = make_requests(shapes, 97, 1, 4);
  EXPECT_EQ(reqs[1].prompt.size(), 7u);
  EXPECT_TRUE(std::equal(reqs[0].prompt.begin(), reqs[0].prompt.begin() + 4, reqs[1].prompt.begin()));
  EXPECT_NE(std::vector<int32_t>(reqs[0].prompt.begin() + 4, reqs[0].prompt.end()),
            std::vector<int32_t>(reqs[1].prompt.begin() + 4, reqs[1].prompt.begin() + 5));
  {
    std::FILE* f = std::fopen(path.c_str(), "w");
    std::fputs("{\"prompt_len\": 5}\n", f);
    std::fclose(f);
  }
  EXPECT_THROW(read_trace(path), std::invalid_argument);
}

}  // namespace
}  // namespace gpuledger
