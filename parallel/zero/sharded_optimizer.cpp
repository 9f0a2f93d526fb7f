// ShardedOptimizer (see sharded_optimizer.h).
#include "parallel/zero/sharded_optimizer.h"

#include <algorithm>
#include <stdexcept>
#include <string>
#include <utility>

namespace gpuledger {

ShardedOptimizer::ShardedOptimizer(Device& dev, Comm& dp, Params& params, const RunConfig& run, int zero,
                                   const ShardGroups& groups, std::unique_ptr<UpdateRule> rule, CommCounters* counters,
                                   Comm* expert_dp)
    : dev_(dev), dp_(dp), expert_dp_(expert_dp), params_(params), sharded_(zero >= 1), rule_(std::move(rule)) {
  for (const UnitLayout& u : params.layout().units) {
    shards_.push_back(sharded_ ? unit_shard(u, groups) : unit_shard(u.elems, 1, 0));
    for (const ShardPart& p : shards_.back().parts)
      if (p.expert && p.n > 1 && expert_dp_ == nullptr)
        throw std::invalid_argument("ShardedOptimizer: expert-sharded parts need the expert-data-parallel group");
  }
  if (run.offload_optimizer) {
    // DeepSpeed's offload_optimizer is a ZeRO 1-3 option (core/layout.cpp refuses it first).
    if (!sharded_) throw std::invalid_argument("ShardedOptimizer: --offload optimizer needs ZeRO >= 1");
    offload_ = std::make_unique<OptimizerOffload>(dev, params, shards_, counters);
    rule_->offload_to(offload_->host());
  }
  const Account master_account = offload_ ? Account::kHost : Account::kMaster;
  for (size_t i = 0; i < shards_.size(); ++i) {
    const std::string& name = params.layout().units[i].name;
    const int64_t se = shards_[i].shard_elems;
    if (run.has_master()) master_.push_back(dev.alloc(4 * se, master_account, name + ".master"));
    rule_->add_unit(name, se);
    if (!master_.empty()) compute().fill_zero(master_.back().data(), master_.back().bytes());
  }
}

ShardedOptimizer::~ShardedOptimizer() = default;

Device& ShardedOptimizer::compute() { return offload_ ? offload_->host() : dev_; }

void ShardedOptimizer::load_master(size_t u, const std::vector<float>& unit_values) {
  for (const ShardPart& p : shards_[u].parts) {
    if (p.valid == 0) continue;
    if (!master_.empty())
      compute().copy_from_host(byte_offset(master_[u].data(), 4 * p.shard_at), unit_values.data() + p.begin,
                               4 * p.valid);
    else if (offload_)  // offloaded fp32 weights: the host's copy of the shard is the master
      compute().copy_from_host(byte_offset(offload_->host_weights(u), 4 * p.shard_at), unit_values.data() + p.begin,
                               4 * p.valid);
  }
}

const Buffer* ShardedOptimizer::whole_master(size_t u) const {
  return master_.empty() || sharded_ ? nullptr : &master_[u];
}

void ShardedOptimizer::update_unit(size_t u, int64_t step_count, float grad_scale) {
  const UnitLayout& unit = params_.layout().units[u];
  const UnitShard& sh = shards_[u];
  const DType e = params_.weight_type(), g = params_.grad_type();
  // Offloaded: the update reads the host's copy of the gradient shard and
  // writes the host's weights (both shard-sized), copied back after.
  const void* grads = offload_ ? offload_->grads_to_host(u) : params_.grads(u).data();
  void* weights = offload_ ? offload_->host_weights(u) : params_.weights(u).data();
  const bool grads_shard = offload_ || params_.grads_sharded();
  const bool weights_shard = offload_ || params_.weights_sharded();
  // The matrices decayed, the vectors (norms, biases) not: each run clipped to each part's shard
  const std::vector<UnitLayout::DecayRun> runs = unit.decay_runs();
  for (const ShardPart& part : sh.parts)
    for (const UnitLayout::DecayRun& run : runs) {
      const int64_t lo = std::max(run.begin, part.begin), hi = std::min(run.end, part.begin + part.valid);
      if (hi <= lo) continue;
      ShardPiece p;
      p.unit = u;
      p.state_offset = part.shard_at + (lo - part.begin);  // offset in the shard-sized states
      p.elems = hi - lo;
      p.master = master_.empty() ? nullptr : static_cast<float*>(byte_offset(master_[u].data(), 4 * p.state_offset));
      p.weights = byte_offset(weights, dtype_bytes(e) * (weights_shard ? p.state_offset : lo));
      p.weight_type = e;
      p.grads = byte_offset(grads, dtype_bytes(g) * (grads_shard ? p.state_offset : lo));
      p.grad_type = g;
      p.decay = run.decay;
      rule_->update(p, step_count, grad_scale);
    }
  if (offload_) offload_->weights_to_device(u);
}

void ShardedOptimizer::step(int64_t step_count, float grad_scale) {
  dev_.ledger().mark_phase("optimizer");
  for (size_t u = 0; u < shards_.size(); ++u) update_unit(u, step_count, grad_scale);
  if (sharded_ && dp_.size() > 1 && !params_.weights_sharded()) gather_updated_weights();
}

void ShardedOptimizer::gather_updated_weights() {
  dev_.ledger().mark_phase("zero.all_gather");
  const DType e = params_.weight_type();
  const int64_t eb = dtype_bytes(e);
  for (size_t u = 0; u < shards_.size(); ++u)
    for (const ShardPart& p : shards_[u].parts) {
      if (p.n < 2) continue;  // a group of one: the shard is the part
      Comm& group = p.expert ? *expert_dp_ : dp_;
      void* w = byte_offset(params_.weights(u).data(), eb * p.off);  // the part in the whole weights
      if (p.padded_elems() == p.elems) {                             // in place: the shard is already in its slot
        group.all_gather(w, byte_offset(params_.weights(u).data(), eb * p.begin), p.shard_elems, e);
      } else {  // padded: gather into a temporary, keep the part's P elements
        Buffer full = dev_.alloc(eb * p.padded_elems(), Account::kWorkspace, "zero.gather");
        Buffer mine = dev_.alloc(eb * p.shard_elems, Account::kWorkspace, "zero.shard");
        dev_.fill_zero(mine.data(), mine.bytes());
        if (p.valid > 0) dev_.copy(mine.data(), byte_offset(params_.weights(u).data(), eb * p.begin), eb * p.valid);
        group.all_gather(full.data(), mine.data(), p.shard_elems, e);
        dev_.copy(w, full.data(), eb * p.elems);
      }
    }
}

}  // namespace gpuledger
