// FP8 weight copies and scaling state (see fp8.h).
#include "analytic/fp8.h"

#include <vector>

#include "analytic/params.h"
#include "core/checked_math.h"
#include "core/fp8.h"

namespace gpuledger::analytic {

int64_t fp8_gemm_state_bytes(int64_t weight_elems, int64_t amax_history_len) {
  constexpr std::string_view what = "FP8 state bytes of a GEMM";
  const int64_t scaling = checked_product({kFp8QuantizersPerGemm, 4, checked_add(1, amax_history_len, what)}, what);
  return checked_sum(std::initializer_list<int64_t>{checked_mul(2, weight_elems, what), 4, scaling}, what);
}

// Over the rank's layer tensors (analytic/params.h, names "layers.<i>.<role>"):
// each FP8 tensor of P elements that is g GEMMs (core/fp8.h: the routed
// experts one per expert held, E/ep) holds 2·P + g·(4 + 5·4·(1 + H)).
int64_t fp8_weight_state_bytes(const ModelConfig& m, const Layout& l, const RunConfig& r, int64_t rank) {
  if (!r.fp8_training()) return 0;
  constexpr std::string_view what = "FP8 state bytes of a rank";
  const int64_t local_experts = m.is_moe() ? m.num_experts / l.ep : 0;
  const int64_t per_gemm_scaling = fp8_gemm_state_bytes(0, r.fp8_amax_history_len);
  std::vector<int64_t> terms;
  for (const auto& u : rank_param_units(m, l, rank)) {
    if (u.name.rfind("layer.", 0) != 0) continue;
    const std::string prefix = "layers." + u.name.substr(u.name.find('.') + 1) + ".";
    for (const auto& t : u.tensors) {
      const int64_t gemms = fp8_gemms_of_role(std::string_view(t.name).substr(prefix.size()), local_experts);
      if (gemms == 0) continue;
      terms.push_back(checked_add(checked_mul(2, t.elems, what), checked_mul(gemms, per_gemm_scaling, what), what));
    }
  }
  return checked_sum(terms, what);
}

}  // namespace gpuledger::analytic
