// Activation bytes: every tensor this implementation saves for backward
// (docs/exact-budget.md "Activations", tensor by tensor), the stage extras,
// microbatches in flight, and the published forms of Korthikanti et al. 2022
// ("Reducing Activation Recomputation in Large Transformer Models", Table 2,
// §4.2.3 and §4.3) beside them.
#include "analytic/activations.h"

#include <initializer_list>
#include <string>
#include <string_view>

#include "analytic/megatron.h"
#include "analytic/mla.h"
#include "analytic/moe.h"
#include "analytic/params.h"
#include "analytic/pipeline.h"
#include "core/checked_math.h"

namespace gpuledger::analytic {
namespace {

// The sizes every formula below is written in (docs/exact-budget.md "Notation").
struct Dims {
  int64_t b, s, s_l, h, a_t, k_t, d, f_t, e, t;
  bool gpt, drop;
};

Dims dims(const ModelConfig& m, const Layout& l, const RunConfig& r) {
  Dims x{};
  x.b = r.mbs;
  // Context parallelism (cp > 1, tp = 1): the rank holds s/cp tokens of every
  // sequence (core/layout.h cp_token_chunks), and every saved tensor is of its
  // local tokens — the ring's flash core saves the local queries' output and
  // log-sum-exp, not the visiting K/V blocks (TransformerEngine's
  // AttnFuncWithCPAndKVP2P saves q, k, v, out and softmax_lse of the rank).
  x.s = r.seq / l.cp;
  x.t = l.tp;
  x.s_l = l.sp ? x.s / l.tp : x.s;  // sequence-sharded tensors under --sp
  x.h = m.hidden;
  x.a_t = m.heads / l.tp;
  x.k_t = kv_heads_on_rank(m.kv_heads, l.tp);
  x.d = m.head_dim;
  x.f_t = m.ffn / l.tp;
  x.e = dtype_bytes(r.dtype);
  x.gpt = m.is_gpt();
  x.drop = r.dropout > 0.0;
  return x;
}

// One norm's saved statistics (fp32): LayerNorm mean and rstd, RMSNorm rstd.
int64_t norm_stats(const Dims& x) { return checked_product({x.gpt ? 2 : 1, 4, x.b, x.s_l}, "norm statistics bytes"); }

// A sum of products, each step checked (core/checked_math.h): b·a_t·s² alone
// leaves 64 bits for long sequences.
class CheckedBytes {
 public:
  explicit CheckedBytes(std::string_view what) : what_(what) {}
  void add(std::initializer_list<int64_t> factors) { n_ = checked_add(n_, checked_product(factors, what_), what_); }
  int64_t value() const { return n_; }

 private:
  std::string_view what_;
  int64_t n_ = 0;
};

// The attention block's saved tensors from Q, K, V to the context (a layer
// of multi-head attention, not MLA).
void attention_activation_bytes(CheckedBytes& n, const ModelConfig& m, const RunConfig& r, const Dims& x) {
  n.add({x.e, x.b, x.s, x.a_t * x.d + 2 * x.k_t * x.d});  // Q, K, V (after RoPE)
  if (m.qk_norm) {  // Qwen3: Q and K before the QK norm, and its fp32 rstd per head row
    n.add({x.e, x.b, x.s, (x.a_t + x.k_t) * x.d});
    n.add({4, x.b, x.s, x.a_t + x.k_t});
  }
  if (r.recompute == Recompute::kNone) {
    // The attention core; `selective` recomputes it in backward instead.
    if (r.attention == AttentionKind::kMaterialized) {
      n.add({x.e, x.b, x.a_t, x.s, x.s});                  // softmax probabilities (b·a_t·s² elements)
      if (x.drop) n.add({1 + x.e, x.b, x.a_t, x.s, x.s});  // 1-byte mask, dropped probs
      if (m.attention_sinks) n.add({4, x.b, x.a_t, x.s});  // the rows' fp32 log-denominator, for the sinks' gradient
    } else {
      // Flash keeps only the fp32 log-sum-exp per row; its dropout mask is
      // regenerated from the counter-based RNG in backward.
      n.add({4, x.b, x.a_t, x.s});
    }
  }
  n.add({x.e, x.b, x.s, x.a_t, x.d});  // context (attention-out input)
}

}  // namespace

int64_t norm_stat_bytes_per_layer(const ModelConfig& m, const Layout& l, const RunConfig& r) {
  if (r.recompute == Recompute::kFull) return 0;  // only the layer input is kept
  // norm 1 and norm 2, and with post_norms the two post-block norms
  return checked_mul(m.post_norms ? 4 : 2, norm_stats(dims(m, l, r)), "norm statistics bytes");
}

int64_t activation_bytes_per_layer(const ModelConfig& m, const Layout& l, const RunConfig& r) {
  return activation_bytes_of_layer(m, l, r, m.layers - 1);
}

int64_t activation_bytes_of_stage_layers(const ModelConfig& m, const Layout& l, const RunConfig& r, int64_t stage) {
  // A MoE model's first dense_layers layers save the dense MLP's tensors, the
  // others the sparse block's (every MoE layer alike, every dense one alike).
  constexpr std::string_view what = "activation bytes of a stage's layers";
  const int64_t moe = moe_layers_on_stage(m, l, stage), dense = layers_on_stage(m, l, stage) - moe;
  return checked_add(checked_mul(moe, activation_bytes_of_layer(m, l, r, m.layers - 1), what),
                     dense > 0 ? checked_mul(dense, activation_bytes_of_layer(m, l, r, 0), what) : 0, what);
}

int64_t activation_bytes_of_layer(const ModelConfig& m, const Layout& l, const RunConfig& r, int64_t layer) {
  const Dims x = dims(m, l, r);
  const int64_t hidden_sp = checked_product({x.e, x.b, x.s_l, x.h}, "activation bytes per layer");  // one (sp) tensor
  CheckedBytes n("activation bytes per layer");
  // Layer input (norm-1 input): the only tensor kept under `full`.
  n.add({hidden_sp});
  if (r.recompute == Recompute::kFull) return n.value();

  n.add({norm_stats(x)});  // norm-1 statistics (sp)
  n.add({hidden_sp});      // norm-1 output (sp)
  if (m.is_mla()) {
    // Multi-head latent attention's block, from its latents to the context (analytic/mla.h)
    n.add({mla_attention_activation_bytes(m, x.b, x.s, x.t, x.e, r.recompute == Recompute::kNone)});
  } else {
    attention_activation_bytes(n, m, r, x);
  }
  if (x.drop) n.add({x.b, x.s_l, x.h});  // attention-out dropout mask (sp)
  n.add({hidden_sp});                    // norm-2 input (sp)
  n.add({norm_stats(x)});                // norm-2 statistics (sp)
  n.add({hidden_sp});                    // norm-2 output (sp)
  if (m.is_moe_layer(layer)) {
    // The sparse MLP's saved tensors (analytic/moe.h): without a capacity
    // factor on one rank all N·k choices kept; under ep > 1, or with a
    // capacity factor, the E·C capacity slots whatever the routing (the
    // block pads to capacity, models/moe/moe_block.h).
    const int64_t tokens = x.b * x.s;
    n.add({moe_padded_to_capacity(m, l) ? moe_block_ep_activation_bytes(m, tokens, x.e)
                                        : moe_block_activation_bytes(m, tokens, moe_worst_case_rows(m, tokens), x.e)});
  } else {
    // gpt: MLP-in output (GELU input) and GELU output; llama: gate, up, SwiGLU output.
    n.add({x.gpt ? 2 : 3, x.e, x.b, x.s, x.f_t});
  }
  if (x.drop) n.add({x.b, x.s_l, x.h});  // MLP dropout mask (sp)
  if (m.post_norms) {  // Gemma 2, 3: each block's output before its post norm, and the norm's statistics (sp)
    n.add({2, hidden_sp});
    n.add({2, norm_stats(x)});
  }
  return n.value();
}

int64_t activation_stage_extra_bytes(const ModelConfig& m, const Layout& l, const RunConfig& r, int64_t stage) {
  const Dims x = dims(m, l, r);
  CheckedBytes n("activation bytes of a stage's ends");
  if (stage == 0) {
    n.add({4, x.b, x.s});                  // token ids (int32)
    if (x.drop) n.add({x.b, x.s_l, x.h});  // embedding dropout mask (sp)
  }
  if (stage == l.pp - 1) {
    const int64_t vocab_t = padded_vocab(m, l.tp) / l.tp;
    n.add({x.e, x.b, x.s_l, x.h});  // final-norm input (sp)
    n.add({norm_stats(x)});         // final-norm statistics (sp)
    n.add({x.e, x.b, x.s_l, x.h});  // final-norm output (sp)
    n.add({4, x.b, x.s, vocab_t});  // logits (fp32)
    n.add({4, x.b, x.s});           // targets (int32)
  }
  return n.value();
}

int64_t activation_bytes_per_microbatch(const ModelConfig& m, const Layout& l, const RunConfig& r, int64_t stage) {
  constexpr std::string_view what = "activation bytes per microbatch";
  return checked_add(activation_bytes_of_stage_layers(m, l, r, stage), activation_stage_extra_bytes(m, l, r, stage),
                     what);
}

int64_t activation_peak_bytes(const ModelConfig& m, const Layout& l, const RunConfig& r, int64_t stage) {
  if (l.vpp > 1) {
    // docs/exact-budget.md "Interleaved stages": the pairs in flight × one
    // chunk's layers, plus the stage extras × the most pairs of the chunk that
    // carries them (the embedding's chunk 0, the head's chunk vpp − 1) live
    // at such a peak.
    constexpr std::string_view what = "activation peak bytes";
    const int64_t pairs = chunk_microbatches_in_flight(l.pp, stage, r.microbatches, l.vpp);
    const int64_t chunk_bytes = checked_mul(layers_per_chunk(m, l, stage), activation_bytes_per_layer(m, l, r), what);
    const int64_t extra_chunk = stage == 0 ? 0 : l.vpp - 1;
    const int64_t extra_live = chunk_live_at_peak(l.pp, stage, r.microbatches, l.vpp, extra_chunk);
    return checked_add(checked_mul(pairs, chunk_bytes, what),
                       checked_mul(extra_live, activation_stage_extra_bytes(m, l, r, stage), what), what);
  }
  // docs/exact-budget.md "Microbatches in flight": in_flight(i) × (Σ layers + extras).
  return checked_mul(microbatches_in_flight(r.schedule, l.pp, stage, r.microbatches),
                     activation_bytes_per_microbatch(m, l, r, stage), "activation peak bytes");
}

double korthikanti_per_layer_bytes(KorthikantiRow row, double s, double b, double h, double a, double t) {
  // Korthikanti et al. 2022, Table 2: activation bytes per transformer layer
  // (16-bit activations, 1-byte dropout masks, f = 4h, norm statistics ignored).
  const double sbh = s * b * h;
  const double attn = 5.0 * a * s / h;  // the 5as/h term: probs, mask, dropped probs
  switch (row) {
    case KorthikantiRow::kNoParallel: return sbh * (34.0 + attn);
    case KorthikantiRow::kTensor: return sbh * (10.0 + 24.0 / t + attn / t);
    case KorthikantiRow::kTensorSequence: return sbh * (34.0 / t + attn / t);
    case KorthikantiRow::kTensorSelective: return sbh * (10.0 + 24.0 / t);
    case KorthikantiRow::kTensorSequenceSelective: return sbh * (34.0 / t);
    case KorthikantiRow::kFullRecompute: return sbh * 2.0;
  }
  return 0;
}

namespace {

struct RowInfo {
  KorthikantiRow row;
  const char* name;
  const char* form;
};

constexpr RowInfo kRows[] = {
    {KorthikantiRow::kNoParallel, "no_parallel", "sbh(34 + 5as/h)"},
    {KorthikantiRow::kTensor, "tensor", "sbh(10 + 24/t + 5as/(ht))"},
    {KorthikantiRow::kTensorSequence, "tensor_sequence", "sbh(34/t + 5as/(ht))"},
    {KorthikantiRow::kTensorSelective, "tensor_selective", "sbh(10 + 24/t)"},
    {KorthikantiRow::kTensorSequenceSelective, "tensor_sequence_selective", "34sbh/t"},
    {KorthikantiRow::kFullRecompute, "full_recompute", "2sbh"},
};

const RowInfo& row_info(KorthikantiRow row) {
  for (const auto& ri : kRows)
    if (ri.row == row) return ri;
  return kRows[0];
}

// The row of Table 2 that describes this run. With t = 1 the tensor rows
// reduce to the unparallel ones (selective: sbh(10 + 24) = 34sbh).
KorthikantiRow matching_row(const Layout& l, const RunConfig& r) {
  if (r.recompute == Recompute::kFull) return KorthikantiRow::kFullRecompute;
  const bool sp = l.sp && l.tp > 1;
  if (r.recompute == Recompute::kSelective)
    return sp ? KorthikantiRow::kTensorSequenceSelective : KorthikantiRow::kTensorSelective;
  if (l.tp == 1) return KorthikantiRow::kNoParallel;
  return sp ? KorthikantiRow::kTensorSequence : KorthikantiRow::kTensor;
}

}  // namespace

std::vector<Published> published_activations(const ModelConfig& m, const Layout& l, const RunConfig& r, int64_t stage) {
  // With context parallelism the rows are evaluated at the rank's s/cp tokens:
  // the paper has no cp, and a rank of a cp ring holds a sequence of s/cp.
  const double s = static_cast<double>(r.seq / l.cp), b = static_cast<double>(r.mbs);
  const double h = static_cast<double>(m.hidden), a = static_cast<double>(m.heads);
  const double t = static_cast<double>(l.tp);
  const KorthikantiRow row = matching_row(l, r);
  const RowInfo& ri = row_info(row);
  const double per_layer = korthikanti_per_layer_bytes(row, s, b, h, a, t);
  // interleaved: (microbatch, chunk) pairs of one chunk's layers each
  const bool vpp = l.vpp > 1;
  const int64_t in_flight = vpp ? chunk_microbatches_in_flight(l.pp, stage, r.microbatches, l.vpp)
                                : microbatches_in_flight(r.schedule, l.pp, stage, r.microbatches);
  const int64_t layers = layers_per_chunk(m, l, stage);
  std::vector<Published> out;

  out.push_back(
      {"korthikanti_per_layer", per_layer,
       std::string("Korthikanti et al. 2022, Table 2, row ") + ri.name + ": " + ri.form + " per layer per microbatch"});

  // §4.2.3: under 1F1B the first stage holds p microbatches of L/p layers —
  // L layers' worth (Eq. 5) — discounted by min(1, m/p) when m < p (as Megatron's
  // theoretical_memory_usage.py does); stage i holds p − i, GPipe all m.
  const double stage_layers = static_cast<double>(in_flight * layers) * per_layer;
  std::string rule = r.schedule == Schedule::kGPipe
                         ? "GPipe: m = " + std::to_string(in_flight) + " in flight"
                         : "1F1B: min(p − i, m) = " + std::to_string(in_flight) + " in flight";
  if (vpp)
    rule = "interleaved 1F1B: min((p − i − 1)·2 + (v − 1)·p + 1, m·v) = " + std::to_string(in_flight) +
           " chunk-microbatches in flight; first stage = L·(1 + (p − 1)/(p·v)) layers' worth (Megatron's "
           "interleaving penalty)";
  else if (stage == 0 && r.schedule == Schedule::k1F1B)
    rule += "; first stage = L layers' worth × min(1, m/p) (§4.2.3, Eq. 5)";
  out.push_back({"korthikanti_stage", stage_layers,
                 "Korthikanti et al. 2022, Table 2 row × " + std::to_string(layers) +
                     " layers × in-flight microbatches (" + rule + ")"});

  // §4.3 "Total activations memory": embedding dropout mask sbh (first stage),
  // output-layer-norm input 2sbh and output-layer input 2sbh plus fp32 logits
  // for the cross entropy 4sbv (last stage); hidden-sized terms /t under SP,
  // logits /t (vocab-parallel). Per microbatch in flight.
  const double sp_div = (l.sp && l.tp > 1) ? t : 1.0;
  double extras = 0;
  if (stage == 0) extras += s * b * h / sp_div;
  if (stage == l.pp - 1) extras += 4.0 * s * b * h / sp_div + 4.0 * s * b * m.vocab / t;
  // interleaved: only the embedding's (head's) chunk carries them
  const int64_t with_extras =
      vpp ? chunk_live_at_peak(l.pp, stage, r.microbatches, l.vpp, stage == 0 ? 0 : l.vpp - 1) : in_flight;
  out.push_back({"korthikanti_stage_with_extras", stage_layers + static_cast<double>(with_extras) * extras,
                 "korthikanti_stage + §4.3 extras × in flight: embedding dropout sbh (first "
                 "stage); output norm input 2sbh, output layer input 2sbh, fp32 logits 4sbv/t "
                 "(last stage); hidden terms /t under SP"});

  // Megatron-LM's own figure, as report_theoretical_memory chooses it
  // (analytic/megatron.h); it describes the first pipeline stage only.
  if (stage == 0) {
    const MegatronActivationArgs ma = megatron_activation_args(l, r);
    const bool sp_selective = ma.sequence_parallel && ma.selective_recompute;
    out.push_back(
        {"megatron_activation", megatron_activation_bytes(m, l, r, ma),
         std::string("Megatron-LM megatron/training/theoretical_memory_usage.py report_theoretical_memory @") +
             kMegatronCommit +
             (sp_selective ? ": compute_activation_memory (SP + selective): sbh(18 + 4f/h)·L + embedding terms, "
                             "× min(1, m/p) when p > 1, + output layer when p = 1, all /t"
                           : ": compute_activation_memory_without_sp: sbh(10 + 24/t)·L + embedding terms, "
                             "× min(1, m/p) when p > 1, + 2(sbV'/t + sbh) when p = 1, × 1.05") +
             (ma.virtual_stages ? "; interleaved: × 1 + (p − 1)/(p·v) instead of min(1, m/p)" : "")});
  }

  for (const auto& row_i : kRows) {
    out.push_back(
        {std::string("korthikanti_table2.") + row_i.name, korthikanti_per_layer_bytes(row_i.row, s, b, h, a, t),
         std::string("Korthikanti et al. 2022, Table 2: ") + row_i.form + " per layer per microbatch, t = tp"});
  }
  return out;
}

}  // namespace gpuledger::analytic
