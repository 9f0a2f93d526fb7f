// ZeRO-Offload's host bytes and copies (see offload.h).
#include "analytic/offload.h"

#include <algorithm>

#include "analytic/model_states.h"
#include "analytic/params.h"
#include "core/checked_math.h"
#include "core/int_math.h"

namespace gpuledger::analytic {

int64_t offload_host_bytes(const ModelConfig& m, const Layout& l, const RunConfig& r, int64_t rank) {
  if (!r.offload_optimizer) return 0;
  const int64_t e = dtype_bytes(r.dtype);
  const int64_t g = r.dtype == DType::kFP32 ? 4 : dtype_bytes(r.grad_dtype);
  const int64_t per_elem = (r.has_master() ? 4 : 0) + optimizer_state_bytes_per_param(r) + g + e;
  return checked_mul(per_elem, rank_shard_params(m, l, rank), "offloaded host bytes");
}

OffloadTraffic offload_traffic(const ModelConfig& m, const Layout& l, const RunConfig& r, int64_t rank) {
  OffloadTraffic t;
  if (!r.offload_optimizer) return t;
  const int64_t e = dtype_bytes(r.dtype);
  const int64_t g = r.dtype == DType::kFP32 ? 4 : dtype_bytes(r.grad_dtype);
  const Coords c = l.coords(rank);
  const int64_t dp_rank = c.dp, dp_cp_rank = l.dp_cp_rank(c);  // the dense shard's place among dp·cp
  // The shard's elements inside a part of p elements over n ranks, for the part's rank r.
  auto valid_of = [](int64_t p, int64_t n, int64_t r) {
    const int64_t s = ceil_div(p, n);
    return std::clamp<int64_t>(p - r * s, 0, s);
  };
  int64_t valid_sum = 0;
  for (const auto& u : rank_param_units(m, l, rank)) {
    // the dense part over dp·cp; under ep > 1 the experts over the dp/ep ranks
    // holding them, where this rank is the (dp_rank / ep)-th (ParamUnit::shard_elems)
    const int64_t x = u.expert_sharded_elems();
    const int64_t valid = valid_of(u.elems() - x, l.dp_cp(), dp_cp_rank) + valid_of(x, l.dp / l.ep, dp_rank / l.ep);
    if (valid == 0) continue;
    ++t.copies;
    valid_sum = checked_add(valid_sum, valid, "offloaded elements");
  }
  t.grad_bytes_to_host = checked_mul(g, valid_sum, "offloaded gradient bytes");
  t.param_bytes_to_device = checked_mul(e, valid_sum, "offloaded parameter bytes");
  return t;
}

}  // namespace gpuledger::analytic
