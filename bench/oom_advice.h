// What would make a run fit: after an out-of-memory, the analytic budget of
// the failing rank's role is recomputed under a few changes (more recompute,
// a smaller micro-batch, tensor parallelism, ZeRO) and the ones that fit the
// limit are suggested with their totals.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/layout.h"
#include "core/model_config.h"
#include "core/run_config.h"

namespace gpuledger::bench {

struct FitSuggestion {
  std::string change;       // "--recompute full"
  int64_t total_bytes = 0;  // the role's exact total under the change
  bool fits = false;
};

std::vector<FitSuggestion> suggest_fits(const ModelConfig& m, const Layout& l, const RunConfig& r, int64_t rank,
                                        int64_t limit_bytes);

}  // namespace gpuledger::bench
