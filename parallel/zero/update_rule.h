// UpdateRule: the element-wise optimizer update that ShardedOptimizer
// (sharded_optimizer.h) runs on the rank's shard of each unit — AdamW, SGD,
// Adagrad and Lion are one ElementwiseRule (elementwise_rule.h) configured by
// the optimizer's kind. A rule owns its per-
// element states (account optim), sized by the shard, and updates one
// contiguous piece of a shard at a time.
#pragma once
#include <cstdint>
#include <string>

#include "core/dtype.h"
#include "kernels/device.h"

namespace gpuledger {

// A contiguous piece of one unit's shard of a single decay class.
struct ShardPiece {
  size_t unit = 0;
  int64_t state_offset = 0;  // elements from the start of the unit's shard-sized states
  int64_t elems = 0;
  float* master = nullptr;  // fp32 master of the piece; nullptr without one (fp32 weights)
  void* weights = nullptr;  // the piece's weights (dtype weight_type)
  DType weight_type = DType::kFP32;
  const void* grads = nullptr;  // the piece's gradients (dtype grad_type)
  DType grad_type = DType::kFP32;
  bool decay = false;  // a matrix (weight decay applies)
};

class UpdateRule {
 public:
  virtual ~UpdateRule() = default;
  // Allocates and zeroes the rule's states for unit `unit_name`'s shard of
  // `shard_elems` elements; called once per unit, in unit order. Throws OutOfMemory.
  virtual void add_unit(const std::string& unit_name, int64_t shard_elems) = 0;
  // ZeRO-Offload (parallel/zero/optimizer_offload.h): the states go to host
  // memory (Account::kHost) and update() runs on `host`, the pieces' pointers
  // being host memory. Called before the first add_unit.
  virtual void offload_to(Device& host) = 0;
  // Updates one piece: weights (and master) from the gradients times
  // grad_scale (the clipping coefficient); step_count counts from 1.
  virtual void update(const ShardPiece& piece, int64_t step_count, float grad_scale) = 0;
};

}  // namespace gpuledger
