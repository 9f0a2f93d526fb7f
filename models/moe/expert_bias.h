// DeepSeek-V3's auxiliary-loss-free load balancing (arXiv 2412.19437 §2.1.2):
// each MoE layer's router adds a per-expert bias b to the scores it selects
// the top k by (not to the combine weights, moe_routing.h), and after each
// training step b_e moves by γ towards balance: down when expert e took more
// than the mean load, up when less (docs/formulas/moe.md "The expert bias").
//
// As Megatron-LM holds it (NVIDIA/Megatron-LM d98e8a64ddf34856e74b24714e3bedb2f5a39553):
// megatron/core/transformer/moe/router.py TopKRouter registers `expert_bias`
// (E fp32, zeros) as a buffer — no gradient, no optimizer state — and counts
// the step's choices per expert in `local_tokens_per_expert` (only in a
// forward with gradients: not in a recompute); after the backward,
// finalize_model_grads.py _update_router_expert_bias stacks every layer's
// counts, all-reduces them over the tensor × data × context-parallel group
// and applies moe_utils.py get_updated_expert_bias:
//   b_e += rate · sign(mean_e' c_e' − c_e),  rate = moe_router_bias_update_rate
// (1e-3 by default, DeepSeek-V3's γ for its first 14.3T tokens, §4.2); then
// the counts restart from zero.
//
// Here: one fp32 buffer of E per MoE layer of the stage, booked under the
// `weights` account (the model's device memory beside its parameters); the
// counts stay on the host with the routing plans, and cross the group in a
// transient fp32 buffer (workspace) of E per MoE layer.
#pragma once
#include <cstdint>
#include <vector>

#include "comm/comm.h"
#include "kernels/device.h"

namespace gpuledger {

class ExpertBias {
 public:
  // Megatron-LM TransformerConfig.moe_router_bias_update_rate's default.
  static constexpr float kUpdateRate = 1e-3f;

  // moe_layer[i]: local layer i of the stage holds the sparse block (a bias of `experts` values).
  ExpertBias(Device& device, int64_t experts, const std::vector<bool>& moe_layer);

  // Local layer i's bias (device, E fp32), or nullptr for a dense layer.
  const float* layer(int64_t i) const;
  // Adds one forward's choices per expert (RoutingPlan::assigned) to local layer i's counts.
  void count(int64_t i, const std::vector<int64_t>& assigned);
  // The step's update: the counts summed over `group` (one all-reduce of every
  // MoE layer's E fp32 counts; none when the group has one rank), every bias
  // moved by kUpdateRate·sign(mean − count), the counts reset.
  void update(Comm& group);
  // Local layer i's bias on the host (zeros on a device that holds no values).
  std::vector<float> values(int64_t i) const;

 private:
  Device& dev_;
  int64_t experts_;
  std::vector<Buffer> bias_;                // per local layer; empty for a dense layer
  std::vector<std::vector<float>> counts_;  // per local layer, E (fp32, as Megatron's buffer)
};

}  // namespace gpuledger
