// What the run commands build of a model file, said in one place: a model
// file may describe more. Multi-head latent attention (DeepSeek-V2/V3) is
// built by train and plan (materialized core, no attention dropout, cp 1),
// not served by infer; a DeepSeek-MoE model's first dense layers (not with
// interleaved stages) and DeepSeek-V3's expert bias are built. Qwen3's QK norm runs at tp = 1 only (its
// shared γ's gradient is not summed over tensor-parallel ranks); a mixture-of-experts model (docs/formulas/moe.md) runs
// with data, expert (--ep, carved out of dp) and pipeline parallelism (interleaved stages too) and ZeRO 0-3 at tp = 1
// (under ep > 1 the experts' ZeRO shards over the expert-data-parallel group, --offload optimizer too), with every
// recompute mode. A capacity factor is run padded to capacity (models/moe/moe_block.h), so its budget is exact whatever
// the routing drops. FP8 training (docs/formulas/fp8.md) is built for every model (MoE experts and MLA
// projections included) but not with ZeRO 3, on the cuda backend, on a device without FP8 tensor cores,
// nor outside training.
#pragma once

#include <string_view>

#include "core/layout.h"
#include "core/model_config.h"
#include "core/resolved_config.h"
#include "core/run_config.h"

namespace gpuledger {

// What a command does with the model: builds it (train, plan, sweep, check:
// the layers' code or their budgets), serves it (infer: the layers and the
// engine's KV cache), or only sizes its KV cache and weights (kv, serve-plan).
enum class ModelUse { kRun, kInfer, kKvSizing };

// Throws ConfigError naming the field (exit 2) when the runs do not build
// this model under this layout and run. Multi-head latent attention is
// sized by kv and serve-plan under any layout; train and plan build it, infer
// refuses it.
void require_runnable_model(const ModelConfig& m, const Layout& l, const RunConfig& r, ModelUse use = ModelUse::kRun);

// Throws ConfigError when the run trains in FP8 (--dtype fp8) and: the command
// only sizes a KV cache (kv, serve-plan); --zero 3 (the FP8 copy of a gathered
// unit is not built); the --device has no FP8 tensor cores (Ampere).
void require_runnable_fp8(const ResolvedConfig& r, ModelUse use);

// Throws ConfigError for an fp8 run on the cuda backend (no FP8 GEMM there)
// or outside training (infer).
void require_fp8_backend(const RunConfig& r, std::string_view backend, bool training);

// --capacity-factor c: sets m.capacity_factor, checked as the model file's
// field is (a MoE model, c in (0, E]); throws ConfigError otherwise.
void override_capacity_factor(ModelConfig& m, double capacity_factor);

}  // namespace gpuledger
