// The host's read bandwidth (see stream_read.h).
#include "bench/stream_read.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <memory>
#include <stdexcept>
#include <vector>

#include "kernels/cpu/cpu_isa.h"  // GPL_CPU_HAVE_AVX2_PATH, the run-time check

#ifdef GPL_CPU_HAVE_AVX2_PATH
#include <immintrin.h>
#endif
#ifdef _OPENMP
#include <omp.h>
#endif

#include "bench/host_cpu.h"
#include "bench/median.h"
#include "kernels/cpu/thread_policy.h"

namespace gpuledger::bench {

namespace {

constexpr int64_t kPageBytes = 4096;

double dot_scalar(const float* a, const float* b, int64_t n) {
  // Eight independent sums: the compiler may vectorize them, and no sum waits on another's add.
  float s[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int j = 0; j < 8; ++j) s[j] += a[i + j] * b[i + j];
  double t = 0;
  for (int j = 0; j < 8; ++j) t += s[j];
  for (; i < n; ++i) t += static_cast<double>(a[i]) * b[i];
  return t;
}

#ifdef GPL_CPU_HAVE_AVX2_PATH
__attribute__((target("avx2,fma"))) double dot_avx2(const float* a, const float* b, int64_t n) {
  // Four accumulators of 8 lanes: 32 floats (two cache lines of each array) per iteration.
  __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps(), s2 = _mm256_setzero_ps(), s3 = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), s0);
    s1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8), s1);
    s2 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 16), _mm256_loadu_ps(b + i + 16), s2);
    s3 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 24), _mm256_loadu_ps(b + i + 24), s3);
  }
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, _mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3)));
  double t = 0;
  for (float v : lanes) t += v;
  for (; i < n; ++i) t += static_cast<double>(a[i]) * b[i];
  return t;
}
#endif

double dot_range(const float* a, const float* b, int64_t n) {
#ifdef GPL_CPU_HAVE_AVX2_PATH
  if (cpu_best_isa() == CpuIsa::kAvx2) return dot_avx2(a, b, n);
#endif
  return dot_scalar(a, b, n);
}

int pool_threads() {
#ifdef _OPENMP
  return omp_get_max_threads();
#else
  return 1;
#endif
}

struct FreeDeleter {
  void operator()(float* p) const { std::free(p); }
};
using HostArray = std::unique_ptr<float, FreeDeleter>;

HostArray host_array(int64_t bytes) {
  auto* p = static_cast<float*>(std::aligned_alloc(kPageBytes, static_cast<size_t>(bytes)));
  if (!p) throw std::runtime_error(fmt::format("STREAM read: cannot allocate {} bytes of host memory", bytes));
  return HostArray(p);
}

}  // namespace

StreamReadSizing stream_read_sizing(int64_t llc_bytes, int64_t mem_available_bytes, int64_t cap_bytes) {
  StreamReadSizing s;
  s.llc_bytes = llc_bytes;
  s.mem_available_bytes = mem_available_bytes;
  s.cap_bytes = cap_bytes;
  int64_t bytes = std::max(4 * std::max<int64_t>(llc_bytes, 0), kStreamReadFloorBytes);
  bytes = std::min(bytes, cap_bytes);
  if (mem_available_bytes > 0) bytes = std::min(bytes, mem_available_bytes / 4);  // two arrays ≤ half of it
  s.array_bytes = std::max<int64_t>(bytes / kPageBytes * kPageBytes, kPageBytes);
  return s;
}

double stream_dot(const float* a, const float* b, int64_t n) {
  const int threads = pool_threads();
  if (threads <= 1 || n < (int64_t{1} << 16)) return dot_range(a, b, n);
  double total = 0;
#ifdef _OPENMP
  // One contiguous slice per thread, each a multiple of 64 floats (a 256-byte boundary).
#pragma omp parallel num_threads(threads) reduction(+ : total)
  {
    const int64_t t = omp_get_thread_num(), nt = omp_get_num_threads();
    const int64_t per = (n / nt) / 64 * 64;
    const int64_t begin = t * per, end = t == nt - 1 ? n : begin + per;
    total += dot_range(a + begin, b + begin, end - begin);
  }
#endif
  return total;
}

std::string stream_dot_isa() {
#ifdef GPL_CPU_HAVE_AVX2_PATH
  if (cpu_best_isa() == CpuIsa::kAvx2) return "avx2+fma";
#endif
  return "scalar";
}

std::string ReadBandwidth::kernel() const {
  return fmt::format(
      "STREAM read: dot of 2 × {} MiB fp32 arrays ({}, {} threads; LLC {} MiB, arrays sized max(4 × LLC, 64 MiB), "
      "at most {} MiB each and half the available memory together)",
      sizing.array_bytes >> 20, isa, threads, sizing.llc_bytes >> 20, sizing.cap_bytes >> 20);
}

ReadBandwidth measure_read_bandwidth(int warmup, int reps, int64_t array_bytes) {
  apply_cpu_thread_policy();  // the same pool the CPU kernels run on
  ReadBandwidth r;
  r.sizing = stream_read_sizing(last_level_cache_bytes(), mem_available_bytes());
  if (array_bytes > 0) r.sizing.array_bytes = std::max<int64_t>(array_bytes / kPageBytes * kPageBytes, kPageBytes);
  r.threads = pool_threads();
  r.isa = stream_dot_isa();
  const int64_t n = r.sizing.array_bytes / 4;
  HostArray a = host_array(r.sizing.array_bytes), b = host_array(r.sizing.array_bytes);
  // Touched first on the threads that read them later (first-touch pages), with values that are not zeros.
#ifdef _OPENMP
#pragma omp parallel for schedule(static) num_threads(r.threads)
#endif
  for (int64_t i = 0; i < n; ++i) {
    a.get()[i] = static_cast<float>(i % 1000) * 1e-3f;
    b.get()[i] = 1.0f - static_cast<float>(i % 997) * 1e-3f;
  }
  volatile double sink = 0;
  for (int i = 0; i < warmup; ++i) sink = sink + stream_dot(a.get(), b.get(), n);
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    sink = sink + stream_dot(a.get(), b.get(), n);
    t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  r.median_seconds = median(t);
  r.bytes_per_s = r.median_seconds > 0 ? 2.0 * static_cast<double>(r.sizing.array_bytes) / r.median_seconds : 0;
  return r;
}

}  // namespace gpuledger::bench
