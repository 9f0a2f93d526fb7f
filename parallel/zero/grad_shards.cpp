// ZeroGradShards (see grad_shards.h).
#include "parallel/zero/grad_shards.h"

namespace gpuledger {

ZeroGradShards::ZeroGradShards(Device& dev, Comm& dp, Comm& expert_dp, StageModel& stage, Params& params)
    : dev_(dev),
      dp_(dp),
      expert_dp_(expert_dp),
      stage_(stage),
      params_(params),
      tied_head_(params.layout().head_uses_embedding) {
  for (const UnitLayout& u : params.layout().units) defers_.push_back(u.summed_over_embedding_group());
  deferred_.resize(defers_.size());
}

void ZeroGradShards::before_backward(size_t u) {
  const ParamLayout& pl = params_.layout();
  const int64_t gb = dtype_bytes(params_.grad_type());
  const int64_t padded = params_.shard(u).padded_elems;
  dev_.fill_zero(params_.grad_staging(), gb * padded);  // padding stays 0
  if (defers_[u] && deferred_[u].empty()) {
    deferred_[u] = dev_.alloc(gb * padded, Account::kGrads, pl.units[u].name + ".tied_grad");
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

void ZeroGradShards::reduce_into_shard(size_t u, void* full) {
  const DType g = params_.grad_type();
  const int64_t gb = dtype_bytes(g);
  for (const ShardPart& p : params_.shard(u).parts) {
    void* part = byte_offset(full, gb * p.padded_at);
    Comm& group = p.expert ? expert_dp_ : dp_;
    if (p.n > 1) group.reduce_scatter(part, part, p.shard_elems, g);  // in place: the shard at the part's start
    dev_.accumulate(byte_offset(params_.grads(u).data(), gb * p.shard_at), g, part, g, p.shard_elems);
  }
}

void ZeroGradShards::after_backward(size_t u) {
  const DType g = params_.grad_type();
  void* staging = params_.grad_staging();
  stage_.reduce_tp_partial_grads(u, staging);
  if (defers_[u]) {  // summed over the embedding group first (grad_shards.h)
    dev_.accumulate(deferred_[u].data(), g, staging, g, params_.shard(u).padded_elems);
    return;
  }
  reduce_into_shard(u, staging);
}

void ZeroGradShards::reduce_deferred() {
  for (size_t u = 0; u < deferred_.size(); ++u) {
    Buffer& full = deferred_[u];
    if (full.empty()) continue;
    reduce_into_shard(u, full.data());
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
