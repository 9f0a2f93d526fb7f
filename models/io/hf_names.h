// Where each tensor of gpuledger's model lives in a Hugging Face checkpoint.
// One of our full (t = 1) tensors is one or more checkpoint tensors stacked by
// rows (HfPart): our fused QKV is Llama's q_proj | k_proj | v_proj, and
// GPT-2's c_attn already fused in that order (transformers' GPT2Attention
// splits c_attn's output into q, k, v along the last dimension).
//   GPT-2 (modeling_gpt2.py): "transformer." + wte, wpe, h.N.{ln_1, attn.c_attn,
//     attn.c_proj, ln_2, mlp.c_fc, mlp.c_proj}, ln_f. Its Conv1D stores
//     weights (in × out), used as y = x·W + b: ours are (out × in), so every
//     GPT-2 matrix but wte and wpe is transposed. Older files (the original
//     openai-community/gpt2) have the same names without "transformer.".
//   Llama / Mistral / Qwen2 (modeling_llama.py): model.embed_tokens,
//     model.layers.N.{input_layernorm, self_attn.{q,k,v,o}_proj,
//     post_attention_layernorm, mlp.{gate,up,down}_proj}, model.norm, lm_head
//     (absent when tied); every matrix (out × in), as ours.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/model_config.h"
#include "models/transformer/param_layout.h"

namespace gpuledger {

struct HfPart {
  std::string name;         // the checkpoint tensor
  int64_t first_row = 0;    // the first row of our full tensor it holds
  int64_t rows = 0;         // how many
  bool transposed = false;  // stored (cols × rows): GPT-2's Conv1D
};

// The checkpoint tensors of tensor `slot` of unit `unit` (names from a
// one-rank layout, make_param_layout). `gpt_prefix` is "transformer." or "".
std::vector<HfPart> hf_parts(const ModelConfig& m, const std::string& unit, const TensorSlot& slot,
                             const std::string& gpt_prefix = "transformer.");

}  // namespace gpuledger
