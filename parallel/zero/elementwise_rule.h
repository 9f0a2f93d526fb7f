// ElementwiseRule: the UpdateRule of every optimizer whose update is element
// by element (kernels/optimizer_rules.h): AdamW, SGD with momentum, Adagrad,
// Lion — one mechanism, the optimizer's kind and hyperparameters configuring
// Device::optimizer_update. Its fp32 states per shard element, account optim
// (host under --offload optimizer, updated on the host: offload_to)
// (docs/exact-budget.md "Model states"), named as PyTorch's optimizers name
// their state (torch/optim/*.py):
//   adamw   "<unit>.adam_m", "<unit>.adam_v"  (exp_avg, exp_avg_sq)
//   sgd     "<unit>.momentum_buffer"           (none with momentum 0)
//   adagrad "<unit>.sum"
//   lion    "<unit>.exp_avg"
// Weight decay applies to the matrices only (Megatron's default of no decay
// on biases and norms). Device::optimizer_update runs the update on the fp32
// master when there is one, rounding it into the weights.
// AdamW keeps its constants β = (0.9, 0.95), ε = 1e-8.
#pragma once
#include <memory>
#include <vector>

#include "core/run_config.h"
#include "kernels/device.h"
#include "parallel/zero/update_rule.h"

namespace gpuledger {

class ElementwiseRule : public UpdateRule {
 public:
  // hyper.weight_decay is the matrices' decay.
  ElementwiseRule(Device& dev, const OptimizerHyper& hyper) : dev_(dev), compute_(&dev), hyper_(hyper) {}

  void add_unit(const std::string& unit_name, int64_t shard_elems) override;
  void offload_to(Device& host) override;
  void update(const ShardPiece& piece, int64_t step_count, float grad_scale) override;

 private:
  Device& dev_;      // allocates the states (on the rank's ledger)
  Device* compute_;  // runs the update: dev_, or the host under offload
  Account account_ = Account::kOptim;
  OptimizerHyper hyper_;
  std::vector<Buffer> state1_, state2_;  // per unit, shard-sized (empty when the rule keeps fewer)
};

// AdamW (Loshchilov & Hutter 2019) with the run's learning rate and weight decay.
class AdamW final : public ElementwiseRule {
 public:
  static constexpr float kBeta1 = 0.9f, kBeta2 = 0.95f, kEps = 1e-8f;
  AdamW(Device& dev, double lr, double weight_decay);
};

// The run's optimizer (RunConfig::optimizer and its hyperparameters).
OptimizerHyper optimizer_hyper(const RunConfig& run);
std::unique_ptr<UpdateRule> make_update_rule(Device& dev, const RunConfig& run);

}  // namespace gpuledger
