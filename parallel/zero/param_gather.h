// ZeroParamGather: ZeRO 3 (Rajbhandari et al. 2020, P_os+g+p) with n > 1 —
// the weights hold the rank's shard of each unit (e·S_u, Params
// ParamSharding). Each unit is all-gathered into a full padded copy, each
// part over its group (models/transformer/unit_shard.h: dp, or the
// expert-data-parallel group for a MoE layer's experts under ep > 1)
// (Params::gathered, account weights, "<unit>.gathered") before its forward
// and before its backward, with the next `prefetch` units in the direction of
// the pass (forward: higher indices, backward: lower), and freed at the end of
// that forward or backward (a full recompute runs on the backward's copy);
// the layer is rebound to the copy (StageModel::rebind_layer_unit).
// Interleaved stages (--vpp): a pass runs one model chunk's units, so the
// prefetch window stops at the chunk's end (forward) or start (backward): the
// next pass may be another chunk's, and a unit gathered for a pass that is
// not its own would stay gathered until its next pass. At any time the
// gathered units are one window of one chunk (docs/exact-budget.md).
// Tied embeddings with p = 1 (ParamLayout head_uses_embedding): the head reads
// the embedding unit's word matrix, so the embedding unit is gathered for the
// head's forward and backward too, unless already gathered (the backward
// prefetch window of the head reaching unit 0), and freed at the head's end
// only if gathered for it. docs/exact-budget.md and docs/formulas/comm.md
// count the extra copy and the extra all-gathers.
#pragma once
#include <cstdint>
#include <vector>

#include "comm/comm.h"
#include "kernels/device.h"
#include "models/transformer/model.h"
#include "models/transformer/params.h"
#include "models/transformer/unit_hooks.h"

namespace gpuledger {

class ZeroParamGather final : public UnitHooks {
 public:
  // params: weights sharded over dp (the expert parts over expert_dp, Params::shard); prefetch >= 0.
  ZeroParamGather(Device& dev, Comm& dp, Comm& expert_dp, StageModel& stage, Params& params, int64_t prefetch);

  void before_forward(size_t u) override { enter(u, /*backward=*/false); }
  void after_forward(size_t u) override { leave(u); }
  void before_backward(size_t u) override { enter(u, /*backward=*/true); }
  void after_backward(size_t u) override { leave(u); }
  void release_all();  // a step that failed midway: frees every gathered copy

 private:
  void enter(size_t u, bool backward);
  void leave(size_t u);
  void gather(size_t u);  // once: a unit already gathered is left as it is
  bool is_tied_head(size_t u) const;
  int64_t chunk_of(size_t u) const;  // the model chunk unit u runs in

  Device& dev_;
  Comm& dp_;
  Comm& expert_dp_;
  StageModel& stage_;
  Params& params_;
  int64_t prefetch_;
  std::vector<int64_t> chunk_;       // per unit: its model chunk
  bool embedding_for_head_ = false;  // the head's enter gathered the embedding unit
};

}  // namespace gpuledger
