// Pipeline parallelism on real ranks (np 2: pp 2; np 4: pp 4 with 4 layers,
// and dp 2 × pp 2), GPipe and 1F1B at several microbatch counts, against one
// rank with the same global batch (tests/parallel/mpi/layout_check.h), fp32
// within 1e-5; the ranks book what their meta simulation books. tiny-gpt's
// tied embeddings exercise the emb group (first and last stage).
#include <gtest/gtest.h>

#include "layout_check.h"

namespace gpuledger {
namespace {

using namespace testing;

ModelConfig with_layers(const char* name, int64_t layers) {
  ModelConfig m = load_model(name);
  m.layers = layers;
  return m;
}

Layout pp_layout(int64_t dp, int zero = 0) {
  Layout l;
  l.dp = dp;
  l.pp = world_size() / dp;
  l.zero = zero;
  return l;
}

struct PipeCase {
  Schedule schedule;
  int64_t m;
};

class Pipeline : public ::testing::TestWithParam<PipeCase> {};

TEST_P(Pipeline, LlamaMatchesOneRank) {
  const auto& c = GetParam();
  check_layout(with_layers("tiny-llama", 4), small_run(c.m, c.schedule), pp_layout(1), 2, Tolerance{});
}

TEST_P(Pipeline, GptTiedMatchesOneRank) {
  const auto& c = GetParam();
  check_layout(with_layers("tiny-gpt", 4), small_run(c.m, c.schedule), pp_layout(1), 2, Tolerance{});
}

INSTANTIATE_TEST_SUITE_P(Schedules, Pipeline,
                         ::testing::Values(PipeCase{Schedule::kGPipe, 1}, PipeCase{Schedule::kGPipe, 2},
                                           PipeCase{Schedule::kGPipe, 4}, PipeCase{Schedule::k1F1B, 1},
                                           PipeCase{Schedule::k1F1B, 2}, PipeCase{Schedule::k1F1B, 4}),
                         [](const auto& info) {
                           return std::string(schedule_name(info.param.schedule)) + "_m" + std::to_string(info.param.m);
                         });

// dp 2 × pp 2 (np 4 only): data and pipeline together, tied embeddings.
TEST(PipelineMixed, Dp2Pp2GptMatchesOneRank) {
  if (world_size() != 4) GTEST_SKIP() << "needs 4 ranks";
  check_layout(with_layers("tiny-gpt", 2), small_run(2, Schedule::k1F1B), pp_layout(2), 2, Tolerance{});
}

// Large messages (b·s·h·e = 4·64·64·4 = 64 KiB, past any eager limit) under
// 1F1B: the ranks' point-to-point programs (parallel/pp/p2p.h) must not deadlock.
TEST(PipelineLarge, OneFOneBWithRendezvousMessages) {
  RunConfig r = small_run(4, Schedule::k1F1B);
  r.seq = 64;
  r.mbs = 4;
  check_layout(with_layers("tiny-llama", 4), r, pp_layout(1), 1, Tolerance{});
}

}  // namespace
}  // namespace gpuledger
