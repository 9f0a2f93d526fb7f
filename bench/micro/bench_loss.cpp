// Cross-entropy over the LM head's fp32 logits (N = B·T rows, the padded
// vocabulary as columns, the real vocabulary in the softmax), forward and
// backward. Presets at tp > 1 are left out: their loss is the
// vocabulary-parallel ops between all-reduces, not this op.
// Memory-bound: bytes from op_bytes.h.
// Name: cross_entropy/<backend>/<preset>/<fwd|bwd>/seq:T
#include "bench/micro/families.h"
#include "bench/micro/layer_shapes.h"
#include "bench/micro/micro_context.h"
#include "kernels/op_bytes.h"

namespace gpuledger::micro {

namespace {

void run_loss(benchmark::State& st, Backend& b, PresetAtTp p, int64_t mbs, bool backward) {
  guarded(st, [&] {
    const LayerShapes s = layer_shapes(p.preset, p.tp, st.range(0), mbs);
    const int64_t N = s.tokens, Vp = s.vocab_local, V = s.vocab;
    Device& dev = *b.dev;
    Buffer logits = dev.alloc(N * Vp * 4, Account::kWorkspace, "micro.ce.logits");
    Buffer targets = dev.alloc(N * 4, Account::kWorkspace, "micro.ce.targets");
    Buffer losses = dev.alloc(N * 4, Account::kWorkspace, "micro.ce.losses");
    fill_values(dev, logits.data(), DType::kFP32, N * Vp);
    fill_ids(dev, targets.as<int32_t>(), N, V);
    double total_s = 0;
    if (!backward) {
      total_s = time_op(st, dev, [&] {
        dev.cross_entropy_forward(losses.as<float>(), logits.as<float>(), targets.as<int32_t>(), N, Vp, V);
      });
      set_memory_counters(st, b, static_cast<double>(cross_entropy_forward_bytes(N, Vp)), total_s);
    } else {
      Buffer dlogits = dev.alloc(N * Vp * 4, Account::kWorkspace, "micro.ce.dlogits");
      total_s = time_op(st, dev, [&] {
        dev.cross_entropy_backward(dlogits.as<float>(), logits.as<float>(), targets.as<int32_t>(), N, Vp, V,
                                   1.0f / static_cast<float>(N));
      });
      set_memory_counters(st, b, static_cast<double>(cross_entropy_backward_bytes(N, Vp)), total_s);
    }
  });
}

}  // namespace

void register_loss(const MicroOptions& o) {
  for (const auto& name : o.backends) {
    Backend* b = backend(name);
    if (!b) continue;
    for (const auto& p : o.presets) {
      if (p.tp > 1) continue;
      const std::string label = layer_shapes(p.preset, p.tp, o.seqs.front(), o.mbs).label;
      for (bool backward : {false, true}) {
        auto* bm = benchmark::RegisterBenchmark(
            bench_name("cross_entropy", name, label + (backward ? "/bwd" : "/fwd")).c_str(),
            [b, p, mbs = o.mbs, backward](benchmark::State& st) { run_loss(st, *b, p, mbs, backward); });
        configure(bm)->ArgName("seq");
        for (int64_t seq : o.seqs) bm->Arg(seq);
      }
    }
  }
}

}  // namespace gpuledger::micro
