// make_param_layout (see param_layout.h): the per-rank tensor list of
// docs/exact-budget.md "Parameters held by a rank", tensor by tensor.
#include "models/transformer/param_layout.h"

#include <stdexcept>

namespace gpuledger {
namespace {

// Tensor ids: (layer + 1) << 8 | kind for layer tensors, kind alone for the
// embedding and head ones. They name the full tensor, so they are the same on
// every layout (and the tied copy of the word embedding shares its id).
enum Kind : uint64_t {
  kWord = 1,
  kPosition,
  kHeadOut,
  kHeadNormW,
  kHeadNormB,
  kNorm1W = 16,
  kNorm1B,
  kQkvW,
  kQkvB,
  kOutW,
  kOutB,
  kNorm2W,
  kNorm2B,
  kMlpInW,
  kMlpInB,
  kGateW,
  kUpW,
  kMlpOutW,
  kMlpOutB,
  kRouterW,
  kExpertGateW,
  kExpertUpW,
  kExpertDownW,
  kSharedGateW,
  kSharedUpW,
  kSharedDownW,
  kQNormW,
  kKNormW,
  kMlaQDownW,
  kMlaQUpW,
  kMlaQW,
  kMlaKvDownW,
  kMlaKvUpW,
  kMlaQNormW,
  kMlaKvNormW,
  kPostAttnNormW,
  kPostMlpNormW,
  kSinks,
  kRouterLogitB,
  kExpertGateB,
  kExpertUpB,
  kExpertDownB,
};
uint64_t layer_id(int64_t layer, Kind k) { return (static_cast<uint64_t>(layer + 1) << 8) | k; }

class UnitBuilder {
 public:
  UnitBuilder(std::string name, std::string prefix) : prefix_(std::move(prefix)) { u_.name = std::move(name); }
  // Adds a tensor after the others.
  TensorSlot& add(const std::string& role, int64_t rows, int64_t cols, bool matrix, ParamInit init, uint64_t id,
                  int64_t full_cols) {
    TensorSlot t;
    t.name = prefix_ + role;
    t.role = role;
    t.offset = u_.elems;
    t.rows = rows;
    t.cols = cols;
    t.matrix = matrix;
    t.init = init;
    t.tensor_id = id;
    t.full_cols = full_cols;
    u_.elems += rows * cols;
    u_.tensors.push_back(t);
    return u_.tensors.back();
  }
  UnitLayout done() { return std::move(u_); }

 private:
  std::string prefix_;
  UnitLayout u_;
};

}  // namespace

int64_t padded_vocab_size(int64_t vocab, int64_t tp) {
  if (tp == 1) return vocab;
  const int64_t mult = 128 * tp;
  return (vocab + mult - 1) / mult * mult;
}

std::optional<int64_t> global_row(const TensorSlot& t, int64_t r) {
  switch (t.row_map) {
    case RowMap::kBlock: return t.row_begin + r;
    case RowMap::kVocab: {
      const int64_t g = t.row_begin + r;
      if (g >= t.valid_rows_end) return std::nullopt;
      return g;
    }
    case RowMap::kQkv:
    case RowMap::kHeadPair:
      if (r < t.q_rows) return t.q_row_begin + r;
      r -= t.q_rows;
      if (r < t.kv_rows) return t.full_q_rows + t.kv_row_begin + r;
      r -= t.kv_rows;
      return t.full_q_rows + t.full_kv_rows + t.kv_row_begin + r;
  }
  return std::nullopt;
}

std::optional<int64_t> global_element_index(const TensorSlot& t, int64_t r, int64_t c) {
  const auto g = global_row(t, r);
  if (!g) return std::nullopt;
  return *g * t.full_cols + t.col_begin + c;
}

std::vector<UnitLayout::DecayRun> UnitLayout::decay_runs() const {
  std::vector<DecayRun> runs;
  for (const TensorSlot& t : tensors) {
    if (t.elems() == 0) continue;
    if (!runs.empty() && runs.back().decay == t.matrix && runs.back().end == t.offset)
      runs.back().end += t.elems();
    else
      runs.push_back({t.offset, t.offset + t.elems(), t.matrix});
  }
  return runs;
}

const TensorSlot* UnitLayout::find(std::string_view role) const {
  for (const auto& t : tensors)
    if (t.role == role) return &t;
  return nullptr;
}

const TensorSlot& UnitLayout::at(std::string_view role) const {
  if (const TensorSlot* t = find(role)) return *t;
  throw std::out_of_range("param layout: unit " + name + " has no tensor " + std::string(role));
}

const TensorSlot* UnitLayout::word_matrix() const {
  for (const auto& t : tensors)
    if (t.word_embedding || t.tied_copy) return &t;
  return nullptr;
}

bool UnitLayout::summed_over_embedding_group() const {
  for (const auto& t : tensors)
    if (t.summed_over_embedding_group) return true;
  return false;
}

int64_t ParamLayout::total_elems() const {
  int64_t n = 0;
  for (const auto& u : units) n += u.elems;
  return n;
}

namespace {

// How one TP rank splits a layer (Megatron): a_t query heads, k_t KV heads
// starting at kv_head0, f_t FFN rows, rank j of t.
struct LayerSplit {
  int64_t t, j, a_t, k_t, f_t, kv_head0;
  int64_t ep = 1, ep_rank = 0;  // expert parallelism: E/ep experts from expert ep_rank·E/ep
};

// The matrices of a multi-head latent attention (param_layout.h): the down
// projections whole on every rank (their gradients TP-partial), the up
// projections two head blocks each, rank j's a_t heads of each block, and
// attn_out's a_t·d_v columns.
void mla_matrices(UnitBuilder& ub, const ModelConfig& m, int64_t L, const LayerSplit& sp) {
  const int64_t h = m.hidden, a = m.heads, a_t = sp.a_t, j = sp.j;
  const int64_t dn = m.qk_nope_head_dim, dr = m.qk_rope_head_dim, dv = m.v_head_dim;
  const auto partial = [](TensorSlot& s) {
    s.replicated_over_tp = true;
    s.tp_partial_grad = true;
  };
  // rows: a_t·first of the block of a·first rows, then a_t·second of the next block
  const auto head_pair = [&](TensorSlot& s, int64_t first, int64_t second) {
    s.row_map = RowMap::kHeadPair;
    s.q_rows = a_t * first;
    s.kv_rows = a_t * second;
    s.q_row_begin = j * a_t * first;
    s.kv_row_begin = j * a_t * second;
    s.full_q_rows = a * first;
  };
  const int64_t q_in = m.q_lora_rank > 0 ? m.q_lora_rank : h;
  if (m.q_lora_rank > 0) {
    partial(ub.add("mla.q_down.weight", m.q_lora_rank, h, true, ParamInit::kNormal, layer_id(L, kMlaQDownW), h));
    head_pair(ub.add("mla.q_up.weight", a_t * (dn + dr), q_in, true, ParamInit::kNormal, layer_id(L, kMlaQUpW), q_in),
              dn, dr);
  } else {
    head_pair(ub.add("mla.q.weight", a_t * (dn + dr), h, true, ParamInit::kNormal, layer_id(L, kMlaQW), h), dn, dr);
  }
  partial(ub.add("mla.kv_down.weight", m.kv_lora_rank + dr, h, true, ParamInit::kNormal, layer_id(L, kMlaKvDownW), h));
  head_pair(ub.add("mla.kv_up.weight", a_t * (dn + dv), m.kv_lora_rank, true, ParamInit::kNormal,
                   layer_id(L, kMlaKvUpW), m.kv_lora_rank),
            dn, dv);
  ub.add("attn_out.weight", h, a_t * dv, true, ParamInit::kResidualNormal, layer_id(L, kOutW), a * dv).col_begin =
      j * a_t * dv;
}

// The routed experts, a MoE layer unit's first tensors: each expert kind
// stacked over the experts (gate, up: E·f_e × h; down: E·h × f_e, expert e's
// h × f_e block at row e·h), then gpt-oss's expert biases the same way. Under
// ep > 1 the rank holds the E/ep experts from ep_rank·E/ep on (a row block of
// each stacked tensor), and these tensors, the unit's prefix, are the part
// ZeRO shards over the expert-data-parallel group (unit_shard.h).
void routed_experts(UnitBuilder& ub, const ModelConfig& m, int64_t L, const LayerSplit& sp) {
  const int64_t h = m.hidden, E = m.num_experts, f = m.expert_ffn;
  const int64_t local = E / sp.ep, first = sp.ep_rank * local;
  auto expert_rows = [&](TensorSlot& s, int64_t rows_per_expert) {
    s.row_begin = first * rows_per_expert;
    s.expert_sharded = sp.ep > 1;
  };
  expert_rows(ub.add("moe.experts.gate.weight", local * f, h, true, ParamInit::kNormal, layer_id(L, kExpertGateW), h),
              f);
  expert_rows(ub.add("moe.experts.up.weight", local * f, h, true, ParamInit::kNormal, layer_id(L, kExpertUpW), h), f);
  expert_rows(
      ub.add("moe.experts.down.weight", local * h, f, true, ParamInit::kResidualNormal, layer_id(L, kExpertDownW), f),
      h);
  if (!m.expert_biases) return;
  expert_rows(ub.add("moe.experts.gate.bias", local * f, 1, false, ParamInit::kZeros, layer_id(L, kExpertGateB), 1), f);
  expert_rows(ub.add("moe.experts.up.bias", local * f, 1, false, ParamInit::kZeros, layer_id(L, kExpertUpB), 1), f);
  expert_rows(ub.add("moe.experts.down.bias", local * h, 1, false, ParamInit::kZeros, layer_id(L, kExpertDownB), 1), h);
}

// Layer L's unit on the rank: its matrices, then its vectors (replicated
// over TP unless column-parallel) — a MoE layer's routed experts first.
UnitLayout layer_unit(const ModelConfig& m, int64_t L, const LayerSplit& sp) {
  const int64_t h = m.hidden, d = m.head_dim, j = sp.j, a_t = sp.a_t, k_t = sp.k_t, f_t = sp.f_t;
  const bool gpt = m.is_gpt();
  // A MoE model's layers past its first dense_layers hold the sparse block
  // (DeepSeek's first_k_dense_replace); the first ones the dense MLP of size ffn.
  const bool moe = m.is_moe_layer(L);
  auto replicated = [](TensorSlot& s) { s.replicated_over_tp = true; };
  const std::string idx = std::to_string(L);
  UnitBuilder ub("layer." + idx, "layers." + idx + ".");
  const int64_t qkv_rows = (a_t + 2 * k_t) * d;
  auto qkv_map = [&](TensorSlot& s) {
    s.row_map = RowMap::kQkv;
    s.q_rows = a_t * d;
    s.kv_rows = k_t * d;
    s.q_row_begin = j * a_t * d;
    s.kv_row_begin = sp.kv_head0 * d;
    s.full_q_rows = m.heads * d;
    s.full_kv_rows = m.kv_heads * d;
  };
  auto col_split = [&](TensorSlot& s, int64_t local_cols) { s.col_begin = j * local_cols; };
  auto row_block = [&](TensorSlot& s, int64_t local_rows) { s.row_begin = j * local_rows; };
  // matrices
  if (moe) routed_experts(ub, m, L, sp);
  if (m.is_mla()) {
    mla_matrices(ub, m, L, sp);
  } else {
    qkv_map(ub.add("qkv.weight", qkv_rows, h, true, ParamInit::kNormal, layer_id(L, kQkvW), h));
    col_split(ub.add("attn_out.weight", h, a_t * d, true, ParamInit::kResidualNormal, layer_id(L, kOutW), m.heads * d),
              a_t * d);
  }
  if (moe) {
    // The rest of the sparse MLP (docs/formulas/moe.md): the router (E × h),
    // then the shared experts as one FFN of inner size S·f_s, whole on every
    // rank.
    const int64_t E = m.num_experts, fs = m.shared_experts * m.shared_expert_ffn;
    ub.add("moe.router.weight", E, h, true, ParamInit::kNormal, layer_id(L, kRouterW), h);
    if (fs > 0) {
      ub.add("moe.shared.gate.weight", fs, h, true, ParamInit::kNormal, layer_id(L, kSharedGateW), h);
      ub.add("moe.shared.up.weight", fs, h, true, ParamInit::kNormal, layer_id(L, kSharedUpW), h);
      ub.add("moe.shared.down.weight", h, fs, true, ParamInit::kResidualNormal, layer_id(L, kSharedDownW), fs);
    }
  } else if (gpt) {
    row_block(ub.add("mlp_in.weight", f_t, h, true, ParamInit::kNormal, layer_id(L, kMlpInW), h), f_t);
  } else {
    row_block(ub.add("mlp_gate.weight", f_t, h, true, ParamInit::kNormal, layer_id(L, kGateW), h), f_t);
    row_block(ub.add("mlp_up.weight", f_t, h, true, ParamInit::kNormal, layer_id(L, kUpW), h), f_t);
  }
  if (!moe)
    col_split(ub.add("mlp_out.weight", h, f_t, true, ParamInit::kResidualNormal, layer_id(L, kMlpOutW), m.ffn), f_t);
  // vectors (replicated unless column-parallel)
  replicated(ub.add("norm1.weight", h, 1, false, ParamInit::kOnes, layer_id(L, kNorm1W), 1));
  if (gpt) replicated(ub.add("norm1.bias", h, 1, false, ParamInit::kZeros, layer_id(L, kNorm1B), 1));
  if (gpt || m.qkv_bias) qkv_map(ub.add("qkv.bias", qkv_rows, 1, false, ParamInit::kZeros, layer_id(L, kQkvB), 1));
  if (m.is_mla()) {  // the latents' RMSNorm γ, whole on every rank
    const auto partial = [](TensorSlot& s) {
      s.replicated_over_tp = true;
      s.tp_partial_grad = true;
    };
    if (m.q_lora_rank > 0)
      partial(ub.add("mla.q_norm.weight", m.q_lora_rank, 1, false, ParamInit::kOnes, layer_id(L, kMlaQNormW), 1));
    partial(ub.add("mla.kv_norm.weight", m.kv_lora_rank, 1, false, ParamInit::kOnes, layer_id(L, kMlaKvNormW), 1));
  }
  if (m.qk_norm) {  // Qwen3: one RMSNorm γ over head_dim each for Q and K, shared by the heads
    replicated(ub.add("q_norm.weight", d, 1, false, ParamInit::kOnes, layer_id(L, kQNormW), 1));
    replicated(ub.add("k_norm.weight", d, 1, false, ParamInit::kOnes, layer_id(L, kKNormW), 1));
  }
  if (gpt || m.attn_out_bias)
    replicated(ub.add("attn_out.bias", h, 1, false, ParamInit::kZeros, layer_id(L, kOutB), 1));
  // gpt-oss's sinks: one logit per query head, split over tp with the heads (HF inits them N(0, 0.02²))
  if (m.attention_sinks)
    row_block(ub.add("attn.sinks", a_t, 1, false, ParamInit::kNormal, layer_id(L, kSinks), 1), a_t);
  if (moe && m.router_logit_bias)  // gpt-oss: the router linear's bias, whole on every rank as its weight
    ub.add("moe.router.logit_bias", m.num_experts, 1, false, ParamInit::kZeros, layer_id(L, kRouterLogitB), 1);
  replicated(ub.add("norm2.weight", h, 1, false, ParamInit::kOnes, layer_id(L, kNorm2W), 1));
  if (gpt) {
    replicated(ub.add("norm2.bias", h, 1, false, ParamInit::kZeros, layer_id(L, kNorm2B), 1));
    row_block(ub.add("mlp_in.bias", f_t, 1, false, ParamInit::kZeros, layer_id(L, kMlpInB), 1), f_t);
    replicated(ub.add("mlp_out.bias", h, 1, false, ParamInit::kZeros, layer_id(L, kMlpOutB), 1));
  }
  if (m.post_norms) {  // Gemma 2, 3: RMSNorm γ on each block's output, replicated as norm 1 and 2
    replicated(ub.add("post_attn_norm.weight", h, 1, false, ParamInit::kOnes, layer_id(L, kPostAttnNormW), 1));
    replicated(ub.add("post_mlp_norm.weight", h, 1, false, ParamInit::kOnes, layer_id(L, kPostMlpNormW), 1));
  }
  return ub.done();
}

}  // namespace

ParamLayout make_param_layout(const ModelConfig& m, const Layout& l, const Coords& coords) {
  const int64_t t = l.tp, j = coords.tp, h = m.hidden;
  if (m.heads % t != 0 || m.ffn % t != 0 || (m.kv_heads % t != 0 && t % m.kv_heads != 0))
    throw std::invalid_argument("param layout: heads, ffn and kv_heads must divide by tp (or tp by kv_heads)");
  if (m.is_moe() && t > 1)
    throw std::invalid_argument("param layout: a mixture-of-experts model on one tensor-parallel rank only");
  const bool gpt = m.is_gpt();
  const int64_t a_t = m.heads / t, k_t = kv_heads_on_rank(m.kv_heads, t), f_t = m.ffn / t;
  // The first KV head this rank holds: a block of k/t, or with t > k the one
  // head its t/k replicas share.
  const int64_t kv_head0 = t <= m.kv_heads ? j * k_t : j / (t / m.kv_heads);
  const int64_t stage = coords.pp;

  ParamLayout pl;
  pl.vocab_padded = padded_vocab_size(m.vocab, t);
  pl.vocab_rows = pl.vocab_padded / t;
  pl.first_layer = first_layer_of_chunk(m, l, stage, 0);
  pl.layers = layers_on_stage(m, l, stage);
  pl.chunks = l.vpp;
  pl.chunk_layers = layers_per_chunk(m, l, stage);
  pl.stage = stage;
  pl.pp = l.pp;
  const bool first = stage == 0, last = stage == l.pp - 1;
  pl.head_uses_embedding = m.tied_embeddings && l.pp == 1;

  auto vocab_matrix = [&](UnitBuilder& ub, const std::string& role, uint64_t id) -> TensorSlot& {
    TensorSlot& w = ub.add(role, pl.vocab_rows, h, true, ParamInit::kNormal, id, h);
    w.row_map = RowMap::kVocab;
    w.row_begin = j * pl.vocab_rows;
    w.valid_rows_end = m.vocab;
    return w;
  };
  // Tied embeddings across stages: one parameter, two copies, summed over
  // the embedding group after the schedule.
  const bool tied_across_stages = m.tied_embeddings && l.pp > 1;
  auto replicated = [](TensorSlot& s) { s.replicated_over_tp = true; };

  if (first) {
    UnitBuilder ub("embedding", "embedding.");
    TensorSlot& word = vocab_matrix(ub, "word.weight", kWord);
    word.word_embedding = true;
    word.summed_over_embedding_group = tied_across_stages;
    if (gpt) replicated(ub.add("position.weight", m.max_seq, h, true, ParamInit::kNormal, kPosition, h));
    pl.embedding_unit = static_cast<int>(pl.units.size());
    pl.units.push_back(ub.done());
  }

  pl.first_layer_unit = static_cast<int>(pl.units.size());
  // The expert-parallel rank: the position in the ep group, ep consecutive dp ranks (core/layout.h ep_group).
  const LayerSplit split{t, j, a_t, k_t, f_t, kv_head0, l.ep, coords.dp % l.ep};
  for (int64_t li = 0; li < pl.layers; ++li) pl.units.push_back(layer_unit(m, pl.global_layer(li), split));

  if (last) {
    UnitBuilder ub("head", "head.");
    if (!m.tied_embeddings)
      vocab_matrix(ub, "output.weight", kHeadOut);
    else if (tied_across_stages) {
      TensorSlot& copy = vocab_matrix(ub, "word_copy.weight", kWord);  // the tied matrix's copy: same values
      copy.tied_copy = true;
      copy.summed_over_embedding_group = true;
    }
    replicated(ub.add("norm.weight", h, 1, false, ParamInit::kOnes, kHeadNormW, 1));
    if (gpt) replicated(ub.add("norm.bias", h, 1, false, ParamInit::kZeros, kHeadNormB, 1));
    pl.head_unit = static_cast<int>(pl.units.size());
    pl.units.push_back(ub.done());
  }
  return pl;
}

}  // namespace gpuledger
