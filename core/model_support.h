// What the run commands build of a model file, said in one place: a model
// file may describe more. Qwen3's QK norm runs at tp = 1 only (its shared γ's
// gradient is not summed over tensor-parallel ranks); a mixture-of-experts model (docs/formulas/moe.md) runs on one
// rank only — expert parallelism, and tensor, pipeline and data parallelism with experts, are not implemented — without
// a capacity factor (the budgets of train and plan take every choice as kept; the MoE block itself drops and counts,
// models/moe/) and without full recompute.
#pragma once

#include "core/layout.h"
#include "core/model_config.h"
#include "core/run_config.h"

namespace gpuledger {

// Throws ConfigError naming the field (exit 2) when the runs do not build
// this model under this layout and run.
void require_runnable_model(const ModelConfig& m, const Layout& l, const RunConfig& r);

}  // namespace gpuledger
