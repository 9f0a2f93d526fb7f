// InferenceModel and InferWeights (see infer_model.h).
#include "models/transformer/infer_model.h"

#include <algorithm>
#include <limits>
#include <stdexcept>
#include <string>

#include "models/transformer/params.h"
#include "models/transformer/tp_mappings.h"

namespace gpuledger {

// ---- weights ----

InferWeights::InferWeights(Device& device, ParamLayout layout, DType weight_type)
    : device_(device), layout_(std::move(layout)), type_(weight_type) {
  for (const auto& u : layout_.units)
    units_.push_back(device_.alloc(u.elems * dtype_bytes(type_), Account::kWeights, u.name + ".weights"));
}

void InferWeights::initialise(uint64_t seed, int64_t total_layers) {
  initialise_from([&](const UnitLayout& unit) { return init_unit_values(unit, seed, total_layers); });
}

void InferWeights::initialise_from(const UnitValues& values) {
  if (!device_.touches_memory()) return;
  std::vector<char> host;
  for (size_t u = 0; u < layout_.units.size(); ++u) {
    const std::vector<float> v = values(layout_.units[u]);
    const auto n = static_cast<int64_t>(v.size());
    if (type_ == DType::kFP32) {
      device_.copy_from_host(units_[u].data(), v.data(), 4 * n);
      continue;
    }
    host.resize(static_cast<size_t>(n * dtype_bytes(type_)));
    convert_from_fp32(v.data(), host.data(), type_, n);
    device_.copy_from_host(units_[u].data(), host.data(), static_cast<int64_t>(host.size()));
  }
}

int64_t InferWeights::bytes() const {
  int64_t b = 0;
  for (const auto& u : units_) b += u.bytes();
  return b;
}

void* InferWeights::weight_or_null(size_t unit, std::string_view role) const {
  const TensorSlot* t = layout_.units[unit].find(role);
  return t ? byte_offset(units_[unit].data(), t->offset * dtype_bytes(type_)) : nullptr;
}

void* InferWeights::weight(size_t unit, std::string_view role) const {
  const TensorSlot& t = layout_.units[unit].at(role);
  return byte_offset(units_[unit].data(), t.offset * dtype_bytes(type_));
}

LayerParams InferWeights::layer_params(size_t unit) const {
  LayerParams lp;
  auto w = [&](const char* role) -> const void* { return weight_or_null(unit, role); };
  lp.norm1_w = w("norm1.weight");
  lp.norm1_b = w("norm1.bias");
  lp.qkv_w = w("qkv.weight");
  lp.qkv_b = w("qkv.bias");
  lp.out_w = w("attn_out.weight");
  lp.out_b = w("attn_out.bias");
  lp.norm2_w = w("norm2.weight");
  lp.norm2_b = w("norm2.bias");
  lp.mlp_in_w = w("mlp_in.weight");
  lp.mlp_in_b = w("mlp_in.bias");
  lp.gate_w = w("mlp_gate.weight");
  lp.up_w = w("mlp_up.weight");
  lp.mlp_out_w = w("mlp_out.weight");
  lp.mlp_out_b = w("mlp_out.bias");
  lp.q_norm_w = w("q_norm.weight");
  lp.k_norm_w = w("k_norm.weight");
  lp.post_attn_norm_w = w("post_attn_norm.weight");
  lp.post_mlp_norm_w = w("post_mlp_norm.weight");
  lp.moe.router = w("moe.router.weight");
  lp.moe.router_b = w("moe.router.logit_bias");
  lp.moe.gate_b = w("moe.experts.gate.bias");
  lp.moe.up_b = w("moe.experts.up.bias");
  lp.moe.down_b = w("moe.experts.down.bias");
  lp.moe.gate = w("moe.experts.gate.weight");
  lp.moe.up = w("moe.experts.up.weight");
  lp.moe.down = w("moe.experts.down.weight");
  lp.moe.shared_gate = w("moe.shared.gate.weight");
  lp.moe.shared_up = w("moe.shared.up.weight");
  lp.moe.shared_down = w("moe.shared.down.weight");
  return lp;
}

// ---- the model ----

namespace {
// The serving layout: one stage, one data-parallel replica, the tp comm's size.
Layout tp_layout(int64_t tp) {
  Layout l;
  l.dp = l.pp = 1;
  l.tp = tp;
  return l;
}
Coords tp_coords(int64_t tp_rank) {
  Coords c;
  c.tp = tp_rank;
  return c;
}
LayerConfig serving_layer_config(const ModelConfig& m, DType dtype, int64_t tp, AttentionKind attention) {
  RunConfig r;
  r.attention = attention;
  r.dtype = dtype;
  r.grad_dtype = dtype;
  r.dropout = 0;
  r.mbs = 1;
  r.seq = 1;
  // A MoE block serves without a capacity factor: every routed token is
  // computed (a capacity is a training device; the serving forward drops nothing).
  ModelConfig served = m;
  served.capacity_factor = std::nullopt;
  return make_layer_config(served, r, tp);
}
}  // namespace

InferenceModel::InferenceModel(Device& device, Comm& tp, const ModelConfig& model, DType dtype, uint64_t seed,
                               const InferWeights::UnitValues& values, AttentionKind attention)
    : dev_(device),
      tp_(tp),
      model_(model),
      lcfg_(serving_layer_config(model, dtype, tp.size(), attention)),
      weights_(device, make_param_layout(model, tp_layout(tp.size()), tp_coords(tp.rank())), dtype) {
  vocab_begin_ = tp.rank() * weights_.layout().vocab_rows;
  if (values)
    weights_.initialise_from(values);
  else
    weights_.initialise(seed, model.layers);
  const ParamLayout& pl = weights_.layout();
  for (int64_t i = 0; i < pl.layers; ++i) {
    LayerConfig c = lcfg_;
    c.moe = model.is_moe_layer(pl.global_layer(i));  // DeepSeek's first dense_layers: the dense MLP
    layers_.push_back(std::make_unique<InferenceLayer>(
        dev_, tp_, c, weights_.layer_params(static_cast<size_t>(pl.first_layer_unit + i)), i));
  }
}

int32_t argmax(const float* x, int64_t n) {
  int64_t best = 0;
  for (int64_t i = 1; i < n; ++i)
    if (x[i] > x[best]) best = i;
  return static_cast<int32_t>(best);
}

int64_t InferenceModel::weight_bytes_read(const std::vector<int32_t>& tokens) const {
  const ParamLayout& pl = weights_.layout();
  int64_t bytes = weights_.bytes();
  if (pl.embedding_unit < 0) return bytes;
  const UnitLayout& eu = pl.units[static_cast<size_t>(pl.embedding_unit)];
  const int64_t e = dtype_bytes(weights_.type());
  const auto n = static_cast<int64_t>(tokens.size());
  if (!pl.head_uses_embedding) {
    const TensorSlot& word = eu.at("word.weight");
    int64_t held = 0;  // vocabulary-parallel: the rows of this rank's range
    for (int32_t id : tokens) held += id >= vocab_begin_ && id < vocab_begin_ + pl.vocab_rows ? 1 : 0;
    bytes += (held - word.rows) * word.cols * e;
  }
  if (const TensorSlot* pos = eu.find("position.weight")) bytes += (n - pos->rows) * pos->cols * e;
  if (model_.is_moe()) {  // the routed experts only: E − routed experts' gate, up and down are not read
    const int64_t expert_bytes = 3 * model_.hidden * model_.expert_ffn * e;
    for (const auto& layer : layers_)
      if (layer->is_moe()) bytes -= (model_.num_experts - layer->experts_routed()) * expert_bytes;
  }
  return bytes;
}

int64_t InferenceModel::experts_routed() const {
  int64_t n = 0;
  for (const auto& layer : layers_) n += layer->experts_routed();
  return n;
}

std::vector<int32_t> InferenceModel::forward(const std::vector<kv::SeqStep>& batch, const std::vector<int32_t>& tokens,
                                             kv::KvCache& cache, std::vector<float>* logits) {
  int64_t n = 0;
  for (const auto& s : batch) n += s.n_new;
  if (static_cast<int64_t>(tokens.size()) != n)
    throw std::invalid_argument("InferenceModel::forward: " + std::to_string(tokens.size()) + " token ids for " +
                                std::to_string(n) + " new tokens");
  const auto B = static_cast<int64_t>(batch.size());
  if (B == 0) return {};
  Buffer a = embed(batch, tokens, cache, n);
  // the layers, ping-pong between two hidden buffers
  Buffer b = workspace(dtype_bytes(lcfg_.e) * n * lcfg_.h, "infer.hidden.b");
  for (auto& layer : layers_) {
    layer->forward(a.data(), b.data(), batch, cache);
    std::swap(a, b);
  }
  b.reset();
  const Buffer lg = head_logits(batch, a);
  return sample(lg, B, logits);
}

Buffer InferenceModel::embed(const std::vector<kv::SeqStep>& batch, const std::vector<int32_t>& tokens,
                             kv::KvCache& cache, int64_t n) {
  const ParamLayout& pl = weights_.layout();
  const auto eu = static_cast<size_t>(pl.embedding_unit);
  const int64_t h = lcfg_.h, e = dtype_bytes(lcfg_.e);
  Buffer ids = workspace(4 * n, "infer.token_ids");
  dev_.copy_from_host(ids.data(), tokens.data(), 4 * n);
  Buffer a = workspace(e * n * h, "infer.hidden.a");
  const int64_t t = tp_.size();
  if (t > 1) {
    // Vocabulary-parallel (as StageModel): this rank's rows, zeros for the
    // others' ids, summed over tp; then the learned positions (gpt).
    dev_.vocab_embedding_forward(a.data(), ids.as<int32_t>(), weights_.weight(eu, "word.weight"), lcfg_.e, n, h,
                                 vocab_begin_, pl.vocab_rows);
    reduce_from_tensor_model_parallel_region(tp_, a.data(), n * h, lcfg_.e);
  }
  int64_t r0 = 0;
  for (const auto& s : batch) {
    const int64_t pos = cache.length(s.id) - s.n_new;
    if (model_.is_gpt() && pos + s.n_new > model_.max_seq)
      throw std::invalid_argument("sequence " + std::to_string(s.id) + " reaches position " +
                                  std::to_string(pos + s.n_new) + ", past the learned positions (" +
                                  std::to_string(model_.max_seq) + ")");
    void* rows = byte_offset(a.data(), e * r0 * h);
    if (t == 1)
      dev_.embedding_forward(
          rows, ids.as<int32_t>() ? ids.as<int32_t>() + r0 : nullptr, weights_.weight(eu, "word.weight"),
          model_.is_gpt() ? weights_.weight(eu, "position.weight") : nullptr, lcfg_.e, 1, s.n_new, h, pos);
    else if (model_.is_gpt())
      dev_.add(rows, rows, byte_offset(weights_.weight(eu, "position.weight"), e * pos * h), lcfg_.e, s.n_new * h);
    r0 += s.n_new;
  }
  return a;
}

Buffer InferenceModel::head_logits(const std::vector<kv::SeqStep>& batch, Buffer& hidden) {
  const ParamLayout& pl = weights_.layout();
  const auto eu = static_cast<size_t>(pl.embedding_unit), hu = static_cast<size_t>(pl.head_unit);
  const int64_t h = lcfg_.h, e = dtype_bytes(lcfg_.e), vr = pl.vocab_rows;
  const auto B = static_cast<int64_t>(batch.size());
  Buffer last = workspace(e * B * h, "infer.last_rows");
  int64_t r0 = 0;
  for (int64_t i = 0; i < B; ++i) {
    r0 += batch[static_cast<size_t>(i)].n_new;
    dev_.copy(byte_offset(last.data(), e * i * h), byte_offset(hidden.data(), e * (r0 - 1) * h), e * h);
  }
  hidden.reset();
  Buffer normed = workspace(e * B * h, "infer.final_norm.out");
  Buffer stats = workspace((lcfg_.gpt ? 2 : 1) * 4 * B, "infer.final_norm.stats");
  float* st = stats.as<float>();
  if (lcfg_.gpt)
    dev_.layernorm_forward(normed.data(), st, st ? st + B : nullptr, last.data(), weights_.weight(hu, "norm.weight"),
                           weights_.weight_or_null(hu, "norm.bias"), lcfg_.e, B, h, lcfg_.norm_eps);
  else
    dev_.rmsnorm_forward(normed.data(), st, last.data(), weights_.weight(hu, "norm.weight"), lcfg_.e, B, h,
                         lcfg_.norm_eps);
  stats.reset();
  last.reset();
  const void* w_out = pl.head_uses_embedding
                          ? weights_.weight(eu, "word.weight")
                          : weights_.weight(hu, model_.tied_embeddings ? "word_copy.weight" : "output.weight");
  Buffer lg = workspace(4 * B * vr, "infer.logits");
  GemmArgs g;
  g.trans_b = true;
  g.m = B;
  g.n = vr;
  g.k = h;
  g.a = normed.data();
  g.lda = h;
  g.b = w_out;
  g.ldb = h;
  g.ab_type = lcfg_.e;
  g.c = lg.data();
  g.ldc = vr;
  g.c_type = DType::kFP32;
  dev_.gemm(g);
  return lg;
}

std::vector<int32_t> InferenceModel::sample(const Buffer& logits_rank, int64_t B, std::vector<float>* logits) {
  const int64_t V = model_.vocab, vr = weights_.layout().vocab_rows, t = tp_.size();
  // greedy sampling on the host
  std::vector<float> host(static_cast<size_t>(B * vr), 0.0f);
  dev_.copy_to_host(host.data(), logits_rank.data(), 4 * B * vr);
  std::vector<int32_t> next(static_cast<size_t>(B));
  if (logits) logits->assign(static_cast<size_t>(B * V), 0.0f);
  if (t == 1) {
    for (int64_t i = 0; i < B; ++i) {
      const float* row = host.data() + i * vr;
      next[static_cast<size_t>(i)] = argmax(row, V);
      if (logits) std::copy(row, row + V, logits->begin() + i * V);
    }
    return next;
  }
  // Vocabulary-parallel head: this rank holds global columns vocab_begin_ …
  // vocab_begin_ + vr − 1, those >= V padding. Each rank's (max, global
  // index) per row, all-gathered: the largest value wins, the lowest index on
  // ties (ranks hold ascending columns) — argmax over the full row, the same
  // token on every rank. Indices travel as fp32 (exact below 2^24 columns).
  const int64_t valid = std::max<int64_t>(0, std::min<int64_t>(vr, V - vocab_begin_));
  std::vector<float> mine(static_cast<size_t>(2 * B));
  for (int64_t i = 0; i < B; ++i) {
    const float* row = host.data() + i * vr;
    const int32_t j = valid > 0 ? argmax(row, valid) : 0;
    mine[static_cast<size_t>(2 * i)] = valid > 0 ? row[j] : -std::numeric_limits<float>::infinity();
    mine[static_cast<size_t>(2 * i + 1)] = static_cast<float>(vocab_begin_ + j);
  }
  Buffer pair = workspace(4 * 2 * B, "infer.argmax.local");
  Buffer pairs = workspace(4 * 2 * B * t, "infer.argmax.gathered");
  dev_.copy_from_host(pair.data(), mine.data(), 4 * 2 * B);
  tp_.all_gather(pairs.data(), pair.data(), 2 * B, DType::kFP32);
  std::vector<float> all(static_cast<size_t>(2 * B * t));
  dev_.copy_to_host(all.data(), pairs.data(), 4 * 2 * B * t);
  for (int64_t i = 0; i < B; ++i) {
    float best = -std::numeric_limits<float>::infinity();
    int64_t best_idx = -1;
    for (int64_t r = 0; r < t; ++r) {
      const float v = all[static_cast<size_t>(r * 2 * B + 2 * i)];
      const auto idx = static_cast<int64_t>(all[static_cast<size_t>(r * 2 * B + 2 * i + 1)]);
      if (best_idx < 0 || v > best || (v == best && idx < best_idx)) {
        best = v;
        best_idx = idx;
      }
    }
    next[static_cast<size_t>(i)] = static_cast<int32_t>(best_idx);
  }
  if (logits) {  // every rank's slice, in rank order = column order
    Buffer full = workspace(4 * B * vr * t, "infer.logits.gathered");
    tp_.all_gather(full.data(), logits_rank.data(), B * vr, DType::kFP32);
    std::vector<float> f(static_cast<size_t>(B * vr * t));
    dev_.copy_to_host(f.data(), full.data(), 4 * B * vr * t);
    for (int64_t r = 0; r < t; ++r)
      for (int64_t i = 0; i < B; ++i)
        for (int64_t j = 0; j < vr && r * vr + j < V; ++j)
          (*logits)[static_cast<size_t>(i * V + r * vr + j)] = f[static_cast<size_t>((r * B + i) * vr + j)];
  }
  return next;
}

}  // namespace gpuledger
