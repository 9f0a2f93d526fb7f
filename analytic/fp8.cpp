// FP8 weight copies and scaling state (see fp8.h).
#include "analytic/fp8.h"

#include <vector>

#include "analytic/params.h"
#include "core/checked_math.h"

namespace gpuledger::analytic {

int64_t fp8_gemm_state_bytes(int64_t weight_elems, int64_t amax_history_len) {
  constexpr std::string_view what = "FP8 state bytes of a GEMM";
  const int64_t scaling = checked_product({kFp8QuantizersPerGemm, 4, checked_add(1, amax_history_len, what)}, what);
  return checked_sum(std::initializer_list<int64_t>{checked_mul(2, weight_elems, what), 4, scaling}, what);
}

int64_t fp8_weight_state_bytes(const ModelConfig& m, const Layout& l, const RunConfig& r, int64_t rank) {
  if (!r.fp8_training()) return 0;
  const int64_t t = l.tp, h = m.hidden, d = m.head_dim;
  const int64_t a_t = m.heads / t, k_t = kv_heads_on_rank(m.kv_heads, t), f_t = m.ffn / t;
  constexpr std::string_view what = "FP8 state bytes of a layer";
  const int64_t H = r.fp8_amax_history_len;
  std::vector<int64_t> gemms = {fp8_gemm_state_bytes(checked_product({a_t + 2 * k_t, d, h}, what), H),
                                fp8_gemm_state_bytes(checked_product({h, a_t, d}, what), H),
                                fp8_gemm_state_bytes(checked_mul(f_t, h, what), H)};  // MLP out
  const int64_t mlp_in = fp8_gemm_state_bytes(checked_mul(f_t, h, what), H);
  gemms.push_back(mlp_in);
  if (!m.is_gpt()) gemms.push_back(mlp_in);  // llama: gate and up, one GEMM each
  const int64_t per_layer = checked_sum(gemms, what);
  int64_t layers = 0;
  for (const auto& u : rank_param_units(m, l, rank))
    if (u.name.rfind("layer.", 0) == 0) ++layers;
  return checked_mul(layers, per_layer, "FP8 state bytes of a rank");
}

}  // namespace gpuledger::analytic
