// Model-state bytes (weights, grads, master, optim) per rank: the exact figures
// of docs/exact-budget.md and the published formulas beside them (ZeRO paper
// §5, Megatron theoretical_memory_usage.py, DeepSpeed's estimators).
#pragma once
#include <cstdint>
#include <vector>

#include "analytic/published.h"
#include "core/account.h"
#include "core/layout.h"
#include "core/model_config.h"
#include "core/run_config.h"

namespace gpuledger::analytic {

// The optimizer's fp32 state bytes per parameter element (docs/formulas/memory.md):
// AdamW 8 (m, v), SGD 4 (momentum buffer; 0 with momentum 0), Adagrad 4 (sum of
// squared gradients), Lion 4 (momentum).
int64_t optimizer_state_bytes_per_param(const RunConfig& r);

// Exact bytes of accounts weights, grads, master, optim for `rank` (others 0).
// ZeRO-3 weights include the gathered-unit peak (1 + prefetch consecutive units).
AccountBytes model_state_bytes(const ModelConfig& m, const Layout& l, const RunConfig& r, int64_t rank);

// Published per-rank model-state figures for this model/layout:
//   "mixed_precision_16psi"  (4 + K)Ψ_r, K = 12 for Adam  (Rajbhandari et al. 2020, §3.1)
//   "zero1" 4Ψ+KΨ/Nd, "zero2" 2Ψ+(2+K)Ψ/Nd, "zero3" (4+K)Ψ/Nd  (ibid. §5, Figure 1), Ψ = rank's
//      params before DP sharding (P_r), only the row of the chosen stage plus (4 + K)Ψ;
//      K = 4 (master) + the optimizer's state bytes (the paper's K for another optimizer)
//   the rows below are Adam's own and are given for --optimizer adamw only:
//   "megatron_18"  18 bytes/param (fp32 main grads), or "megatron_distributed_optimizer"
//      6 + 12/DP when zero >= 1 (Megatron-LM theoretical_memory_usage.py), counted on the
//      most loaded shard (first stage, embedding included)
//   "deepspeed_zero2" 2P + 18P/N, "deepspeed_zero3" 4·largest_layer + 18P/N
//      (DeepSpeed estimate_zero2/3_model_states_mem_needs), when that stage is chosen
std::vector<Published> published_model_states(const ModelConfig& m, const Layout& l, const RunConfig& r, int64_t rank);

// The ZeRO paper's per-device model-state bytes for Ψ params on Nd devices;
// K = 12 is the paper's mixed-precision Adam.
double zero_paper_bytes(double psi, int zero_stage, int64_t nd, double k = 12.0);

}  // namespace gpuledger::analytic
