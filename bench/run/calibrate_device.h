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
  // The grid: every (m, n, k) of these axes. --quick: 256 and 1024 on each.
  std::vector<int64_t> m = {64, 256, 1024, 2048}, n = {256, 768, 2048}, k = {256, 768, 2048};
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
