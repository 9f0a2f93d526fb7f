// What the run commands build of a model file, said in one place: a model
// file may describe more. Qwen3's QK norm runs at tp = 1 only (its shared γ's
// gradient is not summed over tensor-parallel ranks); a mixture-of-experts model (docs/formulas/moe.md) runs with
// data, expert (--ep, carved out of dp) and pipeline parallelism (interleaved stages too) and ZeRO 0-3 at tp = 1 (under
// ep > 1 the experts' ZeRO shards over the expert-data-parallel group, --offload optimizer too), with every
// recompute mode. A capacity factor is run padded to capacity (models/moe/moe_block.h), so its budget is exact whatever
// the routing drops.
#pragma once

#include "core/layout.h"
#include "core/model_config.h"
#include "core/run_config.h"

namespace gpuledger {

// Throws ConfigError naming the field (exit 2) when the runs do not build
// this model under this layout and run.
void require_runnable_model(const ModelConfig& m, const Layout& l, const RunConfig& r);

// --capacity-factor c: sets m.capacity_factor, checked as the model file's
// field is (a MoE model, c in (0, E]); throws ConfigError otherwise.
void override_capacity_factor(ModelConfig& m, double capacity_factor);

}  // namespace gpuledger
