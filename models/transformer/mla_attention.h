// Multi-head latent attention (DeepSeek-V2, arXiv 2405.04434 §2.1;
// docs/formulas/mla.md) on one rank, forward and backward, on the existing
// Device ops: GEMMs, RMSNorm, RoPE, the head layout and the materialized
// softmax. The attention of a TransformerLayer of an MLA model (mla_layer.cpp,
// which adds the tensor-parallel mappings around it), and checked on its own
// against a PyTorch reference (tests/models/transformer/test_mla_attention.cpp).
//
// On one of t tensor-parallel ranks the block holds a_t = a/t heads of q_up,
// kv_up (column-parallel) and o_proj (row-parallel), and the whole down
// projections and latent norms. Its backward is then linear in the rank's
// heads' part: d(latent) from the rank's up projections is a partial sum over
// the ranks, and so, through the RMSNorm backward (linear in its output
// gradient) and the down projections, are dxn and the gradients of the
// replicated tensors; the caller sums dxn over tp as for any
// column-parallel input, and the replicated gradients once a step
// (StageModel::reduce_tp_partial_grads).
//
//   xn ─┬─ q_down ─ q_norm ─┬─ q_up[nope] ─────────── q_nope ┐
//       │   (or xn directly) └─ q_up[rope] ─ RoPE ──── q_rope ┤  S = q_nope·k_nopeᵀ + q_rope·k_ropeᵀ
//       ├─ kv_down[latent] ─ kv_norm ─┬─ kv_up[k] ─── k_nope ┤  P = softmax(S / sqrt(d_n + d_r)), causal
//       │                             └─ kv_up[v] ─── v ─────┤  ctx = P·v ─ o_proj ─ y
//       └─ kv_down[rope] ─ RoPE ──────────────────── k_rope ┘  (k_rope: one head, shared)
//
// Query and key heads are never assembled: the scores are the sum of the two
// products, so the value head may differ from the query/key head (d_v ≠
// d_n + d_r) with no padding, and the shared RoPE key is read by every head.
//
// Weight layout (row-major, out × in; y = x·Wᵀ). kv_down's rows are the
// latent's r_kv then the RoPE key's d_r, as kv_a_proj_with_mqa's. q_up (or q,
// when r_q = 0) holds the a_t·d_n "nope" rows of every head, then the a_t·d_r
// RoPE rows; kv_up the a_t·d_n key rows, then the a_t·d_v value rows. Hugging
// Face's q_b_proj and kv_b_proj interleave them per head ([nope, rope], [k, v]):
// a checkpoint reader permutes the rows. RoPE is the rotate-half convention of
// Device::rope_forward (transformers' apply_rotary_pos_emb; DeepSeek's
// checkpoints store the RoPE rows interleaved, a second fixed permutation).
// The softmax scale is (d_n + d_r)^(−1/2), without YaRN's mscale.
#pragma once
#include <cstdint>

#include "core/dtype.h"
#include "kernels/device.h"

namespace gpuledger {

struct MlaShape {
  int64_t b = 1, s = 1, h = 0, a_t = 0;  // microbatch, sequence, hidden, heads on the rank
  int64_t r_q = 0, r_kv = 0;             // q_lora_rank (0: direct query), kv_lora_rank
  int64_t d_n = 0, d_r = 0, d_v = 0;     // qk_nope, qk_rope, v head dims
  float norm_eps = 1e-6f, rope_theta = 10000.0f;
  DType e = DType::kBF16, g = DType::kBF16;  // compute and gradient dtypes
  int64_t tokens() const { return b * s; }
};

// Weights in e and their gradients in g (accumulated); the q_down and q_norm
// pair is null when r_q = 0.
struct MlaWeights {
  const void *q_down = nullptr, *q_norm = nullptr, *q_up = nullptr, *kv_down = nullptr, *kv_norm = nullptr,
             *kv_up = nullptr, *out = nullptr;
  void *d_q_down = nullptr, *d_q_norm = nullptr, *d_q_up = nullptr, *d_kv_down = nullptr, *d_kv_norm = nullptr,
       *d_kv_up = nullptr, *d_out = nullptr;
};

// What the forward keeps for the backward (account `acc` of mla_forward).
struct MlaSaved {
  Buffer cq, cq_rstd, cqn;                   // query latent, its fp32 rstd, normalised (r_q > 0)
  Buffer ckv, ckv_rstd, ckvn;                // KV latent, rstd, normalised
  Buffer q_nope, q_rope, k_nope, k_rope, v;  // heads (B, a_t, T, ·); k_rope (B, 1, T, d_r); RoPE applied
  Buffer probs, ctx;                         // (B, a_t, T, T) in e; (B, a_t, T, d_v)
};

// y (n × h, e) = the attention of xn (n × h, e), n = b·s tokens at positions 0 … s − 1.
// keep_probs false (selective recompute): the probabilities are workspace,
// freed once the context is formed; mla_recompute_core rebuilds them.
void mla_forward(Device& dev, const MlaShape& sh, const MlaWeights& w, const void* xn, void* y, MlaSaved& saved,
                 Account acc, bool keep_probs = true);
// The core from the saved heads: the fp32 scores (workspace), the
// probabilities into saved.probs (booked in probs_acc), ctx (B, a_t, T, d_v) = P·v.
void mla_core_forward(Device& dev, const MlaShape& sh, MlaSaved& saved, void* ctx, Account probs_acc);
// Selective recompute: the core's forward again (the probabilities into
// saved.probs as workspace, the context into a workspace dropped at once), as
// Megatron's checkpointed core attention re-runs its whole forward.
void mla_recompute_core(Device& dev, const MlaShape& sh, MlaSaved& saved);
// dxn (n × h, e) = d(y)/d(xn)ᵀ·dy; the weight gradients accumulated. Frees `saved`.
void mla_backward(Device& dev, const MlaShape& sh, const MlaWeights& w, const void* xn, const void* dy, void* dxn,
                  MlaSaved& saved);

}  // namespace gpuledger
