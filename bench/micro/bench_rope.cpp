// RoPE on the query heads and on the key heads of a llama preset's layer
// (the layer rotates q and k separately), forward and backward, in place.
// Memory-bound: bytes from op_bytes.h.
// Name: rope/<backend>/<preset>/<q|k>/<fwd|bwd>/<dtype>/seq:T
#include "bench/micro/families.h"
#include "bench/micro/layer_shapes.h"
#include "bench/micro/micro_context.h"
#include "kernels/op_bytes.h"

namespace gpuledger::micro {

namespace {

void run_rope(benchmark::State& st, Backend& b, PresetAtTp p, int64_t mbs, bool keys, bool backward, DType t) {
  guarded(st, [&] {
    const LayerShapes s = layer_shapes(p.preset, p.tp, st.range(0), mbs);
    const AttnShape& a = s.attn;
    const int64_t H = keys ? a.Hkv : a.Hq;
    Device& dev = *b.dev;
    Buffer x = dev.alloc(a.B * H * a.T * a.D * dtype_bytes(t), Account::kWorkspace, "micro.rope.x");
    fill_values(dev, x.data(), t, a.B * H * a.T * a.D);
    const double total_s = time_op(st, dev, [&] {
      if (backward)
        dev.rope_backward(x.data(), t, a.B, H, a.T, a.D, 0, s.rope_theta);
      else
        dev.rope_forward(x.data(), t, a.B, H, a.T, a.D, 0, s.rope_theta);
    });
    set_memory_counters(st, b, static_cast<double>(rope_bytes(a.B, H, a.T, a.D, t)), total_s);
  });
}

}  // namespace

void register_rope(const MicroOptions& o) {
  for (const auto& name : o.backends) {
    Backend* b = backend(name);
    if (!b) continue;
    for (const auto& p : o.presets) {
      const LayerShapes s = layer_shapes(p.preset, p.tp, o.seqs.front(), o.mbs);
      if (!s.llama) continue;  // gpt presets have learned positions, no RoPE
      for (bool keys : {false, true})
        for (bool backward : {false, true})
          for (DType t : o.dtypes) {
            const std::string rest =
                s.label + (keys ? "/k/" : "/q/") + (backward ? "bwd/" : "fwd/") + std::string(dtype_name(t));
            auto* bm = benchmark::RegisterBenchmark(bench_name("rope", name, rest).c_str(),
                                                    [b, p, mbs = o.mbs, keys, backward, t](benchmark::State& st) {
                                                      run_rope(st, *b, p, mbs, keys, backward, t);
                                                    });
            configure(bm)->ArgName("seq");
            for (int64_t seq : o.seqs) bm->Arg(seq);
          }
    }
  }
}

}  // namespace gpuledger::micro
