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

// Bytes one MLA layer's attention block saves for the backward on one of tp
// ranks, for b sequences of s tokens (n = b·s) in e-byte activations, from the
// norm-1 output to the context (docs/exact-budget.md "Activations", MLA rows;
// docs/formulas/mla.md "Training"): the query latent and its normalised copy
// 2·n·r_q·e and their fp32 rstd 4n (r_q > 0); the KV latent and its
// normalised copy 2·n·r_kv·e and 4n; q_nope, k_nope 2·n·a_t·d_n·e; q_rope
// n·a_t·d_r·e; the shared k_rope n·d_r·e; v and the context 2·n·a_t·d_v·e;
// with keep_probs (recompute none) the probabilities b·a_t·s²·e.
int64_t mla_attention_activation_bytes(const ModelConfig& m, int64_t b, int64_t s, int64_t tp, int64_t e,
                                       bool keep_probs);

// GEMM FLOPs of one MLA layer's attention forward on one of tp ranks, b
// sequences of s tokens (n = b·s), 2 FLOPs a multiply-add:
//   replicated (whole on every rank): q_down 2n·h·r_q, kv_down 2n·h·(r_kv + d_r);
//   sharded: q_up 2n·r_q·a_t·(d_n + d_r) (r_q = 0: q 2n·h·a_t·(d_n + d_r)),
//            kv_up 2n·r_kv·a_t·(d_n + d_v), o_proj 2n·a_t·d_v·h;
//   core: the two score products 2·b·a_t·s²·(d_n + d_r) and P·v 2·b·a_t·s²·d_v.
// The backward executes twice each (an input- and a weight-gradient GEMM per
// projection; dS·k, dSᵀ·q for both score products, dctx·vᵀ and Pᵀ·dctx).
struct MlaForwardFlops {
  int64_t replicated = 0, sharded = 0, core = 0;
};
MlaForwardFlops mla_attention_forward_flops(const ModelConfig& m, int64_t b, int64_t s, int64_t tp);

// The tensors of an MLA layer whose gradient each TP rank holds in part (the
// down projections and the latents' norms, replicated while the up
// projections split the heads), in elements, one all-reduce over tp each per
// step (docs/formulas/mla.md "Training"): h·r_q, r_q (r_q > 0), h·(r_kv + d_r), r_kv.
std::vector<int64_t> mla_tp_partial_grad_elems(const ModelConfig& m);

// Values one token keeps per layer: the normalised KV latent and the shared
// RoPE key, kv_lora_rank + qk_rope_head_dim (DeepSeek-V2 §2.1.2: (d_c + d_h^R)·l
// elements per token). The same on every tensor-parallel rank: the latent is
// not split by heads.
int64_t mla_cache_values_per_token(const ModelConfig& m);

}  // namespace gpuledger::analytic
