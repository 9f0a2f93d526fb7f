// The layer's norm at a preset's shapes (N = B·T rows of the hidden size):
// LayerNorm for gpt presets, RMSNorm for llama presets, forward and backward.
// Memory-bound: bytes from op_bytes.h.
// Name: norm/<backend>/<preset>/<layernorm|rmsnorm>/<fwd|bwd>/<dtype>/seq:T
#include "bench/micro/families.h"
#include "bench/micro/layer_shapes.h"
#include "bench/micro/micro_context.h"
#include "kernels/op_bytes.h"

namespace gpuledger::micro {

namespace {

constexpr float kEps = 1e-5f;

void run_norm(benchmark::State& st, Backend& b, PresetAtTp p, int64_t mbs, bool backward, DType t) {
  guarded(st, [&] {
    const LayerShapes s = layer_shapes(p.preset, p.tp, st.range(0), mbs);
    const int64_t N = s.tokens, C = s.hidden, e = dtype_bytes(t);
    Device& dev = *b.dev;
    Buffer x = dev.alloc(N * C * e, Account::kWorkspace, "micro.norm.x");
    Buffer out = dev.alloc(N * C * e, Account::kWorkspace, "micro.norm.out");
    Buffer w = dev.alloc(C * e, Account::kWorkspace, "micro.norm.w");
    Buffer bias = dev.alloc(C * e, Account::kWorkspace, "micro.norm.bias");
    Buffer dw = dev.alloc(C * e, Account::kWorkspace, "micro.norm.dw");
    Buffer dbias = dev.alloc(C * e, Account::kWorkspace, "micro.norm.dbias");
    Buffer mean = dev.alloc(N * 4, Account::kWorkspace, "micro.norm.mean");
    Buffer rstd = dev.alloc(N * 4, Account::kWorkspace, "micro.norm.rstd");
    fill_values(dev, x.data(), t, N * C);
    fill_values(dev, w.data(), t, C);
    fill_values(dev, bias.data(), t, C);
    dev.fill_zero(dw.data(), C * e);
    dev.fill_zero(dbias.data(), C * e);
    double total_s = 0, bytes = 0;
    if (s.llama) {
      dev.rmsnorm_forward(out.data(), rstd.as<float>(), x.data(), w.data(), t, N, C, kEps);
      if (!backward) {
        total_s = time_op(
            st, dev, [&] { dev.rmsnorm_forward(out.data(), rstd.as<float>(), x.data(), w.data(), t, N, C, kEps); });
        bytes = static_cast<double>(rmsnorm_forward_bytes(N, C, t));
      } else {
        Buffer dx = dev.alloc(N * C * e, Account::kWorkspace, "micro.norm.dx");
        total_s = time_op(st, dev, [&] {
          dev.rmsnorm_backward(dx.data(), dw.data(), t, out.data(), x.data(), w.data(), rstd.as<float>(), t, N, C,
                               false);
        });
        bytes = static_cast<double>(rmsnorm_backward_bytes(N, C, t, t));
      }
    } else {
      dev.layernorm_forward(out.data(), mean.as<float>(), rstd.as<float>(), x.data(), w.data(), bias.data(), t, N, C,
                            kEps);
      if (!backward) {
        total_s = time_op(st, dev, [&] {
          dev.layernorm_forward(out.data(), mean.as<float>(), rstd.as<float>(), x.data(), w.data(), bias.data(), t, N,
                                C, kEps);
        });
        bytes = static_cast<double>(layernorm_forward_bytes(N, C, t));
      } else {
        Buffer dx = dev.alloc(N * C * e, Account::kWorkspace, "micro.norm.dx");
        total_s = time_op(st, dev, [&] {
          dev.layernorm_backward(dx.data(), dw.data(), dbias.data(), t, out.data(), x.data(), w.data(),
                                 mean.as<float>(), rstd.as<float>(), t, N, C, false);
        });
        bytes = static_cast<double>(layernorm_backward_bytes(N, C, t, t));
      }
    }
    set_memory_counters(st, b, bytes, total_s);
  });
}

}  // namespace

void register_norm(const MicroOptions& o) {
  for (const auto& name : o.backends) {
    Backend* b = backend(name);
    if (!b) continue;
    for (const auto& p : o.presets) {
      const LayerShapes s = layer_shapes(p.preset, p.tp, o.seqs.front(), o.mbs);
      for (bool backward : {false, true})
        for (DType t : o.dtypes) {
          const std::string rest = s.label + (s.llama ? "/rmsnorm/" : "/layernorm/") + (backward ? "bwd/" : "fwd/") +
                                   std::string(dtype_name(t));
          auto* bm = benchmark::RegisterBenchmark(
              bench_name("norm", name, rest).c_str(),
              [b, p, mbs = o.mbs, backward, t](benchmark::State& st) { run_norm(st, *b, p, mbs, backward, t); });
          configure(bm)->ArgName("seq");
          for (int64_t seq : o.seqs) bm->Arg(seq);
        }
    }
  }
}

}  // namespace gpuledger::micro
