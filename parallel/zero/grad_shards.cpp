// ZeroGradShards (see grad_shards.h).
#include "parallel/zero/grad_shards.h"

namespace gpuledger {

ZeroGradShards::ZeroGradShards(Device& dev, Comm& dp, StageModel& stage, Params& params)
    : dev_(dev),
      dp_(dp),
      stage_(stage),
      params_(params),
      n_(dp.size()),
      tied_head_(params.layout().head_uses_embedding) {
  for (const UnitLayout& u : params.layout().units) {
    shards_.push_back(unit_shard(u.elems, n_, dp.rank()));
    defers_.push_back(u.summed_over_embedding_group());
  }
  deferred_.resize(shards_.size());
}

void ZeroGradShards::before_backward(size_t u) {
  const ParamLayout& pl = params_.layout();
  const int64_t gb = dtype_bytes(params_.grad_type());
  dev_.fill_zero(params_.grad_staging(), gb * shards_[u].padded_elems(n_));  // padding stays 0
  if (defers_[u] && deferred_[u].empty()) {
    deferred_[u] = dev_.alloc(gb * shards_[u].padded_elems(n_), Account::kGrads, pl.units[u].name + ".tied_grad");
    dev_.fill_zero(deferred_[u].data(), deferred_[u].bytes());
  }
  if (!tied_head_) return;
  const auto eu = static_cast<size_t>(pl.embedding_unit);
  const TensorSlot& word = *pl.units[eu].word_matrix();  // V'/t × h
  if (static_cast<int>(u) == pl.head_unit) {
    tied_word_grad_ = dev_.alloc(gb * word.elems(), Account::kComm, "tied_word.grad");
    dev_.fill_zero(tied_word_grad_.data(), tied_word_grad_.bytes());
  } else if (u == eu && !tied_word_grad_.empty()) {
    dev_.copy(params_.grad(eu, word), tied_word_grad_.data(), tied_word_grad_.bytes());
    tied_word_grad_.reset();
  }
}

void ZeroGradShards::after_backward(size_t u) {
  const UnitShard& sh = shards_[u];
  const DType g = params_.grad_type();
  void* staging = params_.grad_staging();
  stage_.reduce_tp_partial_grads(u, staging);
  if (defers_[u]) {  // summed over the embedding group first (grad_shards.h)
    dev_.accumulate(deferred_[u].data(), g, staging, g, sh.padded_elems(n_));
    return;
  }
  dp_.reduce_scatter(staging, staging, sh.shard_elems, g);  // in place: the shard at the start
  dev_.accumulate(params_.grads(u).data(), g, staging, g, sh.shard_elems);
}

void ZeroGradShards::reduce_deferred() {
  const DType g = params_.grad_type();
  for (size_t u = 0; u < deferred_.size(); ++u) {
    Buffer& full = deferred_[u];
    if (full.empty()) continue;
    const int64_t shard = shards_[u].shard_elems;
    dp_.reduce_scatter(full.data(), full.data(), shard, g);  // in place: the shard at the start
    dev_.accumulate(params_.grads(u).data(), g, full.data(), g, shard);
    full.reset();
  }
}

std::optional<void*> ZeroGradShards::word_grad_sink() {
  if (!tied_head_) return std::nullopt;
  return tied_word_grad_.data();
}

void ZeroGradShards::release() {
  tied_word_grad_.reset();
  for (Buffer& b : deferred_) b.reset();
}

}  // namespace gpuledger
