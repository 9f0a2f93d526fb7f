// AdamW (Loshchilov & Hutter 2019) as an UpdateRule: fp32 moments m and v per
// shard element ("<unit>.adam_m", "<unit>.adam_v", account optim,
// docs/exact-budget.md "Model states"); β = (0.9, 0.95), ε = 1e-8, the run's
// learning rate and weight decay — the latter on the matrices only
// (Megatron's default of no decay on biases and norms). Device::adamw runs
// the update (bias-corrected by the step count) on the fp32 master when there
// is one, rounding it into the weights.
#pragma once
#include <vector>

#include "core/run_config.h"
#include "kernels/device.h"
#include "parallel/zero/update_rule.h"

namespace gpuledger {

class AdamW final : public UpdateRule {
 public:
  static constexpr float kBeta1 = 0.9f, kBeta2 = 0.95f, kEps = 1e-8f;

  AdamW(Device& dev, double lr, double weight_decay) : dev_(dev), lr_(lr), weight_decay_(weight_decay) {}

  void add_unit(const std::string& unit_name, int64_t shard_elems) override;
  void update(const ShardPiece& piece, int64_t step_count, float grad_scale) override;

 private:
  Device& dev_;
  double lr_, weight_decay_;
  std::vector<Buffer> m_, v_;  // per unit, shard-sized
};

}  // namespace gpuledger
