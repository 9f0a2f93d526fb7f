// --dtype fp8 resolved and refused where not built (see fp8_options.h).
#include "bench/cli/fp8_options.h"

#include "core/device_spec.h"
#include "core/model_config.h"

namespace gpuledger::cli {

void resolve_dtype(const ConfigOptions& o, ResolvedConfig& r) {
  if (o.dtype != "fp8") {
    r.run.dtype = *dtype_from_name(o.dtype);
    return;
  }
  r.run.dtype = DType::kBF16;
  r.run.fp8 = *fp8_recipe_from_name(o.fp8_recipe);
}

void require_fp8_supported(const ResolvedConfig& r, ModelUse use) {
  if (!r.run.fp8_training()) return;
  if (use == ModelUse::kKvSizing)
    throw ConfigError("dtype",
                      "--dtype fp8 is a training precision (train, plan, sweep, check): the KV cache is sized in "
                      "bf16, fp16 or fp32");
  if (r.layout.zero >= 3)
    throw ConfigError("zero", "--dtype fp8 with --zero 3: the FP8 weight copy of a gathered unit is not built");
  if (r.device && !r.device->peak_fp8_flops)
    throw ConfigError("device", "--dtype fp8 on " + r.device->name + " (" + r.device->description +
                                    "): it has no FP8 tensor cores (FP8 needs Ada, Hopper or Blackwell)");
}

void require_fp8_backend(const ResolvedConfig& r, const std::string& backend, bool training) {
  if (!r.run.fp8_training()) return;
  if (!training)
    throw ConfigError("dtype", "--dtype fp8 is a training precision: infer serves bf16, fp16 or fp32 weights");
  if (backend == "cuda")
    throw ConfigError("backend",
                      "--dtype fp8 on --backend cuda: the CUDA backend has no FP8 GEMM (a cuBLASLt FP8 matmul with "
                      "per-tensor scales is not built); train fp8 on --backend cpu (emulated) or meta");
}

}  // namespace gpuledger::cli
