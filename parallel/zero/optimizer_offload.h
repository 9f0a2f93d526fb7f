// OptimizerOffload: ZeRO-Offload of the optimizer (--offload optimizer; Ren et
// al. 2021; DeepSpeed's zero_optimization.offload_optimizer, read at
// deepspeedai/DeepSpeed@edaa7221267243c7be7fb49c5d5f5c4fb97b4641,
// runtime/zero/stage_1_and_2.py and stage3.py). ShardedOptimizer keeps its
// fp32 master and the rule its states in host memory (Account::kHost on the
// rank's ledger) and runs the update on the CPU, through this part:
//   - per unit, host buffers for the gradient shard copied from the device
//     ("<unit>.offload.grads", g·S_u) and for the updated weights before they
//     go back ("<unit>.offload.weights", e·S_u; with fp32 weights this copy is
//     the master itself: initialised from the parameters and kept);
//   - the host Device that runs the update on them (the cpu backend; meta when
//     the rank's device touches no memory), which allocates nothing itself;
//   - each unit's copies, counted as copy_d2h@host and copy_h2d@host in the
//     rank's CommCounters: the shard's valid elements (models/transformer/unit_shard.h),
//     gradients in their dtype (DeepSpeed's stage 1/2 converts them to fp32 on
//     the GPU before the copy, async_inplace_copy_grad_to_fp32_buffer_from_gpu;
//     here the CPU update reads the 16-bit gradient) and weights in theirs
//     (DeepSpeed copies a 16-bit buffer back, param_buffer_of_bit16_for_cpu_offload_groups).
// The formulas are analytic/offload.h's; docs/exact-budget.md "Host memory".
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "comm/comm.h"
#include "kernels/device.h"
#include "models/transformer/params.h"
#include "models/transformer/unit_shard.h"

namespace gpuledger {

class OptimizerOffload {
 public:
  // Allocates the host buffers of every unit (shards as `shards` says) through
  // `dev` as Account::kHost. `counters` may be null (the copies go uncounted).
  OptimizerOffload(Device& dev, const Params& params, const std::vector<UnitShard>& shards, CommCounters* counters);

  Device& host() { return *host_; }  // runs the update on host memory
  // Unit u's gradient shard (its valid elements) copied to host memory; the host copy.
  const void* grads_to_host(size_t u);
  // Unit u's host weights, shard-sized: the update's output; copied back by weights_to_device.
  void* host_weights(size_t u) { return weights_[u].data(); }
  void weights_to_device(size_t u);

 private:
  Device& dev_;
  const Params& params_;
  const std::vector<UnitShard>& shards_;
  CommCounters* counters_;
  Ledger host_ledger_;  // the host device's own: it allocates nothing, so it stays empty
  std::unique_ptr<Device> host_;
  std::vector<Buffer> grads_, weights_;  // per unit, host memory
};

}  // namespace gpuledger
