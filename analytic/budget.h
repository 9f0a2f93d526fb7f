// One rank's whole analytic budget: the exact accounts, the published figures,
// the communication and the FLOPs. Assembled from the per-budget files; this
// file adds no formula of its own except the communication staging and the
// workspace upper bound.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "analytic/comm_volume.h"
#include "analytic/flops.h"
#include "analytic/published.h"
#include "core/account.h"
#include "core/layout.h"
#include "core/model_config.h"
#include "core/run_config.h"

namespace gpuledger::analytic {

struct RankBudget {
  int64_t rank = 0;
  Coords coords;
  AccountBytes exact;                // workspace = upper bound (backend-specific)
  std::vector<Published> published;  // model states, activations
  std::map<std::string, CommCount> comm;
  StepFlops flops;
  int64_t in_flight = 0;  // microbatches in flight at the activation peak
};

// Upper bound on the workspace account (docs/exact-budget.md "Workspace").
int64_t workspace_bound_bytes(const ModelConfig& m, const Layout& l, const RunConfig& r, int64_t rank);
RankBudget rank_budget(const ModelConfig& m, const Layout& l, const RunConfig& r, int64_t rank);

// Ranks that are distinct roles: one per pipeline stage with dp = 0, tp = 0
// (ranks in a stage differ only by TP/DP coordinates, which do not change bytes).
std::vector<int64_t> role_ranks(const Layout& l);

}  // namespace gpuledger::analytic
