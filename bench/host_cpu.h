// What the host CPU is, read from the files Linux keeps about it: the
// last-level cache (sysfs), the memory available (/proc/meminfo), and the
// hardware fp32 peak — CPUs × FLOPs per cycle per core × clock. The FLOPs per
// cycle are measured (bench/fma_throughput.h) when a measurement is given, and
// a micro-architecture table (fp32 lanes per FMA × FMA units × 2, from
// /proc/cpuinfo's vendor, family, model and flags) is the cross-check beside
// it, or the figure when nothing was measured; the clock comes from
// /proc/cpuinfo or sysfs cpufreq's maximum. Every reader takes its path, so a
// test can hand it a file of its own, and the measurement is a parameter.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "bench/fma_throughput.h"

namespace gpuledger::bench {

// `s` without its leading and trailing white space.
std::string trim_space(std::string_view s);

// The value of the first "key : value" line of `text` whose key is `key`, both
// trimmed (/proc/cpuinfo, /proc/driver/nvidia/gpus/*/information); "" when none.
std::string key_value_field(const std::string& text, std::string_view key);

// "32768K" → 33554432, "1M" → 1048576, "512" → 512 (sysfs cache sizes); -1 when unreadable.
int64_t parse_cache_size_bytes(std::string_view text);

// The largest cache of the highest level listed under `cache_dir`
// (index*/level, index*/size; instruction caches left out); 0 when none is listed.
int64_t last_level_cache_bytes(const std::string& cache_dir = "/sys/devices/system/cpu/cpu0/cache");

// MemAvailable of /proc/meminfo in bytes; 0 when absent.
int64_t mem_available_bytes(const std::string& meminfo_path = "/proc/meminfo");

// The CPUs this process may run on (its affinity mask; at least 1).
int affinity_cpus();

// The same mask as "host:id,id,…" (CPU ids ascending), one record per process
// of a job, for cpus_per_host.
std::string affinity_record(const std::string& host);

// Per host, in order of first appearance: how many distinct CPUs the job's
// processes on that host may run on (the union of their masks; ranks bound to
// one core each count their cores once, unbound ranks the node's CPUs once).
// Throws std::invalid_argument on a record that is not "host:ids".
std::vector<int> cpus_per_host(const std::vector<std::string>& records);

// Table and measurement disagreeing by more than this fraction is said
// wherever the hardware peak is reported.
inline constexpr double kFmaTableTolerance = 0.10;

struct CpuHardwarePeak {
  int cpus = 0;
  // ---- the table (the cross-check) ----
  int fp32_lanes = 0;  // per vector FMA: 16 (AVX-512F), 8 (AVX2 + FMA, or AVX), 4 (SSE)
  int fma_units = 0;   // vector FMA units per core (or mul + add pipes without FMA)
  bool fma = false;
  std::string units_source;          // why that many units (the rule below that applied)
  double table_flops_per_cycle = 0;  // per core: fp32_lanes × fma_units × 2
  // ---- the measurement ----
  std::vector<MeasuredFma> measured;    // per width, on one core; empty: not measured
  double measured_flops_per_cycle = 0;  // per core: the best width's; 0: not measured
  // What the peak takes: the measurement when there is one, else the table.
  double flops_per_cycle = 0;
  // "" when they agree within kFmaTableTolerance (or nothing was measured);
  // else one line naming both figures.
  std::string cross_check;
  // AVX512_BF16 (vdpbf16ps: two bf16 products per fp32 lane per instruction):
  // a bf16 GEMM's peak is twice the fp32 one. Without it bf16 is widened and
  // multiplied in fp32, whose peak is then the bf16 one too.
  bool bf16_dot = false;
  double hz = 0;
  std::string isa;               // "avx512f", "avx2+fma", "avx", "sse"
  std::string frequency_source;  // which file and field the clock came from
  double flops_per_s = 0;        // cpus × flops_per_cycle × hz
  double bf16_flops_per_s = 0;   // flops_per_s, × 2 with bf16_dot
  std::string describe() const;  // one line: the product and its sources (fp32)
  std::string describe_bf16() const;
};

// The clock this thread's core runs at, measured: a chain of dependent integer
// adds of a register (one cycle each on every x86-64 core since the P6; not
// of an immediate, which newer cores fold in the renamer) over thread CPU time,
// the best of a few short runs; 0 on other architectures. What a VM's
// /proc/cpuinfo lacks: its "cpu MHz" is the base clock, and the cores boost
// above it (the 2-vCPU EPYC of results/ reads 2.445 GHz and runs an sgemm
// faster than that clock allows).
double measure_core_clock_hz();

// The peak from /proc/cpuinfo (the first processor's "flags" and "cpu MHz"),
// sysfs cpufreq's cpuinfo_max_freq (kHz), a measured clock and the measured
// FMA throughput. The clock, in order: cpuinfo_max_freq when the file exists
// (the highest clock the cores are rated to hold); else the larger of
// `measured_hz` (measure_core_clock_hz; 0: not measured) and "cpu MHz" (the
// clock at the moment of reading, or a VM's base clock). FLOPs per cycle:
// `measured_fma`'s best width (measure_fma_throughput; empty: the table's).
// The table's FMA units: 2 per core, the count on every x86 core with AVX2
// and FMA since Intel Haswell and AMD Zen 2 (Intel's optimization manual §2;
// AMD's Zen 2/3 software optimization guides); an AVX-512 part with one FMA
// unit reaches half of the figure, which only the measurement sees. AMD
// family 23 (0x17) below model 0x30 is Zen or Zen+, whose two FMA pipes are
// 128 bits wide and run a 256-bit FMA as two halves (AMD's Software
// Optimization Guide for AMD Family 17h Processors, the FPU): 1 unit of 8
// lanes, 16 FLOPs a cycle. AMD family 25 (0x19) with AVX-512 is Zen 4, which
// runs a 512-bit FMA over its two 256-bit pipes (AMD's Zen 4 software
// optimization guide): 1 unit of 16 lanes, the same 32 FLOPs a cycle as its
// AVX2. Without FMA, one multiply and one add pipe. Throws
// std::runtime_error when no clock is found.
CpuHardwarePeak cpu_hardware_peak(
    int cpus, const std::string& cpuinfo_path = "/proc/cpuinfo",
    const std::string& cpufreq_max_path = "/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq",
    double measured_hz = 0, const std::vector<MeasuredFma>& measured_fma = {});

}  // namespace gpuledger::bench
