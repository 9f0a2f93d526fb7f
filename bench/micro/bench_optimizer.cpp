// The optimizer step's two ops over n parameters: the update of each optimizer
// (AdamW, SGD with momentum, Adagrad, Lion; fp32 weights without a master
// copy; 16-bit weights with an fp32 master, as mixed precision runs it) and
// the gradient norm's Σx² (clipping). Memory-bound: bytes from op_bytes.h;
// the update also reports flops_per_s from optimizer_flops_per_elem
// (kernels/flop_counts.h).
// Names: <adamw|sgd|adagrad|lion>/<backend>/<weight dtype>/params:n
//        grad_norm/<backend>/<grad dtype>/params:n
#include <vector>

#include "bench/micro/families.h"
#include "bench/micro/micro_context.h"
#include "kernels/flop_counts.h"
#include "kernels/op_bytes.h"

namespace gpuledger::micro {

namespace {

// The hyperparameters of each rule (the CLI's defaults; AdamW's constants).
OptimizerHyper bench_hyper(OptimizerKind kind) {
  OptimizerHyper h;
  h.kind = kind;
  h.lr = 1e-3f;
  h.weight_decay = 0.1f;
  h.beta1 = 0.9f;
  h.beta2 = kind == OptimizerKind::kAdamW ? 0.95f : 0.99f;
  h.eps = kind == OptimizerKind::kAdamW ? 1e-8f : 1e-10f;
  h.momentum = 0.9f;
  return h;
}

void run_update(benchmark::State& st, Backend& b, DType t, OptimizerKind kind) {
  guarded(st, [&] {
    const int64_t n = st.range(0);
    const bool master = t != DType::kFP32;
    const OptimizerHyper h = bench_hyper(kind);
    const int states = optimizer_state_count(h);
    Device& dev = *b.dev;
    Buffer w = dev.alloc(n * dtype_bytes(t), Account::kWeights, "micro.optim.w");
    Buffer g = dev.alloc(n * dtype_bytes(t), Account::kGrads, "micro.optim.g");
    Buffer s1 = dev.alloc(n * 4, Account::kOptim, "micro.optim.state1");
    Buffer s2;
    if (states >= 2) s2 = dev.alloc(n * 4, Account::kOptim, "micro.optim.state2");
    Buffer p;
    if (master) p = dev.alloc(n * 4, Account::kMaster, "micro.optim.master");
    fill_values(dev, w.data(), t, n);
    fill_values(dev, g.data(), t, n);
    if (master) fill_values(dev, p.data(), DType::kFP32, n);
    dev.fill_zero(s1.data(), n * 4);
    if (states >= 2) dev.fill_zero(s2.data(), n * 4);
    int64_t step = 0;
    const double total_s = time_op(st, dev, [&] {
      dev.optimizer_update(master ? p.as<float>() : nullptr, w.data(), t, g.data(), t, s1.as<float>(),
                           states >= 2 ? s2.as<float>() : nullptr, n, h, ++step, 1.0f);
    });
    set_memory_counters(st, b, static_cast<double>(optimizer_update_bytes(n, t, t, master, states)), total_s);
    if (total_s > 0)
      st.counters["flops_per_s"] = static_cast<double>(optimizer_flops_per_elem(h)) * static_cast<double>(n) *
                                   static_cast<double>(st.iterations()) / total_s;
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
      std::vector<benchmark::internal::Benchmark*> bms;
      for (OptimizerKind kind :
           {OptimizerKind::kAdamW, OptimizerKind::kSGD, OptimizerKind::kAdagrad, OptimizerKind::kLion})
        bms.push_back(benchmark::RegisterBenchmark(
            bench_name(optimizer_name(kind).data(), name, std::string(dtype_name(t))).c_str(),
            [b, t, kind](benchmark::State& st) { run_update(st, *b, t, kind); }));
      bms.push_back(benchmark::RegisterBenchmark(bench_name("grad_norm", name, std::string(dtype_name(t))).c_str(),
                                                 [b, t](benchmark::State& st) { run_grad_norm(st, *b, t); }));
      for (auto* bm : bms) {
        configure(bm)->ArgName("params");
        for (int64_t n : o.adamw_params) bm->Arg(n);
      }
    }
  }
}

}  // namespace gpuledger::micro
