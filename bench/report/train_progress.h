// What `gpuledger train` prints while it runs: a header (the configuration,
// the backend, the peak) and one line per step (loss, time, tokens/s, MFU,
// HFU, peak bytes).
#pragma once
#include <cstdint>
#include <optional>
#include <ostream>
#include <string>

#include "core/resolved_config.h"

namespace gpuledger::report {

struct TrainHeader {
  std::string backend, device_description, mode;
  int64_t steps = 0, warmup = 0;
  std::optional<int64_t> memory_limit_bytes;
  std::optional<double> peak_flops;
  std::string peak_source;
};
void print_train_header(std::ostream& os, const ResolvedConfig& config, const TrainHeader& h);

// MFU: the job's model FLOPs; HFU: the job's hardware FLOPs, both over the step
// time and the job's peak (peak_total_flops: every device's).
struct TrainStepLine {
  int64_t step = 0;
  double loss = 0, seconds = 0;
  int64_t tokens_per_step = 0;
  double model_flops = 0, hardware_flops = 0;
  std::optional<double> peak_total_flops;
  int64_t peak_bytes = 0;
};
void print_train_step(std::ostream& os, const TrainStepLine& s);

}  // namespace gpuledger::report
