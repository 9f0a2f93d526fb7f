// The ledger's own cost, to put a number on "the ledger's overhead is under 1%
// of a step": booking and unbooking one allocation (Ledger::book/unbook, what
// every Device::alloc and Buffer free adds), a whole Device::alloc + free on
// the meta backend (booking plus the op table's virtual call, no memory), the
// same on each real backend for scale, and counting a GEMM's FLOPs (the meta
// backend's gemm does only that: gemm_flops and the executed-FLOP counter).
// Host wall time per call (these are host-side costs on every backend).
// Names: ledger/book_unbook, ledger/alloc_free/<backend>, ledger/flop_count/meta
#include "bench/micro/families.h"
#include "bench/micro/micro_context.h"

namespace gpuledger::micro {

namespace {

constexpr int64_t kAllocBytes = int64_t{1} << 20;

void run_book(benchmark::State& st) {
  Ledger ledger;
  for (auto _ : st) {
    ledger.book(Account::kWorkspace, kAllocBytes, "micro.book");
    ledger.unbook(Account::kWorkspace, kAllocBytes);
  }
  benchmark::DoNotOptimize(ledger.peak_total());
}

void run_alloc_free(benchmark::State& st, Backend& b) {
  for (auto _ : st) {
    Buffer buf = b.dev->alloc(kAllocBytes, Account::kWorkspace, "micro.alloc");
    benchmark::DoNotOptimize(buf.data());
  }
}

void run_flop_count(benchmark::State& st, Backend& b) {
  GemmArgs g;
  g.m = g.n = g.k = 4096;
  g.lda = g.ldb = g.ldc = 4096;
  for (auto _ : st) b.dev->gemm(g);
  benchmark::DoNotOptimize(b.dev->executed_flops());
}

}  // namespace

void register_ledger(const MicroOptions& o) {
  benchmark::RegisterBenchmark("ledger/book_unbook", run_book)->Unit(benchmark::kNanosecond);
  std::vector<std::string> names = o.backends;
  names.insert(names.begin(), "meta");
  for (const auto& name : names) {
    Backend* b = backend(name);
    if (!b) continue;
    benchmark::RegisterBenchmark(bench_name("ledger", "alloc_free", name).c_str(), [b](benchmark::State& st) {
      run_alloc_free(st, *b);
    })->Unit(benchmark::kNanosecond);
  }
  if (Backend* meta = backend("meta"))
    benchmark::RegisterBenchmark("ledger/flop_count/meta", [meta](benchmark::State& st) {
      run_flop_count(st, *meta);
    })->Unit(benchmark::kNanosecond);
}

}  // namespace gpuledger::micro
