// The FP8 state an fp8 run adds to `weights` (analytic/fp8.h) against hand
// counts: per GEMM 2·P (FP8 copy and transpose) + 4 (scale_inv) + 5·4·(1 + H)
// (five quantizers' scale and amax history, H = 1024 by default).
#include <gtest/gtest.h>

#include "analytic/budget.h"
#include "analytic/fp8.h"
#include "core/model_config.h"

namespace gpuledger::analytic {
namespace {

RunConfig fp8_run() {
  RunConfig r;
  r.seq = 16;
  r.mbs = 2;
  r.fp8 = Fp8Recipe::kDelayed;
  return r;
}

TEST(Fp8State, OneGemm) {
  EXPECT_EQ(fp8_gemm_state_bytes(1000, 1024), 2000 + 4 + 5 * 4 * 1025);  // 22,504
  EXPECT_EQ(fp8_gemm_state_bytes(1000, 1024), 22504);
  EXPECT_EQ(fp8_gemm_state_bytes(7, 0), 14 + 4 + 20);
}

TEST(Fp8State, TinyLlamaByHand) {
  const ModelConfig m = load_model("tiny-llama");  // h 64, a 4, k 2, d 16, f 176, 2 layers
  const RunConfig r = fp8_run();
  // t = 1: QKV (4 + 2·2)·16 × 64 = 8192, out 64 × 64 = 4096, gate, up, down 176·64 = 11264 each:
  // Σ P = 46080 per layer, 2·46080 + 5 GEMMs·20504 = 194680 per layer, 2 layers.
  EXPECT_EQ(fp8_weight_state_bytes(m, Layout{}, r, 0), 2 * 194680);
  // t = 2: a_t 2, k_t 1, f_t 88: Σ P = 4096 + 2048 + 3·5632 = 23040; 46080 + 102520 = 148600 a layer.
  Layout tp2;
  tp2.tp = 2;
  EXPECT_EQ(fp8_weight_state_bytes(m, tp2, r, 1), 2 * 148600);
  // pp = 2: one layer on each stage.
  Layout pp2;
  pp2.pp = 2;
  EXPECT_EQ(fp8_weight_state_bytes(m, pp2, r, 0), 194680);
  EXPECT_EQ(fp8_weight_state_bytes(m, pp2, r, 1), 194680);
}

TEST(Fp8State, TinyGptByHandFourGemmsALayer) {
  const ModelConfig m = load_model("tiny-gpt");  // h 64, a = k = 4, d 16, f 256
  // QKV 12·16 × 64 = 12288, out 4096, MLP in and out 256·64 = 16384 each: Σ P = 49152;
  // 2·49152 + 4·20504 = 180320 a layer.
  EXPECT_EQ(fp8_weight_state_bytes(m, Layout{}, fp8_run(), 0), 2 * 180320);
}

// The blockwise recipe: per GEMM 2·P and the fp32 scales of the copy's 128 ×
// 128 blocks, ⌈r/128⌉ × pad4(⌈c/128⌉), and of its transpose's, ⌈c/128⌉ ×
// pad4(⌈r/128⌉); no amax history.
TEST(Fp8State, BlockwiseScalesByHand) {
  EXPECT_EQ(fp8_block_gemm_scaling_bytes(100, 64), 4 * (1 * 4 + 1 * 4));  // one block each way
  EXPECT_EQ(fp8_block_gemm_scaling_bytes(4096, 14336), 4 * (32 * 112 + 112 * 32));
  EXPECT_EQ(fp8_block_gemm_scaling_bytes(6144, 4096), 4 * (48 * 32 + 32 * 48));
  EXPECT_EQ(fp8_block_gemm_scaling_bytes(300, 129), 4 * (3 * 4 + 2 * 4));  // 3 × 2 blocks, each side padded to 4
  // tiny-llama: QKV 128 × 64 and out 64 × 64 one block each way (32 B); gate and up 176 × 64 are
  // 2 × 1 blocks, 4·(2·4 + 1·4) = 48 B, down 64 × 176 likewise: 2·32 + 3·48 = 208 B beside 2·46080 a layer.
  RunConfig r = fp8_run();
  r.fp8 = Fp8Recipe::kBlockwise;
  const ModelConfig m = load_model("tiny-llama");
  EXPECT_EQ(fp8_block_gemm_scaling_bytes(176, 64), 48);
  EXPECT_EQ(fp8_weight_state_bytes(m, Layout{}, r, 0), 2 * (2 * 46080 + 208));
  // llama3-8b, t = 1: QKV 6144 × 4096, out 4096², gate and up 14336 × 4096, down 4096 × 14336 a layer.
  const ModelConfig l8 = load_model("llama3-8b");
  const int64_t per_layer = 2 * 218'103'808 + fp8_block_gemm_scaling_bytes(6144, 4096) +
                            fp8_block_gemm_scaling_bytes(4096, 4096) + 2 * fp8_block_gemm_scaling_bytes(14336, 4096) +
                            fp8_block_gemm_scaling_bytes(4096, 14336);
  EXPECT_EQ(fp8_weight_state_bytes(l8, Layout{}, r, 0), 32 * per_layer);
  EXPECT_EQ(per_layer, 436'207'616 + 4 * (2 * 1536 + 2 * 1024 + 3 * 2 * 3584));
}

TEST(Fp8State, NoneWithoutFp8AndBookedInWeights) {
  const ModelConfig m = load_model("tiny-llama");
  RunConfig bf16 = fp8_run();
  bf16.fp8 = Fp8Recipe::kNone;
  EXPECT_EQ(fp8_weight_state_bytes(m, Layout{}, bf16, 0), 0);
  const auto with = rank_budget(m, Layout{}, fp8_run(), 0), without = rank_budget(m, Layout{}, bf16, 0);
  EXPECT_EQ(with.exact[Account::kWeights] - without.exact[Account::kWeights], 2 * 194680);
  for (Account a : {Account::kGrads, Account::kMaster, Account::kOptim, Account::kActivations, Account::kComm})
    EXPECT_EQ(with.exact[a], without.exact[a]) << account_name(a);
  EXPECT_EQ(with.flops.hardware, without.flops.hardware);
}

}  // namespace
}  // namespace gpuledger::analytic
