// One rank's part of a `gpuledger train` run, the same for every mode (one
// rank, one rank of an MPI job, or one simulated rank of a meta world): build
// the Trainer on the rank's device and groups, run the steps, and return the
// rank's record (measured ledger, comm counters, FLOPs, times) — a failure
// (out of memory, an error) included in the record rather than thrown.
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/resolved_config.h"
#include "kernels/device.h"
#include "parallel/rank_context.h"
#include "parallel/train_step.h"

namespace gpuledger::bench {

struct RankRunOptions {
  int64_t steps = 1;
  int64_t warmup = 0;
  bool timeline = false;
  // Called after every step on the rank that prints (rank 0 / the first simulated rank).
  std::function<void(int64_t step, const StepResult&, const Ledger&)> on_step;
  // Called by every rank after building its Trainer (ok or not), before the first
  // step's collectives: returns "" when every rank is ready, else the first
  // failure's message (MPI: agree_status). Unset: this rank alone decides.
  std::function<std::string(bool ok, const std::string& error)> agree_after_setup;
};

struct RankRun {
  nlohmann::json record;              // ranks[i] of the report, "analytic" included
  std::vector<double> losses, step_ms, compute_ms, comm_ms;
  std::string status = "ok";          // ok | oom | error
  std::string error;
  bool failed_in_step = false;        // inside a step: peers may be waiting in a collective
};

// `record_base` is the rank's analytic section (plan_rank_json); the measured
// parts are added to it.
RankRun run_rank_training(Device& device, const ResolvedConfig& r, const RankContext& ctx,
                          const CommCounters& counters, const RankRunOptions& o, nlohmann::json record_base);

}  // namespace gpuledger::bench
