// DpGradSync: the data-parallel gradient sum of one rank under ZeRO 0 and 1
// (n > 1): the "dp.bucket" staging (account comm, docs/exact-budget.md
// "Communication staging"), and each step a GradBucketReducer over the rank's
// units (grad_buckets.h) — ZeRO 0 all-reduces buckets of the whole gradient,
// ZeRO 1 reduce-scatters each unit's gradient into the rank's shard (the
// optimizer updates only the shard). With run.overlap_grad_reduce (the default) the
// buckets start during the last microbatch's backward (Megatron's
// --overlap-grad-reduce): when a unit's backward ends for the m-th time its
// TP-partial gradients are summed (StageModel::reduce_tp_partial_grads) and
// it is marked final, and every bucket whose units are all final starts. A
// unit holding a tensor summed over the embedding group (tied embeddings,
// p > 1; TensorSlot::summed_over_embedding_group) is held back: final only
// after that sum, at finish(). Without overlap every bucket runs in finish().
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "comm/comm.h"
#include "core/run_config.h"
#include "kernels/device.h"
#include "models/transformer/model.h"
#include "models/transformer/params.h"
#include "models/transformer/unit_hooks.h"
#include "parallel/dp/grad_buckets.h"

namespace gpuledger {

class DpGradSync final : public UnitHooks {
 public:
  // Allocates the staging. `zero`: 0 (all-reduce) or 1 (reduce-scatter into
  // the shards of dp rank dp.rank()). Throws OutOfMemory.
  DpGradSync(Device& dev, Comm& dp, StageModel& stage, Params& params, const RunConfig& run, int zero);

  bool overlap() const { return overlap_; }
  // Whether the backward sums unit u's TP-partial gradients (overlap, not held back).
  bool sums_tp_partials_in_backward(size_t u) const { return overlap_ && !held_back_[u]; }

  void start_step();  // a fresh reducer: no unit final yet
  void before_backward(size_t u) override;
  void after_backward(size_t u) override;
  // Every unit final (the held-back ones summed over the embedding group):
  // starts what has not started, waits for all; the gradients hold the sums.
  void finish();
  void abandon();  // a step that failed midway: waits for and drops what is in flight

 private:
  Device& dev_;
  Comm& dp_;
  StageModel& stage_;
  Params& params_;
  int64_t microbatches_;
  bool overlap_;
  GradReductionPlan plan_;
  Buffer staging_;
  std::vector<bool> held_back_;                 // per unit
  std::vector<int64_t> backward_ends_;          // per unit: backward passes finished this step
  std::unique_ptr<GradBucketReducer> reducer_;  // this step's
};

}  // namespace gpuledger
