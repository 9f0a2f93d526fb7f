// This machine's device profile, measured on the CPU backend (see calibrate_device.h).
#include "bench/run/calibrate_device.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "bench/host_cpu.h"
#include "bench/median.h"
#include "bench/peak.h"
#include "bench/report/fingerprint.h"
#include "bench/stream_read.h"
#include "kernels/cpu/gemm_bf16_dot.h"
#include "kernels/cpu/thread_policy.h"
#include "kernels/registry/registry.h"

#ifdef _OPENMP
#include <omp.h>
#endif

namespace gpuledger::bench {
namespace {

// A memcpy between two host buffers of 256 MiB (past any cache): what a
// device–host copy is on the CPU backend, whose device memory is host memory.
double measure_memcpy_bytes_per_s(int warmup, int reps) {
  const size_t bytes = size_t{256} << 20;
  std::vector<char> a(bytes, 1), b(bytes, 0);
  std::vector<double> t;
  for (int i = 0; i < warmup + reps; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    std::memcpy(b.data(), a.data(), bytes);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (i >= warmup) t.push_back(s);
    a[static_cast<size_t>(i) % bytes] = b[0];  // keeps the copies from being elided
  }
  return static_cast<double>(bytes) / median(t);
}

// The hardware peak of `dtype` on the CPUs this process may use, never below
// what was measured (host_cpu.h raise_to_measured).
perf::Sourced hardware_peak(DType dtype, double best_measured) {
  const bool bf16_pairs = dtype == DType::kBF16 && bf16_dot_enabled();
  HardwarePeak hw = host_hardware_peak(bf16_pairs ? DType::kBF16 : DType::kFP32);
  raise_to_measured(hw, best_measured, "the best GEMM measured by calibrate");
  if (hw.flops_per_s <= 0)
    return {best_measured, "the best GEMM measured by calibrate (hardware peak unknown: " + hw.source + ")"};
  return {hw.flops_per_s, hw.source};
}

perf::DTypeFigures measure_dtype(Device& dev, const DeviceCalibration& c, DType dtype, std::ostream& progress) {
  std::vector<perf::ShapePoint> points;
  for (int64_t m : c.m)
    for (int64_t n : c.n)
      for (int64_t k : c.k) {
        const GemmPeak p = measure_gemm(dev, {"grid", m, n, k}, dtype, c.warmup, c.reps);
        points.push_back({m, n, k, p.flops_per_s});
        progress << fmt::format("calibrate: gemm {} m={} n={} k={}: {:.3g} GFLOP/s\n", dtype_name(dtype), m, n, k,
                                p.flops_per_s / 1e9);
      }
  perf::DTypeFigures f;
  perf::GemmTable table;
  table.trans_a = false;
  table.trans_b = true;
  table.table = perf::ShapeTable(points);
  table.source = fmt::format(
      "measured by gpuledger calibrate: Device::gemm on the cpu backend ({}), C = A·Bᵀ, "
      "median of {} after {} warm-up",
      dev.description(), c.reps, c.warmup);
  const double best = table.table.best_per_s();
  f.gemm = std::move(table);
  f.peak_flops_per_s = hardware_peak(dtype, best);
  f.gemm_efficiency = {best / f.peak_flops_per_s.value,
                       "measured: the best GEMM of the grid over the peak (the roofline's compute roof outside it)"};
  return f;
}

}  // namespace

DeviceCalibration quick_device_calibration() {
  DeviceCalibration c;
  c.m = {256, 1024};
  c.n = {256, 1024};
  c.k = {256, 1024};
  c.reps = 3;
  c.op_classes = quick_op_class_calibration();
  c.attention = quick_attention_calibration();
  return c;
}

void use_cpu_threads(int n) {
  if (n < 1) throw std::invalid_argument("--threads " + std::to_string(n) + ": expected 1 or more");
#ifdef _OPENMP
  omp_set_num_threads(n);
#else
  if (n > 1) throw std::invalid_argument("--threads " + std::to_string(n) + ": this binary was built without OpenMP");
#endif
}

perf::DeviceProfile calibrate_device(const DeviceCalibration& c, std::ostream& progress) {
  Ledger ledger;
  auto dev = make_device("cpu", ledger);
  perf::DeviceProfile p;
  p.name = c.name;
  p.fingerprint = report::machine_fingerprint();
  // The threads every figure below was measured with: the profile fits runs
  // whose ranks have as many (docs/perf-model.md, "Which profile for which run").
  p.fingerprint["calibrate_threads"] = apply_cpu_thread_policy().openmp_threads;
  p.provenance = {perf::kMeasured, report::utc_timestamp(), c.command};
  for (DType dtype : c.dtypes) p.dtypes[dtype] = measure_dtype(*dev, c, dtype, progress);

  const ReadBandwidth bw = measure_read_bandwidth(c.warmup, c.reps);
  p.memory_bandwidth_bytes_per_s = {bw.bytes_per_s, "measured by gpuledger calibrate: " + bw.kernel()};
  progress << fmt::format("calibrate: {}: {:.3g} GB/s\n", bw.kernel(), bw.bytes_per_s / 1e9);

  const double copy = measure_memcpy_bytes_per_s(c.warmup, c.reps);
  p.host_copy_bytes_per_s = {copy, "measured by gpuledger calibrate: memcpy of 256 MiB between host buffers"};
  progress << fmt::format("calibrate: memcpy: {:.3g} GB/s\n", copy / 1e9);

  // The floor: a 16×16×16 fp32 GEMM is all overhead (8 KFLOP).
  const GemmPeak tiny = measure_gemm(*dev, {"floor", 16, 16, 16}, DType::kFP32, c.warmup + 2, c.reps * 5);
  p.launch_floor_seconds = {tiny.median_seconds,
                            "measured by gpuledger calibrate: median time of a 16×16×16 fp32 GEMM on the cpu backend"};
  progress << fmt::format("calibrate: launch floor (16³ GEMM): {:.3g} us\n", tiny.median_seconds * 1e6);

  if (c.dtypes.empty()) throw std::invalid_argument("calibrate: no dtype to measure");
  OpClassCalibration oc = c.op_classes;
  oc.dtype = c.dtypes.front();
  const std::vector<OpTiming> timings = time_op_classes(*dev, oc, progress);
  p.op_class_bandwidth = op_class_bandwidths(timings, oc, tiny.median_seconds, dev->description());
  p.op_bandwidth = op_bandwidths(timings, oc, tiny.median_seconds, dev->description());
  for (const auto& [cls, bw] : p.op_class_bandwidth)
    progress << fmt::format("calibrate: op class {}: {:.3g} GB/s\n", perf::op_class_name(cls), bw.value / 1e9);

  AttentionCalibration ac = c.attention;
  ac.dtype = c.dtypes.front();
  p.attention = calibrate_attention(*dev, ac, p.dtypes.at(ac.dtype).peak_flops_per_s.value, progress);
  perf::validate_device_profile(p);
  return p;
}

}  // namespace gpuledger::bench
