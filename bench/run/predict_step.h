// The predicted step time, MFU and breakdown of a layout, on a device and a
// network profile (docs/perf-model.md "Predicting a step"):
//   1. one rank per pipeline stage (dp = tp = cp = 0) runs one training step
//      on the meta backend with its simulated comms, and every op and
//      communication call it issues is priced as it is reported
//      (perf/sim/program_recorder.h) — the real step code, so the program is
//      what the layout runs: its schedule, its buckets, its gathers;
//   2. the programs are laid on per-stream clocks together
//      (perf/sim/timeline.h simulate_step): the pipeline's sends meet their
//      recvs, collectives wait for their members, started collectives hide
//      behind compute where the code overlaps them. The other ranks of a
//      stage run the same program (the layout's rank roles), so these stand
//      for the world.
// The step is the slowest stage's; MFU and HFU are the job's model and
// executed FLOPs (analytic/flops.h) over step · peak · world.
#pragma once
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "bench/record/step_prediction.h"
#include "core/device_spec.h"
#include "core/resolved_config.h"
#include "core/step_program.h"

namespace gpuledger::run {

// The profiles a prediction uses: `device_arg` and `network_arg` (a published
// name, perf/published_profiles.h, or a profile file), or, when `device_arg`
// is empty, the published profiles named like the --device preset. nullopt
// when neither names one. A device profile given without a network profile
// takes the published network of the same name, else none: a layout of one
// rank needs none; a larger one throws std::invalid_argument asking for
// --network-profile. A name neither published nor a path throws
// std::invalid_argument listing the published ones; a file that cannot be
// read or is not a valid profile throws ConfigError naming it.
std::optional<PerfProfiles> resolve_perf_profiles(const std::string& device_arg, const std::string& network_arg,
                                                  const std::optional<DeviceSpec>& device, int64_t world);

// Throws what the training step throws for a layout the model refuses
// (LayoutError, ConfigError) and std::invalid_argument for a dtype the device
// profile has no figures for. `keep_slices`: keep each rank's simulated
// timeline (for --trace).
// One training step of world rank `rank` of c's layout on the meta backend,
// with `sink` attached to its device and its simulated communicators;
// `recording(true)` just before the step and `recording(false)` after it
// (building the model issues ops that are not the step's).
void run_meta_step(const ResolvedConfig& c, int64_t rank, StepProgramSink& sink,
                   const std::function<void(bool)>& recording);
// The world ranks a prediction simulates: one per pipeline stage, at dp = tp = cp = 0.
std::vector<int64_t> pipeline_stage_ranks(const Layout& l);

StepPrediction predict_step(const ResolvedConfig& c, const PerfProfiles& profiles, bool keep_slices = false);

}  // namespace gpuledger::run
