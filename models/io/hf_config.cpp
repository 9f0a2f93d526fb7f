// config.json ↔ ModelConfig (see hf_config.h).
#include "models/io/hf_config.h"

#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

namespace gpuledger {

using nlohmann::json;

namespace {

[[noreturn]] void fail(const std::string& field, const std::string& origin, const std::string& what) {
  throw ConfigError(field, origin + ": config.json field \"" + field + "\": " + what);
}

// Fields that change nothing in a training step or a forward (token ids,
// generation and bookkeeping, dropouts that must be 0 checked below).
const std::set<std::string>& ignored_fields() {
  static const std::set<std::string> k = {"architectures",
                                          "auto_map",
                                          "bos_token_id",
                                          "eos_token_id",
                                          "pad_token_id",
                                          "dtype",
                                          "torch_dtype",
                                          "transformers_version",
                                          "use_cache",
                                          "initializer_range",
                                          "pretraining_tp",
                                          "attn_implementation",
                                          "_name_or_path",
                                          "tokenizer_class",
                                          "output_attentions",
                                          "output_hidden_states",
                                          "return_dict",
                                          "max_window_layers",
                                          "summary_activation",
                                          "summary_first_dropout",
                                          "summary_proj_to_labels",
                                          "summary_type",
                                          "summary_use_proj",
                                          "n_ctx",
                                          "task_specific_params",
                                          "add_cross_attention",
                                          "layer_types"};
  return k;
}

struct Reader {
  const json& j;
  const std::string& origin;
  std::set<std::string> used;

  bool has(const std::string& f) { return j.contains(f) && !j.at(f).is_null(); }
  int64_t integer(const std::string& f) {
    used.insert(f);
    if (!j.contains(f) || !j.at(f).is_number_integer()) fail(f, origin, "missing or not an integer");
    return j.at(f).get<int64_t>();
  }
  std::optional<int64_t> optional_integer(const std::string& f) {
    used.insert(f);
    if (!has(f)) return std::nullopt;
    return integer(f);
  }
  double number(const std::string& f, double fallback) {
    used.insert(f);
    if (!has(f)) return fallback;
    if (!j.at(f).is_number()) fail(f, origin, "not a number");
    return j.at(f).get<double>();
  }
  bool boolean(const std::string& f, bool fallback) {
    used.insert(f);
    if (!has(f)) return fallback;
    if (!j.at(f).is_boolean()) fail(f, origin, "not true or false");
    return j.at(f).get<bool>();
  }
  std::string string(const std::string& f, const std::string& fallback) {
    used.insert(f);
    if (!has(f)) return fallback;
    if (!j.at(f).is_string()) fail(f, origin, "not a string");
    return j.at(f).get<std::string>();
  }
  // A field the model represents only at one value.
  void require_bool(const std::string& f, bool allowed, bool fallback, const std::string& why) {
    if (boolean(f, fallback) != allowed) fail(f, origin, why);
  }
  void require_zero(const std::string& f) {
    if (number(f, 0.0) != 0.0) fail(f, origin, "dropout must be 0: gpuledger's dropout is --dropout, not the model's");
  }
  void require_null(const std::string& f, const std::string& why) {
    used.insert(f);
    if (has(f)) fail(f, origin, why);
  }
  void finish() {
    for (const auto& [f, v] : j.items())
      if (!used.count(f) && !ignored_fields().count(f))
        fail(f, origin, "unknown to gpuledger, which cannot tell whether it changes the model");
  }
};

void read_gpt2(Reader& r, ModelConfig& m) {
  m.flavour = Flavour::kGpt;
  m.layers = r.integer("n_layer");
  m.hidden = r.integer("n_embd");
  m.heads = r.integer("n_head");
  m.kv_heads = m.heads;
  m.head_dim = m.heads > 0 ? m.hidden / m.heads : 0;
  m.ffn = r.optional_integer("n_inner").value_or(4 * m.hidden);
  m.vocab = r.integer("vocab_size");
  m.max_seq = r.integer("n_positions");
  m.norm_eps = r.number("layer_norm_epsilon", 1e-5);
  m.qkv_bias = true;
  // GPT2LMHeadModel always ties lm_head to wte (its _tied_weights_keys).
  r.require_bool("tie_word_embeddings", true, true, "GPT-2's head is the word embedding: must be true");
  m.tied_embeddings = true;
  const std::string act = r.string("activation_function", "gelu_new");
  if (act != "gelu_new" && act != "gelu_pytorch_tanh")
    r.require_null("activation_function", "\"" + act + "\": gpuledger's GELU is the tanh approximation (gelu_new)");
  r.require_bool("scale_attn_weights", true, true, "attention scores are scaled by 1/sqrt(d)");
  r.require_bool("scale_attn_by_inverse_layer_idx", false, false, "not represented");
  r.require_bool("reorder_and_upcast_attn", false, false, "not represented");
  for (const char* f : {"resid_pdrop", "embd_pdrop", "attn_pdrop"}) r.require_zero(f);
}

void read_llama_family(Reader& r, ModelConfig& m, const std::string& type) {
  m.flavour = Flavour::kLlama;
  m.layers = r.integer("num_hidden_layers");
  m.hidden = r.integer("hidden_size");
  m.heads = r.integer("num_attention_heads");
  m.kv_heads = r.optional_integer("num_key_value_heads").value_or(m.heads);
  m.head_dim = r.optional_integer("head_dim").value_or(m.heads > 0 ? m.hidden / m.heads : 0);
  m.ffn = r.integer("intermediate_size");
  m.vocab = r.integer("vocab_size");
  m.max_seq = r.integer("max_position_embeddings");
  m.norm_eps = r.number("rms_norm_eps", 1e-6);
  m.tied_embeddings = r.boolean("tie_word_embeddings", false);
  if (r.string("hidden_act", "silu") != "silu") r.require_null("hidden_act", "gpuledger's MLP is SwiGLU (silu)");
  r.require_zero("attention_dropout");
  m.rope_theta = r.number("rope_theta", 10000.0);
  r.used.insert("rope_parameters");
  if (r.has("rope_parameters")) {  // transformers 5: {"rope_type": "default", "rope_theta": θ}
    const json& p = r.j.at("rope_parameters");
    if (!p.is_object()) fail("rope_parameters", r.origin, "not an object");
    for (const auto& [k, v] : p.items()) {
      if (k == "rope_theta" && v.is_number())
        m.rope_theta = v.get<double>();
      else if (!(k == "rope_type" && v == "default"))
        fail("rope_parameters." + k, r.origin, "only rope_type \"default\" (unscaled RoPE) is represented");
    }
  }
  r.require_null("rope_scaling", "scaled RoPE is not represented");
  r.require_bool("mlp_bias", false, false, "the llama flavour's MLP has no biases");
  if (type == "qwen2") {  // Qwen2Attention: q/k/v biases, none on o_proj
    m.qkv_bias = true;
    const bool window = r.boolean("use_sliding_window", false);
    r.used.insert("sliding_window");
    if (window) fail("use_sliding_window", r.origin, "Qwen2's per-layer sliding window is not represented");
  } else {
    r.require_bool("attention_bias", false, false, "biases on q/k/v and o are not represented (qwen2 has q/k/v only)");
    m.qkv_bias = false;
    if (type == "mistral") m.sliding_window = r.optional_integer("sliding_window");
  }
}

}  // namespace

ModelConfig model_from_hf_config(const std::string& json_text, const std::string& origin) {
  const json j = json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) throw ConfigError("config.json", origin + ": config.json is not a JSON object");
  Reader r{j, origin, {}};
  const std::string type = r.string("model_type", "");
  ModelConfig m;
  m.name = type;
  m.source = origin;
  if (type == "gpt2")
    read_gpt2(r, m);
  else if (type == "llama" || type == "mistral" || type == "qwen2")
    read_llama_family(r, m, type);
  else
    fail("model_type", origin, "\"" + type + "\": gpuledger reads gpt2, llama, mistral and qwen2");
  r.finish();
  try {
    validate_model_config(m);
  } catch (const ConfigError& e) {
    throw ConfigError(e.field(), origin + ": " + e.what());
  }
  return m;
}

ModelConfig load_hf_config(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw ConfigError("config.json", path + ": cannot read");
  std::stringstream text;
  text << in.rdbuf();
  return model_from_hf_config(text.str(), path);
}

std::string hf_config_json(const ModelConfig& m) {
  if (m.is_moe() || m.qk_norm || m.post_norms)  // Mixtral / Qwen3 / Gemma configs and tensor names are not written yet
    throw ConfigError(m.is_moe() ? "num_experts" : (m.qk_norm ? "qk_norm" : "post_norms"),
                      "model '" + m.name +
                          "': writing a Hugging Face config of a MoE, QK-norm or post-norm model is not implemented");
  if (m.attn_out_bias || m.attention_sinks)  // gpt-oss's o_proj bias and sinks have no Llama/Qwen2 config field
    throw ConfigError(m.attention_sinks ? "attention_sinks" : "attn_out_bias",
                      "model '" + m.name +
                          "': writing a Hugging Face config with an attention-out bias or attention sinks is not "
                          "implemented");
  if (!m.attention_pattern.empty())  // Gemma 3 / gpt-oss configs (layer_types) are not written yet
    throw ConfigError("attention_pattern", "model '" + m.name +
                                               "': writing a Hugging Face config of a per-layer attention pattern "
                                               "is not implemented");
  if (m.is_mla())  // a llama config would describe another attention
    throw ConfigError("kv_lora_rank", "model '" + m.name +
                                          "': writing a Hugging Face config of a multi-head latent attention model "
                                          "is not implemented");
  json j;
  if (m.is_gpt()) {
    j = {{"model_type", "gpt2"},
         {"architectures", {"GPT2LMHeadModel"}},
         {"n_layer", m.layers},
         {"n_embd", m.hidden},
         {"n_head", m.heads},
         {"n_inner", m.ffn},
         {"vocab_size", m.vocab},
         {"n_positions", m.max_seq},
         {"layer_norm_epsilon", m.norm_eps},
         {"activation_function", "gelu_new"},
         {"resid_pdrop", 0.0},
         {"embd_pdrop", 0.0},
         {"attn_pdrop", 0.0},
         {"tie_word_embeddings", true}};
    return j.dump(2) + "\n";
  }
  const std::string type = m.qkv_bias ? "qwen2" : m.sliding_window ? "mistral" : "llama";
  const std::string arch = type == "qwen2"     ? "Qwen2ForCausalLM"
                           : type == "mistral" ? "MistralForCausalLM"
                                               : "LlamaForCausalLM";
  j = {{"model_type", type},
       {"architectures", {arch}},
       {"num_hidden_layers", m.layers},
       {"hidden_size", m.hidden},
       {"num_attention_heads", m.heads},
       {"num_key_value_heads", m.kv_heads},
       {"head_dim", m.head_dim},
       {"intermediate_size", m.ffn},
       {"vocab_size", m.vocab},
       {"max_position_embeddings", m.max_seq},
       {"rms_norm_eps", m.norm_eps},
       {"rope_theta", m.rope_theta},
       {"hidden_act", "silu"},
       {"tie_word_embeddings", m.tied_embeddings}};
  if (type == "mistral") j["sliding_window"] = *m.sliding_window;
  if (type != "qwen2") j["attention_bias"] = false;
  return j.dump(2) + "\n";
}

}  // namespace gpuledger
