// ShardedOptimizer: the optimizer step of one rank over its Params, with the
// state sharded as ZeRO does (Rajbhandari et al. 2020; docs/exact-budget.md
// "Model states"). Per unit: an fp32 master copy ("<unit>.master", account
// master) only when the weights are 16-bit (RunConfig::has_master), and the
// UpdateRule's states. Without ZeRO they cover the whole unit; with ZeRO >= 1
// (P_os) the rank's shard of S_u elements (models/transformer/unit_shard.h:
// ⌈P_u/n⌉, or under ep > 1 a MoE layer's experts over the
// expert-data-parallel group and the rest over dp).
// step(): the "optimizer" phase — the rule runs on the shard's pieces, the
// unit's runs of matrices and of vectors (UnitLayout::decay_runs), each clipped to the
// shard, reading the gradients whole or (ZeRO 2/3) as the shard, writing the
// weights whole or (ZeRO 3) as the shard; then, with ZeRO 1/2 and n > 1, the
// "zero.all_gather" phase: every rank updated its shard, each part of each
// unit is all-gathered over its group (in place when the part needs no
// padding, else through the workspace "zero.gather"/"zero.shard"; nothing
// for a group of one rank). Under ZeRO 3
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
#include "models/transformer/unit_shard.h"
#include "parallel/zero/optimizer_offload.h"
#include "parallel/zero/update_rule.h"

namespace gpuledger {

class ShardedOptimizer {
 public:
  // zero: the ZeRO stage (>= 1 shards the states over `groups`: dp, whose
  // communicator is dp, and for expert-sharded tensors the
  // expert-data-parallel group, expert_dp, needed only when such a part
  // spans more than one rank). Allocates the master copies and the rule's
  // states (zeroed). Throws OutOfMemory; std::invalid_argument for offload
  // without ZeRO. `counters` (may be null) counts the offload's copies.
  ShardedOptimizer(Device& dev, Comm& dp, Params& params, const RunConfig& run, int zero, const ShardGroups& groups,
                   std::unique_ptr<UpdateRule> rule, CommCounters* counters = nullptr, Comm* expert_dp = nullptr);
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
  Comm* expert_dp_;
  Params& params_;
  bool sharded_;  // ZeRO >= 1
  std::unique_ptr<UpdateRule> rule_;
  std::vector<UnitShard> shards_;              // per unit (the whole unit without ZeRO)
  std::vector<Buffer> master_;                 // per unit, shard-sized; empty without a master
  std::unique_ptr<OptimizerOffload> offload_;  // --offload optimizer; else null
};

}  // namespace gpuledger
