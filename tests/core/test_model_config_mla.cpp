// The multi-head latent attention and DeepSeek-MoE fields of a model file:
// defaults, the two DeepSeek presets' values as their config.json files give
// them, and every refusal naming its field.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "core/model_config.h"
#include "core/model_support.h"

namespace gpuledger {
namespace {

// A small MLA model: 4 heads of q/k 8 + 4 (nope + rope), v 6, latents 16 (q) and 12 (kv).
// `over` replaces fields (a value of "" removes the field).
std::string mla_json(const std::map<std::string, std::string>& over = {}) {
  std::map<std::string, std::string> f = {{"name", R"("m")"},
                                          {"flavour", R"("llama")"},
                                          {"layers", "3"},
                                          {"hidden", "32"},
                                          {"heads", "4"},
                                          {"kv_heads", "4"},
                                          {"head_dim", "12"},
                                          {"ffn", "48"},
                                          {"vocab", "97"},
                                          {"max_seq", "64"},
                                          {"q_lora_rank", "16"},
                                          {"kv_lora_rank", "12"},
                                          {"qk_nope_head_dim", "8"},
                                          {"qk_rope_head_dim", "4"},
                                          {"v_head_dim", "6"}};
  for (const auto& [k, v] : over) {
    if (v.empty())
      f.erase(k);
    else
      f[k] = v;
  }
  std::string out = "{";
  for (const auto& [k, v] : f) out += (out.size() > 1 ? ", \"" : "\"") + k + "\": " + v;
  return out + "}";
}

std::string field_of_error(const std::string& text) {
  try {
    parse_model_config(text, "o.json");
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("o.json"), std::string::npos) << e.what();
    return e.field();
  }
  return "<accepted>";
}

TEST(MlaConfig, DenseDefaults) {
  const ModelConfig m = load_model("tiny-llama");
  EXPECT_FALSE(m.is_mla());
  EXPECT_EQ(m.kv_lora_rank, 0);
  EXPECT_EQ(m.q_lora_rank, 0);
  EXPECT_EQ(m.dense_layers, 0);
  EXPECT_FALSE(m.router_bias);
  EXPECT_EQ(m.mtp_modules, 0);
}

TEST(MlaConfig, ParsedFields) {
  const ModelConfig m = parse_model_config(mla_json(), "o.json");
  EXPECT_TRUE(m.is_mla());
  EXPECT_EQ(m.q_lora_rank, 16);
  EXPECT_EQ(m.kv_lora_rank, 12);
  EXPECT_EQ(m.qk_nope_head_dim, 8);
  EXPECT_EQ(m.qk_rope_head_dim, 4);
  EXPECT_EQ(m.v_head_dim, 6);
  // HF's q_lora_rank null: a direct query projection.
  const ModelConfig direct = parse_model_config(mla_json({{"q_lora_rank", "null"}}), "o.json");
  EXPECT_EQ(direct.q_lora_rank, 0);
  EXPECT_TRUE(direct.is_mla());
}

TEST(MlaConfig, RefusalsNameTheField) {
  const std::map<std::string, std::string> no_mla = {{"kv_lora_rank", ""},
                                                     {"q_lora_rank", ""},
                                                     {"qk_nope_head_dim", ""},
                                                     {"qk_rope_head_dim", ""},
                                                     {"v_head_dim", ""}};
  auto without_mla = [&](const std::string& field, const std::string& value) {
    auto over = no_mla;
    over[field] = value;
    return mla_json(over);
  };
  EXPECT_EQ(field_of_error(without_mla("v_head_dim", "8")), "v_head_dim");  // MLA fields without kv_lora_rank
  EXPECT_EQ(field_of_error(without_mla("q_lora_rank", "8")), "q_lora_rank");
  EXPECT_EQ(field_of_error(mla_json({{"head_dim", "16"}})), "head_dim");  // != 8 + 4
  EXPECT_EQ(field_of_error(mla_json({{"kv_heads", "2"}})), "kv_heads");
  EXPECT_EQ(field_of_error(mla_json({{"qk_rope_head_dim", "3"}, {"head_dim", "11"}})), "qk_rope_head_dim");
  EXPECT_EQ(field_of_error(mla_json({{"v_head_dim", "0"}})), "v_head_dim");
  EXPECT_EQ(field_of_error(mla_json({{"kv_lora_rank", "-1"}})), "kv_lora_rank");
  EXPECT_EQ(field_of_error(mla_json({{"kv_lora_rank", R"("12")"}})), "kv_lora_rank");
  EXPECT_EQ(field_of_error(mla_json({{"q_lora_rank", "1048577"}})), "q_lora_rank");
  EXPECT_EQ(field_of_error(mla_json({{"qk_nope_head_dim", "65537"}})), "qk_nope_head_dim");
  EXPECT_EQ(field_of_error(mla_json({{"qk_norm", "true"}})), "qk_norm");
  EXPECT_EQ(field_of_error(mla_json({{"qkv_bias", "true"}})), "qkv_bias");
  EXPECT_EQ(field_of_error(mla_json({{"sliding_window", "16"}})), "sliding_window");
  EXPECT_EQ(field_of_error(mla_json({{"flavour", R"("gpt")"}, {"qkv_bias", "true"}})), "kv_lora_rank");
  EXPECT_EQ(field_of_error(mla_json({{"mtp_modules", "-1"}})), "mtp_modules");
}

TEST(DeepSeekMoeConfig, DenseLayersAndRouterBias) {
  const std::map<std::string, std::string> moe = {
      {"num_experts", "4"}, {"experts_per_token", "2"}, {"expert_ffn", "24"}};
  auto with = [&](const std::string& field, const std::string& value) {
    auto over = moe;
    over[field] = value;
    return mla_json(over);
  };
  EXPECT_EQ(field_of_error(with("dense_layers", "3")), "dense_layers");  // == layers: no MoE layer left
  EXPECT_EQ(field_of_error(with("dense_layers", "-1")), "dense_layers");
  EXPECT_EQ(field_of_error(with("router_bias", "1")), "router_bias");
  const ModelConfig m = parse_model_config(with("dense_layers", "2"), "o.json");
  EXPECT_FALSE(m.is_moe_layer(0));
  EXPECT_FALSE(m.is_moe_layer(1));
  EXPECT_TRUE(m.is_moe_layer(2));
  // Both are mixture-of-experts fields: a dense model may not give them.
  EXPECT_EQ(field_of_error(mla_json({{"dense_layers", "1"}})), "dense_layers");
  EXPECT_EQ(field_of_error(mla_json({{"router_bias", "true"}})), "router_bias");
}

// deepseek-ai/DeepSeek-V3 and DeepSeek-V2-Lite config.json (the presets' "source").
TEST(DeepSeekPresets, FieldsAsPublished) {
  const ModelConfig v3 = load_model("deepseek-v3");
  EXPECT_EQ(v3.layers, 61);
  EXPECT_EQ(v3.hidden, 7168);
  EXPECT_EQ(v3.heads, 128);
  EXPECT_EQ(v3.kv_heads, 128);
  EXPECT_EQ(v3.head_dim, 192);
  EXPECT_EQ(v3.ffn, 18432);
  EXPECT_EQ(v3.vocab, 129280);
  EXPECT_EQ(v3.max_seq, 163840);
  EXPECT_EQ(v3.q_lora_rank, 1536);
  EXPECT_EQ(v3.kv_lora_rank, 512);
  EXPECT_EQ(v3.qk_nope_head_dim, 128);
  EXPECT_EQ(v3.qk_rope_head_dim, 64);
  EXPECT_EQ(v3.v_head_dim, 128);
  EXPECT_EQ(v3.num_experts, 256);
  EXPECT_EQ(v3.experts_per_token, 8);
  EXPECT_EQ(v3.expert_ffn, 2048);
  EXPECT_EQ(v3.shared_experts, 1);
  EXPECT_EQ(v3.shared_expert_ffn, 2048);
  EXPECT_EQ(v3.dense_layers, 3);
  EXPECT_TRUE(v3.router_bias);
  EXPECT_TRUE(v3.norm_topk_prob);
  EXPECT_EQ(v3.mtp_modules, 1);
  EXPECT_FALSE(v3.tied_embeddings);
  EXPECT_EQ(v3.norm_eps, 1e-6);
  EXPECT_EQ(v3.rope_theta, 10000.0);

  const ModelConfig lite = load_model("deepseek-v2-lite");
  EXPECT_EQ(lite.layers, 27);
  EXPECT_EQ(lite.hidden, 2048);
  EXPECT_EQ(lite.heads, 16);
  EXPECT_EQ(lite.ffn, 10944);
  EXPECT_EQ(lite.vocab, 102400);
  EXPECT_EQ(lite.q_lora_rank, 0);  // null: q_proj directly
  EXPECT_EQ(lite.kv_lora_rank, 512);
  EXPECT_EQ(lite.num_experts, 64);
  EXPECT_EQ(lite.experts_per_token, 6);
  EXPECT_EQ(lite.expert_ffn, 1408);
  EXPECT_EQ(lite.shared_experts, 2);
  EXPECT_EQ(lite.dense_layers, 1);
  EXPECT_FALSE(lite.router_bias);
  EXPECT_FALSE(lite.norm_topk_prob);
  EXPECT_EQ(lite.mtp_modules, 0);
}

// Multi-head latent attention: train and plan (ModelUse::kRun) build it with
// the materialized core and no attention dropout, under tensor parallelism
// too; infer refuses it, naming kv_lora_rank; kv and serve-plan
// (ModelUse::kKvSizing) accept it under any run.
TEST(MlaRuns, TrainAndPlanBuildItInferRefuses) {
  RunConfig r;
  Layout l;
  l.tp = 2;
  const ModelConfig mla = load_model("tiny-mla");
  EXPECT_NO_THROW(require_runnable_model(mla, l, r));
  const auto refused = [&](const RunConfig& run, ModelUse use, const std::string& field) {
    try {
      require_runnable_model(mla, l, run, use);
      ADD_FAILURE() << "accepted: " << field;
    } catch (const ConfigError& e) {
      EXPECT_EQ(e.field(), field);
      EXPECT_NE(std::string(e.what()).find("multi-head latent attention"), std::string::npos) << e.what();
    }
  };
  refused(r, ModelUse::kInfer, "kv_lora_rank");
  RunConfig flash = r;
  flash.attention = AttentionKind::kFlash;
  refused(flash, ModelUse::kRun, "attention");
  RunConfig dropout = r;
  dropout.dropout = 0.1;
  refused(dropout, ModelUse::kRun, "dropout");
  EXPECT_NO_THROW(require_runnable_model(mla, l, flash, ModelUse::kKvSizing));
}

// kv and serve-plan (ModelUse::kKvSizing) size DeepSeek-V3 under any tp,
// though no run builds its MoE layers at tp > 1.
TEST(DeepSeekPresets, RunsRefuseAndSizingAccepts) {
  RunConfig r;
  Layout l;
  l.tp = 8;
  const ModelConfig v3 = load_model("deepseek-v3");
  EXPECT_NO_THROW(require_runnable_model(v3, l, r, ModelUse::kKvSizing));
  RunConfig materialized = r;
  materialized.attention = AttentionKind::kMaterialized;
  try {
    require_runnable_model(v3, l, materialized, ModelUse::kRun);
    ADD_FAILURE() << "deepseek-v3 at tp 8 accepted by a run";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.field(), "num_experts") << e.what();
  }
  // The first dense layers (no MLA) are built, but not with interleaved
  // stages (model chunks of different sizes).
  ModelConfig moe = load_model("tiny-moe");
  moe.layers = 4;
  moe.dense_layers = 1;
  l.tp = 1;
  EXPECT_NO_THROW(require_runnable_model(moe, l, r));
  l.pp = 2;
  l.vpp = 2;
  try {
    require_runnable_model(moe, l, r);
    ADD_FAILURE() << "accepted";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.field(), "dense_layers");
    EXPECT_NE(std::string(e.what()).find("interleaved stages (--vpp 2)"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace gpuledger
