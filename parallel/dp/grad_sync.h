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
// Expert parallelism: the expert-sharded tensors (TensorSlot::expert_sharded,
// E/ep experts per rank, a prefix of each MoE layer's unit) are left out of
// the dp buckets and reduced in buckets of their own over the
// expert-data-parallel group (staging "edp.bucket"; none when that group is
// one rank) — ZeRO 0 all-reduces them, ZeRO 1 reduce-scatters them into the
// rank's shard over that group (models/transformer/unit_shard.h), the dense
// rest of each unit into its shard over dp — as Megatron-LM keeps its expert parameters in separate grad
// buffers reduced over the expert data-parallel group
// (megatron/core/distributed/distributed_data_parallel.py,
// NVIDIA/Megatron-LM 001199898c4badd01eaf0785c212d8ed7ce83042: parameters
// with allreduce = False go to expert_parallel_params, their buffers over
// expt_dp_group). No scaling: each expert's gradient already sums the tokens
// of its ep group (the all-to-all brought them) with d(token loss) =
// 1/(global tokens), so its sum over the expert-data-parallel group is the
// global mean's gradient — what Megatron reaches by scaling the expert
// gradients by 1/dp_size as the dense ones (expert_gradient_scaling_factor,
// average_in_collective = False), not by 1/edp_size.
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
  // expert_dp: the expert-data-parallel group, needed when a tensor is expert-sharded.
  DpGradSync(Device& dev, Comm& dp, StageModel& stage, Params& params, const RunConfig& run, int zero,
             Comm* expert_dp = nullptr);

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
  Comm* expert_dp_;
  GradReductionPlan expert_plan_;  // no buckets unless expert-sharded tensors and expert_dp > 1
  Buffer expert_staging_;
  std::unique_ptr<GradBucketReducer> expert_reducer_;  // this step's
  std::vector<bool> held_back_;                        // per unit
  std::vector<int64_t> backward_ends_;                 // per unit: backward passes finished this step
  std::unique_ptr<GradBucketReducer> reducer_;         // this step's
};

}  // namespace gpuledger
