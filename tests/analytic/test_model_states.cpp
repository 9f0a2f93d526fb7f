// Model-state bytes: the ZeRO paper's worked example, exact per-account bytes
// for a tiny model counted by hand at every ZeRO stage, fp32 mode, fp32
// gradients and ZeRO-3 prefetch, and the Megatron/DeepSpeed estimators.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <tuple>

#include "analytic/model_states.h"
#include "core/layout.h"
#include "core/model_config.h"

namespace gpuledger::analytic {
namespace {

std::map<std::string, double> by_name(const std::vector<Published>& ps) {
  std::map<std::string, double> m;
  for (const auto& p : ps) {
    EXPECT_FALSE(p.source.empty()) << p.name;
    m[p.name] = p.value;
  }
  return m;
}

// Rajbhandari et al. 2020, Figure 1: Ψ = 7.5B, Nd = 64, K = 12:
// 120 GB, 31.4 GB, 16.6 GB, 1.9 GB (1.875).
TEST(ZeroPaper, Figure1Example) {
  const double psi = 7.5e9;
  EXPECT_DOUBLE_EQ(zero_paper_bytes(psi, 0, 64), 120e9);
  EXPECT_DOUBLE_EQ(zero_paper_bytes(psi, 1, 64), 31.40625e9);
  EXPECT_DOUBLE_EQ(zero_paper_bytes(psi, 2, 64), 16.640625e9);
  EXPECT_DOUBLE_EQ(zero_paper_bytes(psi, 3, 64), 1.875e9);
  // As printed in the paper (one decimal).
  EXPECT_NEAR(zero_paper_bytes(psi, 1, 64) / 1e9, 31.4, 0.05);
  EXPECT_NEAR(zero_paper_bytes(psi, 2, 64) / 1e9, 16.6, 0.05);
  EXPECT_NEAR(zero_paper_bytes(psi, 3, 64) / 1e9, 1.9, 0.05);
}

// tiny-llama on one stage: units embedding 97·64 = 6208, two layers of 46,208,
// head 64 + 6208 = 6272; P_r = 104,896.
struct Tiny {
  ModelConfig m = load_model("tiny-llama");
  Layout l;
  RunConfig r;
  Tiny(int64_t dp, int zero) {
    l.dp = dp;
    l.zero = zero;
  }
  AccountBytes bytes(int64_t rank = 0) const { return model_state_bytes(m, l, r, rank); }
};

constexpr int64_t kP = 104'896;

TEST(ModelStates, Zero0Bf16) {
  Tiny t(2, 0);
  const auto b = t.bytes();
  EXPECT_EQ(b[Account::kWeights], 2 * kP);
  EXPECT_EQ(b[Account::kGrads], 2 * kP);
  EXPECT_EQ(b[Account::kMaster], 4 * kP);
  EXPECT_EQ(b[Account::kOptim], 8 * kP);
  EXPECT_EQ(b.device_total(), 16 * kP);  // 16Ψ
  EXPECT_EQ(b[Account::kActivations], 0);
}

// dp 3 pads each unit: ⌈6208/3⌉ + 2·⌈46208/3⌉ + ⌈6272/3⌉ = 2070 + 2·15403 + 2091.
constexpr int64_t kS3 = 2070 + 15403 + 15403 + 2091;  // 34,967

TEST(ModelStates, Zero1ShardsMasterAndOptim) {
  Tiny t(3, 1);
  const auto b = t.bytes(1);
  EXPECT_EQ(b[Account::kWeights], 2 * kP);
  EXPECT_EQ(b[Account::kGrads], 2 * kP);
  EXPECT_EQ(b[Account::kMaster], 4 * kS3);
  EXPECT_EQ(b[Account::kOptim], 8 * kS3);
}

// ZeRO with experts (docs/formulas/moe.md "ZeRO with experts"): Mixtral-8x7B
// at ep 8 holds one expert per layer (176,160,768 elements, 32 layers:
// X = 5,637,144,576) and 1,605,636,096 dense elements (the embedding
// 131,072,000, 32 layers of 41,984,000, the head 131,076,096). The dense
// units shard over dp, the experts over dp/ep:
//   dp 16: 8,192,000 + 32·2,624,000 + 8,192,256 = 100,352,256 dense and
//          32·88,080,384 = 2,818,572,288 expert elements → S_r = 2,918,924,544;
//   dp 8 (dp/ep = 1: the experts not sharded): 200,704,512 + 5,637,144,576 = 5,837,849,088.
TEST(ModelStates, MixtralExpertsShardOverTheExpertDataParallelGroup) {
  const ModelConfig m = load_model("mixtral-8x7b");
  RunConfig r;
  r.dtype = DType::kBF16;
  r.grad_dtype = DType::kBF16;
  const int64_t p_r = 7242780672;
  for (auto [dp, zero, s_r] : {std::tuple{16, 1, int64_t{2918924544}}, {8, 2, int64_t{5837849088}}}) {
    Layout l;
    l.dp = dp;
    l.ep = 8;
    l.zero = zero;
    const AccountBytes b = model_state_bytes(m, l, r, 0);
    EXPECT_EQ(b[Account::kWeights], 2 * p_r) << "dp " << dp;
    EXPECT_EQ(b[Account::kGrads], 2 * (zero >= 2 ? s_r : p_r)) << "dp " << dp;
    EXPECT_EQ(b[Account::kMaster], 4 * s_r) << "dp " << dp;
    EXPECT_EQ(b[Account::kOptim], 8 * s_r) << "dp " << dp;
  }
}

// One fp32 state for SGD (momentum buffer), Adagrad (sum of squared
// gradients) and Lion (momentum): 4 bytes per element where AdamW keeps 8,
// so 12Ψ in bf16 mixed precision, and SGD without momentum keeps none (8Ψ).
TEST(ModelStates, OptimizerStatesPerOptimizer) {
  for (auto [opt, momentum, state] : {std::tuple{OptimizerKind::kAdamW, 0.9, 8},
                                      {OptimizerKind::kSGD, 0.9, 4},
                                      {OptimizerKind::kSGD, 0.0, 0},
                                      {OptimizerKind::kAdagrad, 0.9, 4},
                                      {OptimizerKind::kLion, 0.9, 4}}) {
    SCOPED_TRACE(std::string(optimizer_name(opt)) + " momentum " + std::to_string(momentum));
    Tiny t(3, 0);
    t.r.optimizer = opt;
    t.r.momentum = momentum;
    EXPECT_EQ(optimizer_state_bytes_per_param(t.r), state);
    auto b = t.bytes();
    EXPECT_EQ(b[Account::kOptim], state * kP);
    EXPECT_EQ(b.device_total(), (8 + state) * kP);
    for (int zero : {1, 2, 3}) {  // sharded as the master is
      t.l.zero = zero;
      b = t.bytes(1);
      EXPECT_EQ(b[Account::kOptim], state * kS3) << "zero " << zero;
      EXPECT_EQ(b[Account::kMaster], 4 * kS3) << "zero " << zero;
    }
  }
}

TEST(ModelStates, Zero2ShardsGrads) {
  Tiny t(3, 2);
  const auto b = t.bytes(2);
  EXPECT_EQ(b[Account::kWeights], 2 * kP);
  EXPECT_EQ(b[Account::kGrads], 2 * kS3);
  EXPECT_EQ(b[Account::kMaster], 4 * kS3);
  EXPECT_EQ(b[Account::kOptim], 8 * kS3);
}

TEST(ModelStates, Zero3GatheredUnitsWithPrefetch) {
  Tiny t(3, 3);
  // Gathered unit buffers e·n·⌈P_u/n⌉ = 2·3·(2070, 15403, 15403, 2091)
  //                                   = 12420, 92418, 92418, 12546.
  t.r.prefetch = 1;  // two consecutive units: the two layers
  auto b = t.bytes();
  EXPECT_EQ(b[Account::kWeights], 2 * kS3 + 92418 + 92418);
  EXPECT_EQ(b[Account::kGrads], 2 * kS3);
  EXPECT_EQ(b[Account::kMaster], 4 * kS3);
  EXPECT_EQ(b[Account::kOptim], 8 * kS3);

  t.r.prefetch = 0;  // one unit at a time
  EXPECT_EQ(t.bytes()[Account::kWeights], 2 * kS3 + 92418);
  t.r.prefetch = 2;  // three units: embedding + 2 layers or 2 layers + head
  EXPECT_EQ(t.bytes()[Account::kWeights], 2 * kS3 + 92418 + 92418 + 12546);
  t.r.prefetch = 9;  // more than there are: all four
  EXPECT_EQ(t.bytes()[Account::kWeights], 2 * kS3 + 12420 + 92418 + 92418 + 12546);
}

TEST(ModelStates, Zero3OverOneRankGathersNothing) {
  // n = 1: the shard of every unit is the whole unit and there is no other rank
  // to gather from: weights e·P_r, as under ZeRO 0, whatever --prefetch says.
  for (int64_t prefetch : {0, 2, 9}) {
    Tiny t(1, 3);
    t.r.prefetch = prefetch;
    const auto b = t.bytes();
    EXPECT_EQ(b[Account::kWeights], 2 * kP) << prefetch;
    EXPECT_EQ(b[Account::kGrads], 2 * kP);
    EXPECT_EQ(b[Account::kMaster], 4 * kP);
    EXPECT_EQ(b[Account::kOptim], 8 * kP);
  }
  // The same on a tensor- and pipeline-parallel layout with dp = 1.
  ModelConfig m = load_model("tiny-llama");
  Layout l;
  l.tp = 2;
  l.pp = 2;
  RunConfig r;
  for (int64_t rank = 0; rank < l.world(); ++rank) {
    l.zero = 3;
    const int64_t z3 = model_state_bytes(m, l, r, rank)[Account::kWeights];
    l.zero = 0;
    EXPECT_EQ(z3, model_state_bytes(m, l, r, rank)[Account::kWeights]) << rank;
  }
}

TEST(ModelStates, Fp32HasNoMasterAndFp32Grads) {
  Tiny t(2, 0);
  t.r.dtype = DType::kFP32;
  t.r.grad_dtype = DType::kBF16;  // ignored: fp32 training has fp32 gradients
  const auto b = t.bytes();
  EXPECT_EQ(b[Account::kWeights], 4 * kP);
  EXPECT_EQ(b[Account::kGrads], 4 * kP);
  EXPECT_EQ(b[Account::kMaster], 0);
  EXPECT_EQ(b[Account::kOptim], 8 * kP);
}

TEST(ModelStates, GradFp32WithBf16Weights) {
  Tiny t(2, 2);
  t.r.grad_dtype = DType::kFP32;  // Megatron's main_grad
  // dp 2: ⌈·/2⌉ = 3104, 23104, 23104, 3136.
  const int64_t s2 = 3104 + 23104 + 23104 + 3136;
  const auto b = t.bytes();
  EXPECT_EQ(b[Account::kWeights], 2 * kP);
  EXPECT_EQ(b[Account::kGrads], 4 * s2);
  EXPECT_EQ(b[Account::kMaster], 4 * s2);
  EXPECT_EQ(b[Account::kOptim], 8 * s2);
}

TEST(ModelStates, PipelineStageHoldsItsUnits) {
  // tiny-llama, pp 2, tp 2, dp 2, ZeRO 1. Last stage: layer 1 at t = 2
  // (23,168) + head (norm 64 + V'/t·h = 128·64) → P_r = 31,424, S_r = 11584 + 4128.
  ModelConfig m = load_model("tiny-llama");
  Layout l;
  l.dp = 2;
  l.tp = 2;
  l.pp = 2;
  l.zero = 1;
  RunConfig r;
  const auto b = model_state_bytes(m, l, r, 4);  // rank 4: tp 0, dp 0, pp 1
  EXPECT_EQ(b[Account::kWeights], 2 * 31424);
  EXPECT_EQ(b[Account::kGrads], 2 * 31424);
  EXPECT_EQ(b[Account::kMaster], 4 * (11584 + 4128));
  EXPECT_EQ(b[Account::kOptim], 8 * (11584 + 4128));
}

// Tied embeddings with p > 1 under ZeRO 2/3 (dp 2): the word's unit keeps its
// whole gradient, g·n·⌈P_u/n⌉, beside the shards until its deferred
// reduce-scatter. tiny-gpt, 4 layers, pp 2: a layer holds 49,984; stage 0 the
// embedding 97·64 + 64·64 = 10,304 and 2 layers (S_r = 5152 + 49,984), stage
// 1 2 layers and the head 64 + 64 + 97·64 = 6336 (S_r = 3168 + 49,984).
TEST(ModelStates, TiedAcrossStagesHoldsTheWordUnitsGradient) {
  ModelConfig m = load_model("tiny-gpt");
  m.layers = 4;
  Layout l;
  l.dp = 2;
  l.pp = 2;
  RunConfig r;  // bf16 gradients
  for (int zero : {2, 3}) {
    l.zero = zero;
    EXPECT_EQ(model_state_bytes(m, l, r, l.rank({0, 0, 0}))[Account::kGrads], 2 * (5152 + 49984) + 2 * 10304);
    EXPECT_EQ(model_state_bytes(m, l, r, l.rank({1, 0, 1}))[Account::kGrads], 2 * (3168 + 49984) + 2 * 6336);
    EXPECT_EQ(model_state_bytes(m, l, r, l.rank({0, 0, 0}))[Account::kMaster], 4 * (5152 + 49984));
  }
  l.zero = 1;  // ZeRO 1 holds every unit's whole gradient anyway
  EXPECT_EQ(model_state_bytes(m, l, r, 0)[Account::kGrads], 2 * (10304 + 2 * 49984));
  m.tied_embeddings = false;  // untied: the head's own output matrix, no deferral
  l.zero = 2;
  EXPECT_EQ(model_state_bytes(m, l, r, l.rank({0, 0, 0}))[Account::kGrads], 2 * (5152 + 49984));
}

// ZeRO 3 with interleaved stages: a pass runs one chunk, and the prefetch
// window stops at the chunk's last unit. tiny-llama, 4 layers, dp 2 × pp 2,
// vpp 2, --prefetch 1: stage 0 holds the embedding 6208 and layer 0 (chunk
// 0), layer 2 (chunk 1), 46,208 each. Windows {embedding, layer 0},
// {layer 0}, {layer 2} — not {layer 0, layer 2}: 2·(6208 + 46,208) gathered.
TEST(ModelStates, Zero3InterleavedWindowsStayInTheChunk) {
  ModelConfig m = load_model("tiny-llama");
  m.layers = 4;
  Layout l;
  l.dp = 2;
  l.pp = 2;
  l.vpp = 2;
  l.zero = 3;
  RunConfig r;
  r.microbatches = 2;
  r.prefetch = 1;
  const int64_t s_r = (6208 + 46208 + 46208) / 2;
  EXPECT_EQ(model_state_bytes(m, l, r, 0)[Account::kWeights], 2 * s_r + 2 * (6208 + 46208));
  r.prefetch = 0;
  EXPECT_EQ(model_state_bytes(m, l, r, 0)[Account::kWeights], 2 * s_r + 2 * 46208);
  l.vpp = 1;  // one chunk: layers 0 and 1 in one window
  r.prefetch = 1;
  EXPECT_EQ(model_state_bytes(m, l, r, 0)[Account::kWeights], 2 * s_r + 2 * (46208 + 46208));
}

TEST(PublishedModelStates, Llama2_7bDp8) {
  const ModelConfig m = load_model("llama2-7b");
  const double psi = 6'738'415'616.0;
  RunConfig r;
  Layout l;
  l.dp = 8;

  l.zero = 0;
  auto p = by_name(published_model_states(m, l, r, 0));
  EXPECT_DOUBLE_EQ(p.at("mixed_precision_16psi"), 16 * psi);
  // Megatron: no biases in Llama, V = 32000 is a multiple of 128, untied with
  // p = 1 adds the output layer → its count equals Ψ: 18Ψ.
  EXPECT_DOUBLE_EQ(p.at("megatron_18"), 18 * psi);
  EXPECT_EQ(p.count("zero1"), 0u);

  l.zero = 1;
  p = by_name(published_model_states(m, l, r, 0));
  EXPECT_DOUBLE_EQ(p.at("zero1"), 4 * psi + 12 * psi / 8);
  EXPECT_DOUBLE_EQ(p.at("megatron_distributed_optimizer"), (6 + 12.0 / 8) * psi);
  EXPECT_EQ(p.count("megatron_18"), 0u);

  l.zero = 2;
  p = by_name(published_model_states(m, l, r, 0));
  EXPECT_DOUBLE_EQ(p.at("zero2"), 2 * psi + 14 * psi / 8);
  // DeepSpeed stage_1_and_2.py, cpu_offload=False: 2P + int(18P/N);
  // 18 · 6,738,415,616 / 8 = 15,161,435,136 exactly.
  EXPECT_DOUBLE_EQ(p.at("deepspeed_zero2"), 2 * psi + 15'161'435'136.0);

  l.zero = 3;
  p = by_name(published_model_states(m, l, r, 0));
  EXPECT_DOUBLE_EQ(p.at("zero3"), 16 * psi / 8);
  // DeepSpeed stage3.py: 4·largest_layer + int(18P/N); largest module: the
  // 32000 × 4096 embedding.
  EXPECT_DOUBLE_EQ(p.at("deepspeed_zero3"), 4.0 * 131'072'000 + 15'161'435'136.0);
}

// Another optimizer: the ZeRO paper's rows with its K (4 + the state bytes:
// 8 for SGD), and no Adam-only rows (Megatron, DeepSpeed).
TEST(PublishedModelStates, Llama2_7bSgdUsesItsOwnK) {
  const ModelConfig m = load_model("llama2-7b");
  const double psi = 6'738'415'616.0;
  RunConfig r;
  r.optimizer = OptimizerKind::kSGD;
  Layout l;
  l.dp = 8;
  auto p = by_name(published_model_states(m, l, r, 0));
  EXPECT_DOUBLE_EQ(p.at("mixed_precision_16psi"), 12 * psi);
  EXPECT_EQ(p.count("megatron_18"), 0u);
  EXPECT_DOUBLE_EQ(model_state_bytes(m, l, r, 0).device_total(), 12 * psi);
  l.zero = 2;
  p = by_name(published_model_states(m, l, r, 0));
  EXPECT_DOUBLE_EQ(p.at("zero2"), 2 * psi + 10 * psi / 8);
  EXPECT_EQ(p.count("deepspeed_zero2"), 0u);
}

TEST(PublishedModelStates, MegatronCountsItsOwnWay) {
  // GPT-2 at t = p = 1: Megatron ignores linear biases and pads V to 50,304.
  // layer = 2h(f + 2) + 2h²·(1 + 1)·1 = 2·768·3074 + 4·768² = 7,080,960;
  // block = 12·layer + 2h = 84,973,056; embedding = 768·50,304 = 38,633,472
  // (tied: counted once) → 123,606,528 params × 18.
  const ModelConfig g = load_model("gpt2");
  RunConfig r;
  auto p = by_name(published_model_states(g, Layout{}, r, 0));
  EXPECT_DOUBLE_EQ(p.at("megatron_18"), 18.0 * 123'606'528);

  // Llama-2-7B, tp 2, pp 2: V' = 32000 (a multiple of 256). Megatron's current
  // code splits the block: TP-sharded (attention 2h²·2 + MLP 2h·f·3/2) per layer
  // = 202,375,168, × 32 = 6,476,005,376; replicated (2 RMSNorms 2h per layer,
  // + final norm h) = 32·8192 + 4096 = 266,240, divided by p but not by t.
  // First stage: (6,476,005,376/2 + 131,072,000)/2 + 266,240/2 = 1,684,670,464;
  // other stage: 6,476,005,376/4 + 133,120 = 1,619,134,464.
  const ModelConfig m = load_model("llama2-7b");
  Layout l;
  l.tp = 2;
  l.pp = 2;
  p = by_name(published_model_states(m, l, r, 0));
  EXPECT_DOUBLE_EQ(p.at("megatron_18"), 18.0 * 1'684'670'464);
  p = by_name(published_model_states(m, l, r, 2));  // stage 1
  EXPECT_DOUBLE_EQ(p.at("megatron_18"), 18.0 * 1'619'134'464);
}

TEST(PublishedModelStates, MegatronRowOnlyWhereItDescribesTheRun) {
  // ZeRO 0: 18 bytes/param; ZeRO 1: the distributed optimizer (shards like
  // ZeRO 1); ZeRO 2 and 3 shard more than either, so neither row is printed.
  for (int zero = 0; zero <= 3; ++zero) {
    Tiny t(2, zero);
    auto p = by_name(published_model_states(t.m, t.l, t.r, 0));
    EXPECT_EQ(p.count("megatron_18"), zero == 0 ? 1u : 0u) << zero;
    EXPECT_EQ(p.count("megatron_distributed_optimizer"), zero == 1 ? 1u : 0u) << zero;
  }
}

TEST(PublishedModelStates, DeepSpeedZero3TinyLargestModule) {
  // tiny-llama dp 2: largest module = one SwiGLU projection 64·176 = 11,264;
  // int(18 · 104,896 / 2) = 944,064.
  Tiny t(2, 3);
  auto p = by_name(published_model_states(t.m, t.l, t.r, 0));
  EXPECT_DOUBLE_EQ(p.at("deepspeed_zero3"), 4.0 * 11264 + 944'064);
  EXPECT_DOUBLE_EQ(p.at("zero3"), 16.0 * kP / 2);
}

}  // namespace
}  // namespace gpuledger::analytic
