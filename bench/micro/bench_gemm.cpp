// The layer's GEMMs (QKV, O, MLP gate/up/down, LM head) in each pass, at a
// preset's per-TP-rank shapes, as models/transformer/layer.cpp issues them.
// Name: gemm/<backend>/<preset[:tpN]>/<linear>/<fwd|dgrad|wgrad>/<dtype>/seq:T.
#include "bench/micro/families.h"
#include "bench/micro/layer_shapes.h"
#include "bench/micro/micro_context.h"
#include "kernels/flop_counts.h"

namespace gpuledger::micro {

namespace {

void run_gemm(benchmark::State& st, Backend& b, PresetAtTp p, int64_t mbs, std::string linear, Pass pass, DType t) {
  guarded(st, [&] {
    const LayerShapes s = layer_shapes(p.preset, p.tp, st.range(0), mbs);
    LinearShape l;
    for (const auto& x : s.linears)
      if (x.name == linear) l = x;
    GemmArgs g = linear_gemm(l, s.tokens, pass, t);
    Device& dev = *b.dev;
    Buffer a = dev.alloc(g.m * g.k * dtype_bytes(t), Account::kWorkspace, "micro.gemm.a");
    Buffer bb = dev.alloc(g.k * g.n * dtype_bytes(t), Account::kWorkspace, "micro.gemm.b");
    Buffer c = dev.alloc(g.m * g.n * dtype_bytes(g.c_type), Account::kWorkspace, "micro.gemm.c");
    fill_values(dev, a.data(), t, g.m * g.k);
    fill_values(dev, bb.data(), t, g.k * g.n);
    fill_values(dev, c.data(), g.c_type, g.m * g.n);
    g.a = a.data();
    g.b = bb.data();
    g.c = c.data();
    const double total_s = time_op(st, dev, [&] { dev.gemm(g); });
    set_compute_counters(st, b, t, static_cast<double>(gemm_flops(g)), total_s);
  });
}

}  // namespace

void register_gemm(const MicroOptions& o) {
  for (const auto& name : o.backends) {
    Backend* b = backend(name);
    if (!b) continue;
    for (const auto& p : o.presets) {
      const LayerShapes shapes = layer_shapes(p.preset, p.tp, o.seqs.front(), o.mbs);
      for (const auto& l : shapes.linears)
        for (Pass pass : {Pass::kForward, Pass::kDgrad, Pass::kWgrad})
          for (DType t : o.dtypes) {
            const std::string rest =
                shapes.label + "/" + l.name + "/" + pass_name(pass) + "/" + std::string(dtype_name(t));
            auto* bm = benchmark::RegisterBenchmark(bench_name("gemm", name, rest).c_str(),
                                                    [b, p, mbs = o.mbs, l = l.name, pass, t](benchmark::State& st) {
                                                      run_gemm(st, *b, p, mbs, l, pass, t);
                                                    });
            configure(bm)->ArgName("seq");
            for (int64_t seq : o.seqs) bm->Arg(seq);
          }
    }
  }
}

std::string bench_name(const char* family, const std::string& backend, const std::string& rest) {
  return std::string(family) + "/" + backend + "/" + rest;
}

}  // namespace gpuledger::micro
