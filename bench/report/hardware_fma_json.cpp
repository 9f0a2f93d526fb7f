// The hardware peak's FLOPs per cycle in a report (see hardware_fma_json.h).
#include "bench/report/hardware_fma_json.h"

namespace gpuledger::report {

using nlohmann::json;

json hardware_fma_json(const bench::CpuHardwarePeak& p) {
  json widths = json::array();
  for (const auto& m : p.measured)
    widths.push_back({{"isa", m.isa},
                      {"width_bits", m.width_bits},
                      {"fp32_lanes", m.fp32_lanes},
                      {"fused", m.fused},
                      {"fma_per_s", m.fma_per_s},
                      {"fma_per_cycle", m.fma_per_cycle},
                      {"flops_per_cycle", m.flops_per_cycle}});
  const bool measured = p.measured_flops_per_cycle > 0;
  return {{"flops_per_cycle_per_cpu", p.flops_per_cycle},
          {"from", measured ? "measured" : "table"},
          {"measured", widths},
          {"measured_flops_per_cycle", measured ? json(p.measured_flops_per_cycle) : json(nullptr)},
          {"table",
           {{"flops_per_cycle", p.table_flops_per_cycle},
            {"isa", p.isa},
            {"fp32_lanes", p.fp32_lanes},
            {"fma_units", p.fma_units},
            {"rule", p.units_source}}},
          {"tolerance", bench::kFmaTableTolerance},
          {"cross_check", p.cross_check.empty() ? json(nullptr) : json(p.cross_check)}};
}

}  // namespace gpuledger::report
