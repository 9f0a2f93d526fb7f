// ZeroParamGather (see param_gather.h).
#include "parallel/zero/param_gather.h"

namespace gpuledger {

ZeroParamGather::ZeroParamGather(Device& dev, Comm& dp, Comm& expert_dp, StageModel& stage, Params& params,
                                 int64_t prefetch)
    : dev_(dev), dp_(dp), expert_dp_(expert_dp), stage_(stage), params_(params), prefetch_(prefetch) {
  for (size_t u = 0; u < params.units(); ++u) chunk_.push_back(chunk_of(u));
}

int64_t ZeroParamGather::chunk_of(size_t u) const {
  // The embedding runs in chunk 0, the head in the last chunk, local layer i
  // in chunk i / chunk_layers (ParamLayout).
  const ParamLayout& pl = params_.layout();
  const int unit = static_cast<int>(u);
  if (unit == pl.embedding_unit || pl.chunks == 1) return 0;
  if (unit == pl.head_unit) return pl.chunks - 1;
  return (unit - pl.first_layer_unit) / pl.chunk_layers;
}

bool ZeroParamGather::is_tied_head(size_t u) const {
  const ParamLayout& pl = params_.layout();
  return pl.head_uses_embedding && static_cast<int>(u) == pl.head_unit;
}

void ZeroParamGather::gather(size_t u) {
  Buffer& full = params_.gathered(u);
  if (!full.empty()) return;
  const UnitShard& sh = params_.shard(u);
  const DType e = params_.weight_type();
  const int64_t eb = dtype_bytes(e);
  full = dev_.alloc(eb * sh.padded_elems, Account::kWeights, params_.layout().units[u].name + ".gathered");
  for (const ShardPart& p : sh.parts) {
    void* out = byte_offset(full.data(), eb * p.padded_at);
    const void* mine = byte_offset(params_.weights(u).data(), eb * p.shard_at);
    if (p.n > 1)
      (p.expert ? expert_dp_ : dp_).all_gather(out, mine, p.shard_elems, e);
    else  // a group of one: the shard is the part
      dev_.copy(out, mine, eb * p.shard_elems);
  }
  stage_.rebind_layer_unit(u);
}

void ZeroParamGather::enter(size_t u, bool backward) {
  const auto count = static_cast<int64_t>(params_.units());
  for (int64_t k = 0; k <= prefetch_; ++k) {
    const int64_t v = backward ? static_cast<int64_t>(u) - k : static_cast<int64_t>(u) + k;
    if (v < 0 || v >= count || chunk_[static_cast<size_t>(v)] != chunk_[u]) break;
    gather(static_cast<size_t>(v));
  }
  if (!is_tied_head(u)) return;
  const auto eu = static_cast<size_t>(params_.layout().embedding_unit);
  embedding_for_head_ = params_.gathered(eu).empty();
  gather(eu);
}

void ZeroParamGather::leave(size_t u) {
  params_.gathered(u).reset();
  if (!is_tied_head(u)) return;
  if (embedding_for_head_) params_.gathered(static_cast<size_t>(params_.layout().embedding_unit)).reset();
  embedding_for_head_ = false;
}

void ZeroParamGather::release_all() {
  embedding_for_head_ = false;
  for (size_t u = 0; u < params_.units(); ++u) params_.gathered(u).reset();
}

}  // namespace gpuledger
