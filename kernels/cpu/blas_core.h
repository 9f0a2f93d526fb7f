// Whether the BLAS runs kernels as wide as the CPU allows.
//
// OpenBLAS built with DYNAMIC_ARCH (Debian's) picks a kernel family ("core")
// for the CPU it finds when it loads. A CPU newer than the library — e.g.
// OpenBLAS 0.3.21 on a Xeon of a model it does not list — falls back to its
// SSE3 "Prescott" kernels: GEMMs 5-10× slower than the AVX-512 ones the CPU
// runs, every CPU peak and MFU then taken against a crippled BLAS, and nothing
// said. The library reads OPENBLAS_CORETYPE only when it loads, so the fix is
// a fresh process with it set: the binary re-executes itself first thing
// (bench/cli/main.cpp), before MPI or any thread starts.
//
// The ISA levels compared: what the CPU offers (GCC's __builtin_cpu_supports,
// which also checks that the OS saves the wider registers) against the widest
// SIMD the named core's kernels use (OpenBLAS 0.3.21 driver/others/dynamic.c,
// its corename[] list; kernel/x86_64/KERNEL.<CORE>).
#pragma once
#include <optional>
#include <string>
#include <string_view>

namespace gpuledger {

enum class IsaLevel : int { kUnknown = 0, kSse, kAvx, kAvx2, kAvx512 };
std::string_view isa_level_name(IsaLevel l);  // "unknown" | "sse" | "avx" | "avx2" | "avx512"

// The CPU's: AVX-512 (F, BW, VL, DQ), AVX2 with FMA, AVX, else SSE (x86-64); unknown elsewhere.
IsaLevel cpu_isa_level();
// The widest SIMD of an OpenBLAS core's kernels (case-insensitive name); unknown for a name not listed.
IsaLevel blas_core_isa_level(std::string_view corename);
// The OPENBLAS_CORETYPE whose kernels match a CPU of level `cpu`: SkylakeX, Haswell, Sandybridge; none below AVX.
std::optional<std::string> coretype_for(IsaLevel cpu);

struct BlasCoreCheck {
  std::string corename;  // the BLAS's ("built-in" without OpenBLAS)
  IsaLevel blas = IsaLevel::kUnknown, cpu = IsaLevel::kUnknown;
  std::optional<std::string> suggested;  // OPENBLAS_CORETYPE to use when the BLAS is narrower
  bool narrower() const { return suggested.has_value(); }
  std::string describe() const;  // e.g. "OpenBLAS core Prescott (sse kernels) on an avx512 CPU"
};
// corename and cpu level in, the verdict out (no process state: tested directly).
BlasCoreCheck check_blas_core(std::string_view corename, IsaLevel cpu);
// This process's BLAS core: OpenBLAS's openblas_get_corename(), trimmed ("built-in" without OpenBLAS).
std::string blas_corename();
// This process's: blas_corename() against cpu_isa_level().
BlasCoreCheck check_this_blas_core();

// What main() does about it, from the check and the environment: re-execute
// with OPENBLAS_CORETYPE=<suggested> when the BLAS is narrower, the variable is
// unset and GPULEDGER_BLAS_CORETYPE is not "keep" (and this is not already the
// re-executed process: GPULEDGER_BLAS_REEXEC set); otherwise, when narrower,
// warn. Returns the coretype to re-execute with, or none.
struct BlasCoreAction {
  std::optional<std::string> reexec_with;
  std::string warning;  // empty: nothing to say
};
BlasCoreAction decide_blas_core_action(const BlasCoreCheck& check, const char* openblas_coretype_env,
                                       const char* gpuledger_blas_coretype_env, const char* reexec_marker_env);

}  // namespace gpuledger
