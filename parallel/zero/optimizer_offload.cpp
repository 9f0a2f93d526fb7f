// OptimizerOffload (see optimizer_offload.h).
#include "parallel/zero/optimizer_offload.h"

#include <chrono>

#include "kernels/cpu/cpu_device.h"
#include "kernels/meta/meta_device.h"

namespace gpuledger {

namespace {

std::unique_ptr<Device> make_host_device(const Device& dev, Ledger& ledger) {
  if (dev.touches_memory()) return std::make_unique<CpuDevice>(ledger);
  return std::make_unique<MetaDevice>(ledger);
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

OptimizerOffload::OptimizerOffload(Device& dev, const Params& params, const std::vector<UnitShard>& shards,
                                   CommCounters* counters)
    : dev_(dev), params_(params), shards_(shards), counters_(counters), host_(make_host_device(dev, host_ledger_)) {
  const int64_t e = dtype_bytes(params.weight_type()), g = dtype_bytes(params.grad_type());
  for (size_t u = 0; u < shards.size(); ++u) {
    const std::string& name = params.layout().units[u].name;
    grads_.push_back(dev.alloc(g * shards[u].shard_elems, Account::kHost, name + ".offload.grads"));
    weights_.push_back(dev.alloc(e * shards[u].shard_elems, Account::kHost, name + ".offload.weights"));
    host_->fill_zero(weights_.back().data(), weights_.back().bytes());
  }
}

const void* OptimizerOffload::grads_to_host(size_t u) {
  const UnitShard& sh = shards_[u];
  const int64_t g = dtype_bytes(params_.grad_type());
  if (sh.valid() == 0) return grads_[u].data();
  const auto t0 = std::chrono::steady_clock::now();
  if (dev_.touches_memory())
    for (const ShardPart& p : sh.parts)
      if (p.valid > 0)
        dev_.copy_to_host(byte_offset(grads_[u].data(), g * p.shard_at),
                          byte_offset(params_.grads(u).data(), g * (params_.grads_sharded() ? p.shard_at : p.begin)),
                          g * p.valid);
  if (counters_) counters_->add(CommKind::kCopyToHost, "host", g * sh.valid(), seconds_since(t0));
  return grads_[u].data();
}

void OptimizerOffload::weights_to_device(size_t u) {
  const UnitShard& sh = shards_[u];
  const int64_t e = dtype_bytes(params_.weight_type());
  if (sh.valid() == 0) return;
  const auto t0 = std::chrono::steady_clock::now();
  if (dev_.touches_memory())
    for (const ShardPart& p : sh.parts)
      if (p.valid > 0)
        dev_.copy_from_host(
            byte_offset(params_.weights(u).data(), e * (params_.weights_sharded() ? p.shard_at : p.begin)),
            byte_offset(weights_[u].data(), e * p.shard_at), e * p.valid);
  if (counters_) counters_->add(CommKind::kCopyToDevice, "host", e * sh.valid(), seconds_since(t0));
}

}  // namespace gpuledger
