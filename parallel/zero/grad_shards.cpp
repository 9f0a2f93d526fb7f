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
  for (const UnitLayout& u : params.layout().units) shards_.push_back(unit_shard(u.elems, n_, dp.rank()));
}

void ZeroGradShards::before_backward(size_t u) {
  const ParamLayout& pl = params_.layout();
  const int64_t gb = dtype_bytes(params_.grad_type());
  dev_.fill_zero(params_.grad_staging(), gb * shards_[u].padded_elems(n_));  // padding stays 0
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
  dp_.reduce_scatter(staging, staging, sh.shard_elems, g);  // in place: the shard at the start
  dev_.accumulate(params_.grads(u).data(), g, staging, g, sh.shard_elems);
}

std::optional<void*> ZeroGradShards::word_grad_sink() {
  if (!tied_head_) return std::nullopt;
  return tied_word_grad_.data();
}

void ZeroGradShards::release() { tied_word_grad_.reset(); }

}  // namespace gpuledger
