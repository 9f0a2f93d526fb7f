// ZeroGradShards: ZeRO 2 (Rajbhandari et al. 2020, P_os+g; also under ZeRO 3)
// with n > 1 — the gradients hold the rank's shard of each unit (Params
// ParamSharding). A unit's backward writes its full gradient into Params'
// staging buffer (account comm, the padded unit), zeroed before the unit's
// backward; after it the unit's TP-partial gradients are summed on the
// staging buffer (docs/formulas/comm.md "Sequence-partial gradients") and
// each part of the unit (models/transformer/unit_shard.h) is reduce-scattered
// over its group into the shard (accumulating over microbatches): dp, or for
// a MoE layer's experts under ep > 1 the expert-data-parallel group (no
// collective when that group is one rank).
//
// Tied embeddings with p = 1 (ParamLayout head_uses_embedding): the head's
// backward accumulates d(word) into a side buffer "tied_word.grad" of V'/t·h
// elements of g (account comm; word_grad_sink), allocated and zeroed at the
// head unit's backward begin, since the staging buffer then holds the head
// unit's gradient; at the embedding unit's backward begin (the staging
// buffer zeroed) it is copied into the staging buffer's word slot and freed,
// the embedding's backward accumulates on top and the unit's reduce-scatter
// carries both. docs/exact-budget.md counts the side buffer.
//
// Tied embeddings with p > 1 (a unit with a tensor summed over the embedding
// group: the first stage's embedding unit, the last stage's head unit with
// its word copy): the word gradient must be summed over the embedding group
// before the DP reduce-scatter, since the two stages shard different units
// (the embedding unit and the head unit) and so different slices of the word.
// Such a unit's reduce-scatter is deferred past the schedule: after each of
// its backwards its staging gradient (TP partials summed) is added into a
// buffer of the whole padded unit, "<unit>.tied_grad" (n·⌈P_u/n⌉ elements of
// g, account grads: the unit's gradient accumulated over the microbatches, as
// ZeRO 0/1 hold every unit's), allocated at the unit's first backward of the
// step; FinalizeGrads all-reduces its word slot over the embedding group
// (full_grad), then reduce_deferred reduce-scatters it into the shard, once
// per step, and frees it. Megatron-LM keeps the order the other way round — the
// DP reduce-scatter first, then the embedding all-reduce of main_grad — by
// giving the shared embedding a bucket of its own so that both stages shard
// it alike (megatron/core/distributed/fsdp/src/megatron_fsdp/
// param_and_grad_buffer.py _does_param_require_new_bucket;
// finalize_model_grads.py _allreduce_word_embedding_grads, at
// d98e8a64ddf34856e74b24714e3bedb2f5a39553); here a unit is the bucket, and
// the two stages' units differ.
#pragma once
#include <optional>
#include <vector>

#include "comm/comm.h"
#include "kernels/device.h"
#include "models/transformer/model.h"
#include "models/transformer/params.h"
#include "models/transformer/unit_hooks.h"
#include "models/transformer/unit_shard.h"

namespace gpuledger {

class ZeroGradShards final : public UnitHooks {
 public:
  // params: gradients sharded over dp (and the expert parts over expert_dp, Params::shard).
  ZeroGradShards(Device& dev, Comm& dp, Comm& expert_dp, StageModel& stage, Params& params);

  void before_backward(size_t u) override;
  void after_backward(size_t u) override;
  std::optional<void*> word_grad_sink() override;
  // Unit u's whole accumulated gradient while its reduce-scatter is deferred
  // (tied embeddings, p > 1), else nullptr.
  void* full_grad(size_t u) const { return deferred_[u].data(); }
  // The deferred units' reduce-scatter into their shards (after the embedding-group sum).
  void reduce_deferred();
  void release();  // a step that failed midway: drops the side and deferred buffers

 private:
  // Reduce-scatters each part of the padded unit `full` over its group and
  // adds the rank's shards into unit u's gradient shard.
  void reduce_into_shard(size_t u, void* full);

  Device& dev_;
  Comm& dp_;
  Comm& expert_dp_;
  StageModel& stage_;
  Params& params_;
  bool tied_head_;                // the head writes the embedding's word gradient
  std::vector<bool> defers_;      // per unit: reduce-scattered after the schedule
  std::vector<Buffer> deferred_;  // per unit: first backward of the step -> reduce_deferred
  Buffer tied_word_grad_;         // head backward begin -> embedding backward begin
};

}  // namespace gpuledger
