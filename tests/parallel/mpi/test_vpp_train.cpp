// Interleaved pipelines (--vpp) on real ranks: pp = the world (2 or 4), vpp 2
// (and 3 at np 2), against one rank with the same global batch
// (layout_check.h): every step's loss within 1e-5 relative, the gradient norm,
// every parameter within 1e-5 after the steps (fp32), and the rank's ledger and
// comm counters equal to its meta simulation's; then every gradient tensor of
// the first step against the one rank's, element by element within 1e-6 +
// 1e-4 relative. tiny-gpt's tied embeddings put the word embedding in chunk 0
// of rank 0 and its copy in the last chunk of the last rank. At np 4 also
// tp 2 × pp 2 (sp) and dp 2 × pp 2 (ZeRO 1, 2 and 3), each with vpp 2.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "layout_check.h"

namespace gpuledger {
namespace {

using namespace testing;

ModelConfig with_layers(const char* name, int64_t layers) {
  ModelConfig m = load_model(name);
  m.layers = layers;
  return m;
}

Layout vpp_layout(int64_t vpp) {
  Layout l;
  l.pp = world_size();
  l.vpp = vpp;
  return l;
}

struct VppCase {
  const char* model;
  int64_t vpp;
  int64_t m_per_pp;  // microbatches = m_per_pp · pp
};

class Interleaved : public ::testing::TestWithParam<VppCase> {};

TEST_P(Interleaved, MatchesOneRank) {
  const VppCase& c = GetParam();
  const Layout l = vpp_layout(c.vpp);
  check_layout(with_layers(c.model, l.pp * c.vpp), small_run(c.m_per_pp * l.pp, Schedule::k1F1B), l, 2, Tolerance{});
}

INSTANTIATE_TEST_SUITE_P(Chunks, Interleaved,
                         ::testing::Values(VppCase{"tiny-llama", 2, 1}, VppCase{"tiny-llama", 2, 2},
                                           VppCase{"tiny-gpt", 2, 2}, VppCase{"tiny-llama", 3, 1}),
                         [](const auto& info) {
                           return std::string(info.param.model[5] == 'l' ? "llama" : "gpt") + "_vpp" +
                                  std::to_string(info.param.vpp) + "_mx" + std::to_string(info.param.m_per_pp);
                         });

// np 4: interleaving beside tensor parallelism (tp 2 with sp, fp32 within
// tp_tolerance) and beside data parallelism with ZeRO 1 (dp 2).
TEST(InterleavedMixed, Tp2Pp2SpAndDp2Pp2Zero1MatchOneRank) {
  if (world_size() != 4) GTEST_SKIP() << "needs 4 ranks";
  RunConfig r = small_run(2, Schedule::k1F1B);
  r.dropout = 0.0;
  Layout tp = mixed(2, 1, 2, 0, true);
  tp.vpp = 2;
  check_layout(with_layers("tiny-llama", 4), r, tp, 2, tp_tolerance());
  Layout dp = mixed(1, 2, 2, 1, false);
  dp.vpp = 2;
  check_layout(with_layers("tiny-gpt", 4), small_run(2, Schedule::k1F1B), dp, 2, Tolerance{});
}

// np 4: interleaving with ZeRO 2 and 3 (dp 2 × pp 2, vpp 2, 4 layers: each
// chunk one layer, stage 0's chunk 0 with the embedding, stage 1's chunk 1
// with the head). Every unit staged and reduce-scattered after each of its
// backwards in the interleaved order; under ZeRO 3 gathered with a prefetch
// window that stops at the chunk's end (--prefetch 2 reaches past it).
// tiny-gpt ties the word of stage 0's chunk 0 to stage 1's chunk 1: the
// deferred reduce-scatter after the embedding-group sum. Then the gradient
// shards of one step, element by element, against one rank's.
TEST(InterleavedZero, Dp2Pp2Vpp2Zero23MatchOneRank) {
  if (world_size() != 4) GTEST_SKIP() << "needs 4 ranks";
  for (int zero : {2, 3}) {
    SCOPED_TRACE("zero " + std::to_string(zero));
    Layout l = mixed(1, 2, 2, zero, false);
    l.vpp = 2;
    RunConfig r = small_run(4, Schedule::k1F1B);
    r.prefetch = 2;
    check_layout(with_layers("tiny-gpt", 4), r, l, 2, Tolerance{});
    r.prefetch = 1;
    check_layout(with_layers("tiny-llama", 4), r, l, 1, Tolerance{});
    EXPECT_GT(check_step_gradients(with_layers("tiny-gpt", 4), small_run(2, Schedule::k1F1B), l, 1e-6, 1e-4), 0);
  }
}

// The gradients of one step, tensor by tensor, against one rank's.
TEST(InterleavedGradients, EveryTensorMatchesOneRank) {
  const Layout l = vpp_layout(2);
  const ModelConfig m = with_layers("tiny-gpt", 2 * l.pp);
  RunConfig r = small_run(2 * l.pp, Schedule::k1F1B);
  r.grad_dtype = DType::kFP32;
  const std::map<std::string, std::vector<float>> want = reference_gradients(m, r, l);
  RankRig rig(RankRig::Mpi{}, "cpu", m, r, l);
  rig.build(m, r, l);
  rig.trainer->step(0);
  const std::vector<float> got = rig.trainer->gradients_fp32();
  size_t pos = 0, tensors = 0;
  for (const auto& [name, n] : rig.trainer->parameter_tensors()) {
    const auto& w = want.at(reference_name(name));
    ASSERT_EQ(static_cast<int64_t>(w.size()), n) << name;
    double worst = 0;
    for (int64_t i = 0; i < n; ++i) {
      const double g = got[pos + static_cast<size_t>(i)], x = w[static_cast<size_t>(i)];
      EXPECT_NEAR(g, x, 1e-6 + 1e-4 * std::abs(x)) << "rank " << rig.groups.rank << " " << name << "[" << i << "]";
      worst = std::max(worst, std::abs(g - x));
      if (::testing::Test::HasFailure()) return;
    }
    pos += static_cast<size_t>(n);
    ++tensors;
  }
  EXPECT_EQ(pos, got.size());
  EXPECT_EQ(tensors, 2u * 12u + (rig.groups.rank == 0 ? 2u : 0u) + (rig.groups.rank == l.pp - 1 ? 3u : 0u))
      << "gpt: 12 tensors per layer, the embedding's word and position, the head's copy, norm weight and bias";
}

// Large messages (b·s·h·e = 4·64·64·4 = 64 KiB, past any eager limit) on the
// ring of virtual stages: the programs of parallel/pp/p2p.h must not deadlock.
TEST(InterleavedLarge, RendezvousMessages) {
  RunConfig r = small_run(world_size(), Schedule::k1F1B);
  r.seq = 64;
  r.mbs = 4;
  const Layout l = vpp_layout(2);
  check_layout(with_layers("tiny-llama", 2 * l.pp), r, l, 1, Tolerance{});
}

}  // namespace
}  // namespace gpuledger
