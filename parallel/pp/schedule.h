// Pipeline schedule tables: the ordered forward/backward operations one
// pipeline stage runs in a step, as pure data (the idea of Megatron-LM's
// get_schedule_table: the executor walks a table instead of hard-coding a
// loop). GPipe (Huang et al. 2019): all m forwards, then all m backwards.
// 1F1B (PipeDream-Flush, Narayanan et al. 2021 §2.2; Megatron's
// forward_backward_pipelining_without_interleaving): min(pp − stage − 1, m)
// warm-up forwards, then one-forward-one-backward pairs, then the cool-down
// backwards. The analytic closed form of the in-flight count lives apart, in
// analytic/pipeline.h; tests compare the two.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/run_config.h"

namespace gpuledger {

enum class PipeOp { kForward, kBackward };

struct ScheduleStep {
  PipeOp op = PipeOp::kForward;
  int64_t microbatch = 0;  // index within the step, 0 … m − 1
  bool operator==(const ScheduleStep&) const = default;
};

// The table of stage `stage` of `pp` for m microbatches. Every microbatch
// appears once as a forward and once, later, as a backward; backwards run in
// microbatch order. Throws std::invalid_argument for pp < 1, stage outside
// [0, pp) or m < 1.
std::vector<ScheduleStep> make_schedule(Schedule kind, int64_t pp, int64_t stage, int64_t m);

// The most microbatches whose forward has run and whose backward has not, at
// any point of the table (counting the one being run): what the stage's
// activation memory holds at its peak.
int64_t max_in_flight(const std::vector<ScheduleStep>& table);

// "F0 F1 B0 B1" — for messages and tests.
std::string schedule_to_string(const std::vector<ScheduleStep>& table);

}  // namespace gpuledger
