// The instruction-set paths of the cpu backend's hand-vectorized kernels (the
// skinny GEMM, cached attention): chosen at run time, never by building with
// -march=native, so one binary runs on every x86-64 and takes the wider
// path where the CPU has it.
#pragma once

namespace gpuledger {

// kAvx2: AVX2 + FMA + F16C (Haswell, Zen and later); kPortable: anything.
enum class CpuIsa { kPortable, kAvx2 };

// Whether this CPU runs `isa` (checked with __builtin_cpu_supports).
bool cpu_supports(CpuIsa isa);
// The widest path this CPU runs (checked once).
CpuIsa cpu_best_isa();
const char* cpu_isa_name(CpuIsa isa);  // "avx2+fma+f16c" or "portable"

}  // namespace gpuledger

// GPL_CPU_HAVE_AVX2_PATH: this compiler builds the kAvx2 path (GCC on x86-64:
// `#pragma GCC target` and the intrinsics of <immintrin.h>).
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define GPL_CPU_HAVE_AVX2_PATH 1
#endif
