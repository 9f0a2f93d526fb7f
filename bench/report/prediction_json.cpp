// The predicted step → JSON (see prediction_json.h).
#include "bench/report/prediction_json.h"

#include <string>

namespace gpuledger::report {

using nlohmann::json;

namespace {

constexpr double kMsPerSecond = 1e3;

json rank_json(const run::PredictedRank& r) {
  json exposed = json::object();
  double exposed_total = 0;
  for (const auto& [stream, s] : r.exposed_comm_seconds) {
    exposed[stream_group(stream)] = s * kMsPerSecond;
    exposed_total += s;
  }
  return {{"rank", r.rank},
          {"role", r.role},
          {"step_ms", r.step_seconds * kMsPerSecond},
          {"compute_ms", r.compute_seconds * kMsPerSecond},
          {"exposed_comm_ms", exposed},
          {"exposed_comm_total_ms", exposed_total * kMsPerSecond},
          {"bubble_ms", r.wait_seconds * kMsPerSecond},
          {"tail_ms", r.tail_seconds * kMsPerSecond},
          {"ops", r.ops},
          {"collectives", r.collectives},
          {"flops", r.flops}};
}

}  // namespace

std::string stream_group(const std::string& stream) {
  const std::string prefix = "comm ";
  return stream.rfind(prefix, 0) == 0 ? stream.substr(prefix.size()) : stream;
}

json prediction_json(const run::StepPrediction& p) {
  json ranks = json::array();
  for (const auto& r : p.ranks) ranks.push_back(rank_json(r));
  return {{"device_profile", {{"name", p.device_profile}, {"provenance", p.device_provenance}}},
          {"network_profile", {{"name", p.network_profile}, {"provenance", p.network_provenance}}},
          {"tp_comm_overlap", p.tp_comm_overlap},
          {"contiguous_grad_buffer", p.contiguous_grad_buffer},
          {"step_ms", p.step_seconds * kMsPerSecond},
          {"critical_rank", p.critical_rank},
          {"tokens_per_step", p.tokens_per_step},
          {"tokens_per_s", p.tokens_per_s},
          {"model_flops_per_step", p.model_flops_per_step},
          {"hardware_flops_per_step", p.hardware_flops_per_step},
          {"peak_flops_per_device", p.peak_flops_per_device},
          {"devices", p.devices},
          {"mfu", p.mfu},
          {"hfu", p.hfu},
          {"bubble_formula_fraction", p.bubble_formula_fraction},
          {"ranks", ranks},
          {"note",
           "one rank per pipeline stage recorded on the meta backend, every op and collective priced with the "
           "profiles and laid on per-stream clocks (docs/perf-model.md); bubble_ms is the time a stage waited "
           "for its neighbours, beside the formula (p−1)/(v·m+p−1) of the step"}};
}

json predicted_summary_json(const run::StepPrediction& p) {
  return {
      {"step_ms", p.step_seconds * kMsPerSecond}, {"tokens_per_s", p.tokens_per_s},      {"mfu", p.mfu}, {"hfu", p.hfu},
      {"device_profile", p.device_profile},       {"network_profile", p.network_profile}};
}

}  // namespace gpuledger::report
