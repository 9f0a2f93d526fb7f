// The host CPU readers on files of the test's own (bench/host_cpu.h): the
// hardware peak's exact product from a fake /proc/cpuinfo and cpufreq file,
// the last-level cache from a fake sysfs cache directory, MemAvailable; the
// read STREAM's sizing rule and its dot product against a double reference.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "bench/host_cpu.h"
#include "bench/peak.h"
#include "bench/stream_read.h"

namespace gpuledger::bench {
namespace {

namespace fs = std::filesystem;

fs::path scratch(const std::string& name) {
  const fs::path p = fs::temp_directory_path() / ("gpuledger_host_cpu_" + name);
  fs::remove_all(p);
  fs::create_directories(p);
  return p;
}

void write(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  std::ofstream(p) << text;
}

// Two processors as /proc/cpuinfo lists them; only the first is read.
std::string cpuinfo(const std::string& flags, const std::string& mhz) {
  std::string one = "processor\t: 0\nmodel name\t: AMD EPYC\ncpu MHz\t\t: " + mhz + "\nflags\t\t: " + flags + "\n\n";
  return one + "processor\t: 1\ncpu MHz\t\t: 1.000\nflags\t\t: fpu\n\n";
}

TEST(HostCpu, HardwarePeakFromCpuinfoClockAndAvx2) {
  const fs::path d = scratch("avx2");
  write(d / "cpuinfo", cpuinfo("fpu sse sse2 avx fma avx2 bmi2", "2445.424"));
  const CpuHardwarePeak p = cpu_hardware_peak(2, (d / "cpuinfo").string(), (d / "no_cpufreq").string());
  EXPECT_EQ(p.isa, "avx2+fma");
  EXPECT_EQ(p.fp32_lanes, 8);
  EXPECT_EQ(p.fma_units, 2);
  EXPECT_DOUBLE_EQ(p.hz, 2445.424e6);
  // 2 CPUs × 8 lanes × 2 FMA units × 2 FLOPs × 2.445424 GHz = 156.507136 GFLOP/s
  EXPECT_NEAR(p.flops_per_s, 156'507'136'000.0, 1e-3);
  EXPECT_NE(p.frequency_source.find("cpu MHz"), std::string::npos);
}

TEST(HostCpu, CpufreqMaximumIsPreferredAndAvx512DoublesTheLanes) {
  const fs::path d = scratch("avx512");
  write(d / "cpuinfo", cpuinfo("fpu sse avx fma avx2 avx512f avx512bw", "1200.000"));
  write(d / "cpuinfo_max_freq", "3500000\n");  // kHz
  const CpuHardwarePeak p = cpu_hardware_peak(4, (d / "cpuinfo").string(), (d / "cpuinfo_max_freq").string());
  EXPECT_EQ(p.isa, "avx512f");
  // 4 × 16 × 2 × 2 × 3.5 GHz = 896 GFLOP/s
  EXPECT_DOUBLE_EQ(p.flops_per_s, 896e9);
  EXPECT_EQ(p.frequency_source, (d / "cpuinfo_max_freq").string());
}

// A vendor and family line before the rest, as /proc/cpuinfo lists them.
std::string cpuinfo_of(const std::string& vendor, int family, const std::string& flags, const std::string& mhz) {
  return "vendor_id\t: " + vendor + "\ncpu family\t: " + std::to_string(family) + "\n" + cpuinfo(flags, mhz);
}

TEST(HostCpu, Zen4RunsA512BitFmaOverBothPipesAndBf16PairsDoubleIt) {
  const fs::path d = scratch("zen4");
  write(d / "cpuinfo", cpuinfo_of("AuthenticAMD", 25, "fpu avx fma avx2 avx512f avx512bw avx512_bf16", "2596.000"));
  const CpuHardwarePeak p = cpu_hardware_peak(2, (d / "cpuinfo").string(), (d / "none").string());
  EXPECT_EQ(p.isa, "avx512f");
  EXPECT_EQ(p.fp32_lanes, 16);
  EXPECT_EQ(p.fma_units, 1);
  EXPECT_NE(p.units_source.find("Zen 4"), std::string::npos);
  EXPECT_TRUE(p.bf16_dot);
  // 2 CPUs × 16 lanes × 1 unit × 2 FLOPs × 2.596 GHz = 166.144 GFLOP/s; bf16 pairs twice that
  EXPECT_NEAR(p.flops_per_s, 166.144e9, 1e-3);
  EXPECT_NEAR(p.bf16_flops_per_s, 332.288e9, 1e-3);
  EXPECT_NE(p.describe_bf16().find("2 × the fp32 peak"), std::string::npos);
  EXPECT_NE(p.describe_bf16().find("= 3.323e+11 FLOP/s"), std::string::npos) << p.describe_bf16();
}

TEST(HostCpu, TwoAvx512UnitsElsewhereAndBf16WidenedWithoutAvx512Bf16) {
  const fs::path d = scratch("intel_bf16");
  // Intel (family 6) with AVX512_BF16: two 512-bit FMA units, bf16 pairs twice the fp32 figure.
  write(d / "cpuinfo", cpuinfo_of("GenuineIntel", 6, "fpu avx fma avx2 avx512f avx512bw avx512_bf16", "2000.000"));
  CpuHardwarePeak p = cpu_hardware_peak(1, (d / "cpuinfo").string(), (d / "none").string());
  EXPECT_EQ(p.fma_units, 2);
  EXPECT_DOUBLE_EQ(p.flops_per_s, 128e9);  // 1 × 16 × 2 × 2 × 2 GHz
  EXPECT_DOUBLE_EQ(p.bf16_flops_per_s, 256e9);
  // AMD family 25 without AVX-512 (Zen 3): AVX2's two 256-bit FMA units; no bf16 pairs, bf16 at the fp32 figure.
  write(d / "cpuinfo", cpuinfo_of("AuthenticAMD", 25, "fpu avx fma avx2", "2000.000"));
  p = cpu_hardware_peak(1, (d / "cpuinfo").string(), (d / "none").string());
  EXPECT_EQ(p.fma_units, 2);
  EXPECT_FALSE(p.bf16_dot);
  EXPECT_DOUBLE_EQ(p.flops_per_s, 64e9);  // 1 × 8 × 2 × 2 × 2 GHz
  EXPECT_DOUBLE_EQ(p.bf16_flops_per_s, 64e9);
  EXPECT_NE(p.describe_bf16().find("widened"), std::string::npos);
}

TEST(HostCpu, NoFmaCountsAMultiplyAndAnAddPipe) {
  const fs::path d = scratch("sse");
  write(d / "cpuinfo", cpuinfo("fpu sse sse2", "2000.000"));
  const CpuHardwarePeak p = cpu_hardware_peak(1, (d / "cpuinfo").string(), (d / "none").string());
  EXPECT_EQ(p.isa, "sse");
  EXPECT_FALSE(p.fma);
  // 1 × 4 lanes × 1 × 2 × 2 GHz = 16 GFLOP/s
  EXPECT_DOUBLE_EQ(p.flops_per_s, 16e9);
}

TEST(HostCpu, AMeasuredClockAboveCpuinfoIsUsedButNeverAboveCpufreq) {
  const fs::path d = scratch("measured");
  write(d / "cpuinfo", cpuinfo("fpu sse sse2 avx fma avx2", "2445.424"));
  // No cpufreq (a VM): the measured 3.2 GHz, above cpuinfo's, is the clock.
  CpuHardwarePeak p = cpu_hardware_peak(2, (d / "cpuinfo").string(), (d / "none").string(), 3.2e9);
  EXPECT_DOUBLE_EQ(p.flops_per_s, 2 * 8 * 2 * 2 * 3.2e9);  // 204.8 GFLOP/s
  EXPECT_NE(p.frequency_source.find("measured by a chain of dependent adds"), std::string::npos) << p.frequency_source;
  EXPECT_NE(p.frequency_source.find("reads 2.445 GHz"), std::string::npos) << p.frequency_source;
  // Measured below cpuinfo's (a descheduled thread): cpuinfo's clock, the measurement named.
  p = cpu_hardware_peak(2, (d / "cpuinfo").string(), (d / "none").string(), 1.0e9);
  EXPECT_DOUBLE_EQ(p.hz, 2445.424e6);
  EXPECT_NE(p.frequency_source.find("1.000 GHz measured"), std::string::npos) << p.frequency_source;
  // A cpufreq maximum wins over both.
  write(d / "max", "3000000\n");
  p = cpu_hardware_peak(2, (d / "cpuinfo").string(), (d / "max").string(), 3.2e9);
  EXPECT_DOUBLE_EQ(p.hz, 3.0e9);
  // Only a measured clock: enough.
  write(d / "cpuinfo_noclock", "processor\t: 0\nflags\t\t: avx2 fma\n");
  p = cpu_hardware_peak(1, (d / "cpuinfo_noclock").string(), (d / "none").string(), 3.2e9);
  EXPECT_DOUBLE_EQ(p.hz, 3.2e9);
}

TEST(HostCpu, TheMeasuredClockIsAClock) {
#if defined(__x86_64__)
  // A sanity range only (thread CPU time: a descheduled thread does not lower it); every x86-64
  // server clock of the last two decades lies in it.
  const double hz = measure_core_clock_hz();
  EXPECT_GT(hz, 0.8e9);
  EXPECT_LT(hz, 6.5e9);
#else
  EXPECT_EQ(measure_core_clock_hz(), 0);
#endif
}

TEST(HostCpu, NoClockAnywhereIsAnError) {
  const fs::path d = scratch("noclock");
  write(d / "cpuinfo", "processor\t: 0\nflags\t\t: avx2 fma\n");
  EXPECT_THROW(cpu_hardware_peak(1, (d / "cpuinfo").string(), (d / "none").string()), std::runtime_error);
  EXPECT_THROW(cpu_hardware_peak(0, (d / "cpuinfo").string(), (d / "none").string()), std::invalid_argument);
}

TEST(HostCpu, LastLevelCacheIsTheLargestOfTheHighestLevel) {
  const fs::path d = scratch("cache");
  const auto index = [&](int i, const char* level, const char* type, const char* size) {
    write(d / ("index" + std::to_string(i)) / "level", level);
    write(d / ("index" + std::to_string(i)) / "type", type);
    write(d / ("index" + std::to_string(i)) / "size", size);
  };
  index(0, "1\n", "Data\n", "32K\n");
  index(1, "1\n", "Instruction\n", "32K\n");
  index(2, "2\n", "Unified\n", "512K\n");
  index(3, "3\n", "Unified\n", "32768K\n");
  EXPECT_EQ(last_level_cache_bytes(d.string()), 33'554'432);
  EXPECT_EQ(last_level_cache_bytes((d / "absent").string()), 0);
  EXPECT_EQ(parse_cache_size_bytes("1M"), 1'048'576);
  EXPECT_EQ(parse_cache_size_bytes("512"), 512);
  EXPECT_EQ(parse_cache_size_bytes("12Q"), -1);
  EXPECT_EQ(parse_cache_size_bytes(""), -1);
}

TEST(HostCpu, MemAvailableInBytes) {
  const fs::path d = scratch("meminfo");
  write(d / "meminfo", "MemTotal:       32000000 kB\nMemFree:         1000 kB\nMemAvailable:   23226336 kB\n");
  EXPECT_EQ(mem_available_bytes((d / "meminfo").string()), int64_t{23'226'336} * 1024);
  EXPECT_EQ(mem_available_bytes((d / "absent").string()), 0);
}

TEST(StreamRead, ArraysAreFourTimesTheLlcWithinTheCapAndHalfTheFreeMemory) {
  const int64_t MiB = int64_t{1} << 20;
  EXPECT_EQ(stream_read_sizing(32 * MiB, 0).array_bytes, 128 * MiB);         // 4 × LLC
  EXPECT_EQ(stream_read_sizing(4 * MiB, 0).array_bytes, 64 * MiB);           // the floor
  EXPECT_EQ(stream_read_sizing(0, 0).array_bytes, 64 * MiB);                 // LLC unknown
  EXPECT_EQ(stream_read_sizing(512 * MiB, 0).array_bytes, 1024 * MiB);       // the cap
  EXPECT_EQ(stream_read_sizing(32 * MiB, 200 * MiB).array_bytes, 50 * MiB);  // 2 arrays ≤ half of 200 MiB
  EXPECT_EQ(stream_read_sizing(32 * MiB, 10'001).array_bytes % 4096, 0);
}

TEST(HostCpu, CpusPerHostIsTheUnionOfTheRanksMasks) {
  // Two ranks bound to cores 0 and 1 of host a, two unbound ranks of host b (4 CPUs each), one of c.
  const std::vector<std::string> records = {"a:0", "b:0,1,2,3", "a:1", "b:0,1,2,3", "c.example:5,7"};
  EXPECT_EQ(cpus_per_host(records), (std::vector<int>{2, 4, 2}));
  EXPECT_EQ(cpus_per_host({"a:0", "a:0"}), std::vector<int>{1});  // oversubscribed: one core counted once
  EXPECT_THROW(cpus_per_host({"a"}), std::invalid_argument);
  EXPECT_THROW(cpus_per_host({"a:"}), std::invalid_argument);
  EXPECT_THROW(cpus_per_host({"a:1,x"}), std::invalid_argument);
  // This process's own record parses, with as many CPUs as its mask.
  EXPECT_EQ(cpus_per_host({affinity_record("here")}), std::vector<int>{affinity_cpus()});
}

TEST(SessionPeak, MeasuredAgainOnlyWhenTheRunExceededIt) {
  int measured = 0;
  const auto end_peak = [&] {
    ++measured;
    return 150e9;
  };
  // Not exceeded: the start's figure stands, nothing is measured.
  auto p = refresh_session_peak(90e9, 100e9, "start", end_peak);
  EXPECT_EQ(measured, 0);
  EXPECT_FALSE(p.remeasured);
  EXPECT_EQ(p.flops_per_s, 100e9);
  EXPECT_EQ(p.source, "start");
  // Exceeded: measured again, the better kept, both named.
  p = refresh_session_peak(120e9, 100e9, "start", end_peak);
  EXPECT_EQ(measured, 1);
  EXPECT_TRUE(p.remeasured);
  EXPECT_EQ(p.flops_per_s, 150e9);
  EXPECT_NE(p.source.find("1e+11 FLOP/s at the run's start and 1.5e+11 FLOP/s measured again at its end (kept)"),
            std::string::npos)
      << p.source;
  // Exceeded, and the end is no better: the start's figure stays (the MFU check will fail on it).
  p = refresh_session_peak(120e9, 100e9, "start", [] { return 80e9; });
  EXPECT_EQ(p.flops_per_s, 100e9);
  EXPECT_NE(p.source.find("(not better)"), std::string::npos) << p.source;
}

TEST(HardwarePeak, NeverBelowAMeasurementOnTheSameCpus) {
  HardwarePeak hw{156.5e9, "2 CPUs × … × 2.445 GHz", std::nullopt};
  raise_to_measured(hw, 150e9, "sgemm");  // below: unchanged
  EXPECT_EQ(hw.flops_per_s, 156.5e9);
  EXPECT_EQ(hw.source, "2 CPUs × … × 2.445 GHz");
  raise_to_measured(hw, 157.9e9, "sgemm");  // above: raised, both named
  EXPECT_EQ(hw.flops_per_s, 157.9e9);
  EXPECT_EQ(hw.source.rfind("1.579e+11 FLOP/s, sgemm — above the clock's product (2 CPUs × … × 2.445 GHz)", 0), 0u)
      << hw.source;
  HardwarePeak unknown{0, "hardware peak unknown: no clock", std::nullopt};
  raise_to_measured(unknown, 157.9e9, "sgemm");  // unknown stays unknown
  EXPECT_EQ(unknown.flops_per_s, 0);
  // On a report's optional figure: the same rule; none stays none.
  std::optional<double> flops = 156.5e9;
  std::string source = "clock";
  raise_to_measured(flops, source, 157.9e9, "sgemm");
  EXPECT_EQ(flops, 157.9e9);
  EXPECT_EQ(source.rfind("1.579e+11 FLOP/s, sgemm — above the clock's product (clock)", 0), 0u) << source;
  std::optional<double> none;
  raise_to_measured(none, source, 157.9e9, "sgemm");
  EXPECT_FALSE(none.has_value());
}

TEST(StreamRead, DotMatchesADoubleReference) {
  const int64_t n = 300'007;  // past the threading threshold, not a multiple of the vector width
  std::vector<float> a(static_cast<size_t>(n)), b(static_cast<size_t>(n));
  double ref = 0;
  for (int64_t i = 0; i < n; ++i) {
    a[static_cast<size_t>(i)] = static_cast<float>(i % 13) * 0.25f;
    b[static_cast<size_t>(i)] = 1.0f - static_cast<float>(i % 7) * 0.125f;
    ref += static_cast<double>(a[static_cast<size_t>(i)]) * b[static_cast<size_t>(i)];
  }
  // fp32 partial sums: relative error well under 1e-5 for these magnitudes
  EXPECT_NEAR(stream_dot(a.data(), b.data(), n), ref, 1e-5 * ref);
  EXPECT_TRUE(stream_dot_isa() == "avx2+fma" || stream_dot_isa() == "scalar");
}

}  // namespace
}  // namespace gpuledger::bench
