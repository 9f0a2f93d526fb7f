// Megatron-LM's published rows equal what Megatron's own code returns.
// The expectations are the output of scripts/megatron_reference.py, which runs
// Megatron's report_theoretical_memory and num_floating_point_operations
// (NVIDIA/Megatron-LM d98e8a64ddf34856e74b24714e3bedb2f5a39553) on these
// configurations: tests/analytic/megatron_reference.json. Two cases are also
// worked by hand with Megatron's expressions, in the comments.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "analytic/activations.h"
#include "analytic/flops.h"
#include "analytic/megatron.h"
#include "analytic/model_states.h"
#include "analytic/params.h"
#include "core/layout.h"
#include "core/model_config.h"
#include "core/run_config.h"

namespace gpuledger::analytic {
namespace {

// Megatron's floats are evaluated in Python in a different order of
// operations for some terms (integer products first): a relative 1e-12.
void expect_same(double ours, double megatron, const std::string& what) {
  EXPECT_NEAR(ours, megatron, 1e-12 * megatron) << what;
}

struct Case {
  ModelConfig m;
  Layout l;
  RunConfig r;
};

Case make_case(const std::string& model, int64_t tp, int64_t pp, int64_t dp, int64_t seq, int64_t mbs,
               int64_t microbatches) {
  Case c{load_model(model), Layout{}, RunConfig{}};
  c.l.tp = tp;
  c.l.pp = pp;
  c.l.dp = dp;
  c.r.seq = seq;
  c.r.mbs = mbs;
  c.r.microbatches = microbatches;
  return c;
}

double row(const std::vector<Published>& ps, const std::string& name) {
  for (const auto& p : ps) {
    if (p.name == name) {
      EXPECT_NE(p.source.find("d98e8a64"), std::string::npos) << name << ": " << p.source;
      return p.value;
    }
  }
  ADD_FAILURE() << "no row " << name;
  return 0;
}

// The rows of one case against report_theoretical_memory's weight+optimizer
// (plain and distributed), its activation figure, and num_floating_point_operations.
void expect_rows(Case c, double weights_plain, double weights_distributed, double activation, double flops) {
  c.l.zero = 0;
  expect_same(row(published_model_states(c.m, c.l, c.r, 0), "megatron_18"), weights_plain, "megatron_18");
  c.l.zero = 1;
  expect_same(row(published_model_states(c.m, c.l, c.r, 0), "megatron_distributed_optimizer"), weights_distributed,
              "megatron_distributed_optimizer");
  expect_same(row(published_activations(c.m, c.l, c.r, 0), "megatron_activation"), activation, "megatron_activation");
  expect_same(row(published_step_flops(c.m, c.l, c.r), "megatron_num_floating_point_operations"), flops,
              "megatron_num_floating_point_operations");
}

TEST(Megatron, Llama2_7bTp2Pp2Dp4) {
  // Weights (most loaded shard): TP-sharded per layer = attention 2h²(1 + 1)·1
  // + MLP 2h·f·3/2 = 33,554,432·2 + 135,266,304 = 202,375,168, × 32 =
  // 6,476,005,376; replicated = 2h·1 per layer × 32 + final h = 266,240;
  // embedding h·V' = 4096·32000 = 131,072,000 (V' a multiple of 256).
  // ((6,476,005,376/2 + 131,072,000)/2 + 266,240/2) = 1,684,670,464 params;
  // × 18 = 30,324,068,352; × (6 + 12/4) = 15,162,034,176.
  // Activation (no SP: compute_activation_memory_without_sp): sbh = 4096²;
  // sbh(10 + 24/2)·32 = 11,811,160,064; + 8·s·b·p = 65,536; + sbh·p =
  // 33,554,432; × min(1, 8/2) = 1; no output term (p > 1); × 1.05 =
  // 12,437,019,033.6.
  // FLOPs: B = 8·1·4 = 32; per token 6·h·f·3·L + 6·(h·3·4096 + 4096·h)·L +
  // 6·h·V' = 39,642,464,256; × B·s = 5,196,017,074,962,432; + B·s²·(6·4096/2·2)·L
  // = 422,212,465,065,984 → 5,618,229,540,028,416.
  const Case c = make_case("llama2-7b", 2, 2, 4, 4096, 1, 8);
  expect_rows(c, 30324068352.0, 15162034176.0, 12437019033.6, 5618229540028416.0);
  // The other stage: 6,476,005,376/4 + 266,240/2 = 1,619,134,464 params.
  Layout l = c.l;
  l.zero = 0;
  expect_same(row(published_model_states(c.m, l, c.r, l.rank(Coords{0, 0, 1})), "megatron_18"), 18.0 * 1'619'134'464,
              "other shard");
  // Megatron's activation describes the first stage only.
  for (const auto& p : published_activations(c.m, l, c.r, 1)) EXPECT_NE(p.name, "megatron_activation");
}

TEST(Megatron, Llama3_8bTp4SequenceParallelSelective) {
  // SP and selective recompute: compute_activation_memory (18 + 4f/h per layer, /t).
  Case c = make_case("llama3-8b", 4, 1, 2, 8192, 1, 4);
  c.l.sp = true;
  c.r.recompute = Recompute::kSelective;
  expect_rows(c, 36149207040.0, 24099471360.0, 9684664320.0, 3373576551923712.0);
}

TEST(Megatron, Gpt2LayerNormTied) {
  // Weights: attention 2·768²·2 = 2,359,296 + MLP 2·768·3072 = 4,718,592 per
  // layer, × 12 = 84,934,656; replicated 2·768·2 per layer × 12 + final 2·768
  // = 38,400; embedding 768·50,304 = 38,633,472 (tied: once) → 123,606,528
  // params × 18 = 2,224,917,504.
  // Activation (without SP, p = 1): sbh = 1024·4·768 = 3,145,728;
  // sbh·34·12 = 1,283,457,024; + 8·s·b = 32,768; + sbh = 3,145,728; + output
  // (s·b·V' + sbh)·2 = (206,045,184 + 3,145,728)·2 = 418,381,824 →
  // 1,705,017,344 × 1.05 = 1,790,268,211.2.
  const Case c = make_case("gpt2", 1, 1, 2, 1024, 4, 2);
  expect_rows(c, 2224917504.0, 1483278336.0, 1790268211.2, 13074954190848.0);
}

TEST(Megatron, PipelineWithFewerMicrobatchesThanStages) {
  // × min(1, m/p) = 2/4 on the layers and embedding terms.
  const Case c = make_case("llama2-7b", 1, 4, 1, 2048, 2, 2);
  expect_rows(c, 31502518272.0, 31502518272.0, 9618446745.6, 337945206718464.0);
}

TEST(Megatron, InterleavedScheduleFactor) {
  // 1 + (p − 1)/(p·v) = 1 + 3/8 with v = 2 virtual stages (this implementation
  // has no interleaved schedule: the published row never sets v).
  const Case c = make_case("llama2-7b", 1, 4, 1, 2048, 2, 8);
  MegatronActivationArgs a = megatron_activation_args(c.l, c.r);
  EXPECT_FALSE(a.virtual_stages.has_value());
  a.virtual_stages = 2;
  expect_same(megatron_activation_bytes(c.m, c.l, c.r, a), 26450728550.4, "interleaved");
}

TEST(Megatron, CurrentFlopsCodeIsTheCausalModelCount) {
  // Llama-2-7B at t = 1 (V = 32000 needs no padding): Megatron's count, with
  // its causal halving of QKᵀ and P·V, is this implementation's model_causal
  // exactly — two independent derivations of the same number.
  const Case c = make_case("llama2-7b", 1, 1, 1, 4096, 1, 1);
  EXPECT_DOUBLE_EQ(megatron_step_flops(c.m, c.l, c.r), job_step_flops(c.m, c.l, c.r).model_causal);
  EXPECT_DOUBLE_EQ(megatron_step_flops(c.m, c.l, c.r), 175'569'673'125'888.0);
}

// Megatron's MoE terms (compute_weight_and_optimizer_memory, d98e8a64) for
// mixtral-8x7b at TP 2, PP 4, DP 8 (world 64), EP 8, ETP 1, by hand:
//   attention 2·4096²·(1 + 8/32)·1 = 41,943,040; routed experts
//   2·4096·14336·8·3/2 = 1,409,286,144; router 4096·8 = 32,768; norms
//   2·4096 = 8192; final norm 4096; embedding 4096·32000 (32000 is a multiple
//   of 128·2) = 131,072,000; 32 layers, all MoE, no shared experts.
//   TP-sharded (stage 0): (32·41,943,040/4 + 131,072,000)/2 = 233,308,160
//   replicated: (32·(8192 + 32,768) + 4096)/4 = 328,704
//   expert-sharded: (32·1,409,286,144/4)/(1·8) = 1,409,286,144
//   expert DP = 64/(1·8·4) = 2
//   18 B/param: (233,308,160 + 328,704)·18 + 1,409,286,144·18 = 29,572,614,144
//   distributed: 233,636,864·(6 + 12/8) + 1,409,286,144·(6 + 12/2) = 18,663,710,208
// Megatron's own function returns the same two figures for these arguments
// (scripts/megatron_reference.py's loader, num_experts 8, moe_ffn_hidden_size
// 14336, moe_layer_freq 1, expert_model_parallel_size 8, expert_tensor_parallel_size 1).
TEST(Megatron, MixtralMoeTermsAtExpertParallelEight) {
  Case c = make_case("mixtral-8x7b", 2, 4, 8, 4096, 1, 8);
  const MegatronExpertLayout ep8{8, 1};
  const MegatronShardParams s = megatron_shard_params(c.m, c.l, 0, ep8);
  EXPECT_EQ(s.tp_sharded, 233'308'160.0);
  EXPECT_EQ(s.replicated, 328'704.0);
  EXPECT_EQ(s.expert_sharded, 1'409'286'144.0);
  EXPECT_EQ(megatron_weight_and_optimizer_bytes(c.m, c.l, 0, false, ep8), 29'572'614'144.0);
  EXPECT_EQ(megatron_weight_and_optimizer_bytes(c.m, c.l, 0, true, ep8), 18'663'710'208.0);
  // Other shards (stage 1): no embedding; 32·41,943,040/8 = 167,772,160 TP-sharded
  const MegatronShardParams o = megatron_shard_params(c.m, c.l, 1, ep8);
  EXPECT_EQ(o.tp_sharded, 167'772'160.0);
  EXPECT_EQ(o.expert_sharded, 1'409'286'144.0);
  // Without --expert-model-parallel-size: EP 1, ETP = TP 2 (arguments.py),
  // expert DP 64/(2·1·4) = 8: experts 32·1,409,286,144/(4·2) = 5,637,144,576
  // per shard, 18·(233,636,864 + 5,637,144,576) = 105,674,065,920 (Megatron's figure too)
  EXPECT_EQ(megatron_shard_params(c.m, c.l, 0).expert_sharded, 5'637'144'576.0);
  EXPECT_EQ(megatron_weight_and_optimizer_bytes(c.m, c.l, 0, false), 105'674'065'920.0);
  EXPECT_EQ(megatron_weight_and_optimizer_bytes(c.m, c.l, 0, true), 44'030'860'800.0);
  // On one rank the shard is the whole model: Megatron's count at this commit
  // (router included) equals ours, 46,702,792,704 (docs/formulas/moe.md).
  Case one = make_case("mixtral-8x7b", 1, 1, 1, 4096, 1, 1);
  EXPECT_EQ(megatron_shard_params(one.m, one.l, 0).total(), 46'702'792'704.0);
}

// DeepSeek's first dense layers: Megatron's --moe-layer-freq "([0]*1+[1]*2)"
// gives num_dense_layers 1, num_moe_layers 2. tiny-moe at 3 layers, the first
// dense (h 32, a 4, g 2, d 8, ffn 48, E 4, f_e 24, one shared of 16, V 97
// padded to 128), by hand with Megatron's expressions at t = p = 1:
//   attention 2·32·32·(1 + 2/4) = 3072, dense MLP 2·32·48·3/2 = 4608,
//   shared 2·32·16·3/2 = 1536, routed 2·32·24·4·3/2 = 9216, router 128,
//   layernorm 64, final 32, embedding 32·128 = 4096
//   tp-sharded (3072 + 4608)·1 + (3072 + 1536)·2 + 4096 + 4096 (untied) = 25,088
//   replicated 64·1 + (64 + 128)·2 + 32 = 480; expert-sharded 9216·2 = 18,432
// 44,000 in all: our count 42,016 plus the padded rows 2·31·32 = 1,984.
TEST(Megatron, FirstDenseLayersCountTheDenseMlp) {
  ModelConfig m = load_model("tiny-moe");
  m.layers = 3;
  m.dense_layers = 1;
  const MegatronShardParams s = megatron_shard_params(m, Layout{}, 0);
  EXPECT_EQ(s.tp_sharded, 25'088.0);
  EXPECT_EQ(s.replicated, 480.0);
  EXPECT_EQ(s.expert_sharded, 18'432.0);
  EXPECT_EQ(model_params(m), 42'016);
}

TEST(Megatron, PaddedVocabularyAtEveryTensorParallelSize) {
  EXPECT_EQ(megatron_padded_vocab(50257, 1), 50304);
  EXPECT_EQ(megatron_padded_vocab(32000, 2), 32000);
  EXPECT_EQ(megatron_padded_vocab(32000, 3), 32256);
  EXPECT_EQ(megatron_padded_vocab(97, 1), 128);
}

}  // namespace
}  // namespace gpuledger::analytic
