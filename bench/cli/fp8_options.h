// --dtype and --fp8-recipe resolved into RunConfig (docs/formulas/fp8.md); the
// refusals of FP8 training where it is not built live with the others, in
// core/model_support.h.
#pragma once
#include "bench/cli/config_options.h"
#include "core/resolved_config.h"

namespace gpuledger::cli {

// --dtype bf16|fp16|fp32 as it names; --dtype fp8: bf16 weights and
// activations with the layers' Linear GEMMs in FP8 under --fp8-recipe
// (TransformerEngine keeps the parameters in bf16 under fp8_autocast).
void resolve_dtype(const ConfigOptions& o, ResolvedConfig& r);

}  // namespace gpuledger::cli
