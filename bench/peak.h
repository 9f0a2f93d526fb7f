// Measured peaks of a backend: GEMM FLOP/s at given shapes and dtypes, and
// memory bandwidth through the Device (STREAM's "add" kernel, c = a + b: 3
// arrays moved; what the CUDA backend is measured with — on the CPU the
// read-dominated STREAM of bench/stream_read.h is the bandwidth). Fixed
// repetition counts (never adaptive: under MPI every rank must issue the same
// calls); the median of the timed repetitions is reported.
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "bench/host_cpu.h"
#include "kernels/device.h"

namespace gpuledger::bench {

struct GemmShape {
  std::string name;  // "square 2048", "llama2-7b qkv"
  int64_t m = 0, n = 0, k = 0;
};

struct GemmPeak {
  GemmShape shape;
  DType dtype = DType::kFP32;
  double median_seconds = 0;
  double flops_per_s = 0;  // 2mnk / median
};

struct BandwidthPeak {
  int64_t bytes_per_array = 0;
  double median_seconds = 0;
  double bytes_per_s = 0;  // 3 · bytes_per_array / median
};

// The median over `reps` timed calls of `f` (after `warmup` untimed ones),
// each call followed by dev.synchronize() inside its time.
double time_median(Device& dev, int warmup, int reps, const std::function<void()>& f);
// A hook run before every timed call of time_median, time_median_cold and the
// GEMM-call replay (bench/run/calibrate_gemm_calls.h): `calibrate` under an MPI
// launcher sets a barrier, so that the ranks of a host run the same op at the
// same moment — as a step's ranks do, each op contending with its twin on the
// other cores — and not beside whatever the other rank happens to run. Empty:
// no hook.
void set_timing_barrier(std::function<void()> barrier);
void timing_barrier();
// time_median with kCacheEvictBytes written before every call, outside the
// timed part: in a training step the ops between two calls of an op evict its
// operands from the cores' private caches, and back-to-back calls would find
// them there and run faster than the step does. 8 MiB is twice the 2-core
// machine's L2 (docs/perf-model.md).
inline constexpr int64_t kCacheEvictBytes = int64_t{8} << 20;
// The writes themselves: evict() writes its buffer once (call i passes i as
// the byte, so no two passes are alike); check(last) throws std::logic_error
// if the last pass's writes were dropped (keeps the compiler from eliding them).
class CacheEvictor {
 public:
  explicit CacheEvictor(int64_t bytes = kCacheEvictBytes);
  void evict(int pass);
  void check(int last_pass) const;

 private:
  std::vector<char> buf_;
};
double time_median_cold(Device& dev, int warmup, int reps, const std::function<void()>& f,
                        int64_t evict_bytes = kCacheEvictBytes);
// Fills n elements of `b` in `t` with deterministic N(0, 1) values in an
// unpredictable order (not zeros: some BLAS paths short-cut on zeros; not a
// regular pattern: branchy math runs faster on one, peak.cpp says how much)
// through a host staging vector.
void fill_values(Device& dev, Buffer& b, DType t, int64_t n);

// C (m×n, fp32 accumulate into `dtype` operands' C = fp32) = A (m×k) · Bᵀ (n×k), as a linear layer.
GemmPeak measure_gemm(Device& dev, const GemmShape& shape, DType dtype, int warmup, int reps);
BandwidthPeak measure_bandwidth(Device& dev, int64_t bytes_per_array, int warmup, int reps);

// The shapes `gpuledger peak` measures: squares and the GEMMs of a llama2-7b
// layer at 1024 tokens (QKV, attention-out, MLP in, MLP out).
std::vector<GemmShape> default_gemm_shapes();

// The best GEMM FLOP/s over `shapes` for `dtype` — what MFU on a backend without a
// datasheet peak is taken against.
double best_flops(const std::vector<GemmPeak>& peaks, DType dtype);

// The CPU peak `train` and `infer` take MFU against when there is no datasheet:
// the best GEMM of 1024² and 2048², measured now on a device of its own (so
// the run's ledger and FLOP counter never see it). fp32: the sgemm. bf16 on a
// CPU whose GEMMs multiply bf16 pairs (kernels/cpu/gemm_bf16_dot.h): the
// better of the sgemm and the bf16 GEMM, which is faster there; elsewhere bf16
// and fp16 are widened and multiplied in fp32, and the sgemm is their ceiling.
// Beside it, the caller takes the hardware peak (host_hardware_peak below:
// cores × FMA width × clock), raised to this figure (raise_to_measured). MFU
// is reported against both; above 100 % of either it is an error.
struct SessionPeak {
  double flops_per_s = 0;
  std::string source;
};
SessionPeak measure_cpu_session_peak(DType dtype = DType::kFP32);

// A peak measured at a run's start is taken under whatever load the machine
// had then; on a shared machine the load can fall during the run, and the run
// then reaches more than that peak (an MFU above 100 %). When what the run
// achieved exceeds the start's figure, the run measures again at its end
// (`measure`: measure_cpu_session_peak by default) and keeps the better of
// the two, its source naming both. Still above the better one, the MFU check
// fails as before.
struct RefreshedPeak {
  double flops_per_s = 0;
  std::string source;
  bool remeasured = false;
};
RefreshedPeak refresh_session_peak(double achieved_flops_per_s, double start_flops_per_s,
                                   const std::string& start_source, const std::function<double()>& measure = {});

// The CPU's hardware peak for the CPUs this process runs on, with its source;
// flops 0 and the reason as the source when it cannot be read. Its FLOPs per
// cycle are measured once per process on the calling thread
// (bench/fma_throughput.h), against the clock measured once per process.
struct HardwarePeak {
  double flops_per_s = 0;
  std::string source;
  // One CPU of this host as the peak counted it: the measured FMA throughput,
  // the table beside it and their cross-check (none when unknown).
  std::optional<CpuHardwarePeak> cpu;
};
// dtype bf16: the bf16 figure (CpuHardwarePeak::bf16_flops_per_s).
HardwarePeak host_hardware_peak(DType dtype = DType::kFP32);
// A clock read from /proc/cpuinfo's "cpu MHz" (no cpufreq maximum, as in a
// VM) is the clock of the moment or the base clock, below the boost the cores
// run a GEMM at, and the product then falls below what an sgemm measures (on
// the 2-vCPU EPYC of results/: 2.445 GHz read, 157.9 GFLOP/s measured against
// 156.5 computed). The hardware peak is never below a measurement on the same
// CPUs: raised to it, the source saying so and naming the measurement.
void raise_to_measured(HardwarePeak& hw, double measured_flops_per_s, const std::string& measured_what);
// The same on a report's figure (none: the peak is unknown, and stays so) and its source.
void raise_to_measured(std::optional<double>& hw_flops_per_s, std::string& hw_source, double measured_flops_per_s,
                       const std::string& measured_what);

// A job's: Σ over its hosts of the hardware peak of the CPUs its ranks there
// may run on (bench::cpus_per_host). The CPU model and clock are this host's
// (/proc/cpuinfo here): the hosts are taken to be alike, and the source says so.
HardwarePeak job_hardware_peak(const std::vector<int>& cpus_per_host, DType dtype = DType::kFP32);

}  // namespace gpuledger::bench
