// ElementwiseRule and the run's optimizer (see elementwise_rule.h).
#include "parallel/zero/elementwise_rule.h"

#include "models/transformer/params.h"

namespace gpuledger {

namespace {

// The names of the rule's states, as PyTorch's optimizers name them (elementwise_rule.h).
const char* state_name(OptimizerKind kind, int which) {
  switch (kind) {
    case OptimizerKind::kAdamW: return which == 0 ? ".adam_m" : ".adam_v";
    case OptimizerKind::kSGD: return ".momentum_buffer";
    case OptimizerKind::kAdagrad: return ".sum";
    case OptimizerKind::kLion: return ".exp_avg";
  }
  return ".state";
}

float* piece_of(std::vector<Buffer>& states, const ShardPiece& p) {
  return states.empty() ? nullptr : static_cast<float*>(byte_offset(states[p.unit].data(), 4 * p.state_offset));
}

}  // namespace

void ElementwiseRule::add_unit(const std::string& unit_name, int64_t shard_elems) {
  const int states = optimizer_state_count(hyper_);
  for (int k = 0; k < states; ++k) {
    std::vector<Buffer>& s = k == 0 ? state1_ : state2_;
    s.push_back(dev_.alloc(4 * shard_elems, account_, unit_name + state_name(hyper_.kind, k)));
    compute_->fill_zero(s.back().data(), s.back().bytes());
  }
}

void ElementwiseRule::offload_to(Device& host) {
  compute_ = &host;
  account_ = Account::kHost;
}

void ElementwiseRule::update(const ShardPiece& p, int64_t step_count, float grad_scale) {
  OptimizerHyper h = hyper_;
  if (!p.decay) h.weight_decay = 0.0f;
  compute_->optimizer_update(p.master, p.weights, p.weight_type, p.grads, p.grad_type, piece_of(state1_, p),
                             piece_of(state2_, p), p.elems, h, step_count, grad_scale);
}

AdamW::AdamW(Device& dev, double lr, double weight_decay)
    : ElementwiseRule(dev, [&] {
        RunConfig r;
        r.optimizer = OptimizerKind::kAdamW;
        r.lr = lr;
        r.weight_decay = weight_decay;
        return optimizer_hyper(r);
      }()) {}

OptimizerHyper optimizer_hyper(const RunConfig& run) {
  OptimizerHyper h;
  h.kind = run.optimizer;
  h.lr = static_cast<float>(run.lr);
  h.weight_decay = static_cast<float>(run.weight_decay);
  switch (run.optimizer) {
    case OptimizerKind::kAdamW:
      h.beta1 = AdamW::kBeta1;
      h.beta2 = AdamW::kBeta2;
      h.eps = AdamW::kEps;
      break;
    case OptimizerKind::kSGD: h.momentum = static_cast<float>(run.momentum); break;
    case OptimizerKind::kAdagrad: h.eps = static_cast<float>(run.adagrad_eps); break;
    case OptimizerKind::kLion:
      h.beta1 = static_cast<float>(run.lion_beta1);
      h.beta2 = static_cast<float>(run.lion_beta2);
      break;
  }
  return h;
}

std::unique_ptr<UpdateRule> make_update_rule(Device& dev, const RunConfig& run) {
  return std::make_unique<ElementwiseRule>(dev, optimizer_hyper(run));
}

}  // namespace gpuledger
