// --dtype and --fp8-recipe resolved (see fp8_options.h).
#include "bench/cli/fp8_options.h"

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

}  // namespace gpuledger::cli
