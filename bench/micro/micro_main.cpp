// gpl_micro: per-op microbenchmarks of the Device op table (Google Benchmark).
// Our --gpl_* flags choose what is registered (micro_options.h); every other
// flag is Google Benchmark's (--benchmark_filter, --benchmark_repetitions,
// --benchmark_out=… --benchmark_out_format=json, --benchmark_list_tests, …).
// The reference peaks are measured (or looked up) once, after registration
// and before the first benchmark, unless only listing.
#include <benchmark/benchmark.h>

#include <cstring>
#include <iostream>

#include "bench/micro/families.h"
#include "bench/micro/micro_context.h"
#include "bench/micro/micro_options.h"

namespace {

bool has_flag(int argc, char** argv, const char* flag) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == flag || a == std::string(flag) + "=true" || a == std::string(flag) + "=1") return true;
  }
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace gpuledger::micro;
  if (has_flag(argc, argv, "--help")) std::cout << micro_options_help() << "\n";
  MicroOptions o;
  try {
    o = parse_micro_options(&argc, argv);
  } catch (const std::exception& e) {
    std::cerr << "gpl_micro: " << e.what() << "\n" << micro_options_help();
    return 2;
  }
  const bool listing = has_flag(argc, argv, "--benchmark_list_tests");
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 2;
  try {
    register_gemm(o);
    register_attention(o);
    register_norm(o);
    register_rope(o);
    register_loss(o);
    register_adamw(o);
    register_kv(o);
    register_convert(o);
    register_elementwise(o);
    register_ledger(o);
    if (!listing) set_reference_peaks(o.peak);
  } catch (const std::exception& e) {
    std::cerr << "gpl_micro: " << e.what() << "\n";
    return 2;
  }
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
