// Params: a rank's parameters and their gradients, one flat buffer per unit of
// its ParamLayout: weights in the compute dtype e (account weights), gradients
// in the gradient dtype g (account grads) — docs/exact-budget.md "Model states".
//
// Sharded gradients (ZeRO 2, ParamSharding): each unit's gradient buffer holds
// only the rank's shard, S_u elements (account grads; unit_shard.h: ⌈P_u/n⌉,
// or under ep > 1 a MoE layer's expert part over the expert-data-parallel
// group and the rest over dp), and one staging buffer of the largest padded
// unit (account comm, docs/exact-budget.md "Communication staging") holds the
// full gradient of the unit whose backward is running: grad(unit, role) and
// grad_or_null point into it, at the tensor's place in the padded unit
// (UnitShard::padded_offset), for every unit (only one unit's backward runs
// at a time; the training step zeroes it before and reduce-scatters it after).
// Sharded weights (ZeRO 3): each unit's weight buffer holds only the rank's
// shard (each part's elements [r·S, r·S + S), padding 0), and
// weight(unit, role) points into gathered(unit) — the unit's full padded
// copy (account weights) that the training step all-gathers before the
// unit's forward and backward and frees after; nullptr while not gathered.
//
// Initialisation is a function of (seed, tensor, element of the full t = 1
// tensor) only, so every layout holds the same model (a TP slice holds exactly
// the values of the one-rank tensor):
//   matrices   N(0, 0.02²) (GPT-2, Radford et al. 2019), drawn by Box–Muller
//              from Philox(key seed ^ kInitSeedSalt, stream tensor_id), two
//              normals per Philox block (elements 2i, 2i+1 take cos, sin);
//   attention-out and MLP-out weights ·1/sqrt(2L) (GPT-2 §2.3: residual
//              projections scaled by the number of residual layers);
//   norm γ 1, norm β and biases 0; padded vocabulary rows 0.
// The host computes fp32 values, rounds them to e and copies them in; the
// meta backend skips all of it (nothing to write).
#pragma once
#include <cstdint>
#include <functional>
#include <string_view>
#include <vector>

#include "kernels/device.h"
#include "models/transformer/param_layout.h"
#include "models/transformer/unit_shard.h"

namespace gpuledger {

// fp32 values of one unit (layout order). total_layers is the model's L.
std::vector<float> init_unit_values(const UnitLayout& unit, uint64_t seed, int64_t total_layers);

struct ParamSharding {
  bool grads = false;    // ZeRO 2/3
  bool weights = false;  // ZeRO 3
  ShardGroups groups;    // dp and expert-data-parallel sizes and this rank's places
};

class Params {
 public:
  static constexpr uint64_t kInitSeedSalt = 0x9E3779B97F4A7C15ull;  // init draws apart from dropout's
  static constexpr double kInitStd = 0.02;

  // Allocates every unit's weights and gradients (gradients zeroed). Throws OutOfMemory.
  Params(Device& device, ParamLayout layout, DType weight_type, DType grad_type, ParamSharding sharding = {});

  // Writes the initial values. `each_unit(u, values)` also receives each
  // unit's fp32 values (e.g. to fill the fp32 master copy). A no-op on meta.
  void initialise(uint64_t seed, int64_t total_layers,
                  const std::function<void(size_t, const std::vector<float>&)>& each_unit = {});
  // The same with each unit's fp32 values (layout order) from `values`, e.g.
  // a checkpoint's (models/io/hf_weights.h); asked for one unit at a time.
  using UnitValues = std::function<std::vector<float>(const UnitLayout&)>;
  void initialise_from(const UnitValues& values,
                       const std::function<void(size_t, const std::vector<float>&)>& each_unit = {});

  const ParamLayout& layout() const { return layout_; }
  size_t units() const { return weights_.size(); }
  DType weight_type() const { return weight_t_; }
  DType grad_type() const { return grad_t_; }
  Device& device() const { return device_; }

  const Buffer& weights(size_t unit) const { return weights_[unit]; }
  // The unit's gradient buffer: all of it, or its shard when sharded.
  const Buffer& grads(size_t unit) const { return grads_[unit]; }
  bool grads_sharded() const { return sharding_.grads; }
  bool weights_sharded() const { return sharding_.weights; }
  // Unit u's shard geometry over ParamSharding::groups (whether or not sharded).
  const UnitShard& shard(size_t unit) const { return shards_[unit]; }
  // Sharded weights only: the unit's gathered copy (the training step allocates and frees it).
  Buffer& gathered(size_t unit) { return gathered_[unit]; }
  // Sharded only: the staging buffer the model's gradient pointers point into.
  void* grad_staging() const { return grad_staging_.data(); }
  int64_t grad_staging_bytes() const { return grad_staging_.bytes(); }
  // The tensor `role` of `unit` (nullptr on meta); throws if the unit has no such tensor.
  void* weight(size_t unit, std::string_view role) const;
  void* grad(size_t unit, std::string_view role) const;
  // nullptr when the unit has no such tensor (optional biases).
  void* weight_or_null(size_t unit, std::string_view role) const;
  void* grad_or_null(size_t unit, std::string_view role) const;
  // The gradient of tensor `t` of `unit` (a slot of layout().units[unit]).
  void* grad(size_t unit, const TensorSlot& t) const;

  void zero_grads();  // the gradient buffers (shards when sharded)

 private:
  Device& device_;
  ParamLayout layout_;
  DType weight_t_, grad_t_;
  std::vector<Buffer> weights_, grads_;
  ParamSharding sharding_;
  Buffer grad_staging_;
  std::vector<Buffer> gathered_;
  std::vector<UnitShard> shards_;
  // Tensor t's gradient / weights: the whole buffer at its offset, or the padded unit at its place there.
  void* grad_at(size_t unit, const TensorSlot& t) const;
  void* weight_at(size_t unit, const TensorSlot& t) const;
};

// Byte offset into a device buffer; stays nullptr on meta (no memory there).
inline void* byte_offset(void* base, int64_t bytes) {
  return base == nullptr ? nullptr : static_cast<char*>(base) + bytes;
}
inline const void* byte_offset(const void* base, int64_t bytes) {
  return base == nullptr ? nullptr : static_cast<const char*>(base) + bytes;
}

}  // namespace gpuledger
