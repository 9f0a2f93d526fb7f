// Backends, reference peaks, filling and counters (see micro_context.h).
#include "bench/micro/micro_context.h"

#include <unistd.h>

#include <algorithm>
#include <stdexcept>

#include "bench/peak.h"
#include "bench/stream_read.h"
#include "core/device_spec.h"
#include "kernels/registry/registry.h"

namespace gpuledger::micro {

double ReferencePeak::flops_for(DType t) const {
  const auto it = flops_per_s.find(t);
  return it == flops_per_s.end() ? 0 : it->second;
}

namespace {

std::map<std::string, std::unique_ptr<Backend>>& backends() {
  static std::map<std::string, std::unique_ptr<Backend>> all;
  return all;
}

// A limit for each backend's ledger: 3/4 of the host's physical memory, so
// that a shape too large for this machine is refused by the ledger (the
// benchmark is skipped with OutOfMemory's message) instead of being paged
// out or killed. A GPU's own allocation failure is turned into OutOfMemory by
// Device::alloc already.
int64_t ledger_limit_bytes() {
  const long pages = sysconf(_SC_PHYS_PAGES), page_bytes = sysconf(_SC_PAGE_SIZE);
  return pages > 0 && page_bytes > 0 ? static_cast<int64_t>(pages) * page_bytes / 4 * 3 : int64_t{1} << 40;
}

const std::vector<DType> kDtypes = {DType::kFP32, DType::kBF16, DType::kFP16};

ReferencePeak measured_peak(Backend& b) {
  ReferencePeak p;
  if (b.name == "cpu") {
    const auto s = bench::measure_cpu_session_peak();
    for (DType t : kDtypes) p.flops_per_s[t] = s.flops_per_s;
    p.flops_source = s.source + " (CPU compute is fp32 for every storage dtype)";
  } else {
    for (DType t : kDtypes) {
      double best = 0;
      for (int64_t n : {2048, 4096, 8192})
        best = std::max(best, bench::measure_gemm(*b.dev, {"square", n, n, n}, t, 2, 5).flops_per_s);
      p.flops_per_s[t] = best;
    }
    p.flops_source = "measured now: best square GEMM of 2048², 4096², 8192² per dtype on " + b.dev->description();
  }
  if (b.name == "cpu") {
    // The host's read bandwidth, as `gpuledger peak` and `infer` take it (bench/stream_read.h).
    const bench::ReadBandwidth bw = bench::measure_read_bandwidth(1, 5);
    p.bytes_per_s = bw.bytes_per_s;
    p.bytes_source = "measured now: " + bw.kernel() + ", median of 5 (as `gpuledger peak`)";
    return p;
  }
  const int64_t array_bytes = int64_t{256} << 20;
  p.bytes_per_s = bench::measure_bandwidth(*b.dev, array_bytes, 1, 5).bytes_per_s;
  p.bytes_source =
      "measured now: STREAM add c = a + b over 3 × 256 MiB fp32 arrays, median of 5 (as `gpuledger peak`) on " +
      b.dev->description();
  return p;
}

ReferencePeak datasheet_peak(const std::string& preset) {
  const auto spec = find_device(preset);
  if (!spec)
    throw std::invalid_argument("--gpl_peak: unknown device preset '" + preset + "' (see `gpuledger devices`)");
  ReferencePeak p;
  for (DType t : kDtypes)
    if (const auto f = device_peak_flops(*spec, t)) p.flops_per_s[t] = *f;
  p.bytes_per_s = spec->bandwidth_bytes_per_s.value_or(0);
  p.flops_source = p.bytes_source = "datasheet of " + spec->description + " (" + spec->source + ")";
  return p;
}

}  // namespace

Backend* backend(const std::string& name) {
  auto& all = backends();
  if (auto it = all.find(name); it != all.end()) return it->second.get();
  auto b = std::make_unique<Backend>(ledger_limit_bytes());
  b->name = name;
  try {
    b->dev = make_device(name, b->ledger);
  } catch (const std::exception& e) {
    benchmark::AddCustomContext("backend " + name, std::string("not measured: ") + e.what());
    all[name] = nullptr;
    return nullptr;
  }
  benchmark::AddCustomContext("backend " + name, b->dev->description());
  return (all[name] = std::move(b)).get();
}

void set_reference_peaks(const std::string& how) {
  for (auto& [name, b] : backends()) {
    if (!b) continue;
    if (how == "none") {
      b->peak = {};
      b->peak.flops_source = b->peak.bytes_source = "none (--gpl_peak=none)";
    } else if (how == "measure") {
      b->peak = measured_peak(*b);
    } else {
      b->peak = datasheet_peak(how);
    }
    benchmark::AddCustomContext(name + " pct_of_peak against", b->peak.flops_source);
    benchmark::AddCustomContext(name + " pct_of_bandwidth against", b->peak.bytes_source);
    std::string figures;
    for (const auto& [t, f] : b->peak.flops_per_s)
      figures += std::string(dtype_name(t)) + " " + std::to_string(f / 1e9) + " GFLOP/s; ";
    figures += "bandwidth " + std::to_string(b->peak.bytes_per_s / 1e9) + " GB/s";
    benchmark::AddCustomContext(name + " reference figures", figures);
  }
}

void set_compute_counters(benchmark::State& st, const Backend& b, DType t, double flops_per_call, double total_s) {
  if (total_s <= 0) return;
  const double rate = flops_per_call * static_cast<double>(st.iterations()) / total_s;
  st.counters["flops_per_s"] = rate;
  if (const double peak = b.peak.flops_for(t); peak > 0) st.counters["pct_of_peak"] = 100.0 * rate / peak;
}

void set_memory_counters(benchmark::State& st, const Backend& b, double bytes_per_call, double total_s) {
  if (total_s <= 0) return;
  const double rate = bytes_per_call * static_cast<double>(st.iterations()) / total_s;
  st.counters["bytes_per_s"] = rate;
  if (b.peak.bytes_per_s > 0) st.counters["pct_of_bandwidth"] = 100.0 * rate / b.peak.bytes_per_s;
}

void fill_values(Device& dev, void* dst, DType t, int64_t n) {
  if (!dev.touches_memory() || n <= 0) return;
  constexpr int64_t kChunk = int64_t{1} << 20;
  std::vector<float> host(static_cast<size_t>(std::min(n, kChunk)));
  std::vector<uint16_t> host16(t == DType::kFP32 ? 0 : host.size());
  const int64_t e = dtype_bytes(t);
  for (int64_t i0 = 0; i0 < n; i0 += kChunk) {
    const int64_t len = std::min(kChunk, n - i0);
    for (int64_t i = 0; i < len; ++i) host[i] = static_cast<float>(((i0 + i) * 7919) % 1000) * 1e-3f - 0.5f;
    char* at = static_cast<char*>(dst) + i0 * e;
    if (t == DType::kFP32) {
      dev.copy_from_host(at, host.data(), len * e);
    } else {
      convert_from_fp32(host.data(), host16.data(), t, len);
      dev.copy_from_host(at, host16.data(), len * e);
    }
  }
}

void fill_ids(Device& dev, int32_t* dst, int64_t n, int64_t vocab) {
  if (!dev.touches_memory() || n <= 0) return;
  std::vector<int32_t> host(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) host[i] = static_cast<int32_t>((i * 7919) % vocab);
  dev.copy_from_host(dst, host.data(), n * 4);
}

benchmark::internal::Benchmark* configure(benchmark::internal::Benchmark* b) {
  return b->UseManualTime()->Unit(benchmark::kMillisecond);
}

}  // namespace gpuledger::micro
