// One transformer layer on one tensor-parallel rank — a single mechanism for
// both flavours (docs/architecture.md "Model flavours"), configured by LayerConfig:
//   gpt:   LayerNorm, GELU MLP, biases on every linear layer;
//   llama: RMSNorm, RoPE on Q and K, SwiGLU MLP, no biases (QKV bias optional);
//   attention materialized (QKᵀ GEMM into fp32 scores, softmax, dropout, ·V)
//   or flash (the Device's tiled kernel); recompute none / selective / full.
//
//   x ─ norm1 ─ QKV ─ (RoPE) ─ core ─ attn-out ─ AR ─ (+b) ─ dropout ─ + ─ norm2 ─ MLP ─ AR ─ (+b) ─ dropout ─ + ─ out
//   └──────────────────────────────────────────────────────────────────┘  └──────────────────────────────────────┘
// With post_norms (Gemma 2 and 3: Gemma Team 2024, arXiv:2408.00118 §2; the
// post_attention_layernorm and post_feedforward_layernorm of transformers'
// Gemma3DecoderLayer) each block's output passes an RMSNorm of its own before
// the dropout and the residual add: ... (+b) ─ post norm ─ dropout ─ + ...
// Tensor parallelism (Megatron, Shoeybi et al. 2019 §3): QKV and MLP-in are
// column-parallel, attention-out and MLP-out row-parallel; the forward
// all-reduces (AR) the two row-parallel outputs over ctx.tp, the backward the
// gradients of the two column-parallel inputs.
// Sequence parallelism (cfg.sp, Korthikanti et al. 2022 §4.2.2): the residual
// stream, the norms, the dropouts and the residual adds run on this rank's
// token shard — tokens [r·N/t, (r+1)·N/t) of the N = b·s tokens in (B, T)
// order (norms and dropouts are per token, so any token split serves; the
// bytes are b·s_l·h, s_l = s/t). Each AR becomes: forward, all-gather (AG) of
// the norm output into QKV / MLP-in and reduce-scatter (RS) of the
// attention-out / MLP-out output; backward, AG of the output gradient, AG of
// the saved sharded norm output again (for the weight gradients) and RS of the
// input gradient. The gradients of the replicated tensors computed on shards
// (norm γ β, gpt's row-parallel biases) are then partial sums, all-reduced
// over tp once per step by StageModel::reduce_tp_partial_grads.
// KV heads replicated over ranks (t > k): each replica's K/V weight gradient
// covers only its rank's queries; StageModel::reduce_tp_partial_grads sums
// them too.
//
// Saved tensors (docs/exact-budget.md "Activations", account activations):
//   none:      norm-1 stats + output, Q K V (after RoPE), the core's saved
//              tensors (materialized: probs, and with dropout its mask and the
//              dropped probs; flash: the fp32 log-sum-exp), the context,
//              attention-out dropout mask, norm-2 input, stats and output, the
//              MLP's (gpt: GELU input and output; llama: gate, up, SwiGLU
//              output), MLP dropout mask; with qk_norm (Qwen3) Q and K before
//              the QK norm and its rstd (qk_norm.cpp); with post_norms (Gemma
//              2, 3) each block's output before its post norm and the norm's
//              rstd. The layer input is the caller's.
//   selective: the same without the core's tensors, which backward recomputes
//              from Q, K, V (re-running QKᵀ and P·V, as Megatron's
//              checkpointed core attention does) in workspace.
//   full:      nothing (only the caller's layer input); backward re-runs the
//              whole forward with every tensor in workspace, then backward.
// Backward frees each saved tensor once consumed; activation gradients and
// every temporary are workspace. The residual gradient flows in place through
// one buffer: on entry dL/d(out), on return dL/d(x).
//
// Multi-head latent attention (cfg.mla; DeepSeek-V2 §2.1, docs/formulas/mla.md
// "Training"): the attention block is mla_attention.h's, between the same
// mappings — the norm output gathered (sp) into it, o_proj's partial sums
// reduced (sp: reduce-scattered) out of it, and in backward dxn's partial sums
// reduced over tp. Its down projections and latent norms are whole on every
// rank, their gradients partial sums over the ranks' heads, which
// StageModel::reduce_tp_partial_grads sums (Megatron-LM's MLASelfAttention
// splits the same way). Saved instead of Q K V, the core's and the context:
// the block's MlaSaved (the latents, their norms and rstd, the heads, the
// probabilities unless selective, the context); the materialized core only
// (the flash kernel has one head dim for Q, K and V), without attention
// dropout, on one context-parallel rank.
//
// Conventions: tensors (B, T, C) row-major; Q (B, a_t, T, d), K and V
// (B, k_t, T, d) in one buffer; the context (B, a_t, T, d). Weights (out × in),
// y = x·Wᵀ. Weight gradients accumulate (the caller zeroes them once a step).
#pragma once
#include <cstdint>
#include <optional>

#include "comm/comm.h"
#include "core/model_config.h"
#include "core/run_config.h"
#include "kernels/device.h"
#include "models/moe/moe_block.h"
#include "models/transformer/context_ring.h"
#include "models/transformer/mla_attention.h"
#include "models/transformer/params.h"
#include "models/transformer/tp_mappings.h"

namespace gpuledger {

struct LayerConfig {
  bool gpt = true;  // gpt flavour (else llama)
  bool qkv_bias = true;
  bool qk_norm = false;                             // llama: RMSNorm over d on each head's Q and K before RoPE (Qwen3)
  bool post_norms = false;                          // llama: RMSNorm on each block's output before the residual add
  bool out_bias = true;                             // the attention-out projection's bias (gpt; llama: gpt-oss)
  bool sinks = false;                               // attention sinks (gpt-oss): a_t logits, see core_forward
  int64_t b = 1, s = 1;                             // microbatch, sequence
  int64_t h = 0, a_t = 0, k_t = 0, d = 0, f_t = 0;  // per-TP-rank sizes
  std::optional<int64_t> window;
  float norm_eps = 1e-5f;       // the model's norm ε (ModelConfig::norm_eps)
  float rope_theta = 10000.0f;  // the model's RoPE base θ (ModelConfig::rope_theta)
  DType e = DType::kBF16;       // compute / activation dtype
  DType g = DType::kBF16;       // gradient dtype
  float dropout = 0.0f;
  AttentionKind attention = AttentionKind::kMaterialized;
  Recompute recompute = Recompute::kNone;
  bool sp = false;  // sequence parallelism (only with tp > 1)
  int64_t tp = 1;   // tensor-parallel size (the shard count under sp)
  // Mixture of experts (ModelConfig::num_experts > 0): the MLP is a MoeBlock
  // (models/moe/moe_block.h) of these experts; f_t is then unused.
  bool moe = false;
  moe::RoutingConfig routing;
  int64_t expert_ffn = 0, shared_ffn = 0;                 // f_e; S·f_s
  bool router_logit_bias = false, expert_biases = false;  // gpt-oss's biases (MoeShape)
  std::optional<float> swiglu_limit;                      // gpt-oss's clamped GLU (MoeShape)
  // Expert parallelism: the block holds E/ep experts and exchanges tokens
  // over ep_comm (the expert-parallel group, ep ranks; null when ep = 1).
  int64_t ep = 1;
  Comm* ep_comm = nullptr;
  // Context parallelism: the ring the flash core runs over (the StageModel's;
  // s is then the rank's seq / cp tokens). Null: the rank holds the whole sequence.
  const ContextRing* ring = nullptr;
  Comm* cp_comm = nullptr;  // the ring's group (cp > 1): a MoE layer's load-balancing statistics are summed over it
  // Multi-head latent attention (ModelConfig::is_mla()): the attention is the
  // block of mla_attention.h on the a_t heads; d = d_n + d_r, k_t = a_t.
  bool mla = false;
  int64_t q_lora_rank = 0, kv_lora_rank = 0, qk_nope = 0, qk_rope = 0, v_head = 0;

  int64_t tokens() const { return b * s; }
  // Tokens of the rank's shard of the residual stream: N/t under sp, else N.
  int64_t tokens_local() const { return sp ? tokens() / tp : tokens(); }
  // One hidden-sized tensor of the rank's residual stream (tokens_local × h, in e).
  int64_t hidden_local_bytes() const { return dtype_bytes(e) * tokens_local() * h; }
  int64_t q_dim() const { return a_t * d; }
  int64_t kv_dim() const { return k_t * d; }
  int64_t qkv_dim() const { return (a_t + 2 * k_t) * d; }
  AttnShape attn_shape() const;
  // Where the s local tokens sit in the sequence (RoPE, learned positions).
  TokenSpans positions() const { return ring ? ring->local_positions() : TokenSpans{}; }
  // B_kv: the bytes of the rank's K and V (the ring's block).
  int64_t kv_block_bytes() const { return 2 * b * s * kv_dim() * dtype_bytes(e); }
  int64_t norm_stats_bytes() const { return (gpt ? 2 : 1) * 4 * tokens_local(); }  // fp32 mean, rstd
};

// The layer shape of `m` under tensor parallelism t, with the run's options.
LayerConfig make_layer_config(const ModelConfig& m, const RunConfig& r, int64_t tp);

// The dropout key of a hidden-sized mask (the residual stream's dropouts) on
// a rank holding a shard of the microbatch's tokens — under sp TP rank
// tp_rank's, under context parallelism the cp rank's chunks, under both shard
// tp_rank + t·cp_rank — so that every shard draws its own mask; k itself when
// the rank holds every token.
RngKey token_shard_key(RngKey k, const LayerConfig& c, int64_t tp_rank);

// Pointers into one layer unit (weights in e, gradients in g); absent tensors nullptr.
struct LayerParams {
  const void *norm1_w = nullptr, *norm1_b = nullptr, *qkv_w = nullptr, *qkv_b = nullptr, *out_w = nullptr,
             *out_b = nullptr, *norm2_w = nullptr, *norm2_b = nullptr, *mlp_in_w = nullptr, *mlp_in_b = nullptr,
             *gate_w = nullptr, *up_w = nullptr, *mlp_out_w = nullptr, *mlp_out_b = nullptr, *q_norm_w = nullptr,
             *k_norm_w = nullptr, *post_attn_norm_w = nullptr, *post_mlp_norm_w = nullptr, *sinks = nullptr;
  MoeWeights moe;  // the "moe.*" tensors (weights and gradients) of a MoE layer
  MlaWeights mla;  // the "mla.*" tensors and attn_out of an MLA layer
  void *d_norm1_w = nullptr, *d_norm1_b = nullptr, *d_qkv_w = nullptr, *d_qkv_b = nullptr, *d_out_w = nullptr,
       *d_out_b = nullptr, *d_norm2_w = nullptr, *d_norm2_b = nullptr, *d_mlp_in_w = nullptr, *d_mlp_in_b = nullptr,
       *d_gate_w = nullptr, *d_up_w = nullptr, *d_mlp_out_w = nullptr, *d_mlp_out_b = nullptr, *d_q_norm_w = nullptr,
       *d_k_norm_w = nullptr, *d_post_attn_norm_w = nullptr, *d_post_mlp_norm_w = nullptr, *d_sinks = nullptr;
};
LayerParams layer_params(const Params& p, size_t unit);

// Dropout streams of one layer for one microbatch (Philox keys, kernels/philox.h).
struct LayerKeys {
  RngKey attn_probs, attn_out, mlp_out;
};

// What one layer keeps between its forward and backward for one microbatch.
// Per-rank shapes: mbs = b, seq = s, s_l = s/t under sp (else s), h the
// hidden size, d the head dim, a_t / k_t the rank's query / KV heads, f_t =
// ffn/t; e the compute dtype; "scores" = [mbs, a_t, seq, seq].
struct LayerSaved {
  Buffer norm1_stats;   // [mbs, s_l] fp32 rstd (gpt: also mean, ×2)
  Buffer norm1_out;     // [mbs, s_l, h] e
  Buffer qkv;           // Q [mbs, a_t, seq, d] | K, V [mbs, k_t, seq, d] e, after RoPE
  Buffer qk_norm_in;    // qk_norm: Q [mbs, a_t, seq, d] | K [mbs, k_t, seq, d] e, before the QK norm
  Buffer qk_norm_rstd;  // qk_norm: [mbs, a_t + k_t, seq] fp32 rstd of each head's rows
  Buffer probs;         // scores e: softmax(scale·QKᵀ) (materialized core)
  Buffer attn_mask;     // scores uint8 (dropout > 0)
  Buffer dropped;       // scores e: the dropped probabilities (dropout > 0)
  Buffer lse;           // [mbs, a_t, seq] fp32 log-sum-exp (flash core)
  Buffer ctx;           // [mbs, a_t, seq, d] e: the context
  Buffer out_mask;      // [mbs, s_l, h] uint8 attention-out dropout
  Buffer norm2_in;      // [mbs, s_l, h] e: the residual after attention
  Buffer norm2_stats;   // [mbs, s_l] fp32 rstd (gpt: also mean, ×2)
  Buffer norm2_out;     // [mbs, s_l, h] e
  Buffer mlp_a;         // [mbs, seq, f_t] e: gpt GELU input; llama gate
  Buffer mlp_b;         // [mbs, seq, f_t] e: llama up (gpt: none)
  Buffer mlp_act;       // [mbs, seq, f_t] e: GELU / SwiGLU output
  Buffer mlp_mask;      // [mbs, s_l, h] uint8 MLP-out dropout
  // post_norms (Gemma 2, 3): each block's output before its RMSNorm, and the norm's rstd.
  Buffer post_attn_in;     // [mbs, s_l, h] e
  Buffer post_attn_stats;  // [mbs, s_l] fp32 rstd
  Buffer post_mlp_in;      // [mbs, s_l, h] e
  Buffer post_mlp_stats;   // [mbs, s_l] fp32 rstd
  // A MoE layer's block (moe_block.h): its saved tensors, routing and load-balancing loss.
  MoeSaved moe;
  // An MLA layer's attention block (mla_attention.h): its saved tensors.
  MlaSaved mla;
  // Set before backward: d(loss)/d(this layer's load-balancing loss).
  double moe_aux_scale = 0;
  void clear() { *this = LayerSaved{}; }
};

class TransformerLayer {
 public:
  TransformerLayer(Device& device, Comm& tp, const LayerConfig& cfg, const LayerParams& params);

  // out = layer(x), both (tokens_local × h): the whole (B, T, h) without sp,
  // the rank's token shard with it. x stays the caller's (it is the saved layer
  // input); out is allocated by the caller. `saved` receives what backward needs.
  void forward(const void* x, void* out, const LayerKeys& keys, LayerSaved& saved);
  // dres: on entry dL/d(out), on return dL/d(x). Consumes (frees) `saved`;
  // accumulates the weight gradients.
  void backward(const void* x, void* dres, const LayerKeys& keys, LayerSaved& saved);

  const LayerConfig& config() const { return cfg_; }

 private:
  friend class InferenceLayer;  // models/transformer/infer_layer.h reuses norm_forward / mlp_forward
  // layer.cpp
  void forward_impl(const void* x, void* out, const LayerKeys& keys, LayerSaved& s, Account acc, bool keep_core);
  void norm_forward(void* out, Buffer& stats, const void* x, const void* w, const void* b);
  void norm_backward(void* dx, void* dw, void* db, const void* dout, const void* x, const void* w, const Buffer& stats,
                     bool accumulate_dx = true);
  // A block's output (hidden-sized): workspace, or with post_norms the post norm's saved input (account acc).
  Buffer block_output(Account acc, const char* what);
  // post_norms: the returned workspace = RMSNorm(in) of a block's output `in` (from block_output), its rstd
  // saved in `stats` (account acc).
  Buffer post_norm_forward(Buffer& in, Buffer& stats, const void* w, Account acc);
  // dy (the gradient of the post norm's output) -> the returned gradient of the block's output; frees in, stats.
  Buffer post_norm_backward(const void* dy, void* dw, const void* w, Buffer& in, Buffer& stats);
  Buffer ws(int64_t bytes, const char* what);
  // Under `full`'s first forward nothing is kept: a tensor is freed after its last forward use.
  void done(Buffer& b) {
    if (discard_) b.reset();
  }
  // The rank's tokens between blocks, for the TP mappings (tp_mappings.h).
  TpRegion tp_region() const { return TpRegion{dev_, tp_, cfg_.sp, cfg_.tokens(), cfg_.h, cfg_.e}; }
  // Dropout key of the hidden-sized masks: under sp each rank draws its own
  // shard's mask (the site field's spare bits carry the TP rank).
  RngKey hidden_key(RngKey k) const;
  // attention.cpp
  void attention_forward(const void* xn, void* y, const LayerKeys& keys, LayerSaved& s, Account acc, bool keep_core);
  void core_forward(LayerSaved& s, const LayerKeys& keys, Account acc, bool keep, void* ctx);
  // The materialized core on q (B, a_t, T, d), k and v (B, k_t, T, d): the fp32
  // scores (workspace) and the probabilities in s.probs (booked in `core_acc`).
  void materialized_core(const void* q, const void* k, const void* v, void* ctx, LayerSaved& s, const LayerKeys& keys,
                         Account core_acc);
  void core_backward(const void* dctx, void* dq, void* dk, void* dv, LayerSaved& s, const LayerKeys& keys);
  void qk_grads_from_scores(const void* ds, const void* q, const void* k, void* dq, void* dk);
  // The flash core's ring: cfg.ring, or the layer's own ring of one rank.
  const ContextRing& ring() const { return cfg_.ring ? *cfg_.ring : single_rank_; }
  // dxn may alias dy: both blocks write dxn only after their last read of dy.
  void attention_backward(const void* dy, void* dxn, const LayerKeys& keys, LayerSaved& s);
  // qk_norm.cpp (Qwen3): q, k (head layout, `rows_q` = B·a_t·T and `rows_k` =
  // B·k_t·T rows of d) = RMSNorm of q_in, k_in with the shared per-head γ;
  // rstd (rows_q + rows_k, fp32) may be null (inference), q may alias q_in.
  void qk_norm_forward(void* q, void* k, float* rstd, const void* q_in, const void* k_in, int64_t rows_q,
                       int64_t rows_k);
  // split_qkv with the QK norm: the projected Q, K saved in s.qk_norm_in (and
  // the rstd), the normed ones written to q, k; v as split_qkv.
  void qk_norm_split(void* q, void* k, void* v, const void* qkv_rows, LayerSaved& s, Account acc);
  // dq, dk (after RoPE's backward) -> the gradients before the norm, in the
  // returned workspace (dq, dk repointed into it); accumulates the γ gradients.
  Buffer qk_norm_backward(void*& dq, void*& dk, LayerSaved& s);
  // mla_layer.cpp: the attention of an MLA layer (cfg.mla)
  MlaShape mla_shape() const;
  void mla_attention_forward(const void* xn, void* y, LayerSaved& s, Account acc, bool keep_core);
  void mla_attention_backward(const void* dy, void* dxn, LayerSaved& s);
  // mlp.cpp
  void mlp_forward(const void* xn, void* y, LayerSaved& s, Account acc);
  void mlp_backward(const void* dy, void* dxn, LayerSaved& s);
  MoeShape moe_shape() const;

  Device& dev_;
  Comm& tp_;
  LayerConfig cfg_;
  LayerParams p_;
  bool discard_ = false;     // forward under `full`: nothing is kept, free tensors after last use
  ContextRing single_rank_;  // the whole sequence on this rank (no ring buffers)
};

}  // namespace gpuledger
