// FP8 weight copies and scaling state (see fp8.h).
#include "analytic/fp8.h"

#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "analytic/params.h"
#include "core/checked_math.h"
#include "core/fp8.h"
#include "core/int_math.h"

namespace gpuledger::analytic {

int64_t fp8_gemm_state_bytes(int64_t weight_elems, int64_t amax_history_len) {
  constexpr std::string_view what = "FP8 state bytes of a GEMM";
  const int64_t scaling = checked_product({kFp8QuantizersPerGemm, 4, checked_add(1, amax_history_len, what)}, what);
  return checked_sum(std::initializer_list<int64_t>{checked_mul(2, weight_elems, what), 4, scaling}, what);
}

int64_t fp8_block_gemm_scaling_bytes(int64_t rows, int64_t cols) {
  constexpr std::string_view what = "FP8 block scales of a GEMM";
  const auto blocks = [](int64_t n) { return ceil_div(n, kFp8BlockLen); };
  const auto pad4 = [](int64_t n) { return ceil_div(n, int64_t{4}) * 4; };
  return checked_mul(4,
                     checked_add(checked_mul(blocks(rows), pad4(blocks(cols)), what),
                                 checked_mul(blocks(cols), pad4(blocks(rows)), what), what),
                     what);
}

namespace {

// One GEMM's weight (rows × cols) on a TP rank, by role: the shapes of
// analytic/params.cpp (docs/exact-budget.md "Parameters held by a rank"), a
// routed expert's one expert's.
std::pair<int64_t, int64_t> fp8_gemm_weight_shape(const ModelConfig& m, int64_t tp, std::string_view role) {
  const int64_t h = m.hidden, d = m.head_dim, a_t = m.heads / tp, k_t = kv_heads_on_rank(m.kv_heads, tp);
  const int64_t f_t = m.ffn / tp, fe_t = m.expert_ffn / tp, fs_t = m.shared_experts * m.shared_expert_ffn / tp;
  const int64_t dn = m.qk_nope_head_dim, dr = m.qk_rope_head_dim, dv = m.v_head_dim;
  if (role == "qkv.weight") return {(a_t + 2 * k_t) * d, h};
  if (role == "attn_out.weight") return {h, a_t * (m.is_mla() ? dv : d)};
  if (role == "mlp_in.weight" || role == "mlp_gate.weight" || role == "mlp_up.weight") return {f_t, h};
  if (role == "mlp_out.weight") return {h, f_t};
  if (role == "mla.q_down.weight") return {m.q_lora_rank, h};
  if (role == "mla.q_up.weight") return {a_t * (dn + dr), m.q_lora_rank};
  if (role == "mla.q.weight") return {a_t * (dn + dr), h};
  if (role == "mla.kv_down.weight") return {m.kv_lora_rank + dr, h};
  if (role == "mla.kv_up.weight") return {a_t * (dn + dv), m.kv_lora_rank};
  if (role == "moe.experts.gate.weight" || role == "moe.experts.up.weight") return {fe_t, h};
  if (role == "moe.experts.down.weight") return {h, fe_t};
  if (role == "moe.shared.gate.weight" || role == "moe.shared.up.weight") return {fs_t, h};
  if (role == "moe.shared.down.weight") return {h, fs_t};
  throw std::logic_error("fp8_gemm_weight_shape: no shape for the FP8 GEMM role " + std::string(role));
}

}  // namespace

// Over the rank's layer tensors (analytic/params.h, names "layers.<i>.<role>"):
// each FP8 tensor of P elements that is g GEMMs (core/fp8.h: the routed
// experts one per expert held, E/ep) holds 2·P and g GEMMs' scaling state —
// delayed: 4 + 5·4·(1 + H) each; blockwise: its block scales.
int64_t fp8_weight_state_bytes(const ModelConfig& m, const Layout& l, const RunConfig& r, int64_t rank) {
  if (!r.fp8_training()) return 0;
  constexpr std::string_view what = "FP8 state bytes of a rank";
  const int64_t local_experts = m.is_moe() ? m.num_experts / l.ep : 0;
  std::vector<int64_t> terms;
  for (const auto& u : rank_param_units(m, l, rank)) {
    if (u.name.rfind("layer.", 0) != 0) continue;
    const std::string prefix = "layers." + u.name.substr(u.name.find('.') + 1) + ".";
    for (const auto& t : u.tensors) {
      const std::string_view role = std::string_view(t.name).substr(prefix.size());
      const int64_t gemms = fp8_gemms_of_role(role, local_experts);
      if (gemms == 0) continue;
      int64_t scaling = fp8_gemm_state_bytes(0, r.fp8_amax_history_len);
      if (r.fp8 == Fp8Recipe::kBlockwise) {
        const auto [rows, cols] = fp8_gemm_weight_shape(m, l.tp, role);
        if (rows * cols * gemms != t.elems)
          throw std::logic_error("fp8_weight_state_bytes: " + t.name + " is not " + std::to_string(gemms) +
                                 " GEMMs of " + std::to_string(rows) + " × " + std::to_string(cols));
        scaling = fp8_block_gemm_scaling_bytes(rows, cols);
      }
      terms.push_back(checked_add(checked_mul(2, t.elems, what), checked_mul(gemms, scaling, what), what));
    }
  }
  return checked_sum(terms, what);
}

}  // namespace gpuledger::analytic
