// The hardware peak's FLOPs per cycle as a report records them, beside
// summary.hardware_peak_flops (whose meaning is unchanged): each width's
// measured FMA throughput on one core (bench/fma_throughput.h), the
// micro-architecture table's figure, which of the two the peak took, and
// their cross-check. Written by peak, train and infer (docs/report.md).
#pragma once
#include <nlohmann/json.hpp>

#include "bench/host_cpu.h"

namespace gpuledger::report {

nlohmann::json hardware_fma_json(const bench::CpuHardwarePeak& p);

}  // namespace gpuledger::report
