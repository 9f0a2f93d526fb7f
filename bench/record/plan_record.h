// The request and record of `plan`: what a plan is asked for (the resolved
// configuration, the ranks, the time estimate's inputs) and what the analytic
// side computes per rank role and for the job. bench/run/plan_run.h fills them
// and bench/report/plan_json.h writes them; the types sit below both, so that
// report/ needs nothing of run/.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "analytic/budget.h"
#include "analytic/flops.h"
#include "analytic/published.h"
#include "bench/record/step_prediction.h"
#include "core/resolved_config.h"

namespace gpuledger::run {

struct PlanRequest {
  ResolvedConfig config;
  std::vector<int64_t> ranks;          // the ranks reported
  std::optional<double> train_tokens;  // token budget of the time estimate (default 20 per parameter)
  double assumed_mfu = 0.5;
  // The profiles the step is predicted on (--device-profile, or the --device
  // preset's published ones); none: the lower bound alone.
  std::optional<PerfProfiles> profiles;
};

// A published figure beside what it compares to in this implementation.
struct PublishedComparison {
  analytic::Published figure;
  std::string compares_to;      // "model_states", "activations", … or why there is no comparison
  std::optional<double> exact;  // this implementation's figure (none: a reference value only)
};

// One rank's analytic section (also the "analytic" part of a train rank's record).
struct PlanRankRecord {
  analytic::RankBudget budget;  // exact bytes by account, comm, FLOPs, microbatches in flight
  std::string role;             // "r0 pp0 first"
  int64_t params = 0;           // parameters held by the rank
  std::vector<PublishedComparison> published;
  std::optional<int64_t> device_bytes;  // when a device was given: fits and headroom follow
};

struct PlanSummaryRecord {
  int64_t params = 0;
  int64_t tokens_per_step = 0;
  analytic::JobFlops job_flops;
  double bubble_fraction = 0;
  std::vector<analytic::Published> published_flops;
  std::optional<double> peak_flops;
  std::string peak_source;
  std::optional<double> step_time_lower_bound_s;
  double train_tokens = 0;
  double assumed_mfu = 0;
  std::optional<double> train_seconds;
};

struct PlanRecord {
  ResolvedConfig config;
  int64_t non_embedding_params = 0;
  int64_t padded_vocab = 0;
  std::vector<PlanRankRecord> ranks;
  PlanSummaryRecord summary;
  std::optional<StepPrediction> prediction;
  std::string prediction_error;  // why the step could not be predicted (the training step refused the layout)
};

}  // namespace gpuledger::run
