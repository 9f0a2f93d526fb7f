// Host CPU facts (see host_cpu.h).
#include "bench/host_cpu.h"

#include <fmt/format.h>
#include <sched.h>
#include <time.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <stdexcept>
#include <vector>

namespace gpuledger::bench {

namespace {

std::string read_first_line(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::string line;
  if (in) std::getline(in, line);
  return line;
}

}  // namespace

std::string trim_space(std::string_view s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return std::string(s.substr(b, e - b));
}

namespace {

// The value of the first "key : value" line of the file at `path` (/proc/cpuinfo).
std::string cpuinfo_field(const std::string& path, std::string_view key) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return key_value_field(text.str(), key);
}

bool has_flag(const std::string& flags, std::string_view flag) {
  std::istringstream in(flags);
  std::string f;
  while (in >> f)
    if (f == flag) return true;
  return false;
}

}  // namespace

std::string key_value_field(const std::string& text, std::string_view key) {
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    const auto colon = line.find(':');
    if (colon != std::string::npos && trim_space(std::string_view(line).substr(0, colon)) == key)
      return trim_space(std::string_view(line).substr(colon + 1));
  }
  return {};
}

int64_t parse_cache_size_bytes(std::string_view text) {
  const std::string t = trim_space(text);
  if (t.empty() || !std::isdigit(static_cast<unsigned char>(t[0]))) return -1;
  size_t used = 0;
  int64_t v = 0;
  try {
    v = std::stoll(t, &used);
  } catch (const std::exception&) {
    return -1;
  }
  const std::string unit = t.substr(used);
  if (unit.empty()) return v;
  if (unit == "K") return v << 10;
  if (unit == "M") return v << 20;
  if (unit == "G") return v << 30;
  return -1;
}

int64_t last_level_cache_bytes(const std::string& cache_dir) {
  std::error_code ec;
  int best_level = 0;
  int64_t best_bytes = 0;
  for (const auto& entry : std::filesystem::directory_iterator(cache_dir, ec)) {
    if (entry.path().filename().string().rfind("index", 0) != 0) continue;
    if (read_first_line(entry.path() / "type") == "Instruction") continue;
    const std::string level_text = read_first_line(entry.path() / "level");
    const int64_t bytes = parse_cache_size_bytes(read_first_line(entry.path() / "size"));
    if (level_text.empty() || bytes <= 0) continue;
    const int level = std::atoi(level_text.c_str());
    if (level > best_level || (level == best_level && bytes > best_bytes)) {
      best_level = level;
      best_bytes = bytes;
    }
  }
  return best_bytes;
}

int64_t mem_available_bytes(const std::string& meminfo_path) {
  std::ifstream in(meminfo_path);
  std::string key, unit;
  int64_t value = 0;
  while (in >> key >> value) {
    std::getline(in, unit);
    if (key == "MemAvailable:") return trim_space(unit) == "kB" ? value * 1024 : value;
  }
  return 0;
}

int affinity_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return 1;
  return std::max(1, CPU_COUNT(&set));
}

std::string affinity_record(const std::string& host) {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::string ids;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu)
      if (CPU_ISSET(cpu, &set)) {
        if (!ids.empty()) ids += ',';
        ids += std::to_string(cpu);
      }
  }
  return host + ":" + (ids.empty() ? "0" : ids);  // unreadable: one CPU, as affinity_cpus
}

std::vector<int> cpus_per_host(const std::vector<std::string>& records) {
  std::vector<std::string> hosts;
  std::vector<std::set<int>> cpus;
  for (const auto& r : records) {
    const auto colon = r.rfind(':');
    if (colon == std::string::npos || colon == 0 || colon + 1 == r.size())
      throw std::invalid_argument("affinity record \"" + r + "\" is not host:ids");
    const std::string host = r.substr(0, colon);
    auto at = std::find(hosts.begin(), hosts.end(), host);
    if (at == hosts.end()) {
      hosts.push_back(host);
      cpus.emplace_back();
      at = hosts.end() - 1;
    }
    std::set<int>& mine = cpus[at - hosts.begin()];
    std::string_view ids(r);
    ids.remove_prefix(colon + 1);
    while (!ids.empty()) {
      const auto comma = ids.find(',');
      const std::string id(ids.substr(0, comma));
      char* end = nullptr;
      const long v = std::strtol(id.c_str(), &end, 10);
      if (id.empty() || *end != '\0' || v < 0)
        throw std::invalid_argument("affinity record \"" + r + "\": \"" + id + "\" is not a CPU id");
      mine.insert(static_cast<int>(v));
      ids.remove_prefix(comma == std::string_view::npos ? ids.size() : comma + 1);
    }
  }
  std::vector<int> counts;
  for (const auto& c : cpus) counts.push_back(static_cast<int>(c.size()));
  return counts;
}

std::string CpuHardwarePeak::describe() const {
  const std::string table =
      fmt::format("{} fp32 lanes ({}) × {} {} × 2 FLOPs", fp32_lanes, isa, fma_units, units_source);
  const MeasuredFma* best = best_fma(measured);
  if (!best)
    return fmt::format("{} CPUs × {} × {:.3f} GHz ({}) = {:.4g} FLOP/s", cpus, table, hz * 1e-9, frequency_source,
                       flops_per_s);
  return fmt::format(
      "{} CPUs × {:.1f} FLOPs/cycle measured ({}, {}-bit: {:.2f} FMA/cycle × {} lanes × 2) × {:.3f} GHz ({}) = {:.4g} "
      "FLOP/s; table: {} = {:g} FLOPs/cycle{}",
      cpus, flops_per_cycle, best->isa, best->width_bits, best->fma_per_cycle, best->fp32_lanes, hz * 1e-9,
      frequency_source, flops_per_s, table, table_flops_per_cycle, cross_check.empty() ? "" : "; " + cross_check);
}

std::string CpuHardwarePeak::describe_bf16() const {
  if (!bf16_dot) return "bf16 widened to fp32 (no AVX512_BF16): the fp32 peak, " + describe();
  return fmt::format(
      "bf16 on AVX512_BF16 (vdpbf16ps: 2 products per fp32 lane) = 2 × the fp32 peak ({}) = {:.4g} FLOP/s", describe(),
      bf16_flops_per_s);
}

double measure_core_clock_hz() {
#if defined(__x86_64__)
  constexpr int64_t kIterations = 1 << 18;  // × 16 adds: 4 M cycles, about 1.5 ms at 3 GHz
  double best_hz = 0;
  for (int run = 0; run < 5; ++run) {
    timespec t0{}, t1{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t0);
    uint64_t x = 0, one = 1;
    for (int64_t i = 0; i < kIterations; ++i)
      // 16 adds, each waiting for the one before: 16 cycles; the loop's own
      // increment, compare and branch run beside them on the other ALUs. The
      // addend is a register, not an immediate: Intel's Golden Cove cores
      // fold adds of small immediates in the renamer, and the chain of
      // `add $1` ran at 19.6 "GHz" on the Xeon this project is tested on,
      // where `add reg, reg` and a chain of 3-cycle imuls both read 3.6 GHz.
      asm volatile(
          "add %1, %0\n\tadd %1, %0\n\tadd %1, %0\n\tadd %1, %0\n\t"
          "add %1, %0\n\tadd %1, %0\n\tadd %1, %0\n\tadd %1, %0\n\t"
          "add %1, %0\n\tadd %1, %0\n\tadd %1, %0\n\tadd %1, %0\n\t"
          "add %1, %0\n\tadd %1, %0\n\tadd %1, %0\n\tadd %1, %0"
          : "+r"(x)
          : "r"(one));
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t1);
    const double seconds =
        static_cast<double>(t1.tv_sec - t0.tv_sec) + 1e-9 * static_cast<double>(t1.tv_nsec - t0.tv_nsec);
    if (x != static_cast<uint64_t>(16 * kIterations)) return 0;  // never: the chain ran as written
    if (seconds > 0) best_hz = std::max(best_hz, 16.0 * static_cast<double>(kIterations) / seconds);
  }
  return best_hz;
#else
  return 0;
#endif
}

namespace {

// The FLOPs per cycle the peak takes, and the cross-check: the measurement's
// best width, the table's figure when nothing was measured.
void take_measured_fma(CpuHardwarePeak& p, const std::vector<MeasuredFma>& measured) {
  p.measured = measured;
  const MeasuredFma* best = best_fma(measured);
  p.measured_flops_per_cycle = best ? best->flops_per_cycle : 0;
  p.flops_per_cycle = p.measured_flops_per_cycle > 0 ? p.measured_flops_per_cycle : p.table_flops_per_cycle;
  if (p.measured_flops_per_cycle <= 0) return;
  const double ratio = p.measured_flops_per_cycle / p.table_flops_per_cycle;
  if (std::abs(ratio - 1.0) <= kFmaTableTolerance) return;
  p.cross_check = fmt::format(
      "the table and the measurement disagree: table {:g} FLOPs/cycle per core ({} fp32 lanes × {} {} × 2), "
      "measured {:.1f} ({}, {:.2f} FMA/cycle of {} bits), {:.2f}× the table; the peak takes the measurement",
      p.table_flops_per_cycle, p.fp32_lanes, p.fma_units, p.units_source, p.measured_flops_per_cycle, best->isa,
      best->fma_per_cycle, best->width_bits, ratio);
}

}  // namespace

CpuHardwarePeak cpu_hardware_peak(int cpus, const std::string& cpuinfo_path, const std::string& cpufreq_max_path,
                                  double measured_hz, const std::vector<MeasuredFma>& measured_fma) {
  if (cpus < 1) throw std::invalid_argument("hardware peak: cpus must be >= 1, got " + std::to_string(cpus));
  CpuHardwarePeak p;
  p.cpus = cpus;
  const std::string flags = cpuinfo_field(cpuinfo_path, "flags");
  p.fma = has_flag(flags, "fma");
  if (has_flag(flags, "avx512f") && p.fma) {
    p.isa = "avx512f";
    p.fp32_lanes = 16;
  } else if (has_flag(flags, "avx2") && p.fma) {
    p.isa = "avx2+fma";
    p.fp32_lanes = 8;
  } else if (has_flag(flags, "avx")) {
    p.isa = "avx";
    p.fp32_lanes = 8;
    p.fma = false;
  } else if (has_flag(flags, "sse")) {
    p.isa = "sse";
    p.fp32_lanes = 4;
    p.fma = false;
  } else {
    p.isa = "scalar";
    p.fp32_lanes = 1;
    p.fma = false;
  }
  p.fma_units = p.fma ? 2 : 1;  // without FMA: one multiply and one add per cycle, counted as 2 FLOPs
  p.units_source = p.fma ? "FMA units" : "pipes (mul + add)";
  const std::string vendor = cpuinfo_field(cpuinfo_path, "vendor_id");
  const int family = std::atoi(cpuinfo_field(cpuinfo_path, "cpu family").c_str());
  const int model = std::atoi(cpuinfo_field(cpuinfo_path, "model").c_str());
  if (p.isa == "avx512f" && vendor == "AuthenticAMD" && family == 25) {
    p.fma_units = 1;
    p.units_source = "FMA unit (AMD family 25, Zen 4: a 512-bit FMA takes both 256-bit pipes)";
  }
  if (p.fma && vendor == "AuthenticAMD" && family == 23 && model < 0x30) {
    p.fma_units = 1;
    p.units_source = "FMA unit (AMD family 23 below model 0x30, Zen/Zen+: a 256-bit FMA runs as two 128-bit halves)";
  }
  p.table_flops_per_cycle = p.fp32_lanes * p.fma_units * 2.0;
  take_measured_fma(p, measured_fma);
  p.bf16_dot = p.isa == "avx512f" && has_flag(flags, "avx512_bf16");
  const std::string khz = read_first_line(cpufreq_max_path);
  if (!khz.empty() && std::atoll(khz.c_str()) > 0) {
    p.hz = static_cast<double>(std::atoll(khz.c_str())) * 1e3;
    p.frequency_source = cpufreq_max_path;
  } else {
    const std::string mhz = cpuinfo_field(cpuinfo_path, "cpu MHz");
    const double cpuinfo_hz = mhz.empty() ? 0 : std::atof(mhz.c_str()) * 1e6;
    if (!(cpuinfo_hz > 0) && !(measured_hz > 0))
      throw std::runtime_error("hardware peak: no clock in " + cpufreq_max_path + " or in " + cpuinfo_path +
                               " \"cpu MHz\", and none measured");
    if (measured_hz > cpuinfo_hz) {
      p.hz = measured_hz;
      p.frequency_source = cpuinfo_hz > 0
                               ? fmt::format("measured by a chain of dependent adds; {} \"cpu MHz\" reads {:.3f} GHz",
                                             cpuinfo_path, cpuinfo_hz * 1e-9)
                               : std::string("measured by a chain of dependent adds");
    } else {
      p.hz = cpuinfo_hz;
      p.frequency_source = cpuinfo_path + " \"cpu MHz\" of the first processor";
      if (measured_hz > 0) p.frequency_source += fmt::format("; {:.3f} GHz measured", measured_hz * 1e-9);
    }
  }
  p.flops_per_s = static_cast<double>(cpus) * p.flops_per_cycle * p.hz;
  p.bf16_flops_per_s = p.bf16_dot ? 2.0 * p.flops_per_s : p.flops_per_s;
  return p;
}

}  // namespace gpuledger::bench
