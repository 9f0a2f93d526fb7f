// What every gpl_micro benchmark shares: the backends (a Device and its Ledger
// each, created once), the reference peaks that pct_of_peak and
// pct_of_bandwidth are taken against, the timing loop, buffer filling and the
// counters.
#pragma once
#include <benchmark/benchmark.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "kernels/device.h"
#include "kernels/ledger.h"

namespace gpuledger::micro {

// The figures a backend's ops are compared with, and where each comes from.
struct ReferencePeak {
  std::map<DType, double> flops_per_s;  // dense GEMM peak per storage dtype; absent = unknown
  double bytes_per_s = 0;               // 0 = unknown
  std::string flops_source, bytes_source;
  double flops_for(DType t) const;  // 0 when unknown
};

struct Backend {
  explicit Backend(int64_t limit_bytes) : ledger(limit_bytes) {}
  std::string name;
  Ledger ledger;
  std::unique_ptr<Device> dev;
  ReferencePeak peak;
};

// The backend named `name`, created on first use; nullptr when it cannot be
// made here (cuda not built, no GPU): its benchmarks are then not registered.
Backend* backend(const std::string& name);
// Sets every created backend's reference peak: `how` is "measure" (the
// backend's own best sgemm of 1024² and 2048² as `gpuledger train` takes MFU
// against on the CPU — compute is fp32 there whatever the storage — or the
// best square GEMM per dtype on a GPU; and STREAM add over 3 × 256 MiB as
// `gpuledger peak` measures), "none", or a device preset (datasheet figures).
// Records each source in the benchmark context (the JSON's "context").
void set_reference_peaks(const std::string& how);

// Times `op` with the device's timer (Device::start_timer: GPU time on CUDA,
// host time between synchronizes on the CPU), one op per iteration, as the
// iteration's manual time. One untimed call first (page faults, BLAS threads
// starting, lazy workspace). Returns the total timed seconds.
template <class Op>
double time_op(benchmark::State& st, Device& dev, Op&& op) {
  op();
  dev.synchronize();
  double total_s = 0;
  for (auto _ : st) {
    auto timer = dev.start_timer();
    op();
    const double s = timer->stop_seconds();
    st.SetIterationTime(s);
    total_s += s;
  }
  return total_s;
}

// flops_per_s = flops per call · iterations / timed seconds, and pct_of_peak
// against the backend's reference for compute dtype `t` (left out when unknown).
void set_compute_counters(benchmark::State& st, const Backend& b, DType t, double flops_per_call, double total_s);
// bytes_per_s and pct_of_bandwidth, likewise.
void set_memory_counters(benchmark::State& st, const Backend& b, double bytes_per_call, double total_s);

// Small deterministic values in [-0.5, 0.5) (never all zeros: BLAS and the
// norms would take short cuts), written through host staging in chunks.
void fill_values(Device& dev, void* dst, DType t, int64_t n);
// n int32 token ids in [0, vocab).
void fill_ids(Device& dev, int32_t* dst, int64_t n, int64_t vocab);

// Runs `body` and turns an exception (OutOfMemory at a large shape, a backend
// refusing an op) into a skipped benchmark with its message.
template <class Body>
void guarded(benchmark::State& st, Body&& body) {
  try {
    body();
  } catch (const std::exception& e) {
    st.SkipWithError(e.what());
  }
}

// Benchmark names: "<family>/<backend>/<what>…"; every registration goes
// through here so that all share manual time and the repetition aggregates.
benchmark::internal::Benchmark* configure(benchmark::internal::Benchmark* b);

}  // namespace gpuledger::micro
