// FLOPs per step: the exact GEMM count of this design (docs/exact-budget.md
// "FLOPs"), and the published estimates beside it: 6N per token (Kaplan et al.
// 2020 §2.1), 6N + 12·L·h·s (PaLM, Chowdhery et al. 2022, App. B), the
// per-layer 24bsh² + 4bs²h (+ logits 2bshV) (Korthikanti et al. 2022 §6),
// Megatron 2021's 96·B·s·L·h²(1 + s/6h + V/16Lh) (Narayanan et al. 2021, §5.1,
// includes the recompute forward) and 72·B·s·L·h²(1 + s/6h + V/12Lh) without it.
#pragma once
#include <cstdint>
#include <vector>

#include "analytic/published.h"
#include "core/layout.h"
#include "core/model_config.h"
#include "core/run_config.h"

namespace gpuledger::analytic {

struct StepFlops {
  int64_t model = 0;         // fwd + bwd, no recompute, unpadded vocab, each KV head once (MFU numerator)
  int64_t hardware = 0;      // everything executed: recompute, flash bwd QKᵀ, padded vocab (HFU)
  int64_t model_causal = 0;  // model with the attention s² terms halved (causal convention)
};

// GEMM FLOPs of one layer's forward for one microbatch on one TP rank.
int64_t layer_forward_flops(const ModelConfig& m, const Layout& l, const RunConfig& r);
// FLOPs executed by `rank` in one step (m microbatches of its stage).
StepFlops rank_step_flops(const ModelConfig& m, const Layout& l, const RunConfig& r, int64_t rank);
// Whole-job FLOPs of one step (all ranks: what tokens/s × 6N approximates). In
// double: a 405B model's step on 16,384 ranks is ~3e20 FLOPs, past int64; the
// per-rank counts (rank_step_flops) stay exact integers.
struct JobFlops {
  double model = 0, hardware = 0, model_causal = 0;
};
JobFlops job_step_flops(const ModelConfig& m, const Layout& l, const RunConfig& r);

// Published whole-job figures per step (global batch), each cited:
// "kaplan_6n", "palm_6n_12lhs", "korthikanti_per_layer", "megatron_2021_96", "megatron_72".
std::vector<Published> published_step_flops(const ModelConfig& m, const Layout& l, const RunConfig& r);

}  // namespace gpuledger::analytic
