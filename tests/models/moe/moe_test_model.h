// Test helper (not a test binary): the small MoE model and block shape the
// block tests share (tests/models/moe/test_moe_block.cpp on one rank,
// tests/parallel/mpi/test_ep_moe_block.cpp under expert parallelism): a llama
// model of E experts, top-k, one shared expert, renormalised top-k weights and
// a load-balancing coefficient α = 0.05.
#pragma once
#include <cstdint>
#include <optional>

#include "core/model_config.h"
#include "models/moe/moe_block.h"

namespace gpuledger::testing {

struct MoeTestDims {
  int64_t tokens, hidden, experts, k, expert_ffn, shared_ffn;
};

inline ModelConfig moe_test_model(const MoeTestDims& d, std::optional<double> capacity_factor) {
  ModelConfig m;
  m.flavour = Flavour::kLlama;
  m.hidden = d.hidden;
  m.num_experts = d.experts;
  m.experts_per_token = d.k;
  m.expert_ffn = d.expert_ffn;
  m.shared_experts = 1;
  m.shared_expert_ffn = d.shared_ffn;
  m.capacity_factor = capacity_factor;
  m.router_aux_loss_coef = 0.05;
  return m;
}

// The block of moe_test_model(d, m.capacity_factor) over d.tokens tokens, dtype t, ep ranks.
inline MoeShape moe_test_shape(const MoeTestDims& d, const ModelConfig& m, DType t, int64_t ep = 1) {
  MoeShape s;
  s.tokens = d.tokens;
  s.hidden = d.hidden;
  s.expert_ffn = d.expert_ffn;
  s.shared_ffn = d.shared_ffn;
  s.routing = {d.experts, d.k, true, m.capacity_factor, m.router_aux_loss_coef};
  s.ep = ep;
  s.e = s.g = t;
  return s;
}

}  // namespace gpuledger::testing
