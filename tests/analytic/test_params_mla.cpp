// Parameter counts of the DeepSeek presets (multi-head latent attention, the
// first dense layers, shared and routed experts, the router bias, the MTP
// module): against the published totals and a count written out here from
// the config.json values, independently of analytic/params.cpp and mla.cpp.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "analytic/mla.h"
#include "analytic/params.h"
#include "core/layout.h"
#include "core/model_config.h"

namespace gpuledger::analytic {
namespace {

// One DeepSeek layer written out, tensor by tensor as modeling_deepseek_v3.py
// names them: q_a_proj h·r_q + q_a_layernorm r_q + q_b_proj r_q·a·(d_n + d_r)
// (or q_proj h·a·(d_n + d_r)), kv_a_proj_with_mqa h·(r_kv + d_r), kv_a_layernorm
// r_kv, kv_b_proj r_kv·a·(d_n + d_v), o_proj a·d_v·h, two RMSNorms 2h; then the
// dense MLP 3·h·f or the MoE: gate E·h (+ E bias), E experts 3·h·f_e, shared 3·h·S·f_s.
struct HandCount {
  int64_t attention, dense_mlp, moe_mlp, embeddings;
};
HandCount hand_count(int64_t h, int64_t a, int64_t r_q, int64_t r_kv, int64_t d_n, int64_t d_r, int64_t d_v, int64_t f,
                     int64_t E, int64_t f_e, int64_t S, bool bias, int64_t V) {
  const int64_t q = r_q > 0 ? h * r_q + r_q + r_q * a * (d_n + d_r) : h * a * (d_n + d_r);
  const int64_t attention = q + h * (r_kv + d_r) + r_kv + r_kv * a * (d_n + d_v) + a * d_v * h + 2 * h;
  return {attention, 3 * h * f, E * h + (bias ? E : 0) + E * 3 * h * f_e + 3 * h * S * f_e, 2 * V * h + h};
}

// DeepSeek-V3 (config.json: h 7168, a 128, r_q 1536, r_kv 512, d_n 128, d_r 64,
// d_v 128, f 18432, 256 experts of 2048 plus 1 shared, first 3 layers dense,
// V 129280, untied): 671,026,419,200, the "671B total" of arXiv 2412.19437 and
// the model card. Per layer: attention 187,121,664 (norms included); dense MLP
// 396,361,728; MoE 11,320,164,608 (router 1,835,008 + bias 256).
TEST(MlaParams, DeepSeekV3Published) {
  const ModelConfig m = load_model("deepseek-v3");
  const HandCount c = hand_count(7168, 128, 1536, 512, 128, 64, 128, 18432, 256, 2048, 1, true, 129280);
  EXPECT_EQ(c.attention, 187'121'664);
  EXPECT_EQ(c.moe_mlp, 11'320'164'608);
  EXPECT_EQ(3 * (c.attention + c.dense_mlp) + 58 * (c.attention + c.moe_mlp) + c.embeddings, 671'026'419'200);
  EXPECT_EQ(model_params(m), 671'026'419'200);
  EXPECT_EQ(layer_params_at(m, 0, 1), c.attention + c.dense_mlp);
  EXPECT_EQ(layer_params_at(m, 2, 1), c.attention + c.dense_mlp);
  EXPECT_EQ(layer_params_at(m, 3, 1), c.attention + c.moe_mlp);
  EXPECT_EQ(layer_params(m, 1), c.attention + c.moe_mlp);
  // Active: 8 of the 256 routed experts in each of the 58 MoE layers. The model
  // card's "37B activated"; its weights note's 36.6B leaves the input embedding out.
  EXPECT_EQ(active_params(m), 671'026'419'200 - 58LL * 248 * 3 * 7168 * 2048);
  EXPECT_EQ(active_params(m) - 129280LL * 7168, 36'625'618'432);
}

// The MTP module (num_nextn_predict_layers 1; arXiv 2412.19437 §2.2): one MoE
// layer 11,507,286,272 + enorm, hnorm, shared_head.norm 3·7168 + eh_proj
// 2·7168·7168 = 11,610,068,224 of its own (the weights note: "11.5B unique").
// The checkpoint stores the module with copies of the embedding and the head,
// 2·129280·7168 more: 684,489,845,504 stored with the main model, the "685B" of
// the Hugging Face card (which also counts the FP8 weight_scale_inv tensors).
TEST(MlaParams, DeepSeekV3MtpModule) {
  const ModelConfig m = load_model("deepseek-v3");
  const HandCount c = hand_count(7168, 128, 1536, 512, 128, 64, 128, 18432, 256, 2048, 1, true, 129280);
  EXPECT_EQ(mtp_params(m), c.attention + c.moe_mlp + 3 * 7168 + 2LL * 7168 * 7168);
  EXPECT_EQ(mtp_params(m), 11'610'068'224);
  EXPECT_EQ(model_params(m) + mtp_params(m) + 2LL * 129280 * 7168, 684'489'845'504);
  EXPECT_EQ(mtp_params(load_model("deepseek-v2-lite")), 0);
}

// DeepSeek-V2-Lite (config.json: h 2048, a 16, q_lora_rank null, r_kv 512, f
// 10944, 64 experts of 1408 plus 2 shared, first layer dense, V 102400):
// 15,706,484,224, the model card's "15.7B"; active "2.4B" without the input embedding.
TEST(MlaParams, DeepSeekV2LitePublished) {
  const ModelConfig m = load_model("deepseek-v2-lite");
  const HandCount c = hand_count(2048, 16, 0, 512, 128, 64, 128, 10944, 64, 1408, 2, false, 102400);
  EXPECT_EQ(c.attention, 13'767'168);
  EXPECT_EQ((c.attention + c.dense_mlp) + 26 * (c.attention + c.moe_mlp) + c.embeddings, 15'706'484'224);
  EXPECT_EQ(model_params(m), 15'706'484'224);
  EXPECT_EQ(active_params(m), 15'706'484'224 - 26LL * 58 * 3 * 2048 * 1408);
  EXPECT_EQ(active_params(m) - 102400LL * 2048, 2'451'435'008);
}

// Under tp the down projections and the latents' norms stay whole, the up
// projections split by heads and o_proj by its input (Megatron-LM's MLA).
TEST(MlaParams, TensorParallelShapes) {
  const ModelConfig m = load_model("deepseek-v3");
  Layout l;
  l.tp = 8;
  l.dp = 1;
  const auto units = rank_param_units(m, l, 0);
  std::map<std::string, int64_t> elems;
  for (const auto& t : units[1].tensors) elems[t.name] = t.elems;  // layer 0
  EXPECT_EQ(elems.at("layers.0.mla.q_down.weight"), 7168 * 1536);
  EXPECT_EQ(elems.at("layers.0.mla.q_norm.weight"), 1536);
  EXPECT_EQ(elems.at("layers.0.mla.q_up.weight"), 1536 * 16 * 192);
  EXPECT_EQ(elems.at("layers.0.mla.kv_down.weight"), 7168 * 576);
  EXPECT_EQ(elems.at("layers.0.mla.kv_norm.weight"), 512);
  EXPECT_EQ(elems.at("layers.0.mla.kv_up.weight"), 512 * 16 * 256);
  EXPECT_EQ(elems.at("layers.0.attn_out.weight"), 16 * 128 * 7168);
  EXPECT_EQ(elems.at("layers.0.mlp_gate.weight"), 7168 * 18432 / 8);  // layer 0: dense
  EXPECT_EQ(elems.count("layers.0.moe.router.weight"), 0u);
  // A MoE layer: the router whole; its expert bias is a buffer beside the
  // trained units (Megatron's register_buffer), 4·256 B per MoE layer.
  std::map<std::string, int64_t> moe;
  for (const auto& t : units[4].tensors) moe[t.name] = t.elems;  // layer 3
  EXPECT_EQ(moe.at("layers.3.moe.router.weight"), 256 * 7168);
  EXPECT_EQ(moe.count("layers.3.moe.router.bias"), 0u);
  EXPECT_EQ(moe.at("layers.3.moe.experts.gate.weight"), 256LL * 7168 * 2048 / 8);
  // V2-Lite's direct query projection splits by heads.
  const ModelConfig lite = load_model("deepseek-v2-lite");
  l.tp = 2;
  const auto lite_units = rank_param_units(lite, l, 0);
  std::map<std::string, int64_t> q;
  for (const auto& t : lite_units[1].tensors) q[t.name] = t.elems;
  EXPECT_EQ(q.at("layers.0.mla.q.weight"), 2048 * 8 * 192);
  EXPECT_EQ(q.count("layers.0.mla.q_down.weight"), 0u);
}

TEST(MlaParams, CacheValuesPerToken) {
  EXPECT_EQ(mla_cache_values_per_token(load_model("deepseek-v3")), 576);
  EXPECT_EQ(mla_cache_values_per_token(load_model("deepseek-v2-lite")), 576);
}

}  // namespace
}  // namespace gpuledger::analytic
