// ZeroGradShards: ZeRO 2 (Rajbhandari et al. 2020, P_os+g; also under ZeRO 3)
// with n > 1 — the gradients hold the rank's shard of each unit (Params
// ParamSharding). A unit's backward writes its full gradient into Params'
// staging buffer (account comm), zeroed before the unit's backward; after it
// the unit's TP-partial gradients are summed on the staging buffer
// (docs/formulas/comm.md "Sequence-partial gradients") and it is
// reduce-scattered over dp into the shard (accumulating over microbatches).
//
// Tied embeddings with p = 1 (ParamLayout head_uses_embedding): the head's
// backward accumulates d(word) into a side buffer "tied_word.grad" of V'/t·h
// elements of g (account comm; word_grad_sink), allocated and zeroed at the
// head unit's backward begin, since the staging buffer then holds the head
// unit's gradient; at the embedding unit's backward begin (the staging
// buffer zeroed) it is copied into the staging buffer's word slot and freed,
// the embedding's backward accumulates on top and the unit's reduce-scatter
// carries both. docs/exact-budget.md counts the side buffer.
#pragma once
#include <optional>
#include <vector>

#include "comm/comm.h"
#include "kernels/device.h"
#include "models/transformer/model.h"
#include "models/transformer/params.h"
#include "models/transformer/unit_hooks.h"
#include "parallel/zero/shard.h"

namespace gpuledger {

class ZeroGradShards final : public UnitHooks {
 public:
  // params: gradients sharded over the n ranks of dp.
  ZeroGradShards(Device& dev, Comm& dp, StageModel& stage, Params& params);

  void before_backward(size_t u) override;
  void after_backward(size_t u) override;
  std::optional<void*> word_grad_sink() override;
  void release();  // a step that failed midway: drops the side buffer

 private:
  Device& dev_;
  Comm& dp_;
  StageModel& stage_;
  Params& params_;
  int64_t n_;
  bool tied_head_;  // the head writes the embedding's word gradient
  std::vector<UnitShard> shards_;
  Buffer tied_word_grad_;  // head backward begin -> embedding backward begin
};

}  // namespace gpuledger
