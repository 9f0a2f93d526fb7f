// Test helper (not a test binary): the small hand-checkable model shapes the
// analytic tests work through by hand, defined once.
#pragma once
#include <cstdint>
#include <string>

#include "core/model_config.h"

namespace gpuledger::testing {

// gpt, L = 2, h = 8, a = k = 2, d = 4, f = 4h = 32, max_seq 16, qkv bias: the
// shape the published per-layer forms assume (f = 4h, k = a, a·d = h). Its
// units at t = 1 (docs/exact-budget.md): embedding V·8 + 16·8; each layer
// 2h + (8·24 + 24) + (64 + 8) + 2h + (256 + 32) + (256 + 8) = 872; head 2h
// (+ V·8 when untied).
inline ModelConfig hand_gpt(int64_t vocab, bool tied, std::string name) {
  ModelConfig m;
  m.name = std::move(name);
  m.flavour = Flavour::kGpt;
  m.layers = 2;
  m.hidden = 8;
  m.heads = 2;
  m.kv_heads = 2;
  m.head_dim = 4;
  m.ffn = 32;
  m.vocab = vocab;
  m.max_seq = 16;
  m.qkv_bias = true;
  m.tied_embeddings = tied;
  return m;
}

}  // namespace gpuledger::testing
