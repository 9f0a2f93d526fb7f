// Hugging Face config.json → ModelConfig (models/io/hf_config.h): the
// oracle's transformers-written configs (tests/data) read into the values
// transformers uses, transformers 5's rope_parameters and 4's rope_theta,
// Qwen2's q/k/v biases, Mistral's window, and every field the model cannot
// represent is a ConfigError naming it.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "models/io/hf_config.h"

namespace gpuledger {
namespace {

const std::string kData = GPULEDGER_TEST_DATA_DIR;

nlohmann::json read(const std::string& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in);
}

TEST(HfConfig, TransformersLlamaConfigReadsAsWritten) {
  const ModelConfig m = load_hf_config(kData + "/llama/config.json");
  EXPECT_EQ(m.flavour, Flavour::kLlama);
  EXPECT_EQ(m.layers, 2);
  EXPECT_EQ(m.hidden, 16);
  EXPECT_EQ(m.heads, 4);
  EXPECT_EQ(m.kv_heads, 2);
  EXPECT_EQ(m.head_dim, 8);  // given, not hidden / heads
  EXPECT_EQ(m.ffn, 32);
  EXPECT_EQ(m.vocab, 48);
  EXPECT_EQ(m.max_seq, 64);
  EXPECT_FALSE(m.tied_embeddings);
  EXPECT_FALSE(m.qkv_bias);
  EXPECT_EQ(m.norm_eps, 1e-6);
  EXPECT_EQ(m.rope_theta, 500000.0);  // from rope_parameters (transformers 5)
}

TEST(HfConfig, TransformersGpt2ConfigReadsAsWritten) {
  const ModelConfig m = load_hf_config(kData + "/gpt2/config.json");
  EXPECT_EQ(m.flavour, Flavour::kGpt);
  EXPECT_EQ(m.layers, 2);
  EXPECT_EQ(m.hidden, 16);
  EXPECT_EQ(m.heads, 2);
  EXPECT_EQ(m.kv_heads, 2);
  EXPECT_EQ(m.head_dim, 8);
  EXPECT_EQ(m.ffn, 64);  // n_inner null: 4h
  EXPECT_EQ(m.max_seq, 32);
  EXPECT_TRUE(m.tied_embeddings);
  EXPECT_TRUE(m.qkv_bias);
  EXPECT_EQ(m.norm_eps, 1e-5);
}

std::string field_of_error(const nlohmann::json& j) {
  try {
    model_from_hf_config(j.dump(), "test");
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find(e.field()), std::string::npos) << e.what();
    return e.field();
  }
  return "";
}

TEST(HfConfig, QwenBiasesMistralWindowAndTransformers4RopeTheta) {
  nlohmann::json j = read(kData + "/llama/config.json");
  j.erase("rope_parameters");
  j["rope_theta"] = 1e6;  // transformers 4 writes it at the top
  EXPECT_EQ(model_from_hf_config(j.dump(), "t").rope_theta, 1e6);
  nlohmann::json q = j;
  q["model_type"] = "qwen2";
  q.erase("attention_bias");
  q["use_sliding_window"] = false;
  q["sliding_window"] = 4096;
  EXPECT_TRUE(model_from_hf_config(q.dump(), "t").qkv_bias);
  nlohmann::json mi = j;
  mi["model_type"] = "mistral";
  mi["sliding_window"] = 4096;
  EXPECT_EQ(model_from_hf_config(mi.dump(), "t").sliding_window, 4096);
  // And each is written back as transformers reads it.
  for (const auto& c : {j, q, mi}) {
    const ModelConfig m = model_from_hf_config(c.dump(), "t");
    const ModelConfig again = model_from_hf_config(hf_config_json(m), "t");
    EXPECT_EQ(hf_config_json(again), hf_config_json(m));
    EXPECT_EQ(again.qkv_bias, m.qkv_bias);
    EXPECT_EQ(again.sliding_window, m.sliding_window);
    EXPECT_EQ(again.rope_theta, m.rope_theta);
  }
}

TEST(HfConfig, WhatTheModelCannotRepresentIsAnErrorNamingTheField) {
  const nlohmann::json llama = read(kData + "/llama/config.json"), gpt2 = read(kData + "/gpt2/config.json");
  auto edited = [](nlohmann::json j, const std::string& f, const nlohmann::json& v) {
    j[f] = v;
    return j;
  };
  EXPECT_EQ(field_of_error(edited(llama, "rope_scaling", {{"rope_type", "linear"}, {"factor", 2.0}})), "rope_scaling");
  EXPECT_EQ(field_of_error(edited(llama, "rope_parameters", {{"rope_type", "yarn"}, {"rope_theta", 1e4}})),
            "rope_parameters.rope_type");
  EXPECT_EQ(field_of_error(edited(llama, "attention_bias", true)), "attention_bias");
  EXPECT_EQ(field_of_error(edited(llama, "mlp_bias", true)), "mlp_bias");
  EXPECT_EQ(field_of_error(edited(llama, "hidden_act", "gelu")), "hidden_act");
  EXPECT_EQ(field_of_error(edited(llama, "attention_dropout", 0.1)), "attention_dropout");
  EXPECT_EQ(field_of_error(edited(llama, "qk_layernorm", true)), "qk_layernorm");  // unknown: refused
  EXPECT_EQ(field_of_error(edited(llama, "model_type", "bert")), "model_type");
  EXPECT_EQ(field_of_error(edited(llama, "num_key_value_heads", 3)), "kv_heads");  // 4 % 3
  EXPECT_EQ(field_of_error(edited(gpt2, "activation_function", "gelu")), "activation_function");
  EXPECT_EQ(field_of_error(edited(gpt2, "tie_word_embeddings", false)), "tie_word_embeddings");
  EXPECT_EQ(field_of_error(edited(gpt2, "resid_pdrop", 0.1)), "resid_pdrop");
  EXPECT_EQ(field_of_error(edited(gpt2, "scale_attn_by_inverse_layer_idx", true)), "scale_attn_by_inverse_layer_idx");
  nlohmann::json missing = gpt2;
  missing.erase("n_embd");
  EXPECT_EQ(field_of_error(missing), "n_embd");
  EXPECT_EQ(field_of_error(nlohmann::json::array()), "config.json");
}

}  // namespace
}  // namespace gpuledger
