// Measured FMA throughput per core (see fma_throughput.h).
#include "bench/fma_throughput.h"

#include <sched.h>
#include <time.h>

#include <algorithm>
#include <cstring>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define GPL_FMA_X86 1
#endif

namespace gpuledger::bench {

namespace {

#ifdef GPL_FMA_X86
// One kernel per width: kFmaChains chains c_i = OP(c_i) for `iterations`
// rounds, returning a lane of their sum so that no chain is dead code. a < 1
// and b > 0 keep every chain near b / (1 − a) = 1: no overflow, no denormal.
// The loop's increment, compare and branch run on integer ports, beside.
#define GPL_FMA_KERNEL(NAME, TARGET, VEC, SET1, ADD, OP)                                                         \
  __attribute__((target(TARGET))) float NAME(int64_t iterations) {                                               \
    const VEC a = SET1(0.999f), b = SET1(0.001f);                                                                \
    VEC c0 = SET1(0.1f), c1 = SET1(0.2f), c2 = SET1(0.3f), c3 = SET1(0.4f);                                      \
    VEC c4 = SET1(0.5f), c5 = SET1(0.6f), c6 = SET1(0.7f), c7 = SET1(0.8f);                                      \
    VEC c8 = SET1(0.9f), c9 = SET1(1.1f), c10 = SET1(1.2f), c11 = SET1(1.3f);                                    \
    for (int64_t i = 0; i < iterations; ++i) {                                                                   \
      c0 = OP(c0);                                                                                               \
      c1 = OP(c1);                                                                                               \
      c2 = OP(c2);                                                                                               \
      c3 = OP(c3);                                                                                               \
      c4 = OP(c4);                                                                                               \
      c5 = OP(c5);                                                                                               \
      c6 = OP(c6);                                                                                               \
      c7 = OP(c7);                                                                                               \
      c8 = OP(c8);                                                                                               \
      c9 = OP(c9);                                                                                               \
      c10 = OP(c10);                                                                                             \
      c11 = OP(c11);                                                                                             \
    }                                                                                                            \
    const VEC s =                                                                                                \
        ADD(ADD(ADD(ADD(c0, c1), ADD(c2, c3)), ADD(ADD(c4, c5), ADD(c6, c7))), ADD(ADD(c8, c9), ADD(c10, c11))); \
    float lanes[sizeof(VEC) / sizeof(float)];                                                                    \
    std::memcpy(lanes, &s, sizeof(s));                                                                           \
    return lanes[0];                                                                                             \
  }
static_assert(kFmaChains == 12, "the kernels spell out 12 chains");

#define GPL_SSE_OP(c) _mm_add_ps(_mm_mul_ps(c, a), b)
#define GPL_FMA128_OP(c) _mm_fmadd_ps(c, a, b)
#define GPL_AVX_OP(c) _mm256_add_ps(_mm256_mul_ps(c, a), b)
#define GPL_FMA256_OP(c) _mm256_fmadd_ps(c, a, b)
#define GPL_FMA512_OP(c) _mm512_fmadd_ps(c, a, b)
GPL_FMA_KERNEL(chains_sse, "sse2", __m128, _mm_set1_ps, _mm_add_ps, GPL_SSE_OP)
GPL_FMA_KERNEL(chains_fma128, "fma", __m128, _mm_set1_ps, _mm_add_ps, GPL_FMA128_OP)
GPL_FMA_KERNEL(chains_avx, "avx", __m256, _mm256_set1_ps, _mm256_add_ps, GPL_AVX_OP)
GPL_FMA_KERNEL(chains_fma256, "avx,fma", __m256, _mm256_set1_ps, _mm256_add_ps, GPL_FMA256_OP)
GPL_FMA_KERNEL(chains_fma512, "avx512f", __m512, _mm512_set1_ps, _mm512_add_ps, GPL_FMA512_OP)

struct FmaKernel {
  const char* isa;
  int width_bits;
  bool fused;
  float (*run)(int64_t);
};

// The kernels this CPU runs, one per width: fused where it has FMA.
std::vector<FmaKernel> kernels_here() {
  __builtin_cpu_init();
  const bool fma = __builtin_cpu_supports("fma");
  std::vector<FmaKernel> k;
  k.push_back(fma ? FmaKernel{"fma128", 128, true, chains_fma128} : FmaKernel{"sse", 128, false, chains_sse});
  if (__builtin_cpu_supports("avx"))
    k.push_back(fma ? FmaKernel{"avx+fma", 256, true, chains_fma256} : FmaKernel{"avx", 256, false, chains_avx});
  if (__builtin_cpu_supports("avx512f")) k.push_back({"avx512f", 512, true, chains_fma512});
  return k;
}

double thread_seconds() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

// Keeps the calling thread on the CPU it is on for the measurement's life, and
// gives the old mask back after: one core's throughput, not a migration's.
class PinToThisCpu {
 public:
  PinToThisCpu() {
    CPU_ZERO(&old_);
    const int cpu = sched_getcpu();
    if (cpu < 0 || sched_getaffinity(0, sizeof(old_), &old_) != 0) return;
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    pinned_ = sched_setaffinity(0, sizeof(one), &one) == 0;
  }
  ~PinToThisCpu() {
    if (pinned_) sched_setaffinity(0, sizeof(old_), &old_);
  }
  PinToThisCpu(const PinToThisCpu&) = delete;
  PinToThisCpu& operator=(const PinToThisCpu&) = delete;

 private:
  cpu_set_t old_;
  bool pinned_ = false;
};
#undef GPL_SSE_OP
#undef GPL_FMA128_OP
#undef GPL_AVX_OP
#undef GPL_FMA256_OP
#undef GPL_FMA512_OP
#undef GPL_FMA_KERNEL
#endif

}  // namespace

std::vector<MeasuredFma> measure_fma_throughput(double clock_hz) {
  std::vector<MeasuredFma> out;
#ifdef GPL_FMA_X86
  if (!(clock_hz > 0)) return out;
  // 2^18 rounds × 12 chains: 3.1 M FMAs, 1.6 M cycles at 2 FMAs a cycle (about
  // 0.5 ms at 3 GHz), 3.1 M at one; the best of 7 runs after one untimed.
  constexpr int64_t kRounds = int64_t{1} << 18;
  constexpr int kRuns = 7;
  const PinToThisCpu pin;
  volatile float sink = 0;
  for (const FmaKernel& k : kernels_here()) {
    sink = sink + k.run(kRounds / 8);  // warm the unit up (AVX-512 pipes wake up on first use)
    double best_s = 0;
    for (int run = 0; run < kRuns; ++run) {
      const double t0 = thread_seconds();
      sink = sink + k.run(kRounds);
      const double s = thread_seconds() - t0;
      if (s > 0 && (best_s == 0 || s < best_s)) best_s = s;
    }
    if (best_s <= 0) continue;
    MeasuredFma m;
    m.isa = k.isa;
    m.width_bits = k.width_bits;
    m.fp32_lanes = k.width_bits / 32;
    m.fused = k.fused;
    m.fma_per_s = static_cast<double>(kRounds * kFmaChains) / best_s;
    m.fma_per_cycle = m.fma_per_s / clock_hz;
    m.flops_per_cycle = m.fma_per_cycle * 2.0 * m.fp32_lanes;
    out.push_back(m);
  }
#else
  (void)clock_hz;
#endif
  return out;
}

const MeasuredFma* best_fma(const std::vector<MeasuredFma>& measured) {
  const auto at = std::max_element(measured.begin(), measured.end(), [](const MeasuredFma& a, const MeasuredFma& b) {
    return a.flops_per_cycle < b.flops_per_cycle;
  });
  return at == measured.end() ? nullptr : &*at;
}

}  // namespace gpuledger::bench
#undef GPL_FMA_X86
