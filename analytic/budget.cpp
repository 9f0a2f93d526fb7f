// One rank's analytic budget: the exact accounts (model states, activations,
// communication staging, the workspace upper bound), the published figures,
// the per-step communication and FLOPs. Every formula but the communication
// staging (docs/exact-budget.md "Communication staging") and the workspace
// bound (below) lives in the per-budget files this one calls.
#include "analytic/budget.h"

#include <algorithm>
#include <cmath>

#include "analytic/activations.h"
#include "analytic/dp_staging.h"
#include "analytic/fp8.h"
#include "analytic/model_states.h"
#include "analytic/moe.h"
#include "analytic/params.h"
#include "analytic/pipeline.h"
#include "core/checked_math.h"
#include "core/int_math.h"

namespace gpuledger::analytic {
namespace {

// ZeRO 0/1 with ep > 1: the dense gradients' buckets over dp ("dp.bucket")
// and the expert-sharded ones' over the expert-data-parallel group
// ("edp.bucket", none when dp = ep), both held the run long
// (parallel/dp/grad_sync.h): ZeRO 0 4·min(S·bucket, P_r − P_x) +
// 4·min(S·bucket, P_x); ZeRO 1 the reduce-scatter pieces of each unit's dense
// part over dp and of its expert part over dp/ep ranks.
int64_t expert_parallel_staging_bytes(const std::vector<ParamUnit>& units, const Layout& l, int64_t bucket,
                                      bool overlap) {
  std::vector<int64_t> dense, experts;
  int64_t p_x = 0;
  for (const auto& u : units) {
    dense.push_back(u.elems() - u.expert_sharded_elems());
    experts.push_back(u.expert_sharded_elems());
    p_x = checked_add(p_x, u.expert_sharded_elems(), "expert parameters of a rank");
  }
  const int64_t edp = l.dp / l.ep;
  int64_t n = dp_reduce_staging_bytes(dense, l.zero, l.dp, bucket, overlap);
  if (p_x > 0 && edp > 1)
    n = checked_add(n, dp_reduce_staging_bytes(experts, l.zero, edp, bucket, overlap), "comm staging bytes");
  return n;
}

// docs/exact-budget.md "Communication staging", summed (they coexist):
//   DP reduction (n > 1, ZeRO 0/1): fp32 staging slots, S = 2 when the
//     reduction overlaps the backward (--overlap-grad-reduce, the default),
//     else 1 — ZeRO 0: 4 · min(S·⌊bucket_mb·2²⁰ / g⌋, P_r) (all-reduce
//     buckets); ZeRO 1: 4 · S · n · min(⌊bucket/n⌋, max_u ⌈P_u/n⌉)
//     (reduce-scatter pieces; analytic/dp_staging.h);
//   ZeRO-2/3 unit gradient buffer (n > 1): g · n · max_u ⌈P_u / n⌉ (under
//     ep > 1 the largest unit with each part padded to its group);
//   ZeRO-2/3 with tied embeddings, n > 1, p = 1: the head's word-embedding
//     gradient, g · V'/t · h, held from the head's backward to the
//     embedding's (the staging buffer then holds another unit's gradient);
//   PP buffers (p > 1), e·b·s_l·h each (s_l = s/cp, /t under sp): first stage send-activation +
//     recv-gradient, last stage recv-activation + send-gradient, middle all
//     four; with vpp > 1 every stage all four;
//   CP ring buffers (cp > 1), B_kv = 2·b·(s/cp)·k·d·e each: two K/V blocks
//     (the one sent, the one received) and two dK/dV partial sums, held the
//     step long like the PP buffers — TransformerEngine's backward holds
//     p2p_comm_buffers of two (K/V, dK/dV) pairs (AttnFuncWithCPAndKVP2P,
//     context_parallel.py at d0067d0da6cb01811b8072a7d304f0e00344ce2b).
//   With cp > 1 the DP gradient reduction spans dp·cp ranks.
//   With ep > 1 (ZeRO 0/1) the expert-sharded gradients have their own
//     buckets over the expert-data-parallel group, and the MoE block's
//     dispatch buffer E·C·h·e is live during each block's forward.
int64_t comm_staging_bytes(const ModelConfig& m, const Layout& l, const RunConfig& r, int64_t rank) {
  const int64_t e = dtype_bytes(r.dtype);
  const int64_t g = r.dtype == DType::kFP32 ? 4 : dtype_bytes(r.grad_dtype);
  const auto units = rank_param_units(m, l, rank);
  int64_t n = 0;
  const int64_t grad_ranks = l.dp * l.cp;  // Megatron's data-parallel group with cp
  if (grad_ranks > 1) {
    if (l.zero <= 1 && l.ep > 1) {
      n = expert_parallel_staging_bytes(units, l, dp_bucket_elems(r.bucket_mb, g), r.overlap_grad_reduce);
    } else if (l.zero <= 1) {
      n = dp_reduce_staging_bytes(units, l.zero, grad_ranks, dp_bucket_elems(r.bucket_mb, g), r.overlap_grad_reduce);
    } else {
      int64_t largest_padded = 0;  // the largest unit padded (ParamUnit::padded_elems)
      for (const auto& u : units) largest_padded = std::max(largest_padded, u.padded_elems(l));
      n = checked_mul(g, largest_padded, "comm staging bytes");
      if (m.tied_embeddings && l.pp == 1)
        n = checked_add(n, checked_product({g, padded_vocab(m, l.tp) / l.tp, m.hidden}, "comm staging bytes"),
                        "comm staging bytes");
    }
  }
  if (l.pp > 1) {
    const int64_t msg = pipeline_message_bytes(m, l, r);  // s/cp tokens (/t under sp)
    const int64_t stage = l.coords(rank).pp;
    const bool first = stage == 0, last = stage == l.pp - 1;
    // interleaved (vpp > 1): every rank sends and receives both ways (the ring
    // of virtual stages), so all four
    const int64_t buffers = (l.vpp == 1 && (first || last)) ? 2 : 4;
    n = checked_add(n, checked_mul(buffers, msg, "comm staging bytes"), "comm staging bytes");
  }
  if (m.is_moe() && l.ep > 1 && moe_layers_on_stage(m, l, l.coords(rank).pp) > 0) {
    // The MoE block's dispatch buffers (models/moe/moe_block.h): the packed
    // send buffer, then the experts' outputs before they return, E·C·h·e
    // each, one at a time (docs/formulas/moe.md "Expert parallelism"); a
    // stage of DeepSeek's first dense_layers alone has none.
    const int64_t tokens = checked_mul(r.mbs, r.seq, "tokens");
    n = checked_add(n, moe_ep_all_to_all_bytes(m, tokens, e), "comm staging bytes");
  }
  if (l.cp > 1) {
    const int64_t block = checked_product({2, r.mbs, r.seq / l.cp, kv_heads_on_rank(m.kv_heads, l.tp), m.head_dim, e},
                                          "ring K/V block bytes");
    n = checked_add(n, checked_mul(4, block, "comm staging bytes"), "comm staging bytes");
  }
  return n;
}

// fp32 bytes of a GEMM's A (M×K), B (K×N) and C (M×N). The backward GEMMs of
// the same layer (dX = dY·Wᵀ, dW = Xᵀ·dY) use the same three sizes.
int64_t gemm_fp32_bytes(int64_t mm, int64_t k, int64_t nn) {
  constexpr std::string_view what = "workspace bytes of a GEMM";
  return checked_mul(4,
                     checked_add(checked_add(checked_mul(mm, k, what), checked_mul(k, nn, what), what),
                                 checked_mul(mm, nn, what), what),
                     what);
}

}  // namespace

// The workspace upper bound (docs/exact-budget.md "Workspace"): the largest of
//  (a) one layer's activations without recompute for one microbatch (the run's
//      attention kind and dropout) — the buffer a `full` (or `selective`)
//      recompute rebuilds during that layer's backward;
//  (b) the gradient buffers of one microbatch: the fp32 logits gradient
//      4·b·s·V'/t (last stage only) plus two hidden-sized gradients 2·e·b·s·h
//      (full sequence, even under SP: generous);
//  (c) a CPU GEMM's fp32 copies of its operands (an upper bound: the CPU GEMM
//      widens only a decode GEMM's token rows or 512×512 blocks per thread,
//      kernels/cpu/ops_gemm.cpp): 4·(|A| + |B| + |C|) for the
//      largest GEMM of the rank, M = b·s tokens: QKV (h → (a_t + 2k_t)·d),
//      attention-out (a_t·d → h), MLP-in (h → f/t, llama gate and up taken as
//      one fused h → 2f/t), MLP-out (f/t → h), the head (h → V'/t, last stage),
//      and with materialized attention QKᵀ and P·V over all b·a_t heads at once
//      (|A|, |B|, |C| = b·a_t·s·d, b·a_t·s·d, b·a_t·s²); a multi-head latent
//      attention layer's projections too (down h → r_q + r_kv + d_r, q_up,
//      kv_up, o_proj; docs/formulas/mla.md), its core within the same term
//      (d = d_n + d_r ≥ the score products' and P·v's head dims).
// It bounds what a backend holds in `workspace` at one time, not a measured
// equality; it is deliberately generous (fp32 everywhere, fused shapes) and finite.
int64_t workspace_bound_bytes(const ModelConfig& m, const Layout& l, const RunConfig& r, int64_t rank) {
  const int64_t stage = l.coords(rank).pp;
  const bool last = stage == l.pp - 1;
  const int64_t e = dtype_bytes(r.dtype);
  const int64_t b = r.mbs, s = r.seq, h = m.hidden, d = m.head_dim, t = l.tp;
  const int64_t tokens = b * s;
  const int64_t a_t = m.heads / t, k_t = kv_heads_on_rank(m.kv_heads, t), f_t = m.ffn / t;
  const int64_t vocab_t = padded_vocab(m, t) / t;

  RunConfig none = r;
  none.recompute = Recompute::kNone;
  // (a), the larger layer: a MoE model's first dense_layers hold the dense MLP
  const int64_t layer_buffer =
      std::max(activation_bytes_of_layer(m, l, none, 0), activation_bytes_per_layer(m, l, none));

  constexpr std::string_view what = "workspace bytes";
  const int64_t hidden_bytes = checked_product({e, tokens, h}, what);
  const int64_t grad_buffers = checked_add(last ? checked_product({4, tokens, vocab_t}, what) : 0,
                                           checked_mul(2, hidden_bytes, what), what);  // (b)

  int64_t gemm = 0;  // (c)
  gemm = std::max(gemm, gemm_fp32_bytes(tokens, h, (a_t + 2 * k_t) * d));
  gemm = std::max(gemm, gemm_fp32_bytes(tokens, a_t * d, h));
  gemm = std::max(gemm, gemm_fp32_bytes(tokens, h, (m.is_gpt() ? 1 : 2) * f_t));
  gemm = std::max(gemm, gemm_fp32_bytes(tokens, f_t, h));
  if (last) gemm = std::max(gemm, gemm_fp32_bytes(tokens, h, vocab_t));
  if (m.is_mla()) {  // its projections (analytic/mla.h): the down projections, q_up (or q), kv_up, o_proj
    const int64_t dn = m.qk_nope_head_dim, dr = m.qk_rope_head_dim, dv = m.v_head_dim;
    gemm = std::max(gemm, gemm_fp32_bytes(tokens, h, m.q_lora_rank + m.kv_lora_rank + dr));
    gemm = std::max(gemm, gemm_fp32_bytes(tokens, m.q_lora_rank > 0 ? m.q_lora_rank : h, a_t * (dn + dr)));
    gemm = std::max(gemm, gemm_fp32_bytes(tokens, m.kv_lora_rank, a_t * (dn + dv)));
    gemm = std::max(gemm, gemm_fp32_bytes(tokens, a_t * dv, h));
  }
  if (r.attention == AttentionKind::kMaterialized) {
    const int64_t heads = b * a_t;
    gemm = std::max(gemm, checked_product({4, heads, checked_add(2 * s * d, checked_mul(s, s, what), what)}, what));
  }
  // The three coexist: under `full` a whole layer is rebuilt (a) while its
  // backward GEMMs hold fp32 copies (c) beside the residual and branch
  // gradients (b, and one more hidden-sized buffer); so the bound is their sum,
  // not their maximum (measured on the cpu backend over 396 configurations:
  // the largest workspace peak was 0.98 of this sum).
  // post_norms: the gradient of a block's output before its post norm is one more hidden-sized buffer.
  const int64_t post_norm_grad = m.post_norms ? hidden_bytes : 0;
  // (e) A MoE block's backward (models/moe/moe_block.cpp) holds the gradients of its rows' outputs and
  // inputs and of the experts' SwiGLU (e·A·(2h + 2f_e), A its rows: the E·C slots when padded, else the
  // N·k worst case) while only the combine's output and the SwiGLU output (e·A·(h + f_e)) of (a) are freed:
  // e·A·(h + f_e) beyond (a).
  int64_t moe_grads = 0;
  if (m.is_moe()) {
    const int64_t rows = moe_padded_to_capacity(m, l) ? moe_ep_slots(m, tokens) : moe_worst_case_rows(m, tokens);
    moe_grads = checked_product({e, rows, checked_add(h, m.expert_ffn, what)}, what);
  }
  return checked_sum(
      std::initializer_list<int64_t>{layer_buffer, grad_buffers, gemm, hidden_bytes, post_norm_grad, moe_grads}, what);
}

RankBudget rank_budget(const ModelConfig& m, const Layout& l, const RunConfig& r, int64_t rank) {
  RankBudget rb;
  rb.rank = rank;
  rb.coords = l.coords(rank);
  const int64_t stage = rb.coords.pp;

  rb.exact = model_state_bytes(m, l, r, rank);
  // DeepSeek-V3's expert bias: a buffer beside the weights, not a trained parameter (analytic/moe.h).
  rb.exact[Account::kWeights] =
      checked_add(rb.exact[Account::kWeights], router_bias_bytes(m, l, stage), "weights bytes");
  // --dtype fp8: the FP8 weight copies and scaling state, booked with the weights (analytic/fp8.h)
  rb.exact[Account::kWeights] =
      checked_add(rb.exact[Account::kWeights], fp8_weight_state_bytes(m, l, r, rank), "weights bytes");
  rb.exact[Account::kActivations] = activation_peak_bytes(m, l, r, stage);
  rb.exact[Account::kKv] = 0;  // training: no KV cache
  rb.exact[Account::kComm] = comm_staging_bytes(m, l, r, rank);
  rb.exact[Account::kWorkspace] = workspace_bound_bytes(m, l, r, rank);
  // kHost (host memory) comes with the model states: nothing is offloaded yet.

  rb.published = published_model_states(m, l, r, rank);
  for (auto& p : published_activations(m, l, r, stage)) rb.published.push_back(std::move(p));

  rb.comm = rank_comm_per_step(m, l, r, rank);
  rb.flops = rank_step_flops(m, l, r, rank);
  rb.in_flight = l.vpp > 1
                     ? chunk_microbatches_in_flight(l.pp, stage, r.microbatches, l.vpp)  // (microbatch, chunk) pairs
                     : microbatches_in_flight(r.schedule, l.pp, stage, r.microbatches);
  return rb;
}

std::vector<int64_t> role_ranks(const Layout& l) {
  // Ranks within a stage differ only in TP/DP coordinates; every TP rank holds
  // the same shapes and every DP rank the same (padded) shard, so one rank per
  // stage covers every distinct byte count.
  std::vector<int64_t> ranks;
  for (int64_t stage = 0; stage < l.pp; ++stage) ranks.push_back(l.rank(Coords{0, 0, stage}));
  return ranks;
}

}  // namespace gpuledger::analytic
