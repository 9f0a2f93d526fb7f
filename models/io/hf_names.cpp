// hf_parts (see hf_names.h).
#include "models/io/hf_names.h"

#include <stdexcept>

namespace gpuledger {

namespace {

std::vector<HfPart> gpt2_parts(const ModelConfig& m, const std::string& unit, const std::string& role,
                               const std::string& p) {
  const int64_t h = m.hidden;
  if (unit == "embedding") {
    if (role == "word.weight") return {{p + "wte.weight", 0, m.vocab, false}};
    if (role == "position.weight") return {{p + "wpe.weight", 0, m.max_seq, false}};
  } else if (unit == "head") {
    if (role == "word_copy.weight") return {{p + "wte.weight", 0, m.vocab, false}};
    if (role == "norm.weight") return {{p + "ln_f.weight", 0, h, false}};
    if (role == "norm.bias") return {{p + "ln_f.bias", 0, h, false}};
  } else {
    const std::string l = p + "h." + unit.substr(unit.find('.') + 1) + ".";
    const bool vector = role.ends_with(".bias") || role.starts_with("norm");
    auto part = [&](const std::string& name, int64_t rows) {
      return std::vector<HfPart>{{l + name, 0, rows, !vector}};
    };
    if (role == "qkv.weight") return part("attn.c_attn.weight", 3 * h);
    if (role == "qkv.bias") return part("attn.c_attn.bias", 3 * h);
    if (role == "attn_out.weight") return part("attn.c_proj.weight", h);
    if (role == "attn_out.bias") return part("attn.c_proj.bias", h);
    if (role == "mlp_in.weight") return part("mlp.c_fc.weight", m.ffn);
    if (role == "mlp_in.bias") return part("mlp.c_fc.bias", m.ffn);
    if (role == "mlp_out.weight") return part("mlp.c_proj.weight", h);
    if (role == "mlp_out.bias") return part("mlp.c_proj.bias", h);
    if (role == "norm1.weight") return part("ln_1.weight", h);
    if (role == "norm1.bias") return part("ln_1.bias", h);
    if (role == "norm2.weight") return part("ln_2.weight", h);
    if (role == "norm2.bias") return part("ln_2.bias", h);
  }
  return {};
}

std::vector<HfPart> llama_parts(const ModelConfig& m, const std::string& unit, const std::string& role) {
  const int64_t h = m.hidden, q = m.q_dim(), kv = m.kv_dim();
  if (unit == "embedding") {
    if (role == "word.weight") return {{"model.embed_tokens.weight", 0, m.vocab, false}};
  } else if (unit == "head") {
    if (role == "output.weight") return {{"lm_head.weight", 0, m.vocab, false}};
    if (role == "word_copy.weight") return {{"model.embed_tokens.weight", 0, m.vocab, false}};
    if (role == "norm.weight") return {{"model.norm.weight", 0, h, false}};
  } else {
    const std::string l = "model.layers." + unit.substr(unit.find('.') + 1) + ".";
    if (role == "qkv.weight" || role == "qkv.bias") {
      const std::string kind = role.substr(role.find('.'));  // ".weight" | ".bias"
      return {{l + "self_attn.q_proj" + kind, 0, q, false},
              {l + "self_attn.k_proj" + kind, q, kv, false},
              {l + "self_attn.v_proj" + kind, q + kv, kv, false}};
    }
    if (role == "attn_out.weight") return {{l + "self_attn.o_proj.weight", 0, h, false}};
    if (role == "attn_out.bias") return {{l + "self_attn.o_proj.bias", 0, h, false}};  // gpt-oss
    if (role == "attn.sinks") return {{l + "self_attn.sinks", 0, m.heads, false}};     // gpt-oss
    if (role == "mlp_gate.weight") return {{l + "mlp.gate_proj.weight", 0, m.ffn, false}};
    if (role == "mlp_up.weight") return {{l + "mlp.up_proj.weight", 0, m.ffn, false}};
    if (role == "mlp_out.weight") return {{l + "mlp.down_proj.weight", 0, h, false}};
    if (role == "norm1.weight") return {{l + "input_layernorm.weight", 0, h, false}};
    if (role == "norm2.weight") return {{l + "post_attention_layernorm.weight", 0, h, false}};
  }
  return {};
}

}  // namespace

std::vector<HfPart> hf_parts(const ModelConfig& m, const std::string& unit, const TensorSlot& slot,
                             const std::string& gpt_prefix) {
  std::vector<HfPart> parts = m.is_gpt() ? gpt2_parts(m, unit, slot.role, gpt_prefix) : llama_parts(m, unit, slot.role);
  if (parts.empty()) throw std::logic_error("hf_parts: no checkpoint name for " + unit + " " + slot.role);
  return parts;
}

}  // namespace gpuledger
