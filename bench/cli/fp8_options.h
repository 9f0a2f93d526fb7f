// --dtype and --fp8-recipe resolved into RunConfig, and the refusals of FP8
// training where it is not built or the hardware has none (exit 2, naming the
// option): docs/formulas/fp8.md.
#pragma once
#include <string>

#include "bench/cli/config_options.h"
#include "core/model_support.h"
#include "core/resolved_config.h"

namespace gpuledger::cli {

// --dtype bf16|fp16|fp32 as it names; --dtype fp8: bf16 weights and
// activations with the layers' Linear GEMMs in FP8 under --fp8-recipe
// (TransformerEngine keeps the parameters in bf16 under fp8_autocast).
void resolve_dtype(const ConfigOptions& o, ResolvedConfig& r);

// Throws ConfigError when the run trains in FP8 and: the command only sizes a
// KV cache (kv, serve-plan); the model has mixture-of-experts layers (FP8
// expert GEMMs are not built); --zero 3 (the FP8 copy of a gathered unit is not
// built); the --device has no FP8 tensor cores (Ampere: a100-80gb, a10, a10g).
void require_fp8_supported(const ResolvedConfig& r, ModelUse use);

// Throws ConfigError for an fp8 run on the cuda backend (no FP8 GEMM there)
// or outside training (infer).
void require_fp8_backend(const ResolvedConfig& r, const std::string& backend, bool training);

}  // namespace gpuledger::cli
