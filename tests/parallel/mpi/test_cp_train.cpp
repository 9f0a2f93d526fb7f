// Context parallelism on real ranks (models/transformer/context_ring.h): the
// sequence split over a ring of cp ranks (2 chunks each), flash attention over
// the ring, gradients averaged over the dp·cp ranks. Against one rank with the
// same global batch (tests/parallel/mpi/layout_check.h): the loss and gradient
// norm of every step within 1e-5 relative; every element of every parameter's
// first-step gradient within 1e-5 + 1e-4·|g| (fp32: the ring merges the
// attention's blocks and sums the gradients over ranks in another order than
// one rank's single pass); the weights after 3 AdamW steps as under TP
// (tp_tolerance: 0.1% of a tensor's elements may pass 1e-5, none 1e-4 — a
// gradient near 0 whose rounding differs moves its weight by up to lr, seen:
// one element of tiny-gpt's 16384 mlp_out weights at 4.5e-5 under cp 4); and each
// rank books what its meta simulation books (every account but workspace to
// the byte, the same calls and bytes per comm key, send@cp and recv@cp
// included). np 2: cp 2; np 4: cp 4, cp 2 × dp 2, cp 2 × pp 2 (1F1B, GPipe)
// cp 2 × pp 2 × vpp 2, and cp 2 × tp 2 with and without sp. tiny-gpt (learned
// positions) and tiny-llama (RoPE), seq 16 (cp 4: chunks of 2 tokens).
// Dropout 0: the attention's dropout is drawn at the tokens' positions in the
// whole sequence (the same as one rank), the hidden-sized dropouts per rank.
#include <gtest/gtest.h>

#include "layout_check.h"

namespace gpuledger {
namespace {

using namespace testing;

Layout cp_layout(int64_t cp) {
  Layout l;
  l.cp = cp;
  l.dp = world_size() / cp;
  return l;
}

RunConfig cp_run() {
  RunConfig r = small_run(2, Schedule::k1F1B);
  r.dropout = 0.0;
  r.attention = AttentionKind::kFlash;
  return r;
}

void check_cp(const char* model, int64_t cp) {
  const ModelConfig m = load_model(model);
  const Layout l = cp_layout(cp);
  check_layout(m, cp_run(), l, 3, tp_tolerance());
  EXPECT_GT(check_step_gradients(m, cp_run(), l, 1e-5, 1e-4), 0);
}

TEST(ContextParallel, LlamaRingOverEveryRank) { check_cp("tiny-llama", world_size()); }

TEST(ContextParallel, GptRingOverEveryRank) { check_cp("tiny-gpt", world_size()); }

// A MoE model over the ring (tiny-moe, ep 1): each cp rank routes its own
// tokens; the load-balancing loss's f_e counts are summed over cp, each
// rank's share of L_aux taken over the microbatch's b·s tokens, so losses,
// gradients and parameters equal one rank's; and DeepSeek-V3's sigmoid
// router with the expert bias and a first dense layer (3 layers), whose load
// counts sum over dp·cp. np 2: cp 2; np 4: cp 4 and cp 2 × dp 2.
TEST(ContextParallel, MoeRingMatchesOneRank) {
  check_cp("tiny-moe", world_size());
  ModelConfig m = load_model("tiny-moe");
  m.layers = 3;
  m.dense_layers = 1;
  m.router_bias = m.router_sigmoid = true;
  m.routed_scaling_factor = 2.5;
  check_layout(m, cp_run(), cp_layout(2), 3, tp_tolerance());
  EXPECT_GT(check_step_gradients(m, cp_run(), cp_layout(2), 1e-5, 1e-4), 0);
}

// np 4: rings of 2 in two data-parallel replicas (the gradient sum over 4 ranks).
TEST(ContextParallel, RingOfTwoTimesDataParallel) {
  if (world_size() < 4) GTEST_SKIP() << "needs 4 ranks";
  check_cp("tiny-llama", 2);
  check_cp("tiny-gpt", 2);
}

// np 4: cp 2 × pp 2 — each stage runs its own ring (ranks {0, 1} and
// {2, 3}), the pipeline's messages carry the s/cp tokens of the rank; 1F1B and
// GPipe, and the interleaved schedule with 2 chunks per stage (4 layers).
ModelConfig with_layers(const char* name, int64_t layers) {
  ModelConfig m = load_model(name);
  m.layers = layers;
  return m;
}

Layout cp_pp_layout(int64_t vpp) {
  Layout l;
  l.cp = 2;
  l.pp = 2;
  l.vpp = vpp;
  return l;
}

TEST(ContextParallel, RingOnEveryPipelineStage) {
  if (world_size() != 4) GTEST_SKIP() << "needs 4 ranks";
  for (const char* model : {"tiny-llama", "tiny-gpt"}) {
    SCOPED_TRACE(model);
    check_layout(with_layers(model, 2), cp_run(), cp_pp_layout(1), 3, tp_tolerance());
    RunConfig gpipe = cp_run();
    gpipe.schedule = Schedule::kGPipe;
    gpipe.microbatches = 3;
    check_layout(with_layers(model, 2), gpipe, cp_pp_layout(1), 2, tp_tolerance());
    EXPECT_GT(check_step_gradients(with_layers(model, 2), cp_run(), cp_pp_layout(1), 1e-5, 1e-4), 0);
  }
}

TEST(ContextParallel, RingOnEveryVirtualStage) {
  if (world_size() != 4) GTEST_SKIP() << "needs 4 ranks";
  for (const char* model : {"tiny-llama", "tiny-gpt"}) {
    SCOPED_TRACE(model);
    RunConfig r = cp_run();
    r.microbatches = 4;
    check_layout(with_layers(model, 4), r, cp_pp_layout(2), 3, tp_tolerance());
    EXPECT_GT(check_step_gradients(with_layers(model, 4), r, cp_pp_layout(2), 1e-5, 1e-4), 0);
  }
}

// np 4: cp 2 × tp 2 — each TP rank runs the ring on its K/V heads (tiny-llama
// one of its 2, tiny-gpt 2 of its 4) over the cp group of its TP coordinate;
// with sp the residual stream is the TP shard of the rank's s/cp tokens.
TEST(ContextParallel, RingBesideTensorParallelism) {
  if (world_size() != 4) GTEST_SKIP() << "needs 4 ranks";
  for (bool sp : {false, true})
    for (const char* model : {"tiny-llama", "tiny-gpt"}) {
      SCOPED_TRACE(std::string(model) + (sp ? " sp" : ""));
      Layout l;
      l.cp = 2;
      l.tp = 2;
      l.sp = sp;
      check_layout(load_model(model), cp_run(), l, 3, tp_tolerance());
      EXPECT_GT(check_step_gradients(load_model(model), cp_run(), l, 1e-5, 1e-4), 0);
    }
}

// ZeRO 1, 2 and 3 over the data-parallel group with cp (Megatron's
// distributed optimizer shards over data_parallel_group_with_cp): np 2 cp 2
// (dp 1: the shards are the ring's two ranks), np 4 cp 2 × dp 2 (4 shards).
// The weights (under ZeRO 3 each rank's shard) and, under ZeRO 2 and 3, every
// gradient shard of the first step against one rank's.
TEST(ContextParallel, ZeroShardsOverDpTimesCp) {
  for (int z : {1, 2, 3}) {
    SCOPED_TRACE("zero " + std::to_string(z));
    Layout l = cp_layout(2);
    l.zero = z;
    for (const char* model : {"tiny-llama", "tiny-gpt"}) {
      check_layout(load_model(model), cp_run(), l, 3, tp_tolerance());
      // ZeRO 2/3 hold the reduced gradient shards (ZeRO 1 reduce-scatters into
      // the optimizer's staging: its gradient buffer is not the sum)
      if (z >= 2) {
        EXPECT_GT(check_step_gradients(load_model(model), cp_run(), l, 1e-5, 1e-4), 0);
      }
    }
  }
}

// Selective and full recompute re-run the ring's forward in the backward (the
// budget counts the ring twice): the same model, and the meta simulation's counts.
TEST(ContextParallel, RecomputeRunsTheRingAgain) {
  for (Recompute rc : {Recompute::kSelective, Recompute::kFull}) {
    RunConfig r = cp_run();
    r.recompute = rc;
    check_layout(load_model("tiny-llama"), r, cp_layout(world_size()), 2, tp_tolerance());
  }
}

// bf16 storage: the ring's merged output and partial dK/dV sums are rounded to
// bf16 after every step, one rank's flash once — within the bf16 tolerance of
// the other layouts (layout_check.h bf16_tolerance).
TEST(ContextParallel, LlamaBf16WithinRounding) {
  RunConfig r = cp_run();
  r.dtype = DType::kBF16;
  check_layout(load_model("tiny-llama"), r, cp_layout(world_size()), 3, bf16_tolerance());
}

}  // namespace
}  // namespace gpuledger
