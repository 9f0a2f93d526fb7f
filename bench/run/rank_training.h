// One rank's part of a `gpuledger train` run, the same for every mode (one
// rank, one rank of an MPI job, or one simulated rank of a meta world): build
// the Trainer on the rank's device and groups, run the steps, and return the
// rank's record (measured ledger, comm counters, FLOPs, times, beside the
// rank's analytic budget) — a failure (out of memory, an error) included in
// the record rather than thrown. bench/report/train_json.h writes the record.
// The record types: bench/record/train_record.h.
#pragma once
#include <cstdint>
#include <functional>
#include <string>

#include "bench/record/plan_record.h"
#include "bench/record/train_record.h"
#include "comm/comm.h"
#include "core/resolved_config.h"
#include "core/trace.h"
#include "kernels/device.h"
#include "parallel/context/rank_context.h"
#include "parallel/train_step.h"

namespace gpuledger::bench {

struct RankRunOptions {
  int64_t steps = 1;
  int64_t warmup = 0;
  bool timeline = false;
  // Record every op (the device must be a ProfilingDevice) and every
  // collective as trace slices into the record (`train --trace`).
  bool trace = false;
  // After the last step, rank 0 writes its parameters (the whole model at tp =
  // pp = 1) as a Hugging Face checkpoint into this folder ("" none).
  std::string save_weights;
  // Called after every step on the rank that prints (rank 0 / the first simulated rank).
  std::function<void(int64_t step, const StepResult&, const Ledger&)> on_step;
  // Called by every rank after building its Trainer (ok or not), before the first
  // step's collectives: returns "" when every rank is ready, else the first
  // failure's message (MPI: agree_status). Unset: this rank alone decides.
  std::function<std::string(bool ok, const std::string& error)> agree_after_setup;
};

// `analytic` is the rank's plan (plan_rank); the measured parts are added beside it.
RankRun run_rank_training(Device& device, const ResolvedConfig& r, const RankContext& ctx, CommCounters& counters,
                          const RankRunOptions& o, run::PlanRankRecord analytic);

}  // namespace gpuledger::bench
