// Time estimates from peaks: a step-time lower bound (compute at peak, comm at
// bandwidth) and the training time for a token budget (Narayanan et al. 2021,
// §5.1: time ≈ 8·T·P / (n·X) with recompute, 6·T·P / (n·X) without).
#pragma once
#include <cstdint>
#include <optional>

namespace gpuledger::analytic {

// Seconds to train `tokens` tokens of a `params`-parameter model on `gpus`
// devices of `peak_flops` at `mfu`, with 6 FLOPs per parameter per token.
double training_seconds(double params, double tokens, int64_t gpus, double peak_flops, double mfu);

// Lower bound on one step: hardware FLOPs at peak, plus nothing hidden.
std::optional<double> step_time_lower_bound_s(int64_t hardware_flops, std::optional<double> peak_flops);

}  // namespace gpuledger::analytic
