// UnitHooks: what StageModel calls around each ParamLayout unit's part of the
// forward and the backward (the embedding, each layer, the head, in the order
// the pass runs them), so that the parallel training step can act per unit
// while the model runs — gather a sharded unit's weights before its use and
// free them after, reduce a unit's gradient once its backward is done, start
// a communication as soon as its inputs are final. The model knows nothing of
// what is done there.
#pragma once
#include <cstddef>
#include <optional>

namespace gpuledger {

class UnitHooks {
 public:
  virtual ~UnitHooks() = default;
  virtual void before_forward(size_t /*unit*/) {}
  virtual void after_forward(size_t /*unit*/) {}
  virtual void before_backward(size_t /*unit*/) {}
  virtual void after_backward(size_t /*unit*/) {}
  // Tied embeddings with p = 1 (ParamLayout head_uses_embedding): where the
  // head's backward accumulates d(word) (V'/t·h elements of the gradient
  // dtype), when not into the embedding unit's word gradient; nullopt: there.
  virtual std::optional<void*> word_grad_sink() { return std::nullopt; }
};

}  // namespace gpuledger
