// ZeRO-Offload of the optimizer (--offload optimizer; Ren et al. 2021,
// "ZeRO-Offload: Democratizing Billion-Scale Model Training"; DeepSpeed's
// zero_optimization.offload_optimizer): what a rank holds in host memory and
// what it copies between device and host each step (docs/exact-budget.md
// "Host memory"). Pure functions of config, layout and run.
#pragma once
#include <cstdint>

#include "core/layout.h"
#include "core/model_config.h"
#include "core/run_config.h"

namespace gpuledger::analytic {

// Per unit u of the rank's shard S_u = ⌈P_u/n⌉ (under ep > 1 a MoE layer's
// two parts, ParamUnit::shard_elems), in host memory: the fp32
// master (4, 16-bit weights only), the optimizer's states (k·4), the
// gradient shard as copied from the device (g) and the updated weights
// before they are copied back (e; with fp32 weights this copy is the
// master itself). 0 without offload.
int64_t offload_host_bytes(const ModelConfig& m, const Layout& l, const RunConfig& r, int64_t rank);

// One step's copies: each unit whose shard holds parameters (valid_u > 0,
// valid_u = clamp(P_u − r·S_u, 0, S_u) for dp rank r; under ep > 1 the sum
// over the unit's two parts, each with its group's rank) copies its gradient
// shard device→host (g·valid_u) and its updated weights host→device
// (e·valid_u), one copy each. All zero without offload.
struct OffloadTraffic {
  int64_t copies = 0;                 // per direction
  int64_t grad_bytes_to_host = 0;     // device → host
  int64_t param_bytes_to_device = 0;  // host → device
};
OffloadTraffic offload_traffic(const ModelConfig& m, const Layout& l, const RunConfig& r, int64_t rank);

}  // namespace gpuledger::analytic
