// The mixture-of-experts fields of a model file: defaults, the presets' values
// as their config.json files give them, and every refusal naming its field.
#include <gtest/gtest.h>

#include <string>

#include "core/model_config.h"

namespace gpuledger {
namespace {

std::string moe_json(const std::string& extra = "") {
  return R"({"name": "m", "flavour": "llama", "layers": 2, "hidden": 32, "heads": 4, "kv_heads": 2,
             "ffn": 48, "vocab": 97, "max_seq": 64, "num_experts": 4, "experts_per_token": 2, "expert_ffn": 24)" +
         (extra.empty() ? std::string() : ", " + extra) + "}";
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

TEST(MoeConfig, DenseDefaults) {
  const ModelConfig m = load_model("tiny-llama");
  EXPECT_FALSE(m.is_moe());
  EXPECT_EQ(m.num_experts, 0);
  EXPECT_FALSE(m.qk_norm);
  EXPECT_FALSE(m.capacity_factor.has_value());
}

TEST(MoeConfig, ParsedFieldsAndDefaults) {
  const ModelConfig m = parse_model_config(moe_json(), "o.json");
  EXPECT_TRUE(m.is_moe());
  EXPECT_EQ(m.num_experts, 4);
  EXPECT_EQ(m.experts_per_token, 2);
  EXPECT_EQ(m.expert_ffn, 24);
  EXPECT_EQ(m.shared_experts, 0);
  EXPECT_TRUE(m.norm_topk_prob);
  EXPECT_EQ(m.router_aux_loss_coef, 0.0);
  EXPECT_FALSE(m.capacity_factor.has_value());
  const ModelConfig c = parse_model_config(
      moe_json(R"("capacity_factor": 0.5, "router_aux_loss_coef": 0.01, "shared_experts": 2, "shared_expert_ffn": 8,
                  "norm_topk_prob": false, "qk_norm": true)"),
      "o.json");
  EXPECT_EQ(*c.capacity_factor, 0.5);
  EXPECT_EQ(c.router_aux_loss_coef, 0.01);
  EXPECT_EQ(c.shared_experts, 2);
  EXPECT_EQ(c.shared_expert_ffn, 8);
  EXPECT_FALSE(c.norm_topk_prob);
  EXPECT_TRUE(c.qk_norm);
}

// Mixtral-8x7B-v0.1 and Qwen3-30B-A3B config.json (the presets' "source").
TEST(MoeConfig, Presets) {
  const ModelConfig mx = load_model("mixtral-8x7b");
  EXPECT_EQ(mx.num_experts, 8);
  EXPECT_EQ(mx.experts_per_token, 2);
  EXPECT_EQ(mx.expert_ffn, 14336);
  EXPECT_FALSE(mx.qk_norm);
  const ModelConfig q = load_model("qwen3-30b-a3b");
  EXPECT_EQ(q.layers, 48);
  EXPECT_EQ(q.num_experts, 128);
  EXPECT_EQ(q.experts_per_token, 8);
  EXPECT_EQ(q.expert_ffn, 768);
  EXPECT_EQ(q.head_dim, 128);
  EXPECT_TRUE(q.qk_norm);
  EXPECT_TRUE(q.norm_topk_prob);
  const ModelConfig t = load_model("tiny-moe");
  EXPECT_EQ(t.shared_experts, 1);
  EXPECT_FALSE(t.capacity_factor.has_value());  // dropless: what train budgets exactly
}

TEST(MoeConfig, RefusalsNameTheField) {
  const struct {
    std::string extra, field;
  } cases[] = {{R"("experts_per_token": 5)", "experts_per_token"},
               {R"("experts_per_token": 0)", "experts_per_token"},
               {R"("expert_ffn": 0)", "expert_ffn"},
               {R"("num_experts": -1)", "num_experts"},
               {R"("num_experts": 5000, "experts_per_token": 1)", "num_experts"},
               {R"("shared_experts": 1)", "shared_expert_ffn"},
               {R"("shared_expert_ffn": 8)", "shared_expert_ffn"},
               {R"("router_aux_loss_coef": -0.1)", "router_aux_loss_coef"},
               {R"("router_aux_loss_coef": "big")", "router_aux_loss_coef"},
               {R"("capacity_factor": 0)", "capacity_factor"},
               {R"("capacity_factor": 4.5)", "capacity_factor"},
               {R"("capacity_factor": "1")", "capacity_factor"},
               {R"("norm_topk_prob": 1)", "norm_topk_prob"},
               {R"("expert_ffn": 2.5)", "expert_ffn"}};
  for (const auto& c : cases) {
    SCOPED_TRACE(c.extra);
    EXPECT_EQ(field_of_error(moe_json(c.extra)), c.field);
  }
}

TEST(MoeConfig, DenseModelRefusesExpertFields) {
  const std::string dense = R"({"name": "d", "flavour": "llama", "layers": 2, "hidden": 32, "heads": 4,
                                "ffn": 48, "vocab": 97, "max_seq": 64, )";
  EXPECT_EQ(field_of_error(dense + R"("expert_ffn": 24})"), "expert_ffn");
  EXPECT_EQ(field_of_error(dense + R"("capacity_factor": 1.0})"), "capacity_factor");
  EXPECT_EQ(field_of_error(dense + R"("num_experts": 0})"), "<accepted>");
  const std::string gpt = R"({"name": "g", "flavour": "gpt", "layers": 2, "hidden": 64, "heads": 4,
                              "vocab": 97, "max_seq": 64, )";
  EXPECT_EQ(field_of_error(gpt + R"("num_experts": 4, "experts_per_token": 1, "expert_ffn": 8})"), "num_experts");
  EXPECT_EQ(field_of_error(gpt + R"("qk_norm": true})"), "qk_norm");
}

}  // namespace
}  // namespace gpuledger
