// Trainer: one rank's part of a training run — its stage of the model, its
// optimizer state, and one step = the schedule's microbatches forward and
// backward, gradient synchronisation, clipping and AdamW. The same code for
// every backend (cpu, meta, cuda) and every layout.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "core/model_config.h"
#include "core/run_config.h"
#include "kernels/device.h"
#include "parallel/context/rank_context.h"

namespace gpuledger {

struct StepResult {
  double loss = 0;                  // mean cross-entropy over the global batch (same on every rank)
  double grad_norm = 0;             // global gradient norm before clipping
  double seconds = 0;               // wall time of the step (device synchronised)
  int64_t executed_flops = 0;       // GEMM FLOPs this rank executed in the step
  double compute_seconds = 0;       // time outside communication calls
  double comm_seconds = 0;          // time inside communication calls (exposed)
  int64_t moe_dropped_choices = 0;  // MoE: routing choices this rank dropped past capacity (its layers, microbatches)
};

class Trainer {
 public:
  // Allocates the rank's parameters (weights, grads), master weights and
  // optimizer state through `device`, initialised deterministically from
  // run.seed (the same values on every layout), or read from the checkpoint
  // run.init_from (each rank its own part). Throws OutOfMemory.
  Trainer(Device& device, const ModelConfig& model, const RunConfig& run, RankContext ctx);
  ~Trainer();

  // One optimizer step (step_index from 0). Throws OutOfMemory mid-step.
  StepResult step(int64_t step_index);

  // Host copy of every parameter this rank holds, as fp32, in a fixed order
  // (unit by unit, tensor by tensor): for equivalence tests and checkpoints.
  // Under ZeRO 3 with dp > 1 the rank holds shards: each part's valid shard
  // elements (models/transformer/unit_shard.h), part by part, unit by unit.
  std::vector<float> parameters_fp32() const;
  // The gradients of the last step, the same way (dp = 1 or ZeRO 0/1: the
  // rank's whole gradient buffers; ZeRO 2/3 with dp > 1: each unit's shard,
  // as parameters_fp32 under ZeRO 3): for tests against an outside reference.
  std::vector<float> gradients_fp32() const;
  // The names and element counts of those tensors, same order.
  std::vector<std::pair<std::string, int64_t>> parameter_tensors() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace gpuledger
