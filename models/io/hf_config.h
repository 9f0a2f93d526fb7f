// A Hugging Face config.json ↔ ModelConfig, for the architectures whose math
// gpuledger's transformer is (checked against transformers 5.24.0's
// modeling_llama.py, modeling_mistral.py, modeling_qwen2.py, modeling_gpt2.py):
//   model_type "gpt2"     → gpt flavour: learned positions, LayerNorm, biases,
//                           tanh-GELU ("gelu_new"), tied head;
//   "llama" | "mistral" | "qwen2" → llama flavour: RoPE (rotate-half, as
//                           transformers applies it), RMSNorm, SwiGLU ("silu"),
//                           GQA; qwen2 adds the q/k/v biases; mistral its
//                           sliding window.
// The norm ε (layer_norm_epsilon | rms_norm_eps), RoPE θ (rope_theta, or
// rope_parameters.rope_theta with rope_type "default") are read into the model.
// A field that would change the math in a way the model cannot represent
// (rope_scaling, attention_bias, mlp_bias, another activation, …) — and any
// field this reader does not know — is a ConfigError naming the field.
#pragma once
#include <string>

#include "core/model_config.h"

namespace gpuledger {

// `origin` (a path) names the file in messages.
ModelConfig model_from_hf_config(const std::string& json_text, const std::string& origin);
ModelConfig load_hf_config(const std::string& path);  // reads the file; ConfigError when absent

// The config.json of a model, as transformers reads it (GPT2LMHeadModel,
// LlamaForCausalLM, MistralForCausalLM or Qwen2ForCausalLM).
std::string hf_config_json(const ModelConfig& m);

}  // namespace gpuledger
