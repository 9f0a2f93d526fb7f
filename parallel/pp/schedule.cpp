// Schedule tables (see schedule.h): GPipe and 1F1B for one pipeline stage.
#include "parallel/pp/schedule.h"

#include <algorithm>
#include <stdexcept>

namespace gpuledger {

std::vector<ScheduleStep> make_schedule(Schedule kind, int64_t pp, int64_t stage, int64_t m) {
  if (pp < 1 || stage < 0 || stage >= pp || m < 1)
    throw std::invalid_argument("make_schedule: need pp >= 1, 0 <= stage < pp, m >= 1; got pp " + std::to_string(pp) +
                                ", stage " + std::to_string(stage) + ", m " + std::to_string(m));
  std::vector<ScheduleStep> t;
  t.reserve(static_cast<size_t>(2 * m));
  if (kind == Schedule::kGPipe) {
    for (int64_t i = 0; i < m; ++i) t.push_back({PipeOp::kForward, i});
    for (int64_t i = 0; i < m; ++i) t.push_back({PipeOp::kBackward, i});
    return t;
  }
  // 1F1B: stage i starts pp − i − 1 forwards ahead, so that its first
  // backward arrives from the last stage just as its warm-up ends (Megatron's
  // num_warmup_microbatches = pipeline size − rank − 1, capped at m).
  const int64_t warmup = std::min(pp - stage - 1, m);
  int64_t next_f = 0, next_b = 0;
  for (; next_f < warmup; ++next_f) t.push_back({PipeOp::kForward, next_f});
  while (next_f < m) {  // steady state: one forward, one backward
    t.push_back({PipeOp::kForward, next_f++});
    t.push_back({PipeOp::kBackward, next_b++});
  }
  for (; next_b < m; ++next_b) t.push_back({PipeOp::kBackward, next_b});  // cool-down
  return t;
}

int64_t max_in_flight(const std::vector<ScheduleStep>& table) {
  int64_t live = 0, peak = 0;
  for (const auto& s : table) {
    live += s.op == PipeOp::kForward ? 1 : -1;
    peak = std::max(peak, live);
  }
  return peak;
}

std::string schedule_to_string(const std::vector<ScheduleStep>& table) {
  std::string out;
  for (const auto& s : table) {
    if (!out.empty()) out += ' ';
    out += (s.op == PipeOp::kForward ? 'F' : 'B') + std::to_string(s.microbatch);
  }
  return out;
}

}  // namespace gpuledger
