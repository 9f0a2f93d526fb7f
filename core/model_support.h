// What the run commands build of a model file, said in one place: a model
// file may describe more. Qwen3's QK norm and the mixture-of-experts MLP are
// counted (analytic/params.h) but not run yet.
#pragma once

#include "core/layout.h"
#include "core/model_config.h"
#include "core/run_config.h"

namespace gpuledger {

// Throws ConfigError naming the field (exit 2) when the runs do not build
// this model under this layout and run.
void require_runnable_model(const ModelConfig& m, const Layout& l, const RunConfig& r);

}  // namespace gpuledger
