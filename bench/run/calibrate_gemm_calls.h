// The GEMMs of given runs, measured call by call (`gpuledger calibrate --for`):
// each run takes one training step per pipeline stage on the meta backend
// (bench/run/predict_step.h run_meta_step, the step code a prediction
// records), every distinct GEMM call it issues is collected — shape, batch,
// transposes, C's dtype, accumulate — and each is timed on the CPU backend's
// Device::gemm with operands laid out as the call reads them. A prediction then
// prices those calls by their own times (perf/op_time.h op_seconds) instead of
// the grid, which interpolates between shapes a factor of 4 apart and holds one
// layout (A·Bᵀ): a layer's dgrad (A·B), wgrad (Aᵀ·B), the attention's batched
// per-head products and a dimension that splits badly across threads each run
// at their own rate (docs/perf-model.md).
#pragma once
#include <ostream>
#include <set>
#include <utility>
#include <vector>

#include "core/resolved_config.h"
#include "kernels/device.h"
#include "perf/device_profile.h"

namespace gpuledger::bench {

using DTypedCall = std::pair<DType, perf::GemmCall>;  // (operand dtype, call)

// Every GEMM of one step of each of c's pipeline stages, in the order made.
std::vector<DTypedCall> run_gemm_calls(const ResolvedConfig& c);

// The median seconds of `call` with `ab` operands on `dev` over `reps` after
// `warmup`, alone, the caches evicted before each (bench/peak.h time_median_cold).
double measure_gemm_call(Device& dev, DType ab, const perf::GemmCall& call, int warmup, int reps);

// A run whose calls' operands together pass this is measured call by call.
inline constexpr int64_t kSequenceMaxBytes = int64_t{1} << 30;

// Measures every GEMM call of `runs` whose operand dtype `p` has figures into
// that dtype's gemm_points (calls of other dtypes are named on `progress` and
// skipped): each run's calls replayed in the step's order, each with operands
// of its own, every call timed where it stands; a call's figure is the median
// of its samples over its occurrences and passes.
void calibrate_gemm_calls(perf::DeviceProfile& p, const std::vector<ResolvedConfig>& runs, int warmup, int reps,
                          std::ostream& progress);

}  // namespace gpuledger::bench
