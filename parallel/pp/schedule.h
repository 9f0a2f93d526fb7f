// Pipeline schedule tables: the ordered forward/backward operations one
// pipeline stage runs in a step, as pure data (the idea of Megatron-LM's
// get_schedule_table: the executor walks a table instead of hard-coding a
// loop). GPipe (Huang et al. 2019): all m forwards, then all m backwards.
// 1F1B (PipeDream-Flush, Narayanan et al. 2021 §2.2; Megatron's
// forward_backward_pipelining_without_interleaving): min(pp − stage − 1, m)
// warm-up forwards, then one-forward-one-backward pairs, then the cool-down
// backwards. Interleaved 1F1B (Narayanan et al. 2021 §2.2.2; Megatron's
// forward_backward_pipelining_with_interleaving): each rank holds vpp model
// chunks and runs every microbatch once per chunk, see make_schedule. The
// analytic closed form of the in-flight count lives apart, in
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
  int64_t chunk = 0;       // model chunk of the rank, 0 … vpp − 1 (virtual stage chunk·pp + stage)
  bool operator==(const ScheduleStep&) const = default;
};

// The table of stage `stage` of `pp` for m microbatches and vpp model chunks.
// Every (microbatch, chunk) appears once as a forward and once, later, as a
// backward. vpp = 1: backwards run in microbatch order. vpp > 1 (1F1B only,
// pp > 1, m a multiple of pp): Megatron's interleaved order, see
// schedule.cpp. Throws std::invalid_argument for pp < 1, stage outside
// [0, pp), m < 1, vpp < 1, or vpp > 1 with GPipe, pp = 1 or m % pp != 0.
std::vector<ScheduleStep> make_schedule(Schedule kind, int64_t pp, int64_t stage, int64_t m, int64_t vpp = 1);

// The most (microbatch, chunk) pairs whose forward has run and whose backward
// has not, at any point of the table (counting the one being run): what the
// stage's activation memory holds at its peak, in chunks' worth.
int64_t max_in_flight(const std::vector<ScheduleStep>& table);

// The same for the pairs of one chunk only.
int64_t max_in_flight_of_chunk(const std::vector<ScheduleStep>& table, int64_t chunk);

// "F0 F1 B0 B1" — for messages and tests; with chunks > 0 in the table every
// step names its chunk: "F0.0 F1.0 F0.1".
std::string schedule_to_string(const std::vector<ScheduleStep>& table);

}  // namespace gpuledger
