// The optimizer step's two ops over n parameters: AdamW (fp32 weights without
// a master copy; 16-bit weights with an fp32 master, as mixed precision runs
// it) and the gradient norm's Σx² (clipping). Memory-bound: bytes from op_bytes.h.
// Names: adamw/<backend>/<weight dtype>/params:n   grad_norm/<backend>/<grad dtype>/params:n
#include "bench/micro/families.h"
#include "bench/micro/micro_context.h"
#include "bench/micro/op_bytes.h"

namespace gpuledger::micro {

namespace {

void run_adamw(benchmark::State& st, Backend& b, DType t) {
  guarded(st, [&] {
    const int64_t n = st.range(0);
    const bool master = t != DType::kFP32;
    Device& dev = *b.dev;
    Buffer w = dev.alloc(n * dtype_bytes(t), Account::kWeights, "micro.adamw.w");
    Buffer g = dev.alloc(n * dtype_bytes(t), Account::kGrads, "micro.adamw.g");
    Buffer m = dev.alloc(n * 4, Account::kOptim, "micro.adamw.m");
    Buffer v = dev.alloc(n * 4, Account::kOptim, "micro.adamw.v");
    Buffer p;
    if (master) p = dev.alloc(n * 4, Account::kMaster, "micro.adamw.master");
    fill_values(dev, w.data(), t, n);
    fill_values(dev, g.data(), t, n);
    if (master) fill_values(dev, p.data(), DType::kFP32, n);
    dev.fill_zero(m.data(), n * 4);
    dev.fill_zero(v.data(), n * 4);
    int64_t step = 0;
    const double total_s = time_op(st, dev, [&] {
      dev.adamw(master ? p.as<float>() : nullptr, w.data(), t, g.data(), t, m.as<float>(), v.as<float>(), n, 1e-3f,
                0.9f, 0.95f, 1e-8f, 0.1f, ++step, 1.0f);
    });
    set_memory_counters(st, b, static_cast<double>(adamw_bytes(n, t, t, master)), total_s);
  });
}

void run_grad_norm(benchmark::State& st, Backend& b, DType t) {
  guarded(st, [&] {
    const int64_t n = st.range(0);
    Device& dev = *b.dev;
    Buffer g = dev.alloc(n * dtype_bytes(t), Account::kGrads, "micro.grad_norm.g");
    fill_values(dev, g.data(), t, n);
    double sink = 0;
    const double total_s = time_op(st, dev, [&] { sink += dev.sum_squares(g.data(), t, n); });
    benchmark::DoNotOptimize(sink);
    set_memory_counters(st, b, static_cast<double>(n * dtype_bytes(t)), total_s);
  });
}

}  // namespace

void register_adamw(const MicroOptions& o) {
  for (const auto& name : o.backends) {
    Backend* b = backend(name);
    if (!b) continue;
    for (DType t : o.dtypes) {
      auto* adam = benchmark::RegisterBenchmark(bench_name("adamw", name, std::string(dtype_name(t))).c_str(),
                                                [b, t](benchmark::State& st) { run_adamw(st, *b, t); });
      auto* norm = benchmark::RegisterBenchmark(bench_name("grad_norm", name, std::string(dtype_name(t))).c_str(),
                                                [b, t](benchmark::State& st) { run_grad_norm(st, *b, t); });
      for (auto* bm : {adam, norm}) {
        configure(bm)->ArgName("params");
        for (int64_t n : o.adamw_params) bm->Arg(n);
      }
    }
  }
}

}  // namespace gpuledger::micro
