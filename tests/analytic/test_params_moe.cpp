// Parameter counts of mixture-of-experts models: total and active, against
// the published figures and against a count written out here independently
// of analytic/params.cpp.
#include <gtest/gtest.h>

#include "analytic/params.h"
#include "core/layout.h"
#include "core/model_config.h"

namespace gpuledger::analytic {
namespace {

// A llama MoE layer written out: norms 2h, QKV h·(a+2k)·d, out a·d·h, QK norm
// 2d, router E·h, each expert 3·h·f_e, each shared expert 3·h·f_s.
struct HandCount {
  int64_t total, active;
};
HandCount hand_count(const ModelConfig& m) {
  const int64_t h = m.hidden, d = m.head_dim;
  const int64_t attn = 2 * h + h * (m.heads + 2 * m.kv_heads) * d + m.heads * d * h + (m.qk_norm ? 2 * d : 0);
  const int64_t expert = 3 * h * m.expert_ffn, shared = m.shared_experts * 3 * h * m.shared_expert_ffn;
  const int64_t router = m.num_experts * h;
  const int64_t outer = m.vocab * h * (m.tied_embeddings ? 1 : 2) + h;
  return {m.layers * (attn + router + shared + m.num_experts * expert) + outer,
          m.layers * (attn + router + shared + m.experts_per_token * expert) + outer};
}

// Mixtral 8x7B: 46,702,792,704 parameters (the safetensors metadata's total;
// Jiang et al. 2024 "47B total, 13B active"); active worked out by hand:
// per layer attention 41,943,040 + norms 8,192 + router 32,768 + 2 experts
// 352,321,536 = 394,305,536; × 32 + embeddings and head 262,144,000 + final norm 4,096.
TEST(MoeParams, MixtralPublished) {
  const ModelConfig m = load_model("mixtral-8x7b");
  EXPECT_EQ(model_params(m), 46'702'792'704);
  EXPECT_EQ(active_params(m), 12'879'925'248);
  EXPECT_EQ(hand_count(m).total, model_params(m));
  EXPECT_EQ(hand_count(m).active, active_params(m));
}

// Qwen3-30B-A3B: model card "30.5B total, 3.3B activated"; exactly, from its
// config.json: per layer attention 18,874,368 + QK norm 256 + norms 4,096 +
// router 262,144 + 128 experts × 4,718,592; × 48 + 2·151,936·2,048 + 2,048.
TEST(MoeParams, Qwen3Computed) {
  const ModelConfig m = load_model("qwen3-30b-a3b");
  EXPECT_EQ(model_params(m), 30'532'122'624);
  EXPECT_EQ(active_params(m), 3'353'032'704);
  EXPECT_EQ(hand_count(m).total, model_params(m));
  EXPECT_EQ(hand_count(m).active, active_params(m));
}

TEST(MoeParams, SharedExpertsAreAlwaysActive) {
  const ModelConfig m = load_model("tiny-moe");
  // h 32, d 8, a 4, k 2, E 4, top-2, f_e 24, one shared expert f_s 16, V 97 untied:
  // attention: norms 2·32 + QKV 32·(4+2·2)·8 + out 4·8·32 = 64 + 2048 + 1024 = 3136;
  // router 128; shared 3·32·16 = 1536; expert 3·32·24 = 2304.
  const int64_t attn = 3136, router = 128, shared = 1536, expert = 2304, outer = 2 * 97 * 32 + 32;
  EXPECT_EQ(model_params(m), 2 * (attn + router + shared + 4 * expert) + outer);
  EXPECT_EQ(active_params(m), 2 * (attn + router + shared + 2 * expert) + outer);
  EXPECT_EQ(active_params(load_model("tiny-llama")), model_params(load_model("tiny-llama")));
}

TEST(MoeParams, TensorNamesAndUnitSums) {
  const ModelConfig m = load_model("tiny-moe");
  Layout one;
  const auto units = rank_param_units(m, one, 0);
  int64_t sum = 0;
  bool router = false, experts_down = false, shared_up = false;
  for (const auto& u : units) {
    sum += u.elems();
    for (const auto& t : u.tensors) {
      router |= t.name == "layers.1.moe.router.weight" && t.elems == 4 * 32;
      experts_down |= t.name == "layers.0.moe.experts.down.weight" && t.elems == 4 * 24 * 32;
      shared_up |= t.name == "layers.0.moe.shared.up.weight" && t.elems == 16 * 32;
      EXPECT_EQ(t.name.find("mlp_"), std::string::npos) << t.name;  // no dense MLP in a MoE layer
    }
  }
  EXPECT_TRUE(router);
  EXPECT_TRUE(experts_down);
  EXPECT_TRUE(shared_up);
  EXPECT_EQ(sum, model_params(m));
  // DeepSpeed's largest module: Mixtral's stacked expert matrix E·f_e·h, above the embedding V·h.
  EXPECT_EQ(largest_layer_params(load_model("mixtral-8x7b")), 8LL * 14336 * 4096);
}

// Expert parallelism, Mixtral 8x7B at dp 64, ep 8: each rank holds one of the
// 8 experts per layer (176,160,768 = 3·4096·14336 parameters), the router,
// attention, norms, embedding and head whole. Per layer 41,943,040 + 8,192 +
// 32,768 + 176,160,768 = 218,144,768; × 32 + 2·32000·4096 + 4096 =
// 7,242,780,672 on every rank, of which 32·176,160,768 = 5,637,144,576 are
// expert-sharded (their gradients summed over the 8 ranks of the
// expert-data-parallel group). At ep 1 nothing is flagged.
TEST(MoeParams, ExpertParallelShardsTheRoutedExperts) {
  const ModelConfig m = load_model("mixtral-8x7b");
  Layout l;
  l.dp = 64;
  l.ep = 8;
  for (int64_t rank : {0, 9, 63}) {
    EXPECT_EQ(rank_params(m, l, rank), 7'242'780'672) << rank;
    int64_t expert = 0;
    for (const auto& u : rank_param_units(m, l, rank)) expert += u.expert_sharded_elems();
    EXPECT_EQ(expert, 5'637'144'576) << rank;
  }
  EXPECT_EQ(layer_params(m, 1, 8), 218'144'768);
  l.ep = 1;
  EXPECT_EQ(rank_params(m, l, 0), 46'702'792'704);
  for (const auto& u : rank_param_units(m, l, 0)) EXPECT_EQ(u.expert_sharded_elems(), 0) << u.name;
}

}  // namespace
}  // namespace gpuledger::analytic
