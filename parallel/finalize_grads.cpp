// FinalizeGrads (see finalize_grads.h).
#include "parallel/finalize_grads.h"

#include <cmath>
#include <utility>

namespace gpuledger {

double all_reduce_scalar(Device& dev, Comm& comm, double v) {
  if (comm.size() < 2) return v;
  float x = static_cast<float>(v);
  Buffer buf = dev.alloc(4, Account::kWorkspace, "scalar_reduce");
  if (dev.touches_memory()) dev.copy_from_host(buf.data(), &x, 4);
  comm.all_reduce(buf.data(), 1, DType::kFP32);
  if (dev.touches_memory()) dev.copy_to_host(&x, buf.data(), 4);
  return x;
}

FinalizeGrads::FinalizeGrads(Device& dev, const RankContext& ctx, const ModelConfig& model, StageModel& stage,
                             Params& params, std::vector<bool> tp_sum_after_schedule, FullGrad full_grad)
    : dev_(dev),
      ctx_(ctx),
      stage_(stage),
      params_(params),
      tp_sum_after_schedule_(std::move(tp_sum_after_schedule)),
      full_grad_(std::move(full_grad)),
      kv_replicas_(ctx.layout.tp > model.kv_heads ? ctx.layout.tp / model.kv_heads : 1) {
  const ParamLayout& pl = params.layout();
  const int64_t n = reduced_to_shard() ? ctx.layout.dp_cp() : 1;
  const int64_t rank = reduced_to_shard() ? ctx.layout.dp_cp_rank(ctx.coords) : 0;
  for (size_t u = 0; u < pl.units.size(); ++u) {
    grad_shards_.push_back(unit_shard(pl.units[u].elems, n, rank));
    for (const TensorSlot& t : pl.units[u].tensors)
      if (t.summed_over_embedding_group) emb_tensors_.push_back({u, &t});
  }
}

void FinalizeGrads::reduce_model_parallel() {
  for (size_t u = 0; u < params_.units(); ++u)
    if (tp_sum_after_schedule_[u]) stage_.reduce_tp_partial_grads(u, params_.grads(u).data());
  // tied embeddings across stages: one parameter, two copies (Megatron's embedding group)
  if (!syncs_embedding()) return;
  const DType g = params_.grad_type();
  for (const UnitTensor& ut : emb_tensors_) {
    void* grad = params_.grads_sharded() ? byte_offset(full_grad_(ut.unit),
                                                       dtype_bytes(g) * ut.tensor->offset)  // before its reduce-scatter
                                         : params_.grad(ut.unit, *ut.tensor);
    ctx_.emb->all_reduce(grad, ut.tensor->elems(), g);
  }
}

double FinalizeGrads::unit_sum_squares(size_t u, bool expert) {
  const UnitShard& sh = grad_shards_[u];
  const bool sharded = params_.grads_sharded();
  const DType g = params_.grad_type();
  // Σ of squares of unit elements [lo, hi) this rank holds the gradient of
  auto squares = [&](int64_t lo, int64_t hi) {
    lo = sh.clip_lo(lo);
    hi = sh.clip_hi(hi);
    if (hi <= lo) return 0.0;
    const int64_t at = sharded ? lo - sh.begin : lo;
    return dev_.sum_squares(byte_offset(params_.grads(u).data(), dtype_bytes(g) * at), g, hi - lo);
  };
  const bool tp_lead = ctx_.coords.tp == 0;
  double sum_sq = 0.0;
  for (const TensorSlot& t : params_.layout().units[u].tensors) {
    if (t.expert_sharded != expert) continue;
    if (t.tied_copy) continue;  // counted on the first stage
    if (ctx_.layout.tp > 1 && !tp_lead && t.replicated_over_tp) continue;
    if (t.row_map == RowMap::kQkv && kv_replicas_ > 1 && ctx_.coords.tp % kv_replicas_ != 0) {
      // t > k: this rank's K and V rows are another rank's too; count its Q rows only
      sum_sq += squares(t.offset, t.offset + t.q_rows * t.cols);
      continue;
    }
    sum_sq += squares(t.offset, t.offset + t.elems());
  }
  return sum_sq;
}

double FinalizeGrads::grad_norm(bool reduce) {
  double sum_sq = 0.0, expert_sq = 0.0;
  for (size_t u = 0; u < params_.units(); ++u) {
    sum_sq += unit_sum_squares(u, false);
    expert_sq += unit_sum_squares(u, true);
  }
  // ep > 1: the ranks of an ep group hold different experts (the same ones as
  // their expert-data-parallel peers, whose gradients are the same sums).
  if (reduce && ctx_.layout.ep > 1) expert_sq = all_reduce_scalar(dev_, *ctx_.ep, expert_sq);
  sum_sq += expert_sq;
  if (reduce) {
    if (reduced_to_shard()) sum_sq = all_reduce_scalar(dev_, *ctx_.dp, sum_sq);
    sum_sq = all_reduce_scalar(dev_, *ctx_.tp, sum_sq);
    sum_sq = all_reduce_scalar(dev_, *ctx_.pp, sum_sq);
  }
  return std::sqrt(sum_sq);
}

float FinalizeGrads::clip_coefficient(double norm, double clip) {
  if (clip <= 0) return 1.0f;
  const double coef = clip / (norm + 1e-6);
  return coef < 1.0 ? static_cast<float>(coef) : 1.0f;
}

}  // namespace gpuledger
