// DpGradSync (see grad_sync.h).
#include "parallel/dp/grad_sync.h"

#include <stdexcept>
#include <string>
#include <utility>

namespace gpuledger {

namespace {

GradReductionPlan make_plan(const ParamLayout& pl, Comm& dp, const RunConfig& run, DType g, int zero) {
  if (zero != 0 && zero != 1)
    throw std::invalid_argument("DpGradSync: ZeRO " + std::to_string(zero) + " shards the gradients");
  std::vector<int64_t> elems;
  for (const UnitLayout& u : pl.units) elems.push_back(u.elems);
  const int64_t bucket = bucket_elems(run.bucket_mb, dtype_bytes(g));
  return zero == 0 ? all_reduce_plan(elems, bucket, run.overlap_grad_reduce)
                   : reduce_scatter_plan(elems, dp.size(), dp.rank(), bucket, run.overlap_grad_reduce);
}

}  // namespace

DpGradSync::DpGradSync(Device& dev, Comm& dp, StageModel& stage, Params& params, const RunConfig& run, int zero)
    : dev_(dev),
      dp_(dp),
      stage_(stage),
      params_(params),
      microbatches_(run.microbatches),
      overlap_(run.overlap_grad_reduce),
      plan_(make_plan(params.layout(), dp, run, params.grad_type(), zero)) {
  staging_ = dev.alloc(plan_.staging_bytes, Account::kComm, "dp.bucket");
  for (const UnitLayout& u : params.layout().units) held_back_.push_back(u.summed_over_embedding_group());
}

void DpGradSync::start_step() {
  const ParamLayout& pl = params_.layout();
  std::vector<void*> grads;
  for (size_t u = 0; u < pl.units.size(); ++u) grads.push_back(params_.grads(u).data());
  reducer_ = std::make_unique<GradBucketReducer>(dev_, dp_, std::move(grads), params_.grad_type(), plan_,
                                                 staging_.data(), overlap_);
  backward_ends_.assign(pl.units.size(), 0);
}

void DpGradSync::before_backward(size_t) {
  if (overlap_ && reducer_) reducer_->progress();
}

void DpGradSync::after_backward(size_t u) {
  if (!overlap_ || !reducer_) return;
  if (++backward_ends_[u] < microbatches_ || held_back_[u]) return;
  stage_.reduce_tp_partial_grads(u, params_.grads(u).data());
  reducer_->unit_ready(u);
}

void DpGradSync::finish() {
  if (!reducer_) return;
  reducer_->finish();
  reducer_.reset();
}

void DpGradSync::abandon() { reducer_.reset(); }

}  // namespace gpuledger
