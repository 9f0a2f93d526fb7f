#include "kernels/cpu/cpu_isa.h"

namespace gpuledger {

bool cpu_supports(CpuIsa isa) {
  if (isa == CpuIsa::kPortable) return true;
#ifdef GPL_CPU_HAVE_AVX2_PATH
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
#else
  return false;
#endif
}

CpuIsa cpu_best_isa() {
  static const CpuIsa best = cpu_supports(CpuIsa::kAvx2) ? CpuIsa::kAvx2 : CpuIsa::kPortable;
  return best;
}

const char* cpu_isa_name(CpuIsa isa) { return isa == CpuIsa::kAvx2 ? "avx2+fma+f16c" : "portable"; }

}  // namespace gpuledger
