// StageModel (see model.h): embedding, layers, final norm, head and loss of
// one pipeline stage, with per-microbatch saved state.
#include "models/transformer/model.h"

#include <stdexcept>
#include <string>

#include "kernels/philox.h"

namespace gpuledger {

struct StageModel::Slot {
  bool live = false;
  int64_t step = 0, sample_offset = 0;
  Buffer ids, emb_mask;            // first stage
  std::vector<Buffer> hidden;      // hidden[i]: input of local layer i; hidden[L]: final-norm input
  std::vector<LayerSaved> saved;   // per local layer
  Buffer final_stats, final_out, logits, targets;  // last stage
};

StageModel::StageModel(Device& device, Comm& tp, const ModelConfig& model, const RunConfig& run,
                       const Layout& layout, const Coords& coords, Params& params)
    : dev_(device), tp_(tp), model_(model), run_(run), params_(params),
      lcfg_(make_layer_config(model, run, layout.tp)), first_(coords.pp == 0),
      last_(coords.pp == layout.pp - 1), tp_size_(layout.tp) {
  if (tp_size_ > 1 && (first_ || last_))
    throw std::invalid_argument(
        "StageModel: tensor parallelism on the first or last stage needs the vocabulary-parallel "
        "embedding and cross-entropy, which the Device does not offer yet");
  if (model.is_gpt() && run.seq > model.max_seq)
    throw std::invalid_argument("StageModel: seq " + std::to_string(run.seq) + " exceeds max_seq " +
                                std::to_string(model.max_seq) + " (learned positions)");
  const ParamLayout& pl = params_.layout();
  for (int64_t i = 0; i < pl.layers; ++i)
    layers_.push_back(std::make_unique<TransformerLayer>(
        dev_, tp_, lcfg_, layer_params(params_, static_cast<size_t>(pl.first_layer_unit + i))));
}

StageModel::~StageModel() = default;

RngKey StageModel::key(int64_t step, int64_t sample_offset, int64_t layer, uint64_t site) const {
  return RngKey{run_.seed, rng_stream_id(static_cast<uint64_t>(step),
                                         static_cast<uint64_t>(sample_offset),
                                         static_cast<uint64_t>(layer), site)};
}

LayerKeys StageModel::keys(int64_t step, int64_t sample_offset, int64_t layer) const {
  return LayerKeys{key(step, sample_offset, layer, kSiteAttnProbs),
                   key(step, sample_offset, layer, kSiteAttnOut),
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

void StageModel::norm_forward(void* out, float* stats, const void* x, const void* w, const void* b) {
  const int64_t n = lcfg_.tokens();
  if (lcfg_.gpt)
    dev_.layernorm_forward(out, stats, stats ? stats + n : nullptr, x, w, b, lcfg_.e, n, lcfg_.h,
                           kNormEps);
  else
    dev_.rmsnorm_forward(out, stats, x, w, lcfg_.e, n, lcfg_.h, kNormEps);
}

double StageModel::forward(int64_t slot, int64_t step, int64_t sample_offset,
                           const int32_t* host_ids, const int32_t* host_targets,
                           const void* stage_input, void* stage_output) {
  if (slot < 0) throw std::invalid_argument("StageModel::forward: negative slot");
  if (static_cast<size_t>(slot) >= slots_.size()) slots_.resize(static_cast<size_t>(slot) + 1);
  if (!slots_[slot]) slots_[slot] = std::make_unique<Slot>();
  Slot& s = *slots_[slot];
  if (s.live) throw std::logic_error("StageModel::forward: slot " + std::to_string(slot) + " is in flight");
  s.live = true;
  s.step = step;
  s.sample_offset = sample_offset;

  const ParamLayout& pl = params_.layout();
  const int64_t L = pl.layers, n = lcfg_.tokens(), hid = n * lcfg_.h, e = dtype_bytes(lcfg_.e);
  const float p = lcfg_.dropout;
  const std::string mb = "fwd.mb" + std::to_string(slot);
  s.hidden.resize(static_cast<size_t>(L + 1));
  s.saved.resize(static_cast<size_t>(L));

  s.hidden[0] = dev_.alloc(e * hid, Account::kActivations, "layer" + std::to_string(pl.first_layer) + ".in");
  if (first_) {
    dev_.ledger().mark_phase(mb + ".embedding");
    const auto eu = static_cast<size_t>(pl.embedding_unit);
    s.ids = dev_.alloc(4 * n, Account::kActivations, "token_ids");
    dev_.copy_from_host(s.ids.data(), host_ids, 4 * n);
    dev_.embedding_forward(s.hidden[0].data(), s.ids.as<int32_t>(), params_.weight(eu, "word.weight"),
                           lcfg_.gpt ? params_.weight(eu, "position.weight") : nullptr, lcfg_.e,
                           lcfg_.b, lcfg_.s, lcfg_.h, 0);
    if (p > 0) {
      s.emb_mask = dev_.alloc(hid, Account::kActivations, "embedding.mask");
      dev_.dropout_forward(s.hidden[0].data(), s.emb_mask.as<uint8_t>(), s.hidden[0].data(), lcfg_.e,
                           hid, p, key(step, sample_offset, 0, kSiteEmbedding));
    }
  } else {
    dev_.copy(s.hidden[0].data(), stage_input, e * hid);
  }

  for (int64_t i = 0; i < L; ++i) {
    const int64_t layer = pl.first_layer + i;
    dev_.ledger().mark_phase(mb + ".layer" + std::to_string(layer));
    void* out = stage_output;
    if (i + 1 < L || last_) {
      s.hidden[i + 1] = dev_.alloc(e * hid, Account::kActivations, "layer" + std::to_string(layer) + ".out");
      out = s.hidden[i + 1].data();
    }
    layers_[i]->forward(s.hidden[i].data(), out, keys(step, sample_offset, layer), s.saved[i]);
  }
  if (!last_) return 0.0;
  dev_.ledger().mark_phase(mb + ".head");
  return head_forward(s, host_targets);
}

double StageModel::head_forward(Slot& s, const int32_t* host_targets) {
  const ParamLayout& pl = params_.layout();
  const auto hu = static_cast<size_t>(pl.head_unit);
  const int64_t L = pl.layers, n = lcfg_.tokens(), hid = n * lcfg_.h, e = dtype_bytes(lcfg_.e);
  const int64_t vr = pl.vocab_rows;
  const void* w_out = pl.head_uses_embedding
                          ? params_.weight(static_cast<size_t>(pl.embedding_unit), "word.weight")
                          : params_.weight(hu, model_.tied_embeddings ? "word_copy.weight" : "output.weight");

  s.final_stats = dev_.alloc(lcfg_.norm_stats_bytes(), Account::kActivations, "final_norm.stats");
  s.final_out = dev_.alloc(e * hid, Account::kActivations, "final_norm.out");
  norm_forward(s.final_out.data(), s.final_stats.as<float>(), s.hidden[L].data(),
               params_.weight(hu, "norm.weight"), params_.weight_or_null(hu, "norm.bias"));

  // logits (N × V'/t, fp32) = final_out · W_outᵀ: fp32 output for a stable loss
  s.logits = dev_.alloc(4 * n * vr, Account::kActivations, "logits");
  GemmArgs g;
  g.trans_b = true;
  g.m = n; g.n = vr; g.k = lcfg_.h;
  g.a = s.final_out.data(); g.lda = lcfg_.h;
  g.b = w_out; g.ldb = lcfg_.h;
  g.ab_type = lcfg_.e;
  g.c = s.logits.data(); g.ldc = vr; g.c_type = DType::kFP32;
  dev_.gemm(g);

  s.targets = dev_.alloc(4 * n, Account::kActivations, "targets");
  dev_.copy_from_host(s.targets.data(), host_targets, 4 * n);
  Buffer losses = dev_.alloc(4 * n, Account::kWorkspace, "losses");
  dev_.cross_entropy_forward(losses.as<float>(), s.logits.as<float>(), s.targets.as<int32_t>(), n,
                             vr, model_.vocab);
  std::vector<float> host(static_cast<size_t>(n));
  dev_.copy_to_host(host.data(), losses.data(), 4 * n);
  double sum = 0.0;
  for (float x : host) sum += x;
  return sum;
}

void StageModel::head_backward(Slot& s, float loss_scale, void* dres) {
  const ParamLayout& pl = params_.layout();
  const auto hu = static_cast<size_t>(pl.head_unit);
  const auto eu = static_cast<size_t>(pl.embedding_unit);
  const int64_t L = pl.layers, n = lcfg_.tokens(), hid = n * lcfg_.h, e = dtype_bytes(lcfg_.e);
  const int64_t vr = pl.vocab_rows;
  const char* out_role = model_.tied_embeddings ? "word_copy.weight" : "output.weight";
  const void* w_out = pl.head_uses_embedding ? params_.weight(eu, "word.weight") : params_.weight(hu, out_role);
  void* dw_out = pl.head_uses_embedding ? params_.grad(eu, "word.weight") : params_.grad(hu, out_role);

  // dlogits = (softmax − onehot)·scale, in place over the logits
  dev_.cross_entropy_backward(s.logits.as<float>(), s.logits.as<float>(), s.targets.as<int32_t>(), n,
                              vr, model_.vocab, loss_scale);
  s.targets.reset();
  const void* dl = s.logits.data();
  Buffer dl_e;
  if (lcfg_.e != DType::kFP32) {  // the head GEMMs run in the compute dtype
    dl_e = dev_.alloc(e * n * vr, Account::kWorkspace, "dlogits");
    dev_.convert(dl_e.data(), lcfg_.e, s.logits.data(), DType::kFP32, n * vr);
    s.logits.reset();
    dl = dl_e.data();
  }
  linear_backward_weight(dev_, dw_out, lcfg_.g, dl, s.final_out.data(), lcfg_.e, n, lcfg_.h, vr);
  s.final_out.reset();
  Buffer dfinal = dev_.alloc(e * hid, Account::kWorkspace, "final_norm.dout");
  linear_backward_data(dev_, dfinal.data(), dl, w_out, lcfg_.e, n, lcfg_.h, vr);
  dl_e.reset();
  s.logits.reset();
  tp_.all_reduce(dfinal.data(), hid, lcfg_.e);  // vocabulary-parallel head: partial sums

  const float* st = s.final_stats.as<float>();
  if (lcfg_.gpt)
    dev_.layernorm_backward(dres, params_.grad(hu, "norm.weight"), params_.grad(hu, "norm.bias"),
                            lcfg_.g, dfinal.data(), s.hidden[L].data(), params_.weight(hu, "norm.weight"),
                            st, st ? st + n : nullptr, lcfg_.e, n, lcfg_.h, /*accumulate_dx=*/false);
  else
    dev_.rmsnorm_backward(dres, params_.grad(hu, "norm.weight"), lcfg_.g, dfinal.data(),
                          s.hidden[L].data(), params_.weight(hu, "norm.weight"), st, lcfg_.e, n,
                          lcfg_.h, /*accumulate_dx=*/false);
  s.final_stats.reset();
  s.hidden[L].reset();
}

void StageModel::backward(int64_t slot, float loss_scale, const void* output_grad, void* input_grad) {
  if (slot < 0 || static_cast<size_t>(slot) >= slots_.size() || !slots_[slot] || !slots_[slot]->live)
    throw std::logic_error("StageModel::backward: slot " + std::to_string(slot) + " has no forward");
  Slot& s = *slots_[slot];
  const ParamLayout& pl = params_.layout();
  const int64_t L = pl.layers, n = lcfg_.tokens(), hid = n * lcfg_.h, e = dtype_bytes(lcfg_.e);
  const std::string mb = "bwd.mb" + std::to_string(slot);

  Buffer dres = dev_.alloc(e * hid, Account::kWorkspace, "dresidual");
  if (last_) {
    dev_.ledger().mark_phase(mb + ".head");
    head_backward(s, loss_scale, dres.data());
  } else {
    dev_.copy(dres.data(), output_grad, e * hid);
  }
  for (int64_t i = L - 1; i >= 0; --i) {
    const int64_t layer = pl.first_layer + i;
    dev_.ledger().mark_phase(mb + ".layer" + std::to_string(layer));
    layers_[i]->backward(s.hidden[i].data(), dres.data(), keys(s.step, s.sample_offset, layer), s.saved[i]);
    s.hidden[i].reset();
  }
  if (first_) {
    dev_.ledger().mark_phase(mb + ".embedding");
    const auto eu = static_cast<size_t>(pl.embedding_unit);
    if (lcfg_.dropout > 0) {
      dev_.dropout_backward(dres.data(), lcfg_.e, dres.data(), lcfg_.e, s.emb_mask.as<uint8_t>(), hid,
                            lcfg_.dropout);
      s.emb_mask.reset();
    }
    dev_.embedding_backward(params_.grad(eu, "word.weight"),
                            lcfg_.gpt ? params_.grad(eu, "position.weight") : nullptr, lcfg_.g,
                            dres.data(), lcfg_.e, s.ids.as<int32_t>(), lcfg_.b, lcfg_.s, lcfg_.h, 0);
    s.ids.reset();
  } else {
    dev_.copy(input_grad, dres.data(), e * hid);
  }
  *slots_[slot] = Slot{};
}

}  // namespace gpuledger
