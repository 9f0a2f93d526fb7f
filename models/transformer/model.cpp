// StageModel (see model.h): embedding, layers, final norm, head and loss of
// one pipeline stage, with per-microbatch saved state.
#include "models/transformer/model.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <stdexcept>
#include <string>

#include "core/attention_pattern.h"
#include "kernels/philox.h"
#include "models/linear/fp8_scope.h"
#include "models/linear/linear.h"

namespace gpuledger {

// Per-rank shapes as in layer.h LayerSaved (s_l = s/t under sp, else s;
// V'/t the rank's vocabulary rows).
struct StageModel::Slot {
  bool live = false;
  int64_t step = 0, sample_offset = 0;
  int64_t chunk = 0;              // the model chunk the forward ran (model.h)
  Buffer ids;                     // [mbs, seq] int32 token ids (first stage)
  Buffer emb_mask;                // [mbs, s_l, h] uint8 embedding dropout (first stage, dropout > 0)
  std::vector<Buffer> hidden;     // hidden[i]: [mbs, s_l, h] e, input of the chunk's layer i;
                                  // hidden[L]: the final-norm input (last stage, last chunk)
  std::vector<LayerSaved> saved;  // per local layer
  Buffer final_stats;             // [mbs, s_l] fp32 rstd (gpt: also mean, ×2) (last stage)
  Buffer final_out;               // [mbs, s_l, h] e: final-norm output (last stage)
  Buffer logits;                  // [mbs, seq, V'/t] fp32; the probabilities after the loss
  Buffer targets;                 // [mbs, seq] int32 (last stage)
};

StageModel::StageModel(Device& device, Comm& tp, const ModelConfig& model, const RunConfig& run, const Layout& layout,
                       const Coords& coords, Params& params, Comm* ep, Comm* cp)
    : dev_(device),
      tp_(tp),
      model_(model),
      run_(run),
      params_(params),
      lcfg_(make_layer_config(model, run, layout.tp)),
      first_(coords.pp == 0),
      last_(coords.pp == layout.pp - 1),
      tp_size_(layout.tp),
      tp_rank_(coords.tp) {
  lcfg_.sp = layout.sp && layout.tp > 1;
  if (model.is_moe() && layout.ep > 1) {
    if (ep == nullptr || ep->size() != layout.ep)
      throw std::invalid_argument("StageModel: --ep " + std::to_string(layout.ep) +
                                  " needs the expert-parallel group's communicator of that size");
    lcfg_.ep = layout.ep;
    lcfg_.ep_comm = ep;
  }
  if (tp.size() != tp_size_)
    throw std::invalid_argument("StageModel: the tp communicator has " + std::to_string(tp.size()) +
                                " ranks, the layout " + std::to_string(tp_size_));
  if (lcfg_.sp && lcfg_.tokens() % tp_size_ != 0)
    throw std::invalid_argument("StageModel: --sp needs b·s divisible by tp");
  vocab_begin_ = tp_rank_ * params.layout().vocab_rows;
  if (model.is_gpt() && run.seq > model.max_seq)
    throw std::invalid_argument("StageModel: seq " + std::to_string(run.seq) + " exceeds max_seq " +
                                std::to_string(model.max_seq) + " (learned positions)");
  if (cp && cp->size() > 1) {  // context parallelism: the rank's seq / cp tokens, the ring
    lcfg_.s = run.seq / cp->size();
    ring_ = std::make_unique<ContextRing>(dev_, cp, run.seq, lcfg_.kv_block_bytes());
    lcfg_.ring = ring_.get();
    lcfg_.cp_comm = cp;
  }
  const ParamLayout& pl = params_.layout();
  if (model.router_bias) {
    std::vector<bool> moe_layer;
    for (int64_t i = 0; i < pl.layers; ++i) moe_layer.push_back(model.is_moe_layer(pl.global_layer(i)));
    expert_bias_ = std::make_unique<ExpertBias>(dev_, model.num_experts, moe_layer);
  }
  for (int64_t i = 0; i < pl.layers; ++i)
    layers_.push_back(std::make_unique<TransformerLayer>(dev_, tp_, local_layer_config(i), local_layer_params(i)));
}

LayerParams StageModel::local_layer_params(int64_t local_layer) const {
  LayerParams p = layer_params(params_, static_cast<size_t>(params_.layout().first_layer_unit + local_layer));
  if (expert_bias_) p.moe.expert_bias = expert_bias_->layer(local_layer);
  return p;
}

void StageModel::update_expert_bias(Comm& group) {
  if (expert_bias_) expert_bias_->update(group);
}

std::vector<float> StageModel::expert_bias(int64_t local_layer) const {
  if (!expert_bias_ || expert_bias_->layer(local_layer) == nullptr) return {};
  return expert_bias_->values(local_layer);
}

LayerConfig StageModel::local_layer_config(int64_t local_layer) const {
  // Each layer attends under its own window (core/attention_pattern.h): a
  // hybrid model's sliding and full layers differ only there.
  // A MoE model's first dense_layers layers (DeepSeek's first_k_dense_replace)
  // hold the dense MLP of size ffn, the others the sparse block.
  LayerConfig c = lcfg_;
  const int64_t layer = params_.layout().global_layer(local_layer);
  c.window = layer_window(model_, layer);
  c.moe = model_.is_moe_layer(layer);
  return c;
}

StageModel::~StageModel() = default;

RngKey StageModel::key(int64_t step, int64_t sample_offset, int64_t layer, uint64_t site) const {
  return RngKey{run_.seed, rng_stream_id(static_cast<uint64_t>(step), static_cast<uint64_t>(sample_offset),
                                         static_cast<uint64_t>(layer), site)};
}

LayerKeys StageModel::keys(int64_t step, int64_t sample_offset, int64_t layer) const {
  return LayerKeys{key(step, sample_offset, layer, kSiteAttnProbs), key(step, sample_offset, layer, kSiteAttnOut),
                   key(step, sample_offset, layer, kSiteMlpOut)};
}

void StageModel::discard(int64_t slot) {
  if (slot >= 0 && static_cast<size_t>(slot) < slots_.size() && slots_[slot]) *slots_[slot] = Slot{};
}

int64_t StageModel::in_flight() const {
  int64_t n = 0;
  for (const auto& s : slots_) n += s && s->live ? 1 : 0;
  return n;
}

RngKey StageModel::hidden_key(RngKey k) const { return token_shard_key(k, lcfg_, tp_rank_); }

void StageModel::norm_forward(void* out, float* stats, const void* x, const void* w, const void* b) {
  const int64_t n = lcfg_.tokens_local();
  if (lcfg_.gpt)
    dev_.layernorm_forward(out, stats, stats ? stats + n : nullptr, x, w, b, lcfg_.e, n, lcfg_.h, lcfg_.norm_eps);
  else
    dev_.rmsnorm_forward(out, stats, x, w, lcfg_.e, n, lcfg_.h, lcfg_.norm_eps);
}

double StageModel::forward(int64_t slot, int64_t step, int64_t sample_offset, const int32_t* host_ids,
                           const int32_t* host_targets, const void* stage_input, void* stage_output, int64_t chunk) {
  if (slot < 0) throw std::invalid_argument("StageModel::forward: negative slot");
  const ParamLayout& pl = params_.layout();
  if (chunk < 0 || chunk >= pl.chunks)
    throw std::invalid_argument("StageModel::forward: chunk " + std::to_string(chunk) + " outside the stage's " +
                                std::to_string(pl.chunks));
  if (static_cast<size_t>(slot) >= slots_.size()) slots_.resize(static_cast<size_t>(slot) + 1);
  if (!slots_[slot]) slots_[slot] = std::make_unique<Slot>();
  Slot& s = *slots_[slot];
  if (s.live) throw std::logic_error("StageModel::forward: slot " + std::to_string(slot) + " is in flight");
  s.live = true;
  s.step = step;
  s.sample_offset = sample_offset;
  s.chunk = chunk;

  // The chunk's layers: local layers [i0, i0 + L); the embedding sits in
  // chunk 0 of the first stage, the head in the last chunk of the last stage.
  const int64_t L = pl.chunk_layers, i0 = chunk * L;
  const bool first = first_ && chunk == 0, last = last_ && chunk == pl.chunks - 1;
  // hid: elements of the residual stream on this rank (the token shard under sp)
  const int64_t hid = lcfg_.tokens_local() * lcfg_.h, e = dtype_bytes(lcfg_.e);
  const float p = lcfg_.dropout;
  const std::string mb = "fwd.mb" + std::to_string(slot);
  s.hidden.resize(static_cast<size_t>(L + 1));
  s.saved.resize(static_cast<size_t>(L));
  double aux_loss = 0;  // Σ of the MoE layers' load-balancing losses

  s.hidden[0] = dev_.alloc(e * hid, Account::kActivations, "layer" + std::to_string(pl.global_layer(i0)) + ".in");
  if (first) {
    dev_.ledger().mark_phase(mb + ".embedding");
    unit_hook(pl.embedding_unit, false, true);
    embedding_forward(s, host_ids);
    unit_hook(pl.embedding_unit, false, false);
    if (p > 0) {
      s.emb_mask = dev_.alloc(hid, Account::kActivations, "embedding.mask");
      dev_.dropout_forward(s.hidden[0].data(), s.emb_mask.as<uint8_t>(), s.hidden[0].data(), lcfg_.e, hid, p,
                           hidden_key(key(step, sample_offset, 0, kSiteEmbedding)));
    }
  } else {
    dev_.copy(s.hidden[0].data(), stage_input, e * hid);
  }

  for (int64_t i = 0; i < L; ++i) {
    const int64_t layer = pl.global_layer(i0 + i);
    const int unit = pl.first_layer_unit + static_cast<int>(i0 + i);
    dev_.ledger().mark_phase(mb + ".layer" + std::to_string(layer));
    void* out = stage_output;
    if (i + 1 < L || last) {
      s.hidden[i + 1] = dev_.alloc(e * hid, Account::kActivations, "layer" + std::to_string(layer) + ".out");
      out = s.hidden[i + 1].data();
    }
    unit_hook(unit, false, true);
    {
      const Fp8GemmScope fp8(run_.fp8);  // the layer's Linear GEMMs in FP8 (--dtype fp8), by the run's recipe
      layers_[i0 + i]->forward(s.hidden[i].data(), out, keys(step, sample_offset, layer), s.saved[i]);
    }
    unit_hook(unit, false, false);
    aux_loss += s.saved[i].moe.plan.aux_loss;
    moe_dropped_choices_ += s.saved[i].moe.plan.dropped;
    // the expert bias's load counts: this forward's choices (a recompute's are not counted again)
    if (expert_bias_ && expert_bias_->layer(i0 + i)) expert_bias_->count(i0 + i, s.saved[i].moe.plan.assigned);
  }
  // MoE: each layer's load-balancing loss joins the microbatch's mean token
  // loss (docs/formulas/moe.md), so it enters the token sum N times — on the
  // stage that runs the layer (the step sums the stages' shares over pp).
  // Under cp each rank holds its share of every layer's L_aux (moe_routing.h
  // set_aux_over_ranks), which enters the microbatch's b·s tokens, not its own s/cp.
  const double aux_tokens = dev_.touches_memory() ? aux_loss * static_cast<double>(moe_aux_tokens()) : 0.0;
  if (!last) return aux_tokens;
  dev_.ledger().mark_phase(mb + ".head");
  unit_hook(pl.head_unit, false, true);
  const double loss = head_forward(s, host_targets);
  unit_hook(pl.head_unit, false, false);
  return loss + aux_tokens;
}

void StageModel::unit_hook(int unit, bool backward, bool begin) {
  if (hooks_ == nullptr) return;
  const auto u = static_cast<size_t>(unit);
  if (backward)
    begin ? hooks_->before_backward(u) : hooks_->after_backward(u);
  else
    begin ? hooks_->before_forward(u) : hooks_->after_forward(u);
}

void StageModel::rebind_layer_unit(size_t unit) {
  const ParamLayout& pl = params_.layout();
  const int64_t i = static_cast<int64_t>(unit) - pl.first_layer_unit;
  if (i < 0 || i >= pl.layers) return;  // the embedding and head units read Params on each use
  layers_[static_cast<size_t>(i)] =
      std::make_unique<TransformerLayer>(dev_, tp_, local_layer_config(i), local_layer_params(i));
}

void StageModel::embedding_forward(Slot& s, const int32_t* host_ids) {
  const ParamLayout& pl = params_.layout();
  const auto eu = static_cast<size_t>(pl.embedding_unit);
  const int64_t n = lcfg_.tokens(), h = lcfg_.h;
  s.ids = dev_.alloc(4 * n, Account::kActivations, "token_ids");
  dev_.copy_from_host(s.ids.data(), host_ids, 4 * n);
  const void* wpe = lcfg_.gpt ? params_.weight(eu, "position.weight") : nullptr;
  if (tp_size_ == 1) {
    dev_.embedding_forward(s.hidden[0].data(), s.ids.as<int32_t>(), params_.weight(eu, "word.weight"), wpe, lcfg_.e,
                           lcfg_.b, lcfg_.s, h, lcfg_.positions());
    return;
  }
  // Vocabulary-parallel: this rank's rows, zeros for the others' ids, summed over tp.
  {
    PartialSums out(tp_region(), s.hidden[0].data(), "embedding.partial");
    dev_.vocab_embedding_forward(out.data(), s.ids.as<int32_t>(), params_.weight(eu, "word.weight"), lcfg_.e, n, h,
                                 vocab_begin_, pl.vocab_rows);
    out.reduce();
  }
  if (wpe) add_positions(s.hidden[0].data(), wpe);
}

namespace {
// Token i of the rank's rows (global token begin + i, (B, T) order) is token
// t = (begin + i) mod T of its sequence, at position pos.position(t) (t
// itself on one rank; the rank's two chunks under context parallelism): runs
// of consecutive positions, broken at each sequence's end and between the
// chunks. f(row, position, length) for each run of [begin, end).
template <class F>
void position_runs(int64_t begin, int64_t end, int64_t T, const TokenSpans& pos, F&& f) {
  for (int64_t i = begin; i < end;) {
    const int64_t t = i % T;
    const int64_t run_end = t < pos.split ? std::min(T, pos.split) : T;
    const int64_t len = std::min(run_end - t, end - i);
    f(i - begin, pos.position(t), len);
    i += len;
  }
}
}  // namespace

void StageModel::add_positions(void* out, const void* wpe) {
  const int64_t h = lcfg_.h, e = dtype_bytes(lcfg_.e);
  const int64_t begin = token_begin();
  position_runs(begin, begin + lcfg_.tokens_local(), lcfg_.s, lcfg_.positions(),
                [&](int64_t row, int64_t pos, int64_t len) {
                  void* dst = byte_offset(out, e * row * h);
                  dev_.add(dst, dst, byte_offset(wpe, e * pos * h), lcfg_.e, len * h);
                });
}

void StageModel::positions_backward(void* dwpe, const void* dout) {
  const int64_t h = lcfg_.h, e = dtype_bytes(lcfg_.e), g = dtype_bytes(lcfg_.g);
  const int64_t begin = token_begin();
  position_runs(
      begin, begin + lcfg_.tokens_local(), lcfg_.s, lcfg_.positions(), [&](int64_t row, int64_t pos, int64_t len) {
        dev_.accumulate(byte_offset(dwpe, g * pos * h), lcfg_.g, byte_offset(dout, e * row * h), lcfg_.e, len * h);
      });
}

void StageModel::embedding_backward(Slot& s, void* dres) {
  const ParamLayout& pl = params_.layout();
  const auto eu = static_cast<size_t>(pl.embedding_unit);
  const int64_t n = lcfg_.tokens(), h = lcfg_.h;
  void* dwpe = lcfg_.gpt ? params_.grad(eu, "position.weight") : nullptr;
  if (tp_size_ == 1) {
    dev_.embedding_backward(params_.grad(eu, "word.weight"), dwpe, lcfg_.g, dres, lcfg_.e, s.ids.as<int32_t>(), lcfg_.b,
                            lcfg_.s, h, lcfg_.positions());
    s.ids.reset();
    return;
  }
  // positions: the whole gradient without sp (dres is the same on every TP
  // rank); the shard's partial sum under sp (reduce_tp_partial_grads).
  if (dwpe) positions_backward(dwpe, dres);
  const AllTokens d(tp_region(), dres, "embedding.dout");  // sp: the reduce-scatter's transpose
  dev_.vocab_embedding_backward(params_.grad(eu, "word.weight"), lcfg_.g, d.data(), lcfg_.e, s.ids.as<int32_t>(), n, h,
                                vocab_begin_, pl.vocab_rows);
  s.ids.reset();
}

double StageModel::head_forward(Slot& s, const int32_t* host_targets) {
  const ParamLayout& pl = params_.layout();
  const auto hu = static_cast<size_t>(pl.head_unit);
  const int64_t L = static_cast<int64_t>(s.hidden.size()) - 1;  // the final-norm input follows the chunk's layers
  const int64_t n = lcfg_.tokens(), hid = lcfg_.tokens_local() * lcfg_.h, e = dtype_bytes(lcfg_.e);
  const int64_t vr = pl.vocab_rows;
  const void* w_out = pl.head_uses_embedding
                          ? params_.weight(static_cast<size_t>(pl.embedding_unit), "word.weight")
                          : params_.weight(hu, model_.tied_embeddings ? "word_copy.weight" : "output.weight");

  s.final_stats = dev_.alloc(lcfg_.norm_stats_bytes(), Account::kActivations, "final_norm.stats");
  s.final_out = dev_.alloc(e * hid, Account::kActivations, "final_norm.out");
  norm_forward(s.final_out.data(), s.final_stats.as<float>(), s.hidden[L].data(), params_.weight(hu, "norm.weight"),
               params_.weight_or_null(hu, "norm.bias"));
  AllTokens gathered(tp_region(), s.final_out.data(), "final_norm.out.gathered");  // the head reads every token

  // logits (N × V'/t, fp32) = final_out · W_outᵀ: fp32 output for a stable loss
  s.logits = dev_.alloc(4 * n * vr, Account::kActivations, "logits");
  GemmArgs g;
  g.trans_b = true;
  g.m = n;
  g.n = vr;
  g.k = lcfg_.h;
  g.a = gathered.data();
  g.lda = lcfg_.h;
  g.b = w_out;
  g.ldb = lcfg_.h;
  g.ab_type = lcfg_.e;
  g.c = s.logits.data();
  g.ldc = vr;
  g.c_type = DType::kFP32;
  dev_.gemm(g);
  gathered.reset();

  s.targets = dev_.alloc(4 * n, Account::kActivations, "targets");
  dev_.copy_from_host(s.targets.data(), host_targets, 4 * n);
  if (tp_size_ == 1) {
    Buffer losses = dev_.alloc(4 * n, Account::kWorkspace, "losses");
    dev_.cross_entropy_forward(losses.as<float>(), s.logits.as<float>(), s.targets.as<int32_t>(), n, vr, model_.vocab);
    std::vector<float> host(static_cast<size_t>(n));
    dev_.copy_to_host(host.data(), losses.data(), 4 * n);
    double sum = 0.0;
    for (float x : host) sum += x;
    return sum;
  }

  // Vocabulary-parallel cross-entropy: loss = max + log Σ exp(x − max) − x_target,
  // each of the three per-row figures all-reduced over tp (b·s fp32 each).
  Buffer stats = dev_.alloc(3 * 4 * n, Account::kWorkspace, "ce.stats");
  float* row_max = stats.as<float>();
  float* target_logit = row_max ? row_max + n : nullptr;
  float* sum_exp = row_max ? row_max + 2 * n : nullptr;
  float* logits = s.logits.as<float>();
  const int32_t* targets = s.targets.as<int32_t>();
  dev_.vocab_ce_stats(row_max, target_logit, logits, targets, n, vr, vocab_begin_, model_.vocab);
  tp_.all_reduce(row_max, n, DType::kFP32, ReduceOp::kMax);
  tp_.all_reduce(target_logit, n, DType::kFP32);
  dev_.vocab_ce_exp(logits, sum_exp, row_max, n, vr, vocab_begin_, model_.vocab);
  tp_.all_reduce(sum_exp, n, DType::kFP32);
  dev_.vocab_ce_normalize(logits, sum_exp, n, vr);  // the logits now hold the probabilities
  if (!dev_.touches_memory()) return 0.0;
  std::vector<float> host(static_cast<size_t>(3 * n));
  dev_.copy_to_host(host.data(), stats.data(), 3 * 4 * n);
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i)
    sum += static_cast<double>(host[i]) + std::log(static_cast<double>(host[2 * n + i])) -
           static_cast<double>(host[n + i]);
  return sum;
}

void StageModel::head_backward(Slot& s, float loss_scale, void* dres) {
  const ParamLayout& pl = params_.layout();
  const auto hu = static_cast<size_t>(pl.head_unit);
  const auto eu = static_cast<size_t>(pl.embedding_unit);
  const int64_t L = static_cast<int64_t>(s.hidden.size()) - 1;
  const int64_t n = lcfg_.tokens(), nl = lcfg_.tokens_local(), hid = nl * lcfg_.h, e = dtype_bytes(lcfg_.e);
  const int64_t vr = pl.vocab_rows;
  const char* out_role = model_.tied_embeddings ? "word_copy.weight" : "output.weight";
  const void* w_out = pl.head_uses_embedding ? params_.weight(eu, "word.weight") : params_.weight(hu, out_role);
  // tied, p = 1: the embedding's gradient, or where the hooks send it (unit_hooks.h)
  std::optional<void*> sink;
  if (pl.head_uses_embedding && hooks_ != nullptr) sink = hooks_->word_grad_sink();
  void* dw_out = !pl.head_uses_embedding ? params_.grad(hu, out_role) : sink ? *sink : params_.grad(eu, "word.weight");

  // dlogits = (softmax − onehot)·scale, in place over the logits (under TP
  // they already hold the softmax: the backward is local)
  if (tp_size_ == 1)
    dev_.cross_entropy_backward(s.logits.as<float>(), s.logits.as<float>(), s.targets.as<int32_t>(), n, vr,
                                model_.vocab, loss_scale);
  else
    dev_.vocab_ce_backward(s.logits.as<float>(), s.logits.as<float>(), s.targets.as<int32_t>(), n, vr, vocab_begin_,
                           loss_scale);
  s.targets.reset();
  const void* dl = s.logits.data();
  Buffer dl_e;
  if (lcfg_.e != DType::kFP32) {  // the head GEMMs run in the compute dtype
    dl_e = dev_.alloc(e * n * vr, Account::kWorkspace, "dlogits");
    dev_.convert(dl_e.data(), lcfg_.e, s.logits.data(), DType::kFP32, n * vr);
    s.logits.reset();
    dl = dl_e.data();
  }
  {
    // sp: the saved shard of the final-norm output, gathered again
    const AllTokens a(tp_region(), s.final_out.data(), "final_norm.out.regathered");
    linear_backward_weight(dev_, dw_out, lcfg_.g, dl, a.data(), lcfg_.e, n, lcfg_.h, vr);
  }
  s.final_out.reset();
  Buffer dfinal = dev_.alloc(e * hid, Account::kWorkspace, "final_norm.dout");
  {  // vocabulary-parallel head: partial sums of every token, summed over tp
    PartialSums d(tp_region(), dfinal.data(), "final_norm.dout.partial");
    linear_backward_data(dev_, d.data(), dl, w_out, lcfg_.e, n, lcfg_.h, vr);
    dl_e.reset();
    s.logits.reset();
    d.reduce();
  }

  const float* st = s.final_stats.as<float>();
  if (lcfg_.gpt)
    dev_.layernorm_backward(dres, params_.grad(hu, "norm.weight"), params_.grad(hu, "norm.bias"), lcfg_.g,
                            dfinal.data(), s.hidden[L].data(), params_.weight(hu, "norm.weight"), st,
                            st ? st + nl : nullptr, lcfg_.e, nl, lcfg_.h, /*accumulate_dx=*/false);
  else
    dev_.rmsnorm_backward(dres, params_.grad(hu, "norm.weight"), lcfg_.g, dfinal.data(), s.hidden[L].data(),
                          params_.weight(hu, "norm.weight"), st, lcfg_.e, nl, lcfg_.h, /*accumulate_dx=*/false);
  s.final_stats.reset();
  s.hidden[L].reset();
}

void StageModel::backward(int64_t slot, float loss_scale, const void* output_grad, void* input_grad) {
  if (slot < 0 || static_cast<size_t>(slot) >= slots_.size() || !slots_[slot] || !slots_[slot]->live)
    throw std::logic_error("StageModel::backward: slot " + std::to_string(slot) + " has no forward");
  Slot& s = *slots_[slot];
  const ParamLayout& pl = params_.layout();
  const int64_t L = pl.chunk_layers, i0 = s.chunk * L, hid = lcfg_.tokens_local() * lcfg_.h, e = dtype_bytes(lcfg_.e);
  const bool first = first_ && s.chunk == 0, last = last_ && s.chunk == pl.chunks - 1;
  const std::string mb = "bwd.mb" + std::to_string(slot);

  Buffer dres = dev_.alloc(e * hid, Account::kWorkspace, "dresidual");
  if (last) {
    dev_.ledger().mark_phase(mb + ".head");
    unit_hook(pl.head_unit, true, true);
    head_backward(s, loss_scale, dres.data());
    unit_hook(pl.head_unit, true, false);
  } else {
    dev_.copy(dres.data(), output_grad, e * hid);
  }
  for (int64_t i = L - 1; i >= 0; --i) {
    const int64_t layer = pl.global_layer(i0 + i);
    const int unit = pl.first_layer_unit + static_cast<int>(i0 + i);
    dev_.ledger().mark_phase(mb + ".layer" + std::to_string(layer));
    unit_hook(unit, true, true);
    s.saved[i].moe_aux_scale = static_cast<double>(loss_scale) * static_cast<double>(moe_aux_tokens());
    {
      const Fp8GemmScope fp8(run_.fp8);
      layers_[i0 + i]->backward(s.hidden[i].data(), dres.data(), keys(s.step, s.sample_offset, layer), s.saved[i]);
    }
    unit_hook(unit, true, false);
    s.hidden[i].reset();
  }
  if (first) {
    dev_.ledger().mark_phase(mb + ".embedding");
    if (lcfg_.dropout > 0) {
      dev_.dropout_backward(dres.data(), lcfg_.e, dres.data(), lcfg_.e, s.emb_mask.as<uint8_t>(), hid, lcfg_.dropout);
      s.emb_mask.reset();
    }
    unit_hook(pl.embedding_unit, true, true);
    embedding_backward(s, dres.data());
    unit_hook(pl.embedding_unit, true, false);
  } else {
    dev_.copy(input_grad, dres.data(), e * hid);
  }
  *slots_[slot] = Slot{};
}

void StageModel::reduce_tp_partial_grads() {
  for (size_t u = 0; u < params_.units(); ++u) reduce_tp_partial_grads(u, params_.grads(u).data());
}

void StageModel::reduce_tp_partial_grads(size_t unit, void* unit_grads) {
  if (tp_size_ < 2) return;
  const UnitLayout& ul = params_.layout().units[unit];
  const int64_t g = dtype_bytes(lcfg_.g);
  // Under sp: the replicated tensors (TensorSlot::replicated_over_tp: norms,
  // gpt's row-parallel biases and positions) whose gradient each rank computed from its
  // token shard (docs/formulas/comm.md "Sequence-partial gradients"), one
  // all_reduce each, in layout order.
  // With or without sp: the tensors whose gradient is partial over the
  // ranks' heads (TensorSlot::tp_partial_grad: MLA's down projections and
  // latent norms, mla_attention.h), once each.
  for (const TensorSlot& t : ul.tensors)
    if (t.tp_partial_grad || (lcfg_.sp && t.replicated_over_tp))
      tp_.all_reduce(byte_offset(unit_grads, g * t.offset), t.elems(), lcfg_.g);
  // KV heads replicated over t/k ranks (t > k): each replica's K and V rows
  // (and bias) hold the gradient of its own queries only. A staging buffer
  // with one slot per KV head, [K rows | V rows | K bias | V bias], the rank's
  // slot filled and the rest zero, all-reduced over tp: slot j then holds the
  // sum over the ranks sharing head j (docs/formulas/comm.md).
  const int64_t k = model_.kv_heads;
  const TensorSlot* w = ul.find("qkv.weight");
  if (w == nullptr || tp_size_ <= k) return;
  const TensorSlot* b = ul.find("qkv.bias");
  const int64_t d = lcfg_.d, h = lcfg_.h, kv_w = d * h, kv_b = b ? d : 0;
  const int64_t slot_elems = 2 * kv_w + 2 * kv_b;
  const int64_t head = tp_rank_ / (tp_size_ / k);
  Buffer stage = dev_.alloc(g * k * slot_elems, Account::kWorkspace, "kv_replica.grads");
  dev_.fill_zero(stage.data(), stage.bytes());
  void* slot = byte_offset(stage.data(), g * head * slot_elems);
  // local qkv rows: a_t·d query rows, then d K rows, then d V rows (k_t = 1)
  const int64_t q_rows = lcfg_.q_dim();
  void* gw = byte_offset(unit_grads, g * w->offset);
  void* gk = byte_offset(gw, g * q_rows * h);
  void* gb = b ? byte_offset(unit_grads, g * (b->offset + q_rows)) : nullptr;
  dev_.copy(slot, gk, g * 2 * kv_w);  // K then V rows: contiguous
  if (b) dev_.copy(byte_offset(slot, g * 2 * kv_w), gb, g * 2 * kv_b);
  tp_.all_reduce(stage.data(), k * slot_elems, lcfg_.g);
  dev_.copy(gk, slot, g * 2 * kv_w);
  if (b) dev_.copy(gb, byte_offset(slot, g * 2 * kv_w), g * 2 * kv_b);
}

}  // namespace gpuledger
