// Schedule tables (see schedule.h): GPipe, 1F1B and interleaved 1F1B for one
// pipeline stage.
#include "parallel/pp/schedule.h"

#include <algorithm>
#include <stdexcept>

namespace gpuledger {
namespace {

void check_arguments(Schedule kind, int64_t pp, int64_t stage, int64_t m, int64_t vpp) {
  if (pp < 1 || stage < 0 || stage >= pp || m < 1 || vpp < 1)
    throw std::invalid_argument("make_schedule: need pp >= 1, 0 <= stage < pp, m >= 1, vpp >= 1; got pp " +
                                std::to_string(pp) + ", stage " + std::to_string(stage) + ", m " + std::to_string(m) +
                                ", vpp " + std::to_string(vpp));
  if (vpp > 1 && (kind != Schedule::k1F1B || pp < 2 || m % pp != 0))
    throw std::invalid_argument("make_schedule: vpp " + std::to_string(vpp) +
                                " needs the 1f1b schedule, pp > 1 and m a multiple of pp; got pp " +
                                std::to_string(pp) + ", m " + std::to_string(m));
}

// Interleaved 1F1B, as Megatron-LM's forward_backward_pipelining_with_interleaving
// (megatron/core/pipeline_parallel/schedules.py at commit
// d98e8a64ddf34856e74b24714e3bedb2f5a39553). The forwards of the rank run in
// the order of get_schedule_table with microbatch_group_size_per_vp_stage = pp
// (its default, model_parallel_config.py __post_init__): groups of pp
// microbatches, each group through chunk 0, then chunk 1, … then chunk
// vpp − 1. Forward k of that order is (microbatch, chunk) = table[k]; backward k
// is (table[k].microbatch, vpp − 1 − table[k].chunk) (get_model_chunk_id with
// forward=False). Warm-up: get_pp_rank_microbatches' (pp − stage − 1)·2 +
// (vpp − 1)·pp forwards, capped at m·vpp; then pairs of forward k + warm-up
// and backward k; then the remaining backwards.
std::vector<ScheduleStep> interleaved(int64_t pp, int64_t stage, int64_t m, int64_t vpp) {
  std::vector<ScheduleStep> order;  // the forward order: (microbatch, chunk)
  order.reserve(static_cast<size_t>(m * vpp));
  for (int64_t group = 0; group < m; group += pp)
    for (int64_t c = 0; c < vpp; ++c)
      for (int64_t j = group; j < group + pp; ++j) order.push_back({PipeOp::kForward, j, c});
  const int64_t total = m * vpp;
  const int64_t warmup = std::min((pp - stage - 1) * 2 + (vpp - 1) * pp, total);
  auto forward = [&](int64_t k) { return order[static_cast<size_t>(k)]; };
  auto backward = [&](int64_t k) {
    const ScheduleStep& f = order[static_cast<size_t>(k)];
    return ScheduleStep{PipeOp::kBackward, f.microbatch, vpp - 1 - f.chunk};
  };
  std::vector<ScheduleStep> t;
  t.reserve(static_cast<size_t>(2 * total));
  for (int64_t k = 0; k < warmup; ++k) t.push_back(forward(k));
  for (int64_t k = 0; k + warmup < total; ++k) {  // steady state: one forward, one backward
    t.push_back(forward(k + warmup));
    t.push_back(backward(k));
  }
  for (int64_t k = total - warmup; k < total; ++k) t.push_back(backward(k));  // cool-down
  return t;
}

}  // namespace

std::vector<ScheduleStep> make_schedule(Schedule kind, int64_t pp, int64_t stage, int64_t m, int64_t vpp) {
  check_arguments(kind, pp, stage, m, vpp);
  if (vpp > 1) return interleaved(pp, stage, m, vpp);
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

int64_t max_in_flight_of_chunk(const std::vector<ScheduleStep>& table, int64_t chunk) {
  int64_t live = 0, peak = 0;
  for (const auto& s : table) {
    if (s.chunk != chunk) continue;
    live += s.op == PipeOp::kForward ? 1 : -1;
    peak = std::max(peak, live);
  }
  return peak;
}

std::string schedule_to_string(const std::vector<ScheduleStep>& table) {
  const bool chunks = std::any_of(table.begin(), table.end(), [](const ScheduleStep& s) { return s.chunk > 0; });
  std::string out;
  for (const auto& s : table) {
    if (!out.empty()) out += ' ';
    out += (s.op == PipeOp::kForward ? 'F' : 'B') + std::to_string(s.microbatch);
    if (chunks) out += '.' + std::to_string(s.chunk);
  }
  return out;
}

}  // namespace gpuledger
