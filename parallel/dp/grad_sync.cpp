// DpGradSync (see grad_sync.h).
#include "parallel/dp/grad_sync.h"

#include <stdexcept>
#include <string>
#include <utility>

namespace gpuledger {

namespace {

// The ranges of each unit whose tensors are (expert = true) or are not expert-sharded, merged where adjacent.
std::vector<UnitRange> unit_ranges(const ParamLayout& pl, bool expert) {
  std::vector<UnitRange> ranges;
  for (size_t u = 0; u < pl.units.size(); ++u)
    for (const TensorSlot& t : pl.units[u].tensors) {
      if (t.expert_sharded != expert || t.elems() == 0) continue;
      if (!ranges.empty() && ranges.back().unit == u && ranges.back().off + ranges.back().n == t.offset)
        ranges.back().n += t.elems();
      else
        ranges.push_back({u, t.offset, t.elems()});
    }
  return ranges;
}

// ZeRO 0: all-reduce buckets over the ranges laid back to back; ZeRO 1:
// reduce-scatter pieces of each range's shard over `group`.
GradReductionPlan make_plan(const std::vector<UnitRange>& ranges, Comm& group, const RunConfig& run, DType g,
                            int zero) {
  if (zero != 0 && zero != 1)
    throw std::invalid_argument("DpGradSync: ZeRO " + std::to_string(zero) + " shards the gradients");
  const int64_t bucket = bucket_elems(run.bucket_mb, dtype_bytes(g));
  return zero == 0 ? all_reduce_plan(ranges, bucket, run.overlap_grad_reduce)
                   : reduce_scatter_plan(ranges, group.size(), group.rank(), bucket, run.overlap_grad_reduce);
}

}  // namespace

DpGradSync::DpGradSync(Device& dev, Comm& dp, StageModel& stage, Params& params, const RunConfig& run, int zero,
                       Comm* expert_dp)
    : dev_(dev),
      dp_(dp),
      stage_(stage),
      params_(params),
      microbatches_(run.microbatches),
      overlap_(run.overlap_grad_reduce),
      plan_(make_plan(unit_ranges(params.layout(), false), dp, run, params.grad_type(), zero)),
      expert_dp_(expert_dp) {
  staging_ = dev.alloc(plan_.staging_bytes, Account::kComm, "dp.bucket");
  const std::vector<UnitRange> experts = unit_ranges(params.layout(), true);
  if (!experts.empty() && expert_dp_ == nullptr)
    throw std::invalid_argument("DpGradSync: expert-sharded tensors need the expert-data-parallel group");
  if (!experts.empty() && expert_dp_->size() > 1) {
    expert_plan_ = make_plan(experts, *expert_dp_, run, params.grad_type(), zero);
    expert_staging_ = dev.alloc(expert_plan_.staging_bytes, Account::kComm, "edp.bucket");
  }
  for (const UnitLayout& u : params.layout().units) held_back_.push_back(u.summed_over_embedding_group());
}

void DpGradSync::start_step() {
  const ParamLayout& pl = params_.layout();
  std::vector<void*> grads;
  for (size_t u = 0; u < pl.units.size(); ++u) grads.push_back(params_.grads(u).data());
  if (!expert_plan_.buckets.empty())
    expert_reducer_ = std::make_unique<GradBucketReducer>(dev_, *expert_dp_, grads, params_.grad_type(), expert_plan_,
                                                          expert_staging_.data(), overlap_);
  reducer_ = std::make_unique<GradBucketReducer>(dev_, dp_, std::move(grads), params_.grad_type(), plan_,
                                                 staging_.data(), overlap_);
  backward_ends_.assign(pl.units.size(), 0);
}

void DpGradSync::before_backward(size_t) {
  if (overlap_ && reducer_) reducer_->progress();
  if (overlap_ && expert_reducer_) expert_reducer_->progress();
}

void DpGradSync::after_backward(size_t u) {
  if (!overlap_ || !reducer_) return;
  if (++backward_ends_[u] < microbatches_ || held_back_[u]) return;
  stage_.reduce_tp_partial_grads(u, params_.grads(u).data());
  reducer_->unit_ready(u);
  if (expert_reducer_) expert_reducer_->unit_ready(u);
}

void DpGradSync::finish() {
  if (!reducer_) return;
  reducer_->finish();
  reducer_.reset();
  if (expert_reducer_) expert_reducer_->finish();
  expert_reducer_.reset();
}

void DpGradSync::abandon() {
  reducer_.reset();
  expert_reducer_.reset();
}

}  // namespace gpuledger
