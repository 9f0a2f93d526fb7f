// summary.steps of a train report: the figures `gpuledger train` prints per
// step (loss, ms, tokens/s, MFU, HFU, peak bytes), for machines to read.
#pragma once
#include <cstdint>
#include <optional>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/record/train_record.h"

namespace gpuledger::report {

struct StepFigureInputs {
  int64_t tokens_per_step = 0;
  double model_flops_per_step = 0;         // the job's
  double hardware_flops_per_step = 0;      // the job's executed FLOPs
  std::optional<double> peak_total_flops;  // every device's peak together
  int64_t warmup = 0;
};

// One entry per step that every reported rank completed: {"step", "warmup",
// "loss" (rank 0's: the step all-reduces it), "ms" (the slowest rank's),
// "tokens_per_s", "mfu", "hfu" (null without a peak), "peak_bytes" (the
// largest rank's running peak after the step)}.
nlohmann::json train_steps_json(const std::vector<bench::RankRun>& runs, const StepFigureInputs& in);

}  // namespace gpuledger::report
