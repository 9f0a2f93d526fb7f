// Tensor-parallel inference end to end (label mpi, np 2 and 4): every rank
// serves the same requests with an InferenceModel over Layout{tp = world}
// (make_mpi_groups) and its own KV cache of k_t heads, and also runs the
// one-rank engine in-process (make_single_groups, its own device and
// ledger). Checked on every rank:
//   - the generated tokens equal the one-rank run's, request by request
//     (fp32 compute: the TP partial sums reorder additions, ~1e-6 relative,
//     far below the gaps between the top logits of these tiny models; the
//     greedy argmax runs over the full vocabulary, padded columns excluded);
//   - the logits of one prefill step (all-gathered over tp, padded columns
//     dropped) within 1e-5 relative of the one-rank logits, and the greedy
//     token their argmax;
//   - every rank's booked KV pool bytes equal the analytic per-rank
//     reservation (analytic/kv_cache.h with the TP layout) and the
//     hand-computed figure below.
// Per-token bytes by hand, bf16 cache, 2 layers, head dim 16:
// 2 (K, V) · 2 layers · k_t · 16 · 2 bytes = 128 · k_t, with
//   tiny-llama (kv_heads 2): k_t = 1 at t = 2 (split) and t = 4 (each head
//     replicated on 2 ranks, as Megatron and vLLM do);
//   tiny-gpt (kv_heads 4): k_t = 4 / t.
// Both have vocab 97 (prime): padded to a multiple of t, so the last rank's
// slice holds padding the argmax must skip.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "analytic/kv_cache.h"
#include "core/model_config.h"
#include "kernels/device.h"
#include "kernels/ledger.h"
#include "kernels/registry/registry.h"
#include "models/kv/kv_cache.h"
#include "models/kv/kv_format.h"
#include "models/transformer/infer_engine.h"
#include "models/transformer/infer_model.h"
#include "parallel/groups.h"
#include "tests/parallel/mpi/mpi_world.h"

namespace gpuledger {
namespace {

using testing::world_size;

Layout tp_layout(int64_t t) {
  Layout l;
  l.dp = l.pp = 1;
  l.tp = t;
  return l;
}

// k_t by hand (see the header comment).
int64_t hand_kv_heads(const ModelConfig& m, int64_t t) { return t <= m.kv_heads ? m.kv_heads / t : 1; }

constexpr int64_t kRequests = 4, kPrompt = 10, kGen = 6, kMaxLen = 32, kBlock = 4, kBlocks = 64;

std::vector<InferRequest> requests(const ModelConfig& m) {
  return make_requests(std::vector<RequestShape>(kRequests, RequestShape{kPrompt, kGen, 0}), m.vocab, 11);
}

std::unique_ptr<kv::KvCache> make_cache(Device& dev, const kv::KvGeometry& g, bool paged) {
  if (paged) return std::make_unique<kv::PagedKvCache>(dev, g, kBlocks, kBlock);
  return std::make_unique<kv::ContiguousKvCache>(dev, g, kMaxLen);
}

struct Served {
  std::vector<std::vector<int32_t>> tokens;
  int64_t kv_peak_bytes = 0, kv_pool_bytes = 0;
};

Served serve(Device& dev, Ledger& ledger, Comm& tp, const ModelConfig& m, const Layout& l, bool paged) {
  InferenceModel model(dev, tp, m, DType::kFP32, 7);
  auto cache = make_cache(dev, kv::kv_geometry(m, l, KvFormat::kBF16), paged);
  Served s;
  s.kv_pool_bytes = ledger.live(Account::kKv);
  InferenceEngine engine(model, *cache, {8, 64, 0});
  for (const auto& r : engine.run(requests(m))) s.tokens.push_back(r.tokens);
  s.kv_peak_bytes = ledger.peak(Account::kKv);
  return s;
}

Served one_rank(const ModelConfig& m, bool paged) {
  Ledger ledger;
  auto dev = make_device("cpu", ledger);
  CommCounters counters;
  Groups g = make_single_groups(counters, *dev);
  return serve(*dev, ledger, *g.tp, m, tp_layout(1), paged);
}

Served tp_ranks(const ModelConfig& m, bool paged) {
  Ledger ledger;
  auto dev = make_device("cpu", ledger);
  CommCounters counters;
  const Layout l = tp_layout(world_size());
  Groups g = make_mpi_groups(l, counters, *dev, m.tied_embeddings);
  return serve(*dev, ledger, *g.tp, m, l, paged);
}

// One prefill of two sequences (10 and 7 tokens): its logits (2 × V) and greedy tokens.
struct Step {
  std::vector<float> logits;
  std::vector<int32_t> next;
};
Step prefill(Device& dev, Comm& tp, const ModelConfig& m, const Layout& l) {
  InferenceModel model(dev, tp, m, DType::kFP32, 7);
  kv::ContiguousKvCache cache(dev, kv::kv_geometry(m, l, KvFormat::kBF16), kMaxLen);
  const auto reqs = requests(m);
  cache.add_sequence(0, 10);
  cache.add_sequence(1, 7);
  std::vector<int32_t> toks(reqs[0].prompt.begin(), reqs[0].prompt.begin() + 10);
  toks.insert(toks.end(), reqs[1].prompt.begin(), reqs[1].prompt.begin() + 7);
  Step s;
  s.next = model.forward({{0, 10}, {1, 7}}, toks, cache, &s.logits);
  return s;
}

TEST(TpInfer, PrefillLogitsMatchOneRank) {
  for (const char* name : {"tiny-llama", "tiny-gpt"}) {
    SCOPED_TRACE(name);
    const ModelConfig m = load_model(name);
    Ledger l1, lt;
    auto d1 = make_device("cpu", l1), dt = make_device("cpu", lt);
    CommCounters c1, ct;
    Groups g1 = make_single_groups(c1, *d1);
    const Layout l = tp_layout(world_size());
    Groups gt = make_mpi_groups(l, ct, *dt, m.tied_embeddings);
    const Step ref = prefill(*d1, *g1.tp, m, tp_layout(1));
    const Step got = prefill(*dt, *gt.tp, m, l);
    ASSERT_EQ(got.logits.size(), static_cast<size_t>(2 * m.vocab));
    ASSERT_EQ(ref.logits.size(), got.logits.size());
    for (size_t i = 0; i < got.logits.size(); ++i)
      EXPECT_NEAR(got.logits[i], ref.logits[i], 1e-5 * (1.0 + std::abs(ref.logits[i]))) << "logit " << i;
    EXPECT_EQ(got.next, ref.next);
    for (int64_t b = 0; b < 2; ++b)
      EXPECT_EQ(got.next[static_cast<size_t>(b)], argmax(got.logits.data() + b * m.vocab, m.vocab));
  }
}

void check(const char* name, bool paged) {
  SCOPED_TRACE(std::string(name) + (paged ? " paged" : " contiguous"));
  const ModelConfig m = load_model(name);
  const int64_t t = world_size();
  const Layout l = tp_layout(t);
  const Served ref = one_rank(m, paged);
  const Served got = tp_ranks(m, paged);

  ASSERT_EQ(got.tokens.size(), static_cast<size_t>(kRequests));
  for (size_t i = 0; i < got.tokens.size(); ++i) {
    ASSERT_EQ(got.tokens[i].size(), static_cast<size_t>(kGen));
    EXPECT_EQ(got.tokens[i], ref.tokens[i]) << "request " << i;
    for (int32_t tok : got.tokens[i]) {
      EXPECT_GE(tok, 0);
      EXPECT_LT(tok, m.vocab);  // never a padded column
    }
  }

  const int64_t token_bytes = 2 * m.layers * hand_kv_heads(m, t) * m.head_dim * 2;
  analytic::KvOptions o;
  o.dtype = KvFormat::kBF16;
  if (paged) {
    o.layout = KvLayout::kPaged;
    o.block = kBlock;
    // the whole pool is booked up front: blocks × block bytes
    EXPECT_EQ(got.kv_pool_bytes, kBlocks * kBlock * token_bytes);
    EXPECT_EQ(got.kv_pool_bytes, kBlocks * analytic::kv_block_bytes(m, l, o));
    EXPECT_EQ(got.kv_peak_bytes, got.kv_pool_bytes);
  } else {
    o.layout = KvLayout::kContiguous;
    o.max_model_len = kMaxLen;
    // all four run together (max batch 8, one 40-token prefill): 4 reservations of kMaxLen tokens
    EXPECT_EQ(got.kv_peak_bytes, kRequests * kMaxLen * token_bytes);
    EXPECT_EQ(got.kv_peak_bytes, analytic::kv_reserved_bytes(m, l, o, kRequests, kPrompt + kGen - 1));
  }
}

TEST(TpInfer, TinyLlamaContiguousMatchesOneRank) { check("tiny-llama", false); }
TEST(TpInfer, TinyLlamaPagedMatchesOneRank) { check("tiny-llama", true); }
TEST(TpInfer, TinyGptContiguousMatchesOneRank) { check("tiny-gpt", false); }
TEST(TpInfer, TinyGptPagedMatchesOneRank) { check("tiny-gpt", true); }

}  // namespace
}  // namespace gpuledger
