// Peak measurements (see peak.h).
#include "bench/peak.h"
#include "bench/host_cpu.h"
#include "bench/median.h"
#include "kernels/cpu/gemm_bf16_dot.h"
#include "kernels/registry/registry.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <exception>
#include <random>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace gpuledger::bench {

namespace {
std::function<void()>& barrier_hook() {
  static std::function<void()> hook;
  return hook;
}
}  // namespace

void set_timing_barrier(std::function<void()> barrier) { barrier_hook() = std::move(barrier); }
void timing_barrier() {
  if (barrier_hook()) barrier_hook()();
}

double time_median(Device& dev, int warmup, int reps, const std::function<void()>& f) {
  for (int i = 0; i < warmup; ++i) f();
  dev.synchronize();
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    timing_barrier();
    const auto t0 = std::chrono::steady_clock::now();
    f();
    dev.synchronize();
    t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return median(t);
}

CacheEvictor::CacheEvictor(int64_t bytes) : buf_(static_cast<size_t>(std::max<int64_t>(bytes, 1))) {}
void CacheEvictor::evict(int pass) { std::memset(buf_.data(), pass, buf_.size()); }
void CacheEvictor::check(int last_pass) const {
  if (buf_[buf_.size() / 2] != static_cast<char>(last_pass)) throw std::logic_error("evict: lost writes");
}

double time_median_cold(Device& dev, int warmup, int reps, const std::function<void()>& f, int64_t evict_bytes) {
  CacheEvictor evictor(evict_bytes);
  std::vector<double> t;
  for (int i = 0; i < warmup + reps; ++i) {
    evictor.evict(i);
    dev.synchronize();
    timing_barrier();
    const auto t0 = std::chrono::steady_clock::now();
    f();
    dev.synchronize();
    if (i >= warmup) t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  evictor.check(warmup + reps - 1);
  return median(t);
}

// 64 Ki draws of N(0, 1) from a fixed seed, shared by every fill.
static const std::vector<float>& normal_table() {
  static const std::vector<float> table = [] {
    std::mt19937 gen(20261205);
    std::normal_distribution<float> d(0.0f, 1.0f);
    std::vector<float> v(size_t{1} << 16);
    for (float& x : v) x = d(gen);
    return v;
  }();
  return table;
}

void fill_values(Device& dev, Buffer& b, DType t, int64_t n) {
  if (!dev.touches_memory()) return;
  // Values like a layer's activations after a norm: N(0, 1) in an order no
  // branch predictor learns (the table indexed by a multiplicative hash of the
  // position). An op's speed depends on its values: tanhf, expf and the like
  // branch on their argument's range, and over a regular pattern of values a
  // tanh GELU ran 1.6× faster than over random normal ones, which is what a
  // step feeds it.
  const std::vector<float>& table = normal_table();
  std::vector<float> host(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    host[static_cast<size_t>(i)] = table[(static_cast<uint64_t>(i) * 0x9E3779B97F4A7C15ull) >> 48];
  if (t == DType::kFP32) {
    dev.copy_from_host(b.data(), host.data(), n * 4);
  } else {
    std::vector<uint16_t> h16(static_cast<size_t>(n));
    convert_from_fp32(host.data(), h16.data(), t, n);
    dev.copy_from_host(b.data(), h16.data(), n * 2);
  }
}

std::vector<GemmShape> default_gemm_shapes() {
  return {{"square 1024", 1024, 1024, 1024},        {"square 2048", 2048, 2048, 2048},
          {"square 4096", 4096, 4096, 4096},        {"llama2-7b qkv (1024 tok)", 1024, 3 * 4096, 4096},
          {"llama2-7b attn-out", 1024, 4096, 4096}, {"llama2-7b mlp-in (gate)", 1024, 11008, 4096},
          {"llama2-7b mlp-out", 1024, 4096, 11008}};
}

GemmPeak measure_gemm(Device& dev, const GemmShape& s, DType dtype, int warmup, int reps) {
  const int64_t eb = dtype_bytes(dtype);
  Buffer a = dev.alloc(s.m * s.k * eb, Account::kWorkspace, "peak.a");
  Buffer b = dev.alloc(s.n * s.k * eb, Account::kWorkspace, "peak.b");
  Buffer c = dev.alloc(s.m * s.n * 4, Account::kWorkspace, "peak.c");
  fill_values(dev, a, dtype, s.m * s.k);
  fill_values(dev, b, dtype, s.n * s.k);
  GemmArgs g;
  g.trans_b = true;
  g.m = s.m;
  g.n = s.n;
  g.k = s.k;
  g.a = a.data();
  g.lda = s.k;
  g.b = b.data();
  g.ldb = s.k;
  g.ab_type = dtype;
  g.c = c.data();
  g.ldc = s.n;
  g.c_type = DType::kFP32;
  GemmPeak p;
  p.shape = s;
  p.dtype = dtype;
  p.median_seconds = time_median(dev, warmup, reps, [&] { dev.gemm(g); });
  p.flops_per_s = p.median_seconds > 0 ? 2.0 * s.m * s.n * s.k / p.median_seconds : 0;
  return p;
}

BandwidthPeak measure_bandwidth(Device& dev, int64_t bytes_per_array, int warmup, int reps) {
  const int64_t n = bytes_per_array / 4;
  Buffer a = dev.alloc(n * 4, Account::kWorkspace, "stream.a");
  Buffer b = dev.alloc(n * 4, Account::kWorkspace, "stream.b");
  Buffer c = dev.alloc(n * 4, Account::kWorkspace, "stream.c");
  fill_values(dev, a, DType::kFP32, n);
  fill_values(dev, b, DType::kFP32, n);
  BandwidthPeak p;
  p.bytes_per_array = n * 4;
  p.median_seconds = time_median(dev, warmup, reps, [&] { dev.add(c.data(), a.data(), b.data(), DType::kFP32, n); });
  p.bytes_per_s = p.median_seconds > 0 ? 3.0 * n * 4 / p.median_seconds : 0;
  return p;
}

double best_flops(const std::vector<GemmPeak>& peaks, DType dtype) {
  double best = 0;
  for (const auto& p : peaks)
    if (p.dtype == dtype) best = std::max(best, p.flops_per_s);
  return best;
}

SessionPeak measure_cpu_session_peak(DType dtype) {
  Ledger scratch;
  auto dev = make_device("cpu", scratch);
  SessionPeak p;
  for (int64_t n : {1024, 2048})
    p.flops_per_s = std::max(p.flops_per_s, measure_gemm(*dev, {"square", n, n, n}, DType::kFP32, 1, 3).flops_per_s);
  p.source = "measured now: best fp32 sgemm of 1024² and 2048² on " + dev->description();
  if (dtype == DType::kBF16 && bf16_dot_enabled()) {
    double bf16 = 0;
    for (int64_t n : {1024, 2048})
      bf16 = std::max(bf16, measure_gemm(*dev, {"square", n, n, n}, DType::kBF16, 1, 3).flops_per_s);
    p.source = fmt::format(
        "measured now: the better of the best fp32 sgemm ({:.4g} FLOP/s) and the best bf16 GEMM in bf16 pairs "
        "(AVX512_BF16, {:.4g} FLOP/s) of 1024² and 2048² on {}",
        p.flops_per_s, bf16, dev->description());
    p.flops_per_s = std::max(p.flops_per_s, bf16);
  }
  return p;
}

RefreshedPeak refresh_session_peak(double achieved_flops_per_s, double start_flops_per_s,
                                   const std::string& start_source, const std::function<double()>& measure) {
  if (achieved_flops_per_s <= start_flops_per_s) return {start_flops_per_s, start_source, false};
  const double end_flops_per_s = measure ? measure() : measure_cpu_session_peak().flops_per_s;
  const bool end_better = end_flops_per_s > start_flops_per_s;
  return {std::max(start_flops_per_s, end_flops_per_s),
          fmt::format("{} — the better of {:.4g} FLOP/s at the run's start and {:.4g} FLOP/s measured again at its "
                      "end ({}), since the run reached {:.4g} FLOP/s, above the start's figure",
                      start_source, start_flops_per_s, end_flops_per_s, end_better ? "kept" : "not better",
                      achieved_flops_per_s),
          true};
}

namespace {
// The core clock, measured once per process: every hardware figure of a run
// (fp32 and bf16, train's and peak's) then names the same clock.
double process_core_clock_hz() {
  static const double hz = measure_core_clock_hz();
  return hz;
}

// The FMA throughput of one core, measured once per process against that clock.
const std::vector<MeasuredFma>& process_fma_throughput() {
  static const std::vector<MeasuredFma> fma = measure_fma_throughput(process_core_clock_hz());
  return fma;
}

// This host's peak for `cpus` CPUs, its FLOPs per cycle measured.
CpuHardwarePeak host_cpu_peak(int cpus) {
  return cpu_hardware_peak(cpus, "/proc/cpuinfo", "/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq",
                           process_core_clock_hz(), process_fma_throughput());
}
}  // namespace

HardwarePeak host_hardware_peak(DType dtype) {
  HardwarePeak h;
  try {
    const CpuHardwarePeak p = host_cpu_peak(affinity_cpus());
    const bool bf16 = dtype == DType::kBF16;
    h.flops_per_s = bf16 ? p.bf16_flops_per_s : p.flops_per_s;
    h.source = "hardware: " + (bf16 ? p.describe_bf16() : p.describe());
    h.cpu = p;
  } catch (const std::exception& e) {
    h.source = std::string("hardware peak unknown: ") + e.what();
  }
  return h;
}

void raise_to_measured(HardwarePeak& hw, double measured_flops_per_s, const std::string& measured_what) {
  if (hw.flops_per_s <= 0 || measured_flops_per_s <= hw.flops_per_s) return;
  hw.source = fmt::format(
      "{:.4g} FLOP/s, {} — above the clock's product ({}), so the clock read is below the one the "
      "cores ran at",
      measured_flops_per_s, measured_what, hw.source);
  hw.flops_per_s = measured_flops_per_s;
}

void raise_to_measured(std::optional<double>& hw_flops_per_s, std::string& hw_source, double measured_flops_per_s,
                       const std::string& measured_what) {
  if (!hw_flops_per_s) return;
  HardwarePeak hw{*hw_flops_per_s, hw_source, std::nullopt};
  raise_to_measured(hw, measured_flops_per_s, measured_what);
  hw_flops_per_s = hw.flops_per_s;
  hw_source = hw.source;
}

HardwarePeak job_hardware_peak(const std::vector<int>& cpus_per_host, DType dtype) {
  HardwarePeak h;
  try {
    std::string per_host;
    for (int cpus : cpus_per_host) {
      const CpuHardwarePeak p = host_cpu_peak(cpus);
      if (!h.cpu) h.cpu = p;
      const bool bf16 = dtype == DType::kBF16;
      h.flops_per_s += bf16 ? p.bf16_flops_per_s : p.flops_per_s;
      if (!per_host.empty()) per_host += "; ";
      per_host += bf16 ? p.describe_bf16() : p.describe();
    }
    h.source = fmt::format(
        "hardware: {} host(s), the CPUs the ranks may run on per host (hosts taken to be like this "
        "one): {}",
        cpus_per_host.size(), per_host);
  } catch (const std::exception& e) {
    h.flops_per_s = 0;
    h.source = std::string("hardware peak unknown: ") + e.what();
    h.cpu.reset();
  }
  return h;
}

}  // namespace gpuledger::bench
