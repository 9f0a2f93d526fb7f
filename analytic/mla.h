// Multi-head latent attention's closed forms (docs/formulas/mla.md;
// DeepSeek-V2, arXiv 2405.04434 §2.1): the attention tensors of one layer on
// one tensor-parallel rank, and the latent cache's values per token. Pure
// functions of the model config; the parameter units that hold the tensors
// are analytic/params.h.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "analytic/params.h"
#include "core/model_config.h"

namespace gpuledger::analytic {

// The attention tensors of one MLA layer on one of tp ranks, after norm 1 and
// before norm 2, in forward order:
//   q_lora_rank r_q > 0: q_down h·r_q and q_norm r_q (replicated), q_up r_q·a_t·(d_n + d_r);
//   r_q = 0: q h·a_t·(d_n + d_r);
//   kv_down h·(r_kv + d_r) and kv_norm r_kv (replicated), kv_up r_kv·a_t·(d_n + d_v);
//   attn_out a_t·d_v·h (row-parallel).
// a_t = a/t: the up projections are column-parallel by heads and the output
// row-parallel, the down projections and their norms whole on every rank
// (Megatron-LM's MLASelfAttention; the file and commit are in mla.cpp).
void append_mla_attention_tensors(std::vector<ParamTensor>& ts, const ModelConfig& m, int64_t tp,
                                  const std::string& prefix);

// Values one token keeps per layer: the normalised KV latent and the shared
// RoPE key, kv_lora_rank + qk_rope_head_dim (DeepSeek-V2 §2.1.2: (d_c + d_h^R)·l
// elements per token). The same on every tensor-parallel rank: the latent is
// not split by heads.
int64_t mla_cache_values_per_token(const ModelConfig& m);

}  // namespace gpuledger::analytic
