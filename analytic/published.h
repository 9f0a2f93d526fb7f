// A published figure beside an exact one: a name, bytes (or FLOPs), and the
// citation. Shared by every analytic file.
#pragma once
#include <cstdint>
#include <string>

namespace gpuledger::analytic {

struct Published {
  std::string name;    // "zero1", "megatron_distributed_optimizer", "korthikanti_tp_sp", ...
  double value = 0;    // bytes or FLOPs (double: published formulas have fractions)
  std::string source;  // "Rajbhandari et al. 2020, §5.1", ...
};

}  // namespace gpuledger::analytic
