// FLOPs per step: the exact GEMM count of this design (docs/exact-budget.md
// "FLOPs") for one rank and for the whole job, and the published estimates
// beside it. Derivations and a worked example: docs/formulas/flops.md.
// Only GEMMs are counted (a multiply-add is 2 FLOPs); norms, softmax and
// element-wise work are not, as every MFU convention does. Pure functions of
// the config, layout and run: never reads kernels/ or models/transformer/.
#include "analytic/flops.h"
#include "analytic/moe.h"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "analytic/megatron.h"
#include "analytic/mla.h"
#include "analytic/params.h"
#include "core/checked_math.h"

namespace gpuledger::analytic {
namespace {

// ---- checked int64 arithmetic (core/checked_math.h) ----
// A whole job's FLOPs per step can pass 2⁶³ (6 · 405e9 params · 16M tokens ≈
// 4e19): refuse loudly rather than wrap.
int64_t mul(int64_t a, int64_t b) { return checked_mul(a, b, "FLOP count"); }
int64_t add(int64_t a, int64_t b) { return checked_add(a, b, "FLOP count"); }
int64_t mul(std::initializer_list<int64_t> xs) {
  int64_t p = 1;
  for (int64_t x : xs) p = mul(p, x);
  return p;
}

// ---- one layer's forward GEMMs on one TP rank, one microbatch ----
// (docs/exact-budget.md "FLOPs", the t-split shapes)
struct LayerGemms {
  int64_t projections = 0;  // QKV + attention-out + MLP: weights × activations
  int64_t core = 0;         // QKᵀ + P·V: the two s² GEMMs
  int64_t total() const { return add(projections, core); }
};

// kv_heads: the KV heads whose K and V projections are counted on this rank
// (k_t for the hardware count; see model_kv_heads for the model count).
// executed: the hardware count (under ep the MoE experts' padded slots); else
// the model count (the N·k routed rows).
// moe_layer: the layer holds the sparse block (else the dense MLP: a dense
// model, or a MoE model's first dense_layers).
// replicated: whether the tensors whole on every TP rank count here — MLA's
// down projections (analytic/mla.h): executed on every rank (hardware), in
// the model count credited once, to TP rank 0, as the replicated KV heads are.
LayerGemms layer_gemms(const ModelConfig& m, const Layout& l, const RunConfig& r, int64_t kv_heads, bool executed,
                       bool moe_layer, bool replicated = true) {
  // Context parallelism: the rank's s/cp tokens pass through every projection;
  // its s/cp queries meet all s keys over the ring's cp blocks.
  const int64_t b = r.mbs, s = r.seq / l.cp, s_keys = r.seq, h = m.hidden, d = m.head_dim;
  const int64_t a_t = m.heads / l.tp;
  const int64_t f_t = m.ffn / l.tp;
  LayerGemms g;
  // QKV: (b·s, h) × (h, a_t·d + 2·k_t·d)
  const int64_t qkv = mul({2, b, s, h, add(mul(a_t, d), mul({2, kv_heads, d}))});
  // attention-out: (b·s, a_t·d) × (a_t·d, h)
  const int64_t out = mul({2, b, s, a_t, d, h});
  // MLP: gpt in + out (2 GEMMs of h × f/t); llama gate + up + down (3).
  // MoE (analytic/moe.h): router, the experts' rows (all N·k without a
  // capacity factor; the capacity-bound worst case with one), shared experts.
  // Under ep > 1 or with a capacity factor a rank's experts execute every one
  // of the E·C slots, padding included; the model count keeps the rank's own
  // routed rows (N·k, or the capacity-bound worst case).
  const int64_t moe_rows =
      moe_layer && moe_padded_to_capacity(m, l) && executed ? moe_ep_slots(m, b * s) : moe_worst_case_rows(m, b * s);
  const int64_t mlp =
      moe_layer ? moe_block_forward_flops(m, b * s, moe_rows) : mul({m.is_gpt() ? 2 : 3, 2, b, s, h, f_t});
  if (m.is_mla()) {  // multi-head latent attention (cp = 1): its projections and core (analytic/mla.h)
    const MlaForwardFlops f = mla_attention_forward_flops(m, b, s, l.tp);
    g.projections = add(add(f.sharded, replicated ? f.replicated : 0), mlp);
    g.core = f.core;
    return g;
  }
  g.projections = add(add(qkv, out), mlp);
  // QKᵀ: (s, d) × (d, s) per head; P·V: (s, s) × (s, d) per head. The full s²
  // is executed and counted (our kernels do not skip masked blocks).
  g.core = mul({2, 2, b, a_t, s, s_keys, d});
  return g;
}

// KV heads counted by the *model* FLOPs on TP rank j. With t > k each KV head
// is replicated t/k times (docs/exact-budget.md, k_t); the copies are
// redundant work like recompute, so the model count credits each distinct KV
// head once, to the first TP rank holding it. Σ over the TP group = k, so the
// job's model FLOPs do not depend on t.
int64_t model_kv_heads(const ModelConfig& m, const Layout& l, int64_t tp_rank) {
  if (l.tp <= m.kv_heads) return m.kv_heads / l.tp;
  const int64_t replicas = l.tp / m.kv_heads;
  return tp_rank % replicas == 0 ? 1 : 0;
}

// Unpadded vocabulary rows on TP rank j: rank j holds rows [j·V'/t, (j+1)·V'/t)
// of the padded matrix (Megatron's vocab-parallel split); the real ones are
// those below V. Σ over the TP group = V exactly.
int64_t model_vocab_rows(const ModelConfig& m, const Layout& l, int64_t tp_rank) {
  const int64_t rows = padded_vocab(m, l.tp) / l.tp;
  return std::clamp<int64_t>(m.vocab - tp_rank * rows, 0, rows);
}

}  // namespace

int64_t layer_forward_flops(const ModelConfig& m, const Layout& l, const RunConfig& r) {
  return layer_gemms(m, l, r, kv_heads_on_rank(m.kv_heads, l.tp), /*executed=*/true, m.is_moe()).total();
}

namespace {

// One layer's FLOPs for one microbatch: hardware (forward, backward and
// recompute), model (3 × forward, no recompute) and the model's causal count.
struct LayerStepFlops {
  int64_t hardware = 0, model = 0, model_causal = 0;
};

LayerStepFlops layer_step_flops(const ModelConfig& m, const Layout& l, const RunConfig& r, int64_t tp_rank,
                                bool moe_layer) {
  // ---- hardware: everything executed ----
  const LayerGemms hw = layer_gemms(m, l, r, kv_heads_on_rank(m.kv_heads, l.tp), /*executed=*/true, moe_layer);
  // forward + backward (2× forward: the input- and weight-gradient GEMMs; for
  // attention dS·K, dSᵀ·Q, dO·Vᵀ, Pᵀ·dO).
  LayerStepFlops f;
  f.hardware = mul(3, hw.total());
  // Flash backward recomputes S = QKᵀ (Dao et al. 2022, Alg. 4): half the core.
  if (r.attention == AttentionKind::kFlash) f.hardware = add(f.hardware, hw.core / 2);
  // Recompute: selective reruns the attention core's forward (QKᵀ and P·V);
  // full reruns the whole layer's forward. Both compose with flash's own
  // recompute of QKᵀ (docs/exact-budget.md "FLOPs").
  if (r.recompute == Recompute::kSelective) f.hardware = add(f.hardware, hw.core);
  if (r.recompute == Recompute::kFull) f.hardware = add(f.hardware, hw.total());
  // ---- model: 3 × forward, unpadded V, no recompute (MFU numerator) ----
  const LayerGemms mo = layer_gemms(m, l, r, model_kv_heads(m, l, tp_rank), /*executed=*/false, moe_layer,
                                    /*replicated=*/tp_rank == 0);
  f.model = mul(3, mo.total());
  // Causal convention: the two s² GEMMs at half (the masked upper triangle
  // skipped): 3 × core / 2 less per layer. core = 4·b·a_t·s²·d is even.
  f.model_causal = f.model - mul(3, mo.core / 2);
  return f;
}

}  // namespace

StepFlops rank_step_flops(const ModelConfig& m, const Layout& l, const RunConfig& r, int64_t rank) {
  const Coords c = l.coords(rank);
  // The stage's layers: its MoE layers, and a MoE model's first dense_layers
  // (or a dense model's layers) with the dense MLP.
  const int64_t moe_layers = moe_layers_on_stage(m, l, c.pp);
  const int64_t dense_layers = layers_on_stage(m, l, c.pp) - moe_layers;
  const bool last = c.pp == l.pp - 1;
  const int64_t b = r.mbs, s = r.seq / l.cp, h = m.hidden;  // the rank's tokens (cp: s/cp)
  const LayerStepFlops moe = moe_layers > 0 ? layer_step_flops(m, l, r, c.tp, true) : LayerStepFlops{};
  const LayerStepFlops dense = dense_layers > 0 ? layer_step_flops(m, l, r, c.tp, false) : LayerStepFlops{};
  auto layers_sum = [&](int64_t LayerStepFlops::*field) {
    return add(mul(moe_layers, moe.*field), mul(dense_layers, dense.*field));
  };
  // Head: (b·s, h) × (h, V'/t) forward, 2× in backward; never recomputed.
  const int64_t head_hw = mul({3, 2, b, s, h, padded_vocab(m, l.tp) / l.tp});
  const int64_t head_model = mul({3, 2, b, s, h, model_vocab_rows(m, l, c.tp)});

  StepFlops f;
  const int64_t mb = r.microbatches;
  f.hardware = mul(mb, add(layers_sum(&LayerStepFlops::hardware), last ? head_hw : 0));
  f.model = mul(mb, add(layers_sum(&LayerStepFlops::model), last ? head_model : 0));
  f.model_causal = mul(mb, add(layers_sum(&LayerStepFlops::model_causal), last ? head_model : 0));
  return f;
}

JobFlops job_step_flops(const ModelConfig& m, const Layout& l, const RunConfig& r) {
  // The DP replicas do identical work, and so do the cp ranks of a ring (the
  // causal load balancing): Σ over one replica's t·p ranks, × dp·cp.
  JobFlops sum;
  for (int64_t stage = 0; stage < l.pp; ++stage) {
    for (int64_t j = 0; j < l.tp; ++j) {
      const StepFlops f = rank_step_flops(m, l, r, l.rank(Coords{0, j, stage}));
      sum.model += static_cast<double>(f.model);
      sum.hardware += static_cast<double>(f.hardware);
      sum.model_causal += static_cast<double>(f.model_causal);
    }
  }
  const double n = static_cast<double>(l.dp * l.cp);
  sum.model *= n;
  sum.hardware *= n;
  sum.model_causal *= n;
  return sum;
}

std::vector<Published> published_step_flops(const ModelConfig& m, const Layout& l, const RunConfig& r) {
  // Global batch B (sequences) and tokens T of one step; doubles throughout:
  // these are estimates, and the 96/72 forms have fractions.
  const double seqs = static_cast<double>(r.global_batch(l.dp));
  const double s = static_cast<double>(r.seq);
  const double tokens = seqs * s;
  const double L = static_cast<double>(m.layers);
  const double h = static_cast<double>(m.hidden);
  const double V = static_cast<double>(m.vocab);
  const double b = static_cast<double>(r.mbs);
  const double replicas_x_micro = static_cast<double>(r.microbatches * l.dp);

  std::vector<Published> out;
  // Kaplan et al. 2020 §2.1 (Table 1): C ≈ 6N per token, N the non-embedding
  // parameters; drops the context term 2·n_layer·n_ctx·d_attn and the logits.
  out.push_back({"kaplan_6n", 6.0 * static_cast<double>(non_embedding_params(m)) * tokens,
                 "Kaplan et al. 2020, §2.1: 6N per token, N = non-embedding parameters"});
  // A MoE model: 6·N_active (docs/formulas/moe.md), the parameters a token passes through.
  if (m.is_moe())
    out.push_back({"moe_6n_active", static_cast<double>(moe_training_flops_per_token(m)) * tokens,
                   "docs/formulas/moe.md: 6·N_active per token, N_active = the k routed experts, shared experts, "
                   "router, attention and head (Kaplan et al. 2020 §2.1 with the active parameters)"});
  // Chowdhery et al. 2022 (PaLM) App. B: 6N + 12·L·H·Q·T per token (H heads of
  // size Q, T the sequence), full (non-causal) attention; N all parameters
  // (PaLM's embedding is shared with the output layer, so 6N covers the logits).
  const double attn_term = 12.0 * L * static_cast<double>(m.heads * m.head_dim) * s;
  out.push_back({"palm_6n_12lhs", (6.0 * static_cast<double>(model_params(m)) + attn_term) * tokens,
                 "Chowdhery et al. 2022 (PaLM), App. B: 6N + 12·L·H·Q·T per token, N = all parameters"});
  // Korthikanti et al. 2022 §6 / Narayanan et al. 2021 App.: a layer's forward
  // is 24·b·s·h² + 4·b·s²·h (f = 4h, k = a, a·d = h), the logits 2·b·s·h·V;
  // × 3 for forward + backward, per microbatch, over every microbatch of every
  // replica. Algebraically the same count as megatron_72 below.
  const double layer_fwd = 24.0 * b * s * h * h + 4.0 * b * s * s * h;
  const double logits_fwd = 2.0 * b * s * h * V;
  out.push_back({"korthikanti_per_layer", 3.0 * (L * layer_fwd + logits_fwd) * replicas_x_micro,
                 "Korthikanti et al. 2022, §6: 3 × (L·(24bsh² + 4bs²h) + 2bshV) per microbatch"});
  // Narayanan et al. 2021 §5.1 (App.): 96·B·s·L·h²·(1 + s/6h + V/16Lh), with
  // full recomputation (4 × the layers' forward, 3 × the logits'): it
  // describes a run with full recompute only.
  if (r.recompute == Recompute::kFull)
    out.push_back({"megatron_2021_96", 96.0 * seqs * s * L * h * h * (1.0 + s / (6.0 * h) + V / (16.0 * L * h)),
                   "Narayanan et al. 2021, §5.1: 96·B·s·L·h²·(1 + s/6h + V/16Lh), incl. the recompute forward"});
  // Korthikanti et al. 2022 §6: the model FLOPs without recompute,
  // 72·B·s·L·h²·(1 + s/6h + V/12Lh).
  out.push_back({"megatron_72", 72.0 * seqs * s * L * h * h * (1.0 + s / (6.0 * h) + V / (12.0 * L * h)),
                 "Korthikanti et al. 2022, §6: 72·B·s·L·h²·(1 + s/6h + V/12Lh), no recompute"});
  // Megatron-LM's current code (analytic/megatron.h): GQA and SwiGLU aware,
  // the core attention halved for the causal mask, the padded vocabulary.
  out.push_back({"megatron_num_floating_point_operations", megatron_step_flops(m, l, r),
                 std::string("Megatron-LM megatron/training/training.py num_floating_point_operations @") +
                     kMegatronCommit +
                     ": 3·2·B·s·(L·(h·f·(3 if SwiGLU else 2) + h·(q + 2·kv) + q·h) + h·V') + 3·2·B·s²·q·L/2·2 "
                     "(q = a·d, kv = k·d, V' padded to 128·t)"});
  return out;
}

}  // namespace gpuledger::analytic
