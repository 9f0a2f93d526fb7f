// The vector FMA throughput of one core, measured rather than looked up: for
// each vector width the CPU runs (128-bit, 256-bit AVX, 512-bit AVX-512F),
// kFmaChains independent chains of fp32 FMAs (c = c·a + b) on the calling
// thread, pinned to the CPU it is on, timed in thread CPU time. The chains
// outnumber latency × units on every x86 core (4–5 cycles × 2 units), so the
// core issues FMAs as fast as its units take them; FMA/s over the clock
// (measure_core_clock_hz, the same thread CPU time) is FMAs per cycle.
// A micro-architecture table (bench/host_cpu.h) is then only a cross-check:
// Zen/Zen+ split a 256-bit FMA into two 128-bit halves, an AVX-512 part may
// have one 512-bit unit or two, and a table written today is wrong on the
// core that ships tomorrow. Without FMA a multiply and a dependent add stand
// in for one (what a mul + add pipe pair retires). Not here: the clock, the
// table, how many cores.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace gpuledger::bench {

// Independent accumulator chains per kernel: latency × units is at most 10 on
// the x86 cores of the last decade (Zen 4: 4 cycles × 2 pipes; Skylake-SP: 4 ×
// 2; Zen 1: 5 × 2 halves), and 12 accumulators plus the two operands fit the
// 16 registers SSE and AVX have.
inline constexpr int kFmaChains = 12;

// One width's measured throughput on one core.
struct MeasuredFma {
  std::string isa;             // the kernel's instruction set: "avx512f", "avx+fma", "fma128", "avx", "sse"
  int width_bits = 0;          // 128, 256, 512
  int fp32_lanes = 0;          // width_bits / 32
  bool fused = true;           // false: a multiply and an add (no FMA on this CPU)
  double fma_per_s = 0;        // FMAs (or mul + add pairs) per second of thread CPU time, best of the runs
  double fma_per_cycle = 0;    // fma_per_s / the measured clock
  double flops_per_cycle = 0;  // fma_per_cycle × 2 × fp32_lanes
};

// Measures every width this CPU runs (__builtin_cpu_supports), a few ms each,
// the best of several runs, against `clock_hz`; empty off x86-64 or when
// clock_hz is not positive.
std::vector<MeasuredFma> measure_fma_throughput(double clock_hz);

// The entry of `measured` with the most FLOPs per cycle; nullptr when it is empty.
const MeasuredFma* best_fma(const std::vector<MeasuredFma>& measured);

}  // namespace gpuledger::bench
