// A read-dominated STREAM on the host: the dot product of two fp32 arrays,
// each at least four times the last-level cache, so that what is timed is
// memory and not cache (McCalpin's STREAM rule: arrays ≥ 4 × the caches). A
// decode step is almost all reads (weights and K/V), which is why this, not
// STREAM's add (one write per two reads), is the bandwidth it is taken against.
// Vectorized with AVX2 + FMA where the CPU has them (chosen at run time by the
// CPU kernels' check, kernels/cpu/cpu_isa.h: AVX2, FMA and F16C), and
// threaded over the OpenMP pool the CPU kernels use (kernels/cpu/thread_policy.h).
#pragma once
#include <cstdint>
#include <string>

namespace gpuledger::bench {

// The rule that sizes the arrays: max(4 × LLC, 64 MiB) each, at most `cap_bytes`
// each, and both together at most half of the memory available.
struct StreamReadSizing {
  int64_t llc_bytes = 0;            // 0: unknown
  int64_t mem_available_bytes = 0;  // 0: unknown (no bound from it)
  int64_t cap_bytes = 0;
  int64_t array_bytes = 0;  // each of the two arrays (a multiple of 4 KiB)
};
inline constexpr int64_t kStreamReadFloorBytes = int64_t{64} << 20;
inline constexpr int64_t kStreamReadCapBytes = int64_t{1} << 30;
StreamReadSizing stream_read_sizing(int64_t llc_bytes, int64_t mem_available_bytes,
                                    int64_t cap_bytes = kStreamReadCapBytes);

// Σ a[i]·b[i] over n floats on the OpenMP threads (AVX2 + FMA when supported).
double stream_dot(const float* a, const float* b, int64_t n);
// The vector path stream_dot takes on this CPU: "avx2+fma" or "scalar".
std::string stream_dot_isa();

struct ReadBandwidth {
  StreamReadSizing sizing;
  int threads = 0;
  std::string isa;
  double median_seconds = 0;
  double bytes_per_s = 0;      // 2 × array bytes / median
  std::string kernel() const;  // "STREAM read: dot of 2 × 128 MiB fp32 arrays (…)"
};

// Measures it now on host memory of its own (not a Device's: nothing is booked).
// `array_bytes` > 0 overrides the sizing rule (the rule's figures are still reported).
ReadBandwidth measure_read_bandwidth(int warmup, int reps, int64_t array_bytes = 0);

}  // namespace gpuledger::bench
