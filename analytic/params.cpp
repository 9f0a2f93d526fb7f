// Parameter counts tensor by tensor (docs/exact-budget.md "Parameters held by
// a rank"): the per-TP-rank shapes of Megatron's column/row-parallel layers,
// the units ZeRO shards (embedding, one per layer, head), and the published
// total Ψ. Written from the model config alone; never reads kernels/ or
// models/transformer/.
#include "analytic/params.h"
#include "analytic/mla.h"
#include "core/checked_math.h"
#include "core/int_math.h"

#include <algorithm>

namespace gpuledger::analytic {
namespace {

// Appends a tensor unless it is empty (a llama layer has no biases: leaving
// zero-sized entries out keeps tables and names honest).
void add(std::vector<ParamTensor>& ts, std::string name, int64_t elems) {
  if (elems > 0) ts.push_back({std::move(name), elems});
}

int64_t norm_params(const ModelConfig& m) {
  // LayerNorm: γ and β; RMSNorm: γ only.
  return m.is_gpt() ? 2 * m.hidden : m.hidden;
}

// The sparse MLP of a MoE layer (docs/formulas/moe.md): the router (E × h,
// replicated: Megatron's TopKRouter weight is not split over tp) and the
// experts' SwiGLU matrices, each kind stacked over the E experts (gate, up:
// E·f_e × h; down: h × E·f_e), then the shared experts' the same way.
// Under tp each expert's inner size splits as a dense MLP's does. Under
// expert parallelism (ep > 1) a rank holds E/ep of the experts (Megatron-LM's
// num_local_experts = E / ep); the router and the shared experts stay whole
// on every rank.
// buffers: with the router's expert bias (DeepSeek-V3's e_score_correction_bias,
// which the checkpoint holds and the published total counts) — a buffer the
// optimizer never sees (Megatron-LM's TopKRouter registers expert_bias with
// register_buffer, router.py at d98e8a64ddf34856e74b24714e3bedb2f5a39553), so
// a rank's trained units leave it out (analytic/moe.h router_bias_bytes books it).
void append_moe_tensors(std::vector<ParamTensor>& ts, const ModelConfig& m, int64_t tp, int64_t ep,
                        const std::string& p, bool buffers) {
  const int64_t h = m.hidden, routed = m.num_experts / ep * (m.expert_ffn / tp);
  const int64_t shared = m.shared_experts * (m.shared_expert_ffn / tp);
  add(ts, p + "moe.router.weight", m.num_experts * h);
  if (m.router_bias && buffers) add(ts, p + "moe.router.bias", m.num_experts);
  if (m.router_logit_bias) add(ts, p + "moe.router.logit_bias", m.num_experts);  // gpt-oss: the router linear's bias
  for (const char* kind : {"gate", "up", "down"}) {
    add(ts, p + "moe.experts." + kind + ".weight", routed * h);
    ts.back().expert_sharded = ep > 1;
  }
  if (m.expert_biases) {  // gpt-oss: each routed expert's gate, up (f_e) and down (h) biases
    add(ts, p + "moe.experts.gate.bias", routed);
    add(ts, p + "moe.experts.up.bias", routed);
    add(ts, p + "moe.experts.down.bias", m.num_experts / ep * h);
    for (size_t i = ts.size() - 3; i < ts.size(); ++i) ts[i].expert_sharded = ep > 1;
  }
  add(ts, p + "moe.shared.gate.weight", shared * h);
  add(ts, p + "moe.shared.up.weight", shared * h);
  add(ts, p + "moe.shared.down.weight", shared * h);
}

// The MLP after norm 2: the sparse block on a MoE layer (every layer of a
// MoE model past its first dense_layers, DeepSeek's first_k_dense_replace),
// else the dense MLP (gpt: biased GELU in/out; llama: SwiGLU gate, up, down).
void append_mlp_tensors(std::vector<ParamTensor>& ts, const ModelConfig& m, int64_t tp, int64_t ep,
                        const std::string& p, int64_t layer, bool buffers) {
  if (m.is_moe_layer(layer)) {
    append_moe_tensors(ts, m, tp, ep, p, buffers);
    return;
  }
  const int64_t h = m.hidden, f_t = m.ffn / tp;
  const bool gpt = m.is_gpt();
  if (gpt) {
    add(ts, p + "mlp_in.weight", h * f_t);
    add(ts, p + "mlp_in.bias", f_t);
  } else {
    add(ts, p + "mlp_gate.weight", h * f_t);
    add(ts, p + "mlp_up.weight", h * f_t);
  }
  add(ts, p + "mlp_out.weight", f_t * h);
  if (gpt) add(ts, p + "mlp_out.bias", h);
}

// One layer's tensors on one TP rank, layer `layer` (global index). Column-parallel
// QKV and MLP-in split their output dim by t; row-parallel attention-out and
// MLP-out split their input dim by t; norms and row-parallel biases are
// replicated (Megatron, Shoeybi et al. 2019 §3, and docs/exact-budget.md's
// per-layer table). Multi-head latent attention's tensors: analytic/mla.h.
std::vector<ParamTensor> layer_tensors(const ModelConfig& m, int64_t tp, int64_t ep, const std::string& p,
                                       int64_t layer, bool buffers) {
  const int64_t h = m.hidden, d = m.head_dim;
  const int64_t q_t = (m.heads / tp) * d;                     // a_t·d
  const int64_t kv_t = kv_heads_on_rank(m.kv_heads, tp) * d;  // k_t·d
  const int64_t qkv_out = q_t + 2 * kv_t;
  const bool gpt = m.is_gpt();
  std::vector<ParamTensor> ts;
  add(ts, p + "norm1.weight", h);
  if (gpt) add(ts, p + "norm1.bias", h);
  if (m.is_mla()) {
    append_mla_attention_tensors(ts, m, tp, p);
  } else {
    add(ts, p + "qkv.weight", h * qkv_out);
    if (gpt || m.qkv_bias) add(ts, p + "qkv.bias", qkv_out);
    if (m.qk_norm) {  // Qwen3: one RMSNorm γ over head_dim each for Q and K, shared by the heads
      add(ts, p + "q_norm.weight", d);
      add(ts, p + "k_norm.weight", d);
    }
    add(ts, p + "attn_out.weight", q_t * h);
    if (gpt || m.attn_out_bias) add(ts, p + "attn_out.bias", h);
    if (m.attention_sinks) add(ts, p + "attn.sinks", m.heads / tp);  // gpt-oss: a logit per query head
  }
  add(ts, p + "norm2.weight", h);
  if (gpt) add(ts, p + "norm2.bias", h);
  append_mlp_tensors(ts, m, tp, ep, p, layer, buffers);
  if (m.post_norms) {  // Gemma 2, 3: the RMSNorm γ on the attention and MLP outputs
    add(ts, p + "post_attn_norm.weight", h);
    add(ts, p + "post_mlp_norm.weight", h);
  }
  return ts;
}

int64_t sum_elems(const std::vector<ParamTensor>& ts) {
  int64_t n = 0;
  for (const auto& t : ts) n = checked_add(n, t.elems, "parameters of a unit");
  return n;
}

}  // namespace

int64_t ParamUnit::elems() const { return sum_elems(tensors); }

int64_t ParamUnit::expert_sharded_elems() const {
  int64_t n = 0;
  for (const auto& t : tensors)
    if (t.expert_sharded) n = checked_add(n, t.elems, "expert parameters of a unit");
  return n;
}

// The dense part over the data-parallel group with cp (dp·cp ranks; cp is 1
// for a MoE model, core/layout.cpp), the experts over dp/ep.
int64_t ParamUnit::shard_elems(const Layout& l) const {
  const int64_t x = expert_sharded_elems(), edp = l.dp / l.ep, n = l.dp_cp();
  return checked_add(ceil_div(elems() - x, n), ceil_div(x, edp), "parameter shard of a unit");
}

int64_t ParamUnit::padded_elems(const Layout& l) const {
  const int64_t x = expert_sharded_elems(), edp = l.dp / l.ep, n = l.dp_cp();
  return checked_add(checked_mul(n, ceil_div(elems() - x, n), "padded unit"),
                     checked_mul(edp, ceil_div(x, edp), "padded unit"), "padded unit");
}

int64_t padded_vocab(const ModelConfig& m, int64_t tp) {
  // Megatron's _vocab_size_with_padding: multiple of make-vocab-size-divisible-by
  // (128) × t. This implementation pads only when t > 1 (docs/exact-budget.md).
  if (tp <= 1) return m.vocab;
  const int64_t multiple = 128 * tp;
  return ceil_div(m.vocab, multiple) * multiple;
}

int64_t layer_params(const ModelConfig& m, int64_t tp, int64_t ep) { return layer_params_at(m, m.layers - 1, tp, ep); }

int64_t layer_params_at(const ModelConfig& m, int64_t layer, int64_t tp, int64_t ep) {
  return sum_elems(layer_tensors(m, tp, ep, "", layer, /*buffers=*/true));
}

int64_t model_params(const ModelConfig& m) {
  // t = 1, unpadded V, the tied matrix counted once: the figure model cards publish.
  // Each product of two bounded dimensions fits (core/limits.h); the sums and
  // layers × layer do not have to.
  constexpr std::string_view what = "model parameters";
  int64_t n = m.vocab * m.hidden;                                  // word embedding
  if (m.is_gpt()) n = checked_add(n, m.max_seq * m.hidden, what);  // learned positions
  // The first dense_layers layers of a MoE model (dense MLP), then the rest, alike.
  const int64_t dense = m.is_moe() ? m.dense_layers : 0;
  if (dense > 0) n = checked_add(n, checked_mul(dense, layer_params_at(m, 0, 1), what), what);
  n = checked_add(n, checked_mul(m.layers - dense, layer_params(m, 1), what), what);
  n = checked_add(n, norm_params(m), what);                              // final norm
  if (!m.tied_embeddings) n = checked_add(n, m.vocab * m.hidden, what);  // output projection
  return n;
}

int64_t active_params(const ModelConfig& m) {
  // A token passes through k of the E routed experts: the other E − k experts'
  // three matrices (3·h·f_e each) in every MoE layer are not active.
  if (!m.is_moe()) return model_params(m);
  constexpr std::string_view what = "active parameters";
  const int64_t idle_per_layer = checked_mul((m.num_experts - m.experts_per_token) * 3 * m.hidden, m.expert_ffn, what);
  return model_params(m) - checked_mul(m.layers - m.dense_layers, idle_per_layer, what);
}

int64_t mtp_params(const ModelConfig& m) {
  // DeepSeek-V3 §2.2 (fig. 3) and its checkpoint's model.layers.61: each MTP
  // module is one more transformer layer (a MoE layer: its index is past
  // first_k_dense_replace), the RMSNorms enorm and hnorm on the embedding and
  // on the previous depth's hidden state, eh_proj (2h → h) and
  // shared_head.norm. Its embedding and output head are the main model's.
  if (m.mtp_modules == 0) return 0;
  constexpr std::string_view what = "MTP parameters";
  const int64_t h = m.hidden;
  const int64_t module = checked_add(layer_params(m, 1), 3 * h + 2 * h * h, what);
  return checked_mul(m.mtp_modules, module, what);
}

int64_t non_embedding_params(const ModelConfig& m) {
  // Kaplan et al. 2020 §2.1: N excludes "all vocabulary and positional
  // embeddings"; the final norm stays.
  int64_t n = model_params(m) - m.vocab * m.hidden;
  if (m.is_gpt()) n -= m.max_seq * m.hidden;
  if (!m.tied_embeddings) n -= m.vocab * m.hidden;
  return n;
}

int64_t largest_layer_params(const ModelConfig& m) {
  // DeepSpeed's model_to_params (runtime/zero/stage3.py) takes, over every
  // nn.Module, the parameters the module owns directly (recurse=False): a
  // "layer" there is one Linear/Embedding/Norm with its bias, not a transformer
  // block. We apply that rule to this implementation's modules at t = 1:
  // a tensor name minus its last component (".weight"/".bias") is its module.
  Layout one;  // dp = tp = pp = 1: every unit on rank 0
  int64_t best = 0;
  for (const auto& u : rank_param_units(m, one, 0)) {
    std::string module;
    int64_t module_elems = 0;
    for (const auto& t : u.tensors) {
      std::string mod = t.name.substr(0, t.name.rfind('.'));
      if (mod != module) {
        module = mod;
        module_elems = 0;
      }
      module_elems += t.elems;
      best = std::max(best, module_elems);
    }
  }
  return best;
}

std::vector<ParamUnit> rank_param_units(const ModelConfig& m, const Layout& l, int64_t rank) {
  const Coords c = l.coords(rank);
  const int64_t vocab_t = padded_vocab(m, l.tp) / l.tp;  // V'/t rows per rank
  const int64_t h = m.hidden;
  std::vector<ParamUnit> units;

  if (c.pp == 0) {
    // Vocab-parallel word embedding; gpt's learned positions are replicated over TP.
    ParamUnit u{"embedding", {}, 0};
    add(u.tensors, "embedding.word.weight", vocab_t * h);
    if (m.is_gpt()) add(u.tensors, "embedding.position.weight", m.max_seq * h);
    units.push_back(std::move(u));
  }

  // chunk by chunk (one chunk unless vpp > 1), each its contiguous layers
  const int64_t count = layers_per_chunk(m, l, c.pp);
  for (int64_t chunk = 0; chunk < l.vpp; ++chunk) {
    const int64_t first = first_layer_of_chunk(m, l, c.pp, chunk);
    for (int64_t i = first; i < first + count; ++i) {
      const std::string idx = std::to_string(i);
      units.push_back(
          {"layer." + idx, layer_tensors(m, l.tp, l.ep, "layers." + idx + ".", i, /*buffers=*/false), chunk});
    }
  }

  if (c.pp == l.pp - 1) {
    ParamUnit u{"head", {}, l.vpp - 1};
    add(u.tensors, "head.norm.weight", h);
    if (m.is_gpt()) add(u.tensors, "head.norm.bias", h);
    if (!m.tied_embeddings) {
      add(u.tensors, "head.output.weight", vocab_t * h);
    } else if (l.pp > 1) {
      // Tied, p > 1: the last stage keeps its own copy of the word embedding,
      // its gradient all-reduced with the first stage's (Megatron's embedding
      // group). With p = 1 the embedding unit's matrix serves both.
      add(u.tensors, "head.word_copy.weight", vocab_t * h);
    }
    units.push_back(std::move(u));
  }
  return units;
}

bool unit_reduced_after_schedule(const ModelConfig& m, const Layout& l, const ParamUnit& u) {
  return m.tied_embeddings && l.pp > 1 && l.zero >= 2 && l.dp_cp() > 1 && (u.name == "embedding" || u.name == "head");
}

int64_t rank_params(const ModelConfig& m, const Layout& l, int64_t rank) {
  int64_t n = 0;
  for (const auto& u : rank_param_units(m, l, rank)) n = checked_add(n, u.elems(), "parameters of a rank");
  return n;
}

int64_t rank_shard_params(const ModelConfig& m, const Layout& l, int64_t rank) {
  // Each unit's part padded to a multiple of its group and split evenly (ParamUnit::shard_elems).
  int64_t n = 0;
  for (const auto& u : rank_param_units(m, l, rank)) n = checked_add(n, u.shard_elems(l), "parameter shard of a rank");
  return n;
}

}  // namespace gpuledger::analytic
