// The predicted step of a layout (bench/run/predict_step.h): what the step
// simulator (perf/sim/timeline.h) gives for one rank per pipeline stage when
// their programs, recorded from a meta run, are priced with a device and a
// network profile — typed here, written into the report by
// bench/report/prediction_json.h and printed by prediction_table.h.
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/trace.h"
#include "perf/device_profile.h"
#include "perf/network_profile.h"

namespace gpuledger::run {

// The profiles a step is priced with (bench/run/predict_step.h resolve_perf_profiles).
struct PerfProfiles {
  perf::DeviceProfile device;
  perf::NetworkProfile network;
};

struct PredictedRank {
  int64_t rank = 0;
  std::string role;
  double step_seconds = 0;
  double compute_seconds = 0;                          // ops on the compute stream
  std::map<std::string, double> exposed_comm_seconds;  // per stream ("comm tp", …): not hidden by compute
  double wait_seconds = 0;                             // for other ranks: the bubble on a pipeline stage
  double tail_seconds = 0;                             // compute idle while a comm stream finishes
  int64_t ops = 0;                                     // ops the rank ran in the step
  int64_t collectives = 0;                             // communication events in its program (calls, starts, waits)
  int64_t flops = 0;                                   // FLOPs of its recorded ops (= the executed count)
  std::vector<TraceSlice> slices;                      // the simulated timeline (kept for --trace)
};

struct StepPrediction {
  std::string device_profile, device_provenance;  // the profiles' names and provenance kinds
  std::string network_profile, network_provenance;
  bool tp_comm_overlap = false;         // TP collectives overlapped with their GEMMs (--tp-comm-overlap)
  bool contiguous_grad_buffer = false;  // DP buckets reduced in place (--contiguous-grad-buffer)
  std::vector<PredictedRank> ranks;     // one per pipeline stage, in stage order
  double step_seconds = 0;              // the slowest rank's
  int64_t critical_rank = 0;            // which rank that is
  int64_t tokens_per_step = 0;
  double tokens_per_s = 0;
  double peak_flops_per_device = 0;  // the device profile's peak for the run's dtype
  int64_t devices = 1;               // the world
  // The job's (analytic/flops.h), in double: a large job's step passes int64 (a 462B model on
  // 6,144 ranks: 3.6e19 FLOPs).
  double model_flops_per_step = 0, hardware_flops_per_step = 0;
  double mfu = 0, hfu = 0;  // the job's FLOPs over step · peak · devices
  // The schedule formula beside the simulated bubble: (p − 1)/(v·m + p − 1).
  double bubble_formula_fraction = 0;
  double simulate_seconds = 0;  // wall time this prediction took (recording + simulation)
};

}  // namespace gpuledger::run
