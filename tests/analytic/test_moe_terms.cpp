// The MoE budget terms (analytic/moe.h) worked by hand: capacity, the
// capacity-bound rows, the saved bytes, the FLOPs, 6·N_active.
#include <gtest/gtest.h>

#include "analytic/moe.h"
#include "analytic/params.h"
#include "core/model_config.h"

namespace gpuledger::analytic {
namespace {

ModelConfig eight_experts(std::optional<double> c) {
  ModelConfig m;
  m.flavour = Flavour::kLlama;
  m.hidden = 64;
  m.num_experts = 8;
  m.experts_per_token = 2;
  m.expert_ffn = 96;
  m.capacity_factor = c;
  return m;
}

TEST(MoeTerms, CapacityAndWorstCaseRows) {
  // N = 100, k = 2, E = 8: c = 1.25 → C = ⌈1.25·200/8⌉ = ⌈31.25⌉ = 32, E·C = 256 > N·k = 200.
  EXPECT_EQ(moe_capacity(eight_experts(1.25), 100), 32);
  EXPECT_EQ(moe_worst_case_rows(eight_experts(1.25), 100), 200);
  // c = 0.5 → C = ⌈12.5⌉ = 13, E·C = 104 < 200.
  EXPECT_EQ(moe_capacity(eight_experts(0.5), 100), 13);
  EXPECT_EQ(moe_worst_case_rows(eight_experts(0.5), 100), 104);
  // no factor: C = N, every choice kept.
  EXPECT_EQ(moe_capacity(eight_experts(std::nullopt), 100), 100);
  EXPECT_EQ(moe_worst_case_rows(eight_experts(std::nullopt), 100), 200);
  // c = E: C = ⌈2N⌉ capped at N.
  EXPECT_EQ(moe_capacity(eight_experts(8.0), 100), 100);
}

TEST(MoeTerms, BytesAndFlopsByHand) {
  ModelConfig m = eight_experts(std::nullopt);
  m.shared_experts = 2;
  m.shared_expert_ffn = 32;
  // N = 10, A = 20, bf16: probs 4·10·8 = 320; rows 4·20 = 80; in + out 2·20·64·2 = 5,120;
  // gate, up, act 3·20·96·2 = 11,520; shared 3·10·64·2 = 3,840.
  EXPECT_EQ(moe_block_activation_bytes(m, 10, 20, 2), 320 + 80 + 5'120 + 11'520 + 3'840);
  // router 2·10·64·8 = 10,240; experts 6·20·64·96 = 737,280; shared 6·10·64·64 = 245,760.
  EXPECT_EQ(moe_block_forward_flops(m, 10, 20), 10'240 + 737'280 + 245'760);
}

TEST(MoeTerms, SixNActive) {
  // Mixtral: 6·(12,879,925,248 − the untied input embedding 32,000·4,096 = 131,072,000).
  EXPECT_EQ(moe_training_flops_per_token(load_model("mixtral-8x7b")), 6LL * 12'748'853'248);
  // Qwen3-30B-A3B: 6·(3,353,032,704 − 151,936·2,048 = 311,164,928).
  EXPECT_EQ(moe_training_flops_per_token(load_model("qwen3-30b-a3b")), 6LL * 3'041'867'776);
}

}  // namespace
}  // namespace gpuledger::analytic
