// ModelConfig: the model file (docs/architecture.md "A model file"), its loading from
// a preset name or a JSON path, and its validation. Parameter counts live in
// analytic/params.h (the analytic side), not here.
#pragma once
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace gpuledger {

enum class Flavour { kGpt, kLlama };

struct ModelConfig {
  std::string name;
  std::string source;  // where the values come from (paper, HF config URL)
  Flavour flavour = Flavour::kGpt;
  int64_t layers = 0;
  int64_t hidden = 0;                     // h
  int64_t heads = 0;                      // a (query heads)
  int64_t kv_heads = 0;                   // k (== heads for MHA; < heads for GQA/MQA)
  int64_t head_dim = 0;                   // d (defaults to hidden / heads)
  int64_t ffn = 0;                        // MLP inner size (gpt: 4h; llama: SwiGLU inner)
  int64_t vocab = 0;                      // V (unpadded, as published)
  int64_t max_seq = 0;                    // learned positions for gpt; context limit for llama
  bool tied_embeddings = false;           // head shares the word embedding
  bool qkv_bias = false;                  // llama flavour only (Qwen2.5); gpt has every bias
  std::optional<int64_t> sliding_window;  // Mistral: attention window in tokens
  double norm_eps = 1e-5;                 // LayerNorm / RMSNorm ε (GPT-2, Llama 2: 1e-5; HF rms_norm_eps)
  double rope_theta = 10000.0;            // llama: RoPE base θ (Su et al. 2021; Llama 3: 500000)
  bool qk_norm = false;                   // llama: RMSNorm over head_dim on Q and K per head (Qwen3)
  bool post_norms = false;                // llama: RMSNorm on each block's output before the residual add (Gemma 2, 3)
  bool attn_out_bias = false;             // llama: a bias on the attention-out projection (gpt-oss o_proj); gpt has it
  // llama: attention sinks (gpt-oss): one learned logit per query head that
  // joins every softmax row's denominator and has no value (kernels/device.h).
  bool attention_sinks = false;

  // Per-layer windows, repeating over the layers (none: full attention); empty:
  // sliding_window for every layer. Read through core/attention_pattern.h.
  std::vector<std::optional<int64_t>> attention_pattern;

  // Mixture of experts (docs/formulas/moe.md): every layer's MLP is a sparse
  // block when num_experts > 0 (llama flavour only): a router (h → E logits),
  // top-k of the softmax, k SwiGLU experts of inner size expert_ffn per token,
  // plus shared_experts SwiGLU experts of inner size shared_expert_ffn that
  // every token passes through. `ffn` is then unused by the layers.
  int64_t num_experts = 0;                // E (0: a dense model)
  int64_t experts_per_token = 0;          // k (HF num_experts_per_tok)
  int64_t expert_ffn = 0;                 // inner size of one expert (HF moe_intermediate_size)
  int64_t shared_experts = 0;             // experts every token uses (Qwen2-MoE, DeepSeek-MoE)
  int64_t shared_expert_ffn = 0;          // inner size of one shared expert
  bool norm_topk_prob = true;             // renormalise the k chosen probabilities to sum 1
  double router_aux_loss_coef = 0.0;      // α of the load-balancing loss α·E·Σ_e f_e·P_e
  std::optional<double> capacity_factor;  // c: an expert takes ⌈c·N·k/E⌉ tokens (none: no drops)
  // DeepSeek-MoE (DeepSeek-V2/V3 config.json): the first `dense_layers` layers
  // keep a dense SwiGLU MLP of inner size `ffn` (HF first_k_dense_replace);
  // router_bias: the router's per-expert score-correction bias, E values per MoE
  // layer (DeepSeek-V3's e_score_correction_bias, aux-loss-free balancing).
  int64_t dense_layers = 0;
  bool router_bias = false;
  // The router's score function (HF scoring_func; Megatron-LM
  // --moe-router-score-function): softmax over the E logits (Mixtral, Qwen3,
  // DeepSeek-V2), or sigmoid per expert (DeepSeek-V3), the chosen k scores then
  // renormalised with norm_topk_prob. Megatron takes router_bias with sigmoid
  // only (transformer_config.py, moe_router_enable_expert_bias).
  bool router_sigmoid = false;
  // gpt-oss (transformers' GptOssTopKRouter and GptOssExperts): the router
  // linear's bias (E values added to the logits, selection and weights alike),
  // and a bias on each routed expert's gate, up (f_e each) and down (h) projections.
  bool router_logit_bias = false;
  bool expert_biases = false;
  // gpt-oss (HF swiglu_limit): the routed experts' GLU clamped at this limit —
  // (clamp(up, ±L) + 1)·g·σ(1.702·g), g = min(gate, L) (kernels/device.h
  // swiglu_clamped_forward); none: SwiGLU.
  std::optional<double> swiglu_limit;
  // The combine weights' factor (HF routed_scaling_factor; Megatron-LM
  // --moe-router-topk-scaling-factor): DeepSeek-V3 2.5.
  double routed_scaling_factor = 1.0;

  // Multi-head latent attention (docs/formulas/mla.md; DeepSeek-V2, arXiv
  // 2405.04434 §2.1) when kv_lora_rank > 0 (llama flavour, kv_heads == heads,
  // head_dim == qk_nope_head_dim + qk_rope_head_dim): K and V come from a
  // latent of kv_lora_rank values per token, cached with one shared RoPE key
  // of qk_rope_head_dim; q_lora_rank 0 is a direct query projection (V2-Lite).
  int64_t q_lora_rank = 0;       // HF q_lora_rank (null: 0)
  int64_t kv_lora_rank = 0;      // HF kv_lora_rank (0: not MLA)
  int64_t qk_nope_head_dim = 0;  // per-head query/key part without RoPE
  int64_t qk_rope_head_dim = 0;  // per-head query part with RoPE; the one shared key of that size
  int64_t v_head_dim = 0;        // per-head value size
  // Multi-token prediction modules (HF num_nextn_predict_layers, DeepSeek-V3
  // §2.2): counted apart from Ψ (analytic::mtp_params) and not built by the runs.
  int64_t mtp_modules = 0;

  bool is_gpt() const { return flavour == Flavour::kGpt; }
  int64_t q_dim() const { return heads * head_dim; }      // a·d
  int64_t kv_dim() const { return kv_heads * head_dim; }  // k·d
  bool is_moe() const { return num_experts > 0; }
  // Layer i (0-based, global) holds the sparse MLP: a MoE model past its dense layers.
  bool is_moe_layer(int64_t i) const { return is_moe() && i >= dense_layers; }
  bool is_mla() const { return kv_lora_rank > 0; }
};

// A bad model file or value. `field` names the offending field ("" if none).
class ConfigError : public std::runtime_error {
 public:
  ConfigError(std::string field, const std::string& msg) : std::runtime_error(msg), field_(std::move(field)) {}
  const std::string& field() const { return field_; }

 private:
  std::string field_;
};

// Parse a model file's JSON text. Unknown fields, missing required fields,
// non-positive sizes, heads % kv_heads != 0, a gpt model with qkv_bias=false,
// etc. throw ConfigError naming the field; malformed JSON throws ConfigError
// with the line and column. `origin` is used in messages (a path or preset name).
ModelConfig parse_model_config(const std::string& json_text, const std::string& origin);

// Validate a config (called by parse_model_config; also after --layers).
void validate_model_config(const ModelConfig& m);

// Where the preset files (*.json) are: $GPULEDGER_PRESETS when set and not
// empty, else the first share/gpuledger/presets found in the running
// executable's folder or any folder above it. That finds an installed
// <prefix>/bin/gpuledger's <prefix>/share/gpuledger/presets, and, for binaries
// in a build tree (bench/gpuledger, tests/core/test_*), the copy the build
// places in <build>/share/gpuledger/presets. No source path is compiled in.
// Throws ConfigError naming every place it looked when none holds the presets.
std::string preset_dir();

// The search preset_dir() makes, with its inputs given: `env` is the value of
// GPULEDGER_PRESETS (empty: unset), `exe` the executable's path. `dir` is the
// folder found (empty: none); `looked` every folder tried, in order.
struct PresetSearch {
  std::string dir;
  std::vector<std::string> looked;
};
PresetSearch find_preset_dir(const std::string& env, const std::string& exe);

// Names of all presets (file stems), sorted.
std::vector<std::string> preset_names();

// Load a preset by name, or any path ending in .json (or containing '/').
// Unknown preset: ConfigError listing the known ones.
ModelConfig load_model(const std::string& name_or_path);

// `--layers N`: the same layer shape with N layers (the name is kept; the
// report's config carries the layer count). N must be >= 1.
ModelConfig with_layers(ModelConfig m, int64_t layers);

}  // namespace gpuledger
