// Model files: parsing (nlohmann/json), defaults, validation, and finding
// presets on disk. The schema is docs/architecture.md "A model file". Parameter counts
// are not here (analytic/params.cpp).
//
// Decisions the schema leaves open, fixed here:
// - `qkv_bias` for gpt: a gpt model has every bias (GPT-2), so qkv_bias
//   defaults to true and an explicit `"qkv_bias": false` is an error rather
//   than silently ignored (config.h: "a gpt model with qkv_bias=false").
// - gpt is multi-head attention with head_dim·heads == hidden: kv_heads, when
//   given, must equal heads; sliding_window must be null.
// - `source` is optional (a hand-written file may have none); every preset
//   carries one (tests/models/test_config.cpp checks it).
// - Integers must be JSON integers: 32.0 is a type error, not 32.
#include "core/model_config.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <string_view>

#include <nlohmann/json.hpp>

#include "core/attention_pattern.h"
#include "core/input_file.h"
#include "core/limits.h"

namespace gpuledger {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// ---- error helpers ----

[[noreturn]] void fail(const std::string& field, const std::string& origin, const std::string& what) {
  std::string msg = origin + ": ";
  if (!field.empty()) msg += "field '" + field + "': ";
  throw ConfigError(field, msg + what);
}

const char* json_type_name(const json& v) {
  if (v.is_number_integer()) return "integer";
  if (v.is_number_float()) return "number";
  return v.type_name();  // "null", "boolean", "string", "array", "object"
}

// Line and column (both 1-based) of the byte at 0-based `index` in `text`.
std::pair<size_t, size_t> line_col(const std::string& text, size_t index) {
  index = std::min(index, text.size());
  size_t line = 1, line_start = 0;
  for (size_t i = 0; i < index; ++i) {
    if (text[i] == '\n') {
      ++line;
      line_start = i + 1;
    }
  }
  return {line, index - line_start + 1};
}

// ---- typed field readers ----

int64_t get_int(const json& v, const std::string& field, const std::string& origin) {
  if (v.is_number_unsigned()) {
    const auto u = v.get<uint64_t>();
    if (u > static_cast<uint64_t>(INT64_MAX)) fail(field, origin, "integer too large");
    return static_cast<int64_t>(u);
  }
  if (v.is_number_integer()) return v.get<int64_t>();
  fail(field, origin, std::string("expected an integer, got ") + json_type_name(v));
}

bool get_bool(const json& v, const std::string& field, const std::string& origin) {
  if (!v.is_boolean()) fail(field, origin, std::string("expected true or false, got ") + json_type_name(v));
  return v.get<bool>();
}

std::string get_string(const json& v, const std::string& field, const std::string& origin) {
  if (!v.is_string()) fail(field, origin, std::string("expected a string, got ") + json_type_name(v));
  return v.get<std::string>();
}

const std::vector<std::string>& known_fields() {
  static const std::vector<std::string> k = {"name",
                                             "source",
                                             "flavour",
                                             "layers",
                                             "hidden",
                                             "heads",
                                             "kv_heads",
                                             "head_dim",
                                             "ffn",
                                             "vocab",
                                             "max_seq",
                                             "tied_embeddings",
                                             "qkv_bias",
                                             "sliding_window",
                                             "attention_pattern",
                                             "norm_eps",
                                             "rope_theta",
                                             "qk_norm",
                                             "post_norms",
                                             "attn_out_bias",
                                             "attention_sinks",
                                             "num_experts",
                                             "experts_per_token",
                                             "expert_ffn",
                                             "shared_experts",
                                             "shared_expert_ffn",
                                             "norm_topk_prob",
                                             "router_aux_loss_coef",
                                             "capacity_factor",
                                             "dense_layers",
                                             "router_bias",
                                             "router_logit_bias",
                                             "expert_biases",
                                             "swiglu_limit",
                                             "score_function",
                                             "routed_scaling_factor",
                                             "q_lora_rank",
                                             "kv_lora_rank",
                                             "qk_nope_head_dim",
                                             "qk_rope_head_dim",
                                             "v_head_dim",
                                             "mtp_modules"};
  return k;
}

std::string join(const std::vector<std::string>& xs, const std::string& sep) {
  std::string out;
  for (size_t i = 0; i < xs.size(); ++i) out += (i ? sep : "") + xs[i];
  return out;
}

// The mixture-of-experts fields (docs/formulas/moe.md): all zero for a dense
// model; with num_experts > 0, 1 <= k <= E, the expert sizes positive and in
// limits, the coefficients finite and in range.
void validate_moe(const ModelConfig& m, const std::string& origin) {
  const auto str = [](auto v) { return std::to_string(v); };
  if (m.num_experts < 0) fail("num_experts", origin, "must be >= 0 (0: a dense model), got " + str(m.num_experts));
  if (m.num_experts > limits::kMaxExperts)
    fail("num_experts", origin, str(m.num_experts) + " is above the limit " + str(limits::kMaxExperts));
  if (!m.is_moe()) {
    const std::pair<const char*, bool> set[] = {{"experts_per_token", m.experts_per_token != 0},
                                                {"expert_ffn", m.expert_ffn != 0},
                                                {"shared_experts", m.shared_experts != 0},
                                                {"shared_expert_ffn", m.shared_expert_ffn != 0},
                                                {"router_aux_loss_coef", m.router_aux_loss_coef != 0.0},
                                                {"capacity_factor", m.capacity_factor.has_value()},
                                                {"dense_layers", m.dense_layers != 0},
                                                {"router_bias", m.router_bias},
                                                {"router_logit_bias", m.router_logit_bias},
                                                {"expert_biases", m.expert_biases},
                                                {"swiglu_limit", m.swiglu_limit.has_value()},
                                                {"score_function", m.router_sigmoid},
                                                {"routed_scaling_factor", m.routed_scaling_factor != 1.0}};
    for (const auto& [field, given] : set)
      if (given) fail(field, origin, "is a mixture-of-experts field: give num_experts > 0 or leave it out");
    return;
  }
  if (m.is_gpt()) fail("num_experts", origin, "mixture of experts needs the llama flavour (SwiGLU experts)");
  // DeepSeek's first_k_dense_replace: at least one layer stays a MoE layer.
  if (m.dense_layers < 0 || m.dense_layers >= m.layers)
    fail(
        "dense_layers", origin,
        "must be in [0, layers " + str(m.layers) + ") (the first layers with a dense MLP), got " + str(m.dense_layers));
  if (m.experts_per_token < 1 || m.experts_per_token > m.num_experts)
    fail("experts_per_token", origin,
         "must be in [1, num_experts " + str(m.num_experts) + "], got " + str(m.experts_per_token));
  if (m.expert_ffn < 1 || m.expert_ffn > limits::kMaxFfn)
    fail("expert_ffn", origin, "must be in [1, " + str(limits::kMaxFfn) + "], got " + str(m.expert_ffn));
  if (m.shared_experts < 0 || m.shared_experts > limits::kMaxExperts)
    fail("shared_experts", origin, "must be in [0, " + str(limits::kMaxExperts) + "], got " + str(m.shared_experts));
  if (m.shared_experts > 0 && (m.shared_expert_ffn < 1 || m.shared_expert_ffn > limits::kMaxFfn))
    fail("shared_expert_ffn", origin,
         "must be in [1, " + str(limits::kMaxFfn) + "] with shared experts, got " + str(m.shared_expert_ffn));
  if (m.shared_experts == 0 && m.shared_expert_ffn != 0)
    fail("shared_expert_ffn", origin, "given without shared_experts");
  if (!(m.router_aux_loss_coef >= 0 && m.router_aux_loss_coef < 1))
    fail("router_aux_loss_coef", origin, "must be in [0, 1), got " + str(m.router_aux_loss_coef));
  if (m.router_bias && !m.router_sigmoid)
    fail("router_bias", origin,
         "the expert bias (aux-loss-free balancing) needs score_function \"sigmoid\", as Megatron-LM's "
         "--moe-router-enable-expert-bias does");
  if (m.swiglu_limit && !(*m.swiglu_limit > 0 && *m.swiglu_limit <= 1e6))
    fail("swiglu_limit", origin, "must be null or in (0, 1e6], got " + str(*m.swiglu_limit));
  if (!(m.routed_scaling_factor > 0 && m.routed_scaling_factor <= 1000))
    fail("routed_scaling_factor", origin, "must be in (0, 1000], got " + str(m.routed_scaling_factor));
  // c·N·k/E tokens per expert: beyond c = E one expert could take every token k times over.
  if (m.capacity_factor && !(*m.capacity_factor > 0 && *m.capacity_factor <= static_cast<double>(m.num_experts)))
    fail("capacity_factor", origin,
         "must be null (no drops) or in (0, num_experts " + str(m.num_experts) + "], got " + str(*m.capacity_factor));
}

// Multi-head latent attention (docs/formulas/mla.md): all zero unless
// kv_lora_rank > 0; then a llama-flavour model whose heads are the query
// heads (kv_heads == heads) and whose head_dim is the query/key head,
// qk_nope_head_dim + qk_rope_head_dim (HF DeepseekV3Config.qk_head_dim).
void validate_mla(const ModelConfig& m, const std::string& origin) {
  const auto str = [](auto v) { return std::to_string(v); };
  const std::pair<const char*, int64_t> dims[] = {{"q_lora_rank", m.q_lora_rank},
                                                  {"kv_lora_rank", m.kv_lora_rank},
                                                  {"qk_nope_head_dim", m.qk_nope_head_dim},
                                                  {"qk_rope_head_dim", m.qk_rope_head_dim},
                                                  {"v_head_dim", m.v_head_dim}};
  for (const auto& [field, value] : dims) {
    const int64_t cap = std::string_view(field).ends_with("rank") ? limits::kMaxHidden : limits::kMaxHeadDim;
    if (value < 0 || value > cap) fail(field, origin, "must be in [0, " + str(cap) + "], got " + str(value));
  }
  if (m.mtp_modules < 0 || m.mtp_modules > limits::kMaxLayers)
    fail("mtp_modules", origin, "must be in [0, " + str(limits::kMaxLayers) + "], got " + str(m.mtp_modules));
  if (!m.is_mla()) {
    for (const auto& [field, value] : dims)
      if (value != 0)
        fail(field, origin, "is a multi-head latent attention field: give kv_lora_rank > 0 or leave it out");
    return;
  }
  if (m.is_gpt()) fail("kv_lora_rank", origin, "multi-head latent attention needs the llama flavour (RMSNorm, RoPE)");
  for (const auto& [field, value] : dims)
    if (value < 1 && std::string_view(field).ends_with("head_dim"))
      fail(field, origin, "must be >= 1 with kv_lora_rank, got 0");
  if (m.qk_rope_head_dim % 2 != 0)
    fail("qk_rope_head_dim", origin, "RoPE rotates pairs: must be even, got " + str(m.qk_rope_head_dim));
  if (m.head_dim != m.qk_nope_head_dim + m.qk_rope_head_dim)
    fail("head_dim", origin,
         "multi-head latent attention's query/key head is qk_nope_head_dim + qk_rope_head_dim = " +
             str(m.qk_nope_head_dim + m.qk_rope_head_dim) + ", got " + str(m.head_dim));
  if (m.kv_heads != m.heads)
    fail("kv_heads", origin,
         "multi-head latent attention up-projects keys and values for every head: kv_heads must equal heads " +
             str(m.heads));
  if (m.qkv_bias) fail("qkv_bias", origin, "multi-head latent attention's projections have no bias");
  if (m.qk_norm) fail("qk_norm", origin, "multi-head latent attention normalises its latents, not Q and K per head");
  if (m.sliding_window) fail("sliding_window", origin, "is not supported with multi-head latent attention");
  if (m.attention_sinks)
    fail("attention_sinks", origin, "are not supported with multi-head latent attention (its own attention block)");
  if (m.attn_out_bias) fail("attn_out_bias", origin, "multi-head latent attention's projections have no bias");
}

// The checks shared by parse_model_config and validate_model_config.
void validate_with_origin(const ModelConfig& m, const std::string& origin) {
  if (m.name.empty()) fail("name", origin, "must be a non-empty string");
  const std::pair<const char*, int64_t> sizes[] = {
      {"layers", m.layers},     {"hidden", m.hidden}, {"heads", m.heads}, {"kv_heads", m.kv_heads},
      {"head_dim", m.head_dim}, {"ffn", m.ffn},       {"vocab", m.vocab}, {"max_seq", m.max_seq}};
  for (const auto& [field, value] : sizes)
    if (value <= 0) fail(field, origin, "must be a positive integer, got " + std::to_string(value));
  // The stated limits (core/limits.h): beyond them no budget is computed.
  const std::pair<const char*, int64_t> limits[] = {{"layers", limits::kMaxLayers},    {"hidden", limits::kMaxHidden},
                                                    {"heads", limits::kMaxHeads},      {"kv_heads", limits::kMaxHeads},
                                                    {"head_dim", limits::kMaxHeadDim}, {"ffn", limits::kMaxFfn},
                                                    {"vocab", limits::kMaxVocab},      {"max_seq", limits::kMaxTokens}};
  for (size_t i = 0; i < std::size(sizes); ++i)
    if (sizes[i].second > limits[i].second)
      fail(sizes[i].first, origin,
           std::to_string(sizes[i].second) + " is above the limit " + std::to_string(limits[i].second));
  if (m.sliding_window && *m.sliding_window > limits::kMaxTokens)
    fail("sliding_window", origin,
         std::to_string(*m.sliding_window) + " is above the limit " + std::to_string(limits::kMaxTokens));
  for (const auto& [field, text] : {std::pair<const char*, const std::string&>{"name", m.name}, {"source", m.source}})
    for (const char c : text)
      if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f)
        fail(field, origin, "holds a control character (names are printed in tables and messages)");
  if (m.heads % m.kv_heads != 0)
    fail("kv_heads", origin,
         "heads " + std::to_string(m.heads) + " is not a multiple of kv_heads " + std::to_string(m.kv_heads));
  if (!(m.norm_eps > 0 && m.norm_eps < 1))
    fail("norm_eps", origin, "must be in (0, 1), got " + std::to_string(m.norm_eps));
  if (!(m.rope_theta > 1 && m.rope_theta < 1e12))
    fail("rope_theta", origin, "must be in (1, 1e12), got " + std::to_string(m.rope_theta));
  if (m.sliding_window && *m.sliding_window <= 0)
    fail("sliding_window", origin, "must be null or a positive integer, got " + std::to_string(*m.sliding_window));
  validate_moe(m, origin);
  validate_mla(m, origin);
  if (m.is_gpt() && m.qk_norm) fail("qk_norm", origin, "gpt has no QK norm (a llama-flavour option, Qwen3)");
  if (m.is_gpt() && m.post_norms)
    fail("post_norms", origin, "gpt has no post-block norms (a llama-flavour option, Gemma 2 and 3)");
  if (m.is_gpt() && m.attn_out_bias)
    fail("attn_out_bias", origin, "gpt has every bias already (a llama-flavour option, gpt-oss)");
  if (m.is_gpt() && m.attention_sinks)
    fail("attention_sinks", origin, "gpt has no attention sinks (a llama-flavour option, gpt-oss)");
  if (m.is_gpt()) {
    // GPT-2: MHA, every linear has a bias, learned positions, no window.
    if (m.head_dim * m.heads != m.hidden)
      fail("head_dim", origin,
           "gpt requires head_dim·heads == hidden, got " + std::to_string(m.head_dim) + "·" + std::to_string(m.heads) +
               " != " + std::to_string(m.hidden));
    if (m.kv_heads != m.heads)
      fail("kv_heads", origin, "gpt is multi-head attention: kv_heads must equal heads " + std::to_string(m.heads));
    if (!m.qkv_bias) fail("qkv_bias", origin, "gpt has every bias: qkv_bias cannot be false");
    if (m.sliding_window) fail("sliding_window", origin, "gpt has no sliding-window attention");
  }
  validate_attention_pattern(m, origin);
}

// qk_norm, post_norms and the mixture-of-experts fields (all optional; a dense model has none).
void read_moe_fields(const json& j, ModelConfig& m, const std::string& origin) {
  if (j.contains("qk_norm")) m.qk_norm = get_bool(j.at("qk_norm"), "qk_norm", origin);
  if (j.contains("post_norms")) m.post_norms = get_bool(j.at("post_norms"), "post_norms", origin);
  for (auto [field, value] :
       {std::pair{"attn_out_bias", &m.attn_out_bias}, std::pair{"attention_sinks", &m.attention_sinks},
        std::pair{"router_logit_bias", &m.router_logit_bias}, std::pair{"expert_biases", &m.expert_biases}})
    if (j.contains(field)) *value = get_bool(j.at(field), field, origin);
  for (auto [field, value] :
       {std::pair{"num_experts", &m.num_experts}, std::pair{"experts_per_token", &m.experts_per_token},
        std::pair{"expert_ffn", &m.expert_ffn}, std::pair{"shared_experts", &m.shared_experts},
        std::pair{"shared_expert_ffn", &m.shared_expert_ffn}, std::pair{"dense_layers", &m.dense_layers}})
    if (j.contains(field)) *value = get_int(j.at(field), field, origin);
  if (j.contains("router_bias")) m.router_bias = get_bool(j.at("router_bias"), "router_bias", origin);
  if (j.contains("score_function")) {
    const std::string f = get_string(j.at("score_function"), "score_function", origin);
    if (f != "softmax" && f != "sigmoid")
      fail("score_function", origin, "must be \"softmax\" or \"sigmoid\", got \"" + f + "\"");
    m.router_sigmoid = f == "sigmoid";
  }
  if (j.contains("norm_topk_prob")) m.norm_topk_prob = get_bool(j.at("norm_topk_prob"), "norm_topk_prob", origin);
  if (j.contains("swiglu_limit") && !j.at("swiglu_limit").is_null()) {
    if (!j.at("swiglu_limit").is_number())
      fail("swiglu_limit", origin,
           std::string("expected a number or null, got ") + json_type_name(j.at("swiglu_limit")));
    m.swiglu_limit = j.at("swiglu_limit").get<double>();
  }
  if (j.contains("capacity_factor") && !j.at("capacity_factor").is_null()) {
    if (!j.at("capacity_factor").is_number())
      fail("capacity_factor", origin,
           std::string("expected a number or null, got ") + json_type_name(j.at("capacity_factor")));
    m.capacity_factor = j.at("capacity_factor").get<double>();
  }
}

// The multi-head latent attention fields and the MTP module count (optional;
// q_lora_rank null is HF's "no query compression", read as 0).
void read_mla_fields(const json& j, ModelConfig& m, const std::string& origin) {
  for (auto [field, value] :
       {std::pair{"q_lora_rank", &m.q_lora_rank}, std::pair{"kv_lora_rank", &m.kv_lora_rank},
        std::pair{"qk_nope_head_dim", &m.qk_nope_head_dim}, std::pair{"qk_rope_head_dim", &m.qk_rope_head_dim},
        std::pair{"v_head_dim", &m.v_head_dim}, std::pair{"mtp_modules", &m.mtp_modules}})
    if (j.contains(field) && !(field == std::string_view("q_lora_rank") && j.at(field).is_null()))
      *value = get_int(j.at(field), field, origin);
}

}  // namespace

// ---- parsing ----

ModelConfig parse_model_config(const std::string& json_text, const std::string& origin) {
  json j;
  try {
    j = json::parse(json_text);
  } catch (const json::parse_error& e) {
    // e.byte is the 1-based count of bytes read when the error was found,
    // so the offending byte is at index byte - 1.
    const size_t index = e.byte > 0 ? e.byte - 1 : 0;
    const auto [line, col] = line_col(json_text, index);
    std::string detail = e.what();
    // nlohmann's message is "[json.exception.parse_error.101] parse error at
    // line L, column C: <reason>"; keep only the reason (which may hold ": ").
    if (const auto pos = detail.find(": "); pos != std::string::npos) detail = detail.substr(pos + 2);
    throw ConfigError("", origin + ":" + std::to_string(line) + ":" + std::to_string(col) + ": malformed JSON (line " +
                              std::to_string(line) + ", column " + std::to_string(col) + "): " + detail);
  } catch (const json::exception& e) {
    // A number beyond double's range ("layers": 1e400) is out_of_range.406, not a parse error.
    std::string detail = e.what();
    if (const auto pos = detail.find("] "); pos != std::string::npos) detail = detail.substr(pos + 2);
    throw ConfigError("", origin + ": malformed JSON: " + detail);
  }
  if (!j.is_object()) fail("", origin, std::string("a model file is a JSON object, got ") + json_type_name(j));

  for (const auto& [key, value] : j.items()) {
    const auto& k = known_fields();
    if (std::find(k.begin(), k.end(), key) == k.end())
      fail(key, origin, "unknown field (known: " + join(k, ", ") + ")");
  }
  auto required = [&](const char* field) -> const json& {
    if (!j.contains(field)) fail(field, origin, "missing required field");
    return j.at(field);
  };

  ModelConfig m;
  m.name = get_string(required("name"), "name", origin);
  if (j.contains("source")) m.source = get_string(j.at("source"), "source", origin);

  const std::string flavour = get_string(required("flavour"), "flavour", origin);
  if (flavour == "gpt") {
    m.flavour = Flavour::kGpt;
  } else if (flavour == "llama") {
    m.flavour = Flavour::kLlama;
  } else {
    fail("flavour", origin, "must be \"gpt\" or \"llama\", got \"" + flavour + "\"");
  }

  m.layers = get_int(required("layers"), "layers", origin);
  m.hidden = get_int(required("hidden"), "hidden", origin);
  m.heads = get_int(required("heads"), "heads", origin);
  m.vocab = get_int(required("vocab"), "vocab", origin);
  m.max_seq = get_int(required("max_seq"), "max_seq", origin);
  m.kv_heads = j.contains("kv_heads") ? get_int(j.at("kv_heads"), "kv_heads", origin) : m.heads;

  if (j.contains("head_dim")) {
    m.head_dim = get_int(j.at("head_dim"), "head_dim", origin);
  } else if (m.heads > 0 && m.hidden > 0) {
    if (m.hidden % m.heads != 0)
      fail("head_dim", origin,
           "hidden " + std::to_string(m.hidden) + " is not a multiple of heads " + std::to_string(m.heads) +
               ": give head_dim explicitly");
    m.head_dim = m.hidden / m.heads;
  }  // else left 0: validation names the non-positive size

  if (j.contains("ffn")) {
    m.ffn = get_int(j.at("ffn"), "ffn", origin);
  } else if (m.is_gpt()) {
    m.ffn = 4 * m.hidden;  // GPT-2: MLP inner size 4h (Radford et al. 2019, as GPT-1)
  } else {
    fail("ffn", origin, "missing required field (llama's SwiGLU inner size has no default)");
  }

  m.tied_embeddings =
      j.contains("tied_embeddings") ? get_bool(j.at("tied_embeddings"), "tied_embeddings", origin) : m.is_gpt();
  m.qkv_bias = j.contains("qkv_bias") ? get_bool(j.at("qkv_bias"), "qkv_bias", origin) : m.is_gpt();
  if (j.contains("sliding_window") && !j.at("sliding_window").is_null())
    m.sliding_window = get_int(j.at("sliding_window"), "sliding_window", origin);
  if (j.contains("attention_pattern"))
    m.attention_pattern = parse_attention_pattern(j.at("attention_pattern"), m.sliding_window, origin);
  read_moe_fields(j, m, origin);
  read_mla_fields(j, m, origin);
  for (auto [field, value] : {std::pair{"norm_eps", &m.norm_eps}, std::pair{"rope_theta", &m.rope_theta},
                              std::pair{"router_aux_loss_coef", &m.router_aux_loss_coef},
                              std::pair{"routed_scaling_factor", &m.routed_scaling_factor}})
    if (j.contains(field)) {
      if (!j.at(field).is_number())
        fail(field, origin, std::string("expected a number, got ") + json_type_name(j.at(field)));
      *value = j.at(field).get<double>();
    }

  validate_with_origin(m, origin);
  return m;
}

void validate_model_config(const ModelConfig& m) {
  validate_with_origin(m, m.name.empty() ? std::string("model") : m.name);
}

// ---- presets ----

PresetSearch find_preset_dir(const std::string& env, const std::string& exe) {
  PresetSearch search;
  std::error_code ec;
  if (!env.empty()) {
    // An explicit choice is never second-guessed: a wrong one is an error, not a fallback.
    search.looked.push_back(env + " ($GPULEDGER_PRESETS)");
    if (fs::is_directory(env, ec)) search.dir = env;
    return search;
  }
  if (exe.empty()) return search;
  const fs::path start = fs::path(exe).parent_path();
  for (fs::path dir = start; !dir.empty(); dir = dir.parent_path()) {
    const fs::path candidate = dir / "share" / "gpuledger" / "presets";
    search.looked.push_back(candidate.string());
    if (fs::is_directory(candidate, ec)) {
      search.dir = candidate.string();
      return search;
    }
    if (dir == dir.parent_path()) break;  // the root
  }
  return search;
}

std::string preset_dir() {
  const char* env = std::getenv("GPULEDGER_PRESETS");
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  const PresetSearch search = find_preset_dir(env ? env : "", ec ? std::string() : exe.string());
  if (!search.dir.empty()) return search.dir;
  std::string msg = "model presets not found; looked in ";
  msg +=
      search.looked.empty() ? std::string("no folder (the executable's path is unknown)") : join(search.looked, ", ");
  msg += "; set GPULEDGER_PRESETS to the folder holding the preset .json files, or give --model a path";
  throw ConfigError("", msg);
}

std::vector<std::string> preset_names() {
  std::vector<std::string> names;
  std::error_code ec;
  for (fs::directory_iterator it(preset_dir(), ec), end; !ec && it != end; it.increment(ec)) {
    if (it->path().extension() == ".json") names.push_back(it->path().stem().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

namespace {

std::string read_file(const fs::path& path) {
  return read_input_file(path.string(), limits::kMaxModelFileBytes, "model file");
}

bool looks_like_path(const std::string& s) {
  return s.find('/') != std::string::npos || (s.size() > 5 && s.compare(s.size() - 5, 5, ".json") == 0);
}

}  // namespace

ModelConfig load_model(const std::string& name_or_path) {
  check_printable_name("model", name_or_path);
  if (looks_like_path(name_or_path)) return parse_model_config(read_file(name_or_path), name_or_path);

  const fs::path path = fs::path(preset_dir()) / (name_or_path + ".json");
  std::error_code ec;
  if (name_or_path.empty() || !fs::is_regular_file(path, ec)) {
    const auto names = preset_names();
    throw ConfigError("", "unknown model preset '" + name_or_path + "' (in " + preset_dir() +
                              "); known presets: " + (names.empty() ? std::string("none") : join(names, ", ")) +
                              "; or give a path to a .json model file");
  }
  return parse_model_config(read_file(path), "preset " + name_or_path + " (" + path.string() + ")");
}

ModelConfig with_layers(ModelConfig m, int64_t layers) {
  if (layers < 1 || layers > limits::kMaxLayers)
    throw ConfigError("layers", (m.name.empty() ? std::string("model") : m.name) + ": --layers must be in [1, " +
                                    std::to_string(limits::kMaxLayers) + "], got " + std::to_string(layers));
  m.layers = layers;
  // The first N layers keep their windows: a pattern longer than N is cut, and
  // a sliding_window no kept layer uses is dropped (core/attention_pattern.h).
  if (static_cast<int64_t>(m.attention_pattern.size()) > layers) {
    m.attention_pattern.resize(static_cast<size_t>(layers));
    const auto& p = m.attention_pattern;
    if (std::find(p.begin(), p.end(), m.sliding_window) == p.end()) m.sliding_window.reset();
  }
  validate_model_config(m);
  return m;
}

}  // namespace gpuledger
