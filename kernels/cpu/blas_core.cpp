// The BLAS core check (kernels/cpu/blas_core.h).
#include "kernels/cpu/blas_core.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <utility>

#if GPULEDGER_HAVE_BLAS
extern "C" char* openblas_get_corename(void);
#endif

namespace gpuledger {

std::string_view isa_level_name(IsaLevel l) {
  switch (l) {
    case IsaLevel::kSse: return "sse";
    case IsaLevel::kAvx: return "avx";
    case IsaLevel::kAvx2: return "avx2";
    case IsaLevel::kAvx512: return "avx512";
    case IsaLevel::kUnknown: break;
  }
  return "unknown";
}

IsaLevel cpu_isa_level() {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
      __builtin_cpu_supports("avx512dq"))
    return IsaLevel::kAvx512;
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return IsaLevel::kAvx2;
  if (__builtin_cpu_supports("avx")) return IsaLevel::kAvx;
  return IsaLevel::kSse;
#else
  return IsaLevel::kUnknown;
#endif
}

IsaLevel blas_core_isa_level(std::string_view corename) {
  // OpenBLAS 0.3.21's x86-64 cores (driver/others/dynamic.c corename[]), by the
  // widest SIMD their GEMM kernels use (kernel/x86_64/KERNEL.<CORE>): the
  // Bulldozer line runs AVX (with FMA4/FMA3) kernels, Haswell and Zen AVX2+FMA,
  // SkylakeX and later AVX-512.
  static constexpr std::array<std::pair<std::string_view, IsaLevel>, 26> kCores = {{
      {"katmai", IsaLevel::kSse},        {"coppermine", IsaLevel::kSse},
      {"northwood", IsaLevel::kSse},     {"prescott", IsaLevel::kSse},
      {"banias", IsaLevel::kSse},        {"atom", IsaLevel::kSse},
      {"core2", IsaLevel::kSse},         {"penryn", IsaLevel::kSse},
      {"dunnington", IsaLevel::kSse},    {"nehalem", IsaLevel::kSse},
      {"athlon", IsaLevel::kSse},        {"opteron", IsaLevel::kSse},
      {"opteron_sse3", IsaLevel::kSse},  {"barcelona", IsaLevel::kSse},
      {"nano", IsaLevel::kSse},          {"bobcat", IsaLevel::kSse},
      {"sandybridge", IsaLevel::kAvx},   {"bulldozer", IsaLevel::kAvx},
      {"piledriver", IsaLevel::kAvx},    {"steamroller", IsaLevel::kAvx},
      {"excavator", IsaLevel::kAvx},     {"haswell", IsaLevel::kAvx2},
      {"zen", IsaLevel::kAvx2},          {"skylakex", IsaLevel::kAvx512},
      {"cooperlake", IsaLevel::kAvx512}, {"sapphirerapids", IsaLevel::kAvx512},
  }};
  std::string lower(corename);
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
  for (const auto& [name, level] : kCores)
    if (lower == name) return level;
  return IsaLevel::kUnknown;
}

std::optional<std::string> coretype_for(IsaLevel cpu) {
  switch (cpu) {
    case IsaLevel::kAvx512: return "SkylakeX";
    case IsaLevel::kAvx2: return "Haswell";
    case IsaLevel::kAvx: return "Sandybridge";
    default: return std::nullopt;
  }
}

std::string BlasCoreCheck::describe() const {
  std::string s = "OpenBLAS core " + corename + " (" + std::string(isa_level_name(blas)) + " kernels) on an " +
                  std::string(isa_level_name(cpu)) + " CPU";
  if (suggested) s += ": OPENBLAS_CORETYPE=" + *suggested + " runs kernels as wide as the CPU";
  return s;
}

BlasCoreCheck check_blas_core(std::string_view corename, IsaLevel cpu) {
  BlasCoreCheck c;
  c.corename = std::string(corename);
  c.cpu = cpu;
  c.blas = blas_core_isa_level(corename);
  // Only a core known to be narrower than the CPU: an unknown name (a newer
  // library's core) or an unknown CPU says nothing.
  if (c.blas != IsaLevel::kUnknown && c.cpu != IsaLevel::kUnknown && c.blas < c.cpu) c.suggested = coretype_for(cpu);
  return c;
}

std::string blas_corename() {
#if GPULEDGER_HAVE_BLAS
  std::string name = openblas_get_corename();
  const auto b = name.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return "";
  return name.substr(b, name.find_last_not_of(" \t\r\n") - b + 1);
#else
  return "built-in";
#endif
}

BlasCoreCheck check_this_blas_core() { return check_blas_core(blas_corename(), cpu_isa_level()); }

BlasCoreAction decide_blas_core_action(const BlasCoreCheck& check, const char* openblas_coretype_env,
                                       const char* gpuledger_blas_coretype_env, const char* reexec_marker_env) {
  BlasCoreAction a;
  if (!check.narrower()) return a;
  const bool user_set = openblas_coretype_env != nullptr && *openblas_coretype_env != '\0';
  const bool keep = gpuledger_blas_coretype_env != nullptr && std::string_view(gpuledger_blas_coretype_env) == "keep";
  const bool reexeced = reexec_marker_env != nullptr && *reexec_marker_env != '\0';
  if (!user_set && !keep && !reexeced) {
    a.reexec_with = check.suggested;
    return a;
  }
  a.warning = "warning: " + check.describe() +
              (user_set ? std::string(" (OPENBLAS_CORETYPE=") + openblas_coretype_env + " is set: kept)"
               : keep   ? " (GPULEDGER_BLAS_CORETYPE=keep: kept)"
                        : " (re-executing with it did not change the core: kept)");
  return a;
}

}  // namespace gpuledger
