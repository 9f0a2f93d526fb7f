// The training budgets of a multi-head latent attention layer (analytic/mla.h,
// docs/formulas/mla.md "Training") against hand counts for tiny-mla: h 64,
// a 4, r_q 32, r_kv 16, d_n 8, d_r 4, d_v 8, ffn 176 (SwiGLU), 2 layers,
// vocab 97; b 2, s 8, so n = 16 tokens.
#include <gtest/gtest.h>

#include <vector>

#include "analytic/activations.h"
#include "analytic/flops.h"
#include "analytic/mla.h"
#include "core/model_config.h"

namespace gpuledger::analytic {
namespace {

RunConfig run(Recompute rc = Recompute::kNone) {
  RunConfig r;
  r.seq = 8;
  r.mbs = 2;
  r.microbatches = 1;
  r.dropout = 0;
  r.recompute = rc;
  r.attention = AttentionKind::kMaterialized;
  return r;
}

// Forward GEMMs of one layer on one rank, by hand:
//   down projections 2·16·64·(32 + 16 + 4)               = 106,496
//   q_up 2·16·32·4·12 = 49,152; kv_up 2·16·16·4·16 = 32,768; o_proj 2·16·4·8·64 = 65,536
//   core 2·2·4·8·8·(8 + 4) + 2·2·4·8·8·8                  =  20,480
//   SwiGLU 3·2·16·64·176                                  = 1,081,344
// At tp 2 the heads and the MLP halve, the down projections stay whole.
TEST(MlaTraining, ForwardFlopsByHand) {
  const ModelConfig m = load_model("tiny-mla");
  const MlaForwardFlops f = mla_attention_forward_flops(m, 2, 8, 1);
  EXPECT_EQ(f.replicated, 106'496);
  EXPECT_EQ(f.sharded, 49'152 + 32'768 + 65'536);
  EXPECT_EQ(f.core, 20'480);
  EXPECT_EQ(layer_forward_flops(m, Layout{}, run()), 106'496 + 147'456 + 20'480 + 1'081'344);
  Layout tp2;
  tp2.tp = 2;
  EXPECT_EQ(layer_forward_flops(m, tp2, run()), 106'496 + 73'728 + 10'240 + 540'672);

  ModelConfig direct = m;  // no query latent: q 2·16·64·4·12 = 98,304 in place of q_down and q_up
  direct.q_lora_rank = 0;
  const MlaForwardFlops g = mla_attention_forward_flops(direct, 2, 8, 1);
  EXPECT_EQ(g.replicated, 2 * 16 * 64 * 20);
  EXPECT_EQ(g.sharded, 98'304 + 32'768 + 65'536);
}

// The model FLOPs (the MFU numerator) credit the replicated down projections
// once, to TP rank 0, so a job's model FLOPs do not depend on t; the hardware
// count executes them on every rank.
TEST(MlaTraining, ModelFlopsDoNotDependOnTp) {
  const ModelConfig m = load_model("tiny-mla");
  Layout tp2;
  tp2.tp = 2;
  EXPECT_DOUBLE_EQ(job_step_flops(m, Layout{}, run()).model, job_step_flops(m, tp2, run()).model);
  const StepFlops r0 = rank_step_flops(m, tp2, run(), 0), r1 = rank_step_flops(m, tp2, run(), 1);
  // 3 (forward + backward) · 2 layers · 106,496, and the head's real vocabulary rows: rank 0 holds rows
  // 0-127 of V' = 256, 97 of them real, 3·2·16·64·97; rank 1 none
  EXPECT_EQ(r0.model - r1.model, 3 * 2 * 106'496 + 3 * 2 * 16 * 64 * 97);
  EXPECT_EQ(r0.hardware, r1.hardware);
  // selective adds the core's forward again, full the whole layer's
  const int64_t base = rank_step_flops(m, Layout{}, run(), 0).hardware;
  EXPECT_EQ(rank_step_flops(m, Layout{}, run(Recompute::kSelective), 0).hardware - base, 2 * 20'480);
  EXPECT_EQ(rank_step_flops(m, Layout{}, run(Recompute::kFull), 0).hardware - base, 2 * 1'355'776);
}

// Saved bytes of one layer in bf16 (e = 2), n = 16:
//   block: latents 2·16·(32 + 16)·2 + rstd 2·4·16 = 3,200; q_nope, k_nope, q_rope 16·4·20·2 = 2,560;
//          k_rope 16·4·2 = 128; v, context 16·4·16·2 = 2,048; probabilities 2·4·8·8·2 = 1,024
//   layer: input, norm-1 output, norm-2 input and output 4·16·64·2 = 8,192; two rstd 2·4·16 = 128;
//          SwiGLU 3·16·176·2 = 16,896
TEST(MlaTraining, ActivationsByHand) {
  const ModelConfig m = load_model("tiny-mla");
  EXPECT_EQ(mla_attention_activation_bytes(m, 2, 8, 1, 2, true), 3'200 + 2'560 + 128 + 2'048 + 1'024);
  EXPECT_EQ(mla_attention_activation_bytes(m, 2, 8, 1, 2, false), 3'200 + 2'560 + 128 + 2'048);
  EXPECT_EQ(activation_bytes_per_layer(m, Layout{}, run()), 8'960 + 8'192 + 128 + 16'896);
  // tp 2 with sp: the heads halve, the latents stay whole, the hidden-sized tensors are token shards
  Layout tp2;
  tp2.tp = 2;
  tp2.sp = true;
  EXPECT_EQ(mla_attention_activation_bytes(m, 2, 8, 2, 2, true), 3'200 + 1'280 + 128 + 1'024 + 512);
  EXPECT_EQ(activation_bytes_per_layer(m, tp2, run()), 3'200 + 1'280 + 128 + 1'024 + 512 + 4'096 + 64 + 8'448);
}

// DeepSeek-V2-Lite's attention (no query latent; h 2048, a 16, r_kv 512, d_n 128, d_r 64, d_v 128) at s 4096,
// b 1, t 4, bf16, selective (docs/formulas/mla.md "Training"): 2·4096·512·2 + 4·4096 + 4096·4·(256 + 64)·2 +
// 4096·64·2 + 2·4096·4·128·2.
TEST(MlaTraining, V2LiteAttentionActivationsByHand) {
  ModelConfig m = load_model("tiny-mla");
  m.hidden = 2048;
  m.heads = m.kv_heads = 16;
  m.q_lora_rank = 0;
  m.kv_lora_rank = 512;
  m.qk_nope_head_dim = 128;
  m.qk_rope_head_dim = 64;
  m.v_head_dim = 128;
  EXPECT_EQ(mla_attention_activation_bytes(m, 1, 4096, 4, 2, false),
            8'388'608 + 16'384 + 10'485'760 + 524'288 + 8'388'608);
  EXPECT_EQ(mla_attention_activation_bytes(m, 1, 4096, 4, 2, false), 27'803'648);
}

// The gradients each TP rank holds in part: q_down 64·32, q_norm 32, kv_down 64·(16 + 4), kv_norm 16.
TEST(MlaTraining, TpPartialGradients) {
  ModelConfig m = load_model("tiny-mla");
  EXPECT_EQ(mla_tp_partial_grad_elems(m), (std::vector<int64_t>{2'048, 32, 1'280, 16}));
  m.q_lora_rank = 0;
  EXPECT_EQ(mla_tp_partial_grad_elems(m), (std::vector<int64_t>{1'280, 16}));
}

}  // namespace
}  // namespace gpuledger::analytic
