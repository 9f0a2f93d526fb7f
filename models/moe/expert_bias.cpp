// ExpertBias (see expert_bias.h): the buffers, the counts and the step's update.
#include "models/moe/expert_bias.h"

#include <stdexcept>

namespace gpuledger {

ExpertBias::ExpertBias(Device& device, int64_t experts, const std::vector<bool>& moe_layer)
    : dev_(device), experts_(experts) {
  bias_.resize(moe_layer.size());
  counts_.resize(moe_layer.size());
  for (size_t i = 0; i < moe_layer.size(); ++i) {
    if (!moe_layer[i]) continue;
    bias_[i] = dev_.alloc(experts_ * 4, Account::kWeights, "moe.router.expert_bias");
    dev_.fill_zero(bias_[i].data(), experts_ * 4);  // Megatron: torch.zeros
    counts_[i].assign(static_cast<size_t>(experts_), 0.0f);
  }
}

const float* ExpertBias::layer(int64_t i) const {
  const Buffer& b = bias_.at(static_cast<size_t>(i));
  return b.data() ? static_cast<const float*>(b.data()) : nullptr;
}

void ExpertBias::count(int64_t i, const std::vector<int64_t>& assigned) {
  std::vector<float>& c = counts_.at(static_cast<size_t>(i));
  if (static_cast<int64_t>(assigned.size()) != experts_ || c.empty())
    throw std::invalid_argument("ExpertBias::count: a MoE layer's " + std::to_string(experts_) + " counts");
  for (int64_t e = 0; e < experts_; ++e) c[e] += static_cast<float>(assigned[e]);
}

std::vector<float> ExpertBias::values(int64_t i) const {
  std::vector<float> v(static_cast<size_t>(experts_), 0.0f);
  const float* b = layer(i);
  if (b && dev_.touches_memory()) dev_.copy_to_host(v.data(), b, experts_ * 4);
  return v;
}

void ExpertBias::update(Comm& group) {
  // The stacked counts of the stage's MoE layers (Megatron stacks them into one all-reduce).
  std::vector<float> stacked;
  for (const auto& c : counts_) stacked.insert(stacked.end(), c.begin(), c.end());
  if (stacked.empty()) return;  // no MoE layer on the stage: Megatron returns before any collective
  const auto bytes = static_cast<int64_t>(stacked.size() * 4);
  if (group.size() > 1) {
    Buffer buf = dev_.alloc(bytes, Account::kWorkspace, "moe.router.tokens_per_expert");
    if (dev_.touches_memory()) dev_.copy_from_host(buf.data(), stacked.data(), bytes);
    group.all_reduce(buf.data(), static_cast<int64_t>(stacked.size()), DType::kFP32);
    if (dev_.touches_memory()) dev_.copy_to_host(stacked.data(), buf.data(), bytes);
  }
  size_t at = 0;
  for (size_t i = 0; i < bias_.size(); ++i) {
    if (!bias_[i].data()) continue;
    const float* c = stacked.data() + at;
    at += static_cast<size_t>(experts_);
    // average = Σ counts / E; offset = average − count; b += sign(offset)·rate (all fp32, as torch does)
    float sum = 0.0f;
    for (int64_t e = 0; e < experts_; ++e) sum += c[e];
    const float mean = sum / static_cast<float>(experts_);
    std::vector<float> b = values(static_cast<int64_t>(i));
    for (int64_t e = 0; e < experts_; ++e) {
      const float offset = mean - c[e];
      b[e] += static_cast<float>((offset > 0.0f) - (offset < 0.0f)) * kUpdateRate;
    }
    if (dev_.touches_memory()) dev_.copy_from_host(bias_[i].data(), b.data(), experts_ * 4);
    counts_[i].assign(static_cast<size_t>(experts_), 0.0f);
  }
}

}  // namespace gpuledger
