// Read bandwidth of this machine, as decode sees it: a vectorized sum over
// one float array of 1 GiB (32× the 32 MiB L3 here), split over the OpenMP
// threads, each thread summing its own contiguous half with four 8-lane
// accumulators (so the loop is bound by loads, not by the add latency).
// The array is first touched by the thread that later reads it. Prints the
// median of 7 passes in GB/s (10^9 bytes per second) and every pass.
// Built and run by run.sh: g++ -O3 -mavx2 -fopenmp read_bw.cpp.
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

typedef float V8 __attribute__((vector_size(32)));

int main() {
  const size_t n = size_t{1} << 28;  // 2^28 floats = 1 GiB
  float* a = static_cast<float*>(std::aligned_alloc(64, n * sizeof(float)));
#pragma omp parallel for schedule(static)
  for (size_t i = 0; i < n; ++i) a[i] = static_cast<float>(i & 1023) * 1e-3f;
  std::vector<double> gbs;
  double keep = 0;
  for (int pass = 0; pass < 7; ++pass) {
    double total = 0;
    const auto t0 = std::chrono::steady_clock::now();
#pragma omp parallel reduction(+ : total)
    {
      const size_t nt = omp_get_num_threads(), t = omp_get_thread_num();
      const size_t lo = n / nt * t, hi = t + 1 == nt ? n : n / nt * (t + 1);
      V8 s0{}, s1{}, s2{}, s3{};
      for (size_t i = lo; i + 32 <= hi; i += 32) {
        V8 x0, x1, x2, x3;
        std::memcpy(&x0, a + i, 32);
        std::memcpy(&x1, a + i + 8, 32);
        std::memcpy(&x2, a + i + 16, 32);
        std::memcpy(&x3, a + i + 24, 32);
        s0 += x0;
        s1 += x1;
        s2 += x2;
        s3 += x3;
      }
      const V8 s = s0 + s1 + s2 + s3;
      for (int l = 0; l < 8; ++l) total += s[l];
    }
    const double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    keep += total;
    gbs.push_back(n * sizeof(float) / sec / 1e9);
  }
  std::vector<double> sorted = gbs;
  std::sort(sorted.begin(), sorted.end());
  std::printf("read_bw_gbs %.3f threads %d passes", sorted[sorted.size() / 2], omp_get_max_threads());
  for (double g : gbs) std::printf(" %.3f", g);
  std::printf(" (checksum %.3e)\n", keep);
  std::free(a);
  return 0;
}
