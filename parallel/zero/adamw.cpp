// AdamW (see adamw.h).
#include "parallel/zero/adamw.h"

#include "models/transformer/params.h"

namespace gpuledger {

void AdamW::add_unit(const std::string& unit_name, int64_t shard_elems) {
  m_.push_back(dev_.alloc(4 * shard_elems, Account::kOptim, unit_name + ".adam_m"));
  v_.push_back(dev_.alloc(4 * shard_elems, Account::kOptim, unit_name + ".adam_v"));
  dev_.fill_zero(m_.back().data(), m_.back().bytes());
  dev_.fill_zero(v_.back().data(), v_.back().bytes());
}

void AdamW::update(const ShardPiece& p, int64_t step_count, float grad_scale) {
  dev_.adamw(p.master, p.weights, p.weight_type, p.grads, p.grad_type,
             static_cast<float*>(byte_offset(m_[p.unit].data(), 4 * p.state_offset)),
             static_cast<float*>(byte_offset(v_[p.unit].data(), 4 * p.state_offset)), p.elems, static_cast<float>(lr_),
             kBeta1, kBeta2, kEps, p.decay ? static_cast<float>(weight_decay_) : 0.0f, step_count, grad_scale);
}

}  // namespace gpuledger
