// ShardedOptimizer: the optimizer step of one rank over its Params, with the
// state sharded as ZeRO does (Rajbhandari et al. 2020; docs/exact-budget.md
// "Model states"). Per unit: an fp32 master copy ("<unit>.master", account
// master) only when the weights are 16-bit (RunConfig::has_master), and the
// UpdateRule's states. Without ZeRO they cover the whole unit; with ZeRO >= 1
// (P_os) the rank's shard of ⌈P_u/n⌉ elements (shard.h).
// step(): the "optimizer" phase — the rule runs on the shard's pieces, the
// matrices [0, decay_elems) and the vectors after them, each clipped to the
// shard, reading the gradients whole or (ZeRO 2/3) as the shard, writing the
// weights whole or (ZeRO 3) as the shard; then, with ZeRO 1/2 and n > 1, the
// "zero.all_gather" phase: every rank updated its shard, each unit's full
// weights are all-gathered over dp (in place when the unit needs no padding,
// else through the workspace "zero.gather"/"zero.shard"). Under ZeRO 3
// nothing is gathered after the step (zero/param_gather.h gathers per use).
// With RunConfig::offload_optimizer (ZeRO >= 1) the master and the rule's
// states are host memory (account host) and each unit's update runs on the
// CPU between its gradient copy to the host and its weights' copy back
// (zero/optimizer_offload.h); the rest of the step is unchanged.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "comm/comm.h"
#include "core/run_config.h"
#include "kernels/device.h"
#include "models/transformer/params.h"
#include "parallel/zero/optimizer_offload.h"
#include "parallel/zero/shard.h"
#include "parallel/zero/update_rule.h"

namespace gpuledger {

class ShardedOptimizer {
 public:
  // zero: the ZeRO stage (>= 1 shards the states over the n ranks of dp,
  // this rank being dp_rank). Allocates the master copies and the rule's
  // states (zeroed). Throws OutOfMemory; std::invalid_argument for offload
  // without ZeRO. `counters` (may be null) counts the offload's copies.
  ShardedOptimizer(Device& dev, Comm& dp, Params& params, const RunConfig& run, int zero, int64_t n, int64_t dp_rank,
                   std::unique_ptr<UpdateRule> rule, CommCounters* counters = nullptr);
  ~ShardedOptimizer();

  // The initial fp32 values of unit u (layout order, all of it): the master
  // keeps its shard. A no-op without a master.
  void load_master(size_t u, const std::vector<float>& unit_values);
  // One update with the gradients times grad_scale; step_count from 1.
  void step(int64_t step_count, float grad_scale);

  const UnitShard& shard(size_t u) const { return shards_[u]; }
  // Unit u's fp32 master when it holds the whole unit (no ZeRO), else nullptr.
  const Buffer* whole_master(size_t u) const;

 private:
  void update_unit(size_t u, int64_t step_count, float grad_scale);
  Device& compute();  // the device the update runs on: the rank's, or the host under offload
  void gather_updated_weights();

  Device& dev_;
  Comm& dp_;
  Params& params_;
  int64_t n_;
  bool sharded_;  // ZeRO >= 1
  std::unique_ptr<UpdateRule> rule_;
  std::vector<UnitShard> shards_;              // per unit (the whole unit without ZeRO)
  std::vector<Buffer> master_;                 // per unit, shard-sized; empty without a master
  std::unique_ptr<OptimizerOffload> offload_;  // --offload optimizer; else null
};

}  // namespace gpuledger
