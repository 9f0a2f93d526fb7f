// Measuring this machine's DeviceProfile (perf/device_profile.h) with the CPU
// backend: the GEMM entry every CPU run uses (Device::gemm on make_device
// ("cpu"), through bench::measure_gemm) over a grid of (m, n, k) shaped like
// the small models' layers, the bandwidth-bound op classes on the backend's own
// ops (bench/run/calibrate_op_classes.h), attention per kind over a (seq,
// heads, head_dim) grid (bench/run/calibrate_attention.h), the read STREAM
// (bench/stream_read.h), a memcpy for host copies, a tiny GEMM for the launch
// floor, and the hardware peak (bench/host_cpu.h) the efficiency is taken
// against. Fixed repetition counts; the median of each point. Progress lines
// go to `progress`.
#pragma once
#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "bench/run/calibrate_attention.h"
#include "bench/run/calibrate_op_classes.h"
#include "core/dtype.h"
#include "perf/device_profile.h"

namespace gpuledger::bench {

struct DeviceCalibration {
  std::vector<DType> dtypes = {DType::kFP32, DType::kBF16};
  // The grid: every (m, n, k) of these axes, wide enough that every GEMM of
  // the small models' steps (gpuledger models: hidden 256, FFN 688–1024,
  // vocabulary 4096, head_dim 32, 64–512 tokens per microbatch, halved by
  // tp 2 or cp 2) falls inside it: linear layers' forward, dgrad and wgrad
  // (m, n, k from 128 to 4096) and the materialized attention's per-head
  // GEMMs (k or n = head_dim 32). Outside the grid the roofline prices a GEMM
  // at the best GEMM's rate, which a small or skinny GEMM on the CPU is far
  // from (docs/perf-model.md). Factors of 4, interpolated in log space.
  // --quick: 256 and 1024 on each axis.
  std::vector<int64_t> m = {32, 128, 512, 2048, 4096}, n = {32, 128, 512, 2048, 4096}, k = {16, 64, 256, 1024, 4096};
  int warmup = 1, reps = 3;
  // The op classes and attention are measured in the first of `dtypes` (their
  // dtype is replaced by it): put the dtype of the runs to predict first.
  OpClassCalibration op_classes;
  AttentionCalibration attention;
  std::string name;     // the profile's name (default: the host's)
  std::string command;  // the command line, for the provenance
};
DeviceCalibration quick_device_calibration();

// Sets the OpenMP threads the CPU backend's ops and GEMMs run on, for the
// whole process: call it before the first CPU device is made (the thread
// policy, kernels/cpu/thread_policy.h, reads the count once). n >= 1; throws
// std::invalid_argument otherwise, or when built without OpenMP and n > 1.
void use_cpu_threads(int n);

perf::DeviceProfile calibrate_device(const DeviceCalibration& c, std::ostream& progress);

}  // namespace gpuledger::bench
