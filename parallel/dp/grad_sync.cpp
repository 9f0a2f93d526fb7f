// DpGradSync (see grad_sync.h).
#include "parallel/dp/grad_sync.h"

#include <utility>

namespace gpuledger {

DpGradSync::DpGradSync(Device& dev, Comm& dp, StageModel& stage, Params& params, const RunConfig& run)
    : dev_(dev), dp_(dp), stage_(stage), params_(params), microbatches_(run.microbatches),
      bucket_elems_(bucket_elems(run.bucket_mb, dtype_bytes(params.grad_type()))),
      overlap_(run.overlap_grad_reduce) {
  const ParamLayout& pl = params.layout();
  staging_ = dev.alloc(grad_bucket_staging_bytes(bucket_elems_, pl.total_elems(), overlap_), Account::kComm,
                       "dp.bucket");
  for (const UnitLayout& u : pl.units) held_back_.push_back(u.summed_over_embedding_group());
}

void DpGradSync::start_step() {
  const ParamLayout& pl = params_.layout();
  std::vector<void*> grads;
  std::vector<int64_t> elems;
  for (size_t u = 0; u < pl.units.size(); ++u) {
    grads.push_back(params_.grads(u).data());
    elems.push_back(pl.units[u].elems);
  }
  reducer_ = std::make_unique<GradBucketReducer>(dev_, dp_, std::move(grads), std::move(elems),
                                                 params_.grad_type(), bucket_elems_, staging_.data(), overlap_);
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
