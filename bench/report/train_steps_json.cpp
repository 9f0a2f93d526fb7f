// Per-step figures of a train report (see train_steps_json.h).
#include "bench/report/train_steps_json.h"

#include <algorithm>

namespace gpuledger::report {

using nlohmann::json;

json train_steps_json(const std::vector<bench::RankRun>& runs, const StepFigureInputs& in) {
  json steps = json::array();
  if (runs.empty()) return steps;
  size_t n = runs.front().losses.size();
  for (const auto& r : runs) n = std::min({n, r.record.step_ms.size(), r.record.step_peak_bytes.size()});
  for (size_t i = 0; i < n; ++i) {
    double ms = 0;
    int64_t peak = 0;
    for (const auto& r : runs) {
      ms = std::max(ms, r.record.step_ms[i]);
      peak = std::max(peak, r.record.step_peak_bytes[i]);
    }
    const double s = ms / 1e3;
    const bool rated = in.peak_total_flops && *in.peak_total_flops > 0 && s > 0;
    steps.push_back({{"step", i},
                     {"warmup", static_cast<int64_t>(i) < in.warmup},
                     {"loss", runs.front().losses[i]},
                     {"ms", ms},
                     {"tokens_per_s", s > 0 ? json(in.tokens_per_step / s) : json(nullptr)},
                     {"mfu", rated ? json(in.model_flops_per_step / s / *in.peak_total_flops) : json(nullptr)},
                     {"hfu", rated ? json(in.hardware_flops_per_step / s / *in.peak_total_flops) : json(nullptr)},
                     {"peak_bytes", peak}});
  }
  return steps;
}

}  // namespace gpuledger::report
