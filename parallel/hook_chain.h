// HookChain: the UnitHooks of the training step's active parts, given to
// StageModel as one. Entering a unit calls the parts in the order they were
// added, leaving it in the reverse order, so the parts nest like scopes: a
// part added first (ZeRO 3's gather) has the unit's weights ready before the
// next (ZeRO 2's staging) starts and keeps them until that one is done.
// word_grad_sink: the first part that names a sink.
#pragma once
#include <optional>
#include <vector>

#include "models/transformer/unit_hooks.h"

namespace gpuledger {

class HookChain final : public UnitHooks {
 public:
  void add(UnitHooks* part) {
    if (part != nullptr) parts_.push_back(part);
  }
  bool empty() const { return parts_.empty(); }

  void before_forward(size_t u) override {
    for (UnitHooks* p : parts_) p->before_forward(u);
  }
  void after_forward(size_t u) override {
    for (auto it = parts_.rbegin(); it != parts_.rend(); ++it) (*it)->after_forward(u);
  }
  void before_backward(size_t u) override {
    for (UnitHooks* p : parts_) p->before_backward(u);
  }
  void after_backward(size_t u) override {
    for (auto it = parts_.rbegin(); it != parts_.rend(); ++it) (*it)->after_backward(u);
  }
  std::optional<void*> word_grad_sink() override {
    for (UnitHooks* p : parts_)
      if (auto sink = p->word_grad_sink()) return sink;
    return std::nullopt;
  }

 private:
  std::vector<UnitHooks*> parts_;
};

}  // namespace gpuledger
