// Mixture-of-experts budget terms (see moe.h; docs/formulas/moe.md).
#include "analytic/moe.h"

#include <algorithm>
#include <cmath>

#include "analytic/params.h"
#include "core/checked_math.h"

namespace gpuledger::analytic {

int64_t moe_capacity(const ModelConfig& m, int64_t tokens) {
  if (!m.capacity_factor) return tokens;
  // Megatron-LM megatron/core/transformer/moe/moe_utils.py get_capacity (commit
  // 00611e6eeb0b09b5ee074750956855215ddbd67f): ceil((N·k / E) · c); at most N here.
  const double c = std::ceil(*m.capacity_factor * static_cast<double>(tokens * m.experts_per_token) /
                             static_cast<double>(m.num_experts));
  return std::min<int64_t>(tokens, static_cast<int64_t>(c));
}

int64_t moe_layers_on_stage(const ModelConfig& m, const Layout& l, int64_t stage) {
  int64_t n = 0;
  const int64_t count = layers_per_chunk(m, l, stage);
  for (int64_t chunk = 0; chunk < l.vpp; ++chunk) {
    const int64_t first = first_layer_of_chunk(m, l, stage, chunk);
    for (int64_t i = first; i < first + count; ++i) n += m.is_moe_layer(i) ? 1 : 0;
  }
  return n;
}

int64_t router_bias_bytes(const ModelConfig& m, const Layout& l, int64_t stage) {
  if (!m.router_bias) return 0;
  return checked_product({4, m.num_experts, moe_layers_on_stage(m, l, stage)}, "expert bias bytes");
}

int64_t moe_worst_case_rows(const ModelConfig& m, int64_t tokens) {
  return std::min(tokens * m.experts_per_token, m.num_experts * moe_capacity(m, tokens));
}

int64_t moe_block_activation_bytes(const ModelConfig& m, int64_t tokens, int64_t rows, int64_t e_bytes) {
  constexpr std::string_view what = "MoE activation bytes";
  const int64_t shared = m.shared_experts * m.shared_expert_ffn;
  int64_t b = checked_mul(tokens, m.num_experts * 4, what);                           // router probabilities
  b = checked_add(b, rows * 4, what);                                                 // row → token
  b = checked_add(b, checked_product({2, rows, m.hidden, e_bytes}, what), what);      // gathered in, expert out
  b = checked_add(b, checked_product({3, rows, m.expert_ffn, e_bytes}, what), what);  // gate, up, SwiGLU out
  return checked_add(b, checked_product({3, tokens, shared, e_bytes}, what), what);   // shared experts
}

int64_t moe_ep_slots(const ModelConfig& m, int64_t tokens) {
  return checked_mul(m.num_experts, moe_capacity(m, tokens), "MoE dispatch slots");
}

bool moe_padded_to_capacity(const ModelConfig& m, const Layout& l) {
  return m.is_moe() && (l.ep > 1 || m.capacity_factor.has_value());
}

int64_t moe_block_ep_activation_bytes(const ModelConfig& m, int64_t tokens, int64_t e_bytes) {
  constexpr std::string_view what = "MoE activation bytes";
  const int64_t slots = moe_ep_slots(m, tokens), shared = m.shared_experts * m.shared_expert_ffn;
  int64_t b = checked_mul(tokens, m.num_experts * 4, what);                            // router probabilities
  b = checked_add(b, checked_product({2, slots, m.hidden, e_bytes}, what), what);      // received in, returned out
  b = checked_add(b, checked_product({3, slots, m.expert_ffn, e_bytes}, what), what);  // gate, up, SwiGLU out
  return checked_add(b, checked_product({3, tokens, shared, e_bytes}, what), what);    // shared experts
}

int64_t moe_ep_all_to_all_bytes(const ModelConfig& m, int64_t tokens, int64_t e_bytes) {
  return checked_product({moe_ep_slots(m, tokens), m.hidden, e_bytes}, "MoE all-to-all bytes");
}

int64_t moe_block_forward_flops(const ModelConfig& m, int64_t tokens, int64_t rows) {
  constexpr std::string_view what = "MoE FLOPs";
  const int64_t shared = m.shared_experts * m.shared_expert_ffn;
  int64_t f = checked_product({2, tokens, m.hidden, m.num_experts}, what);
  f = checked_add(f, checked_product({6, rows, m.hidden, m.expert_ffn}, what), what);
  return checked_add(f, checked_product({6, tokens, m.hidden, shared}, what), what);
}

int64_t moe_training_flops_per_token(const ModelConfig& m) {
  // The input embedding is a lookup, not a GEMM: left out unless tied (then
  // the same matrix is the head's GEMM); the head's V·h counts.
  int64_t embeddings = m.tied_embeddings ? 0 : m.vocab * m.hidden;
  if (m.is_gpt()) embeddings += m.max_seq * m.hidden;
  return checked_mul(6, active_params(m) - embeddings, "model FLOPs per token");
}

}  // namespace gpuledger::analytic
