// The attention core at a preset's shapes: materialized (the QKᵀ and PV GEMMs
// around the softmax, as models/transformer/attention.cpp runs it, no
// dropout) and flash (the Device's fused kernel), forward and backward; and
// the softmax alone, a memory-bound op on the T×T scores.
// Names: attention/<backend>/<preset>/<materialized|flash>/<fwd|bwd>/<dtype>/seq:T
//        softmax/<backend>/<preset>/<fwd|bwd>/<dtype>/seq:T
#include "bench/micro/families.h"
#include "bench/micro/layer_shapes.h"
#include "bench/micro/micro_context.h"
#include "kernels/flop_counts.h"
#include "kernels/op_bytes.h"

namespace gpuledger::micro {

namespace {

struct AttnBuffers {
  Buffer q, k, v, out, dout, dq, dk, dv, lse;
};

AttnBuffers attn_buffers(Device& dev, const AttnShape& s, DType t, bool backward) {
  const int64_t e = dtype_bytes(t);
  const int64_t q_elems = s.B * s.Hq * s.T * s.D, kv_elems = s.B * s.Hkv * s.T * s.D;
  AttnBuffers a;
  a.q = dev.alloc(q_elems * e, Account::kWorkspace, "micro.attn.q");
  a.k = dev.alloc(kv_elems * e, Account::kWorkspace, "micro.attn.k");
  a.v = dev.alloc(kv_elems * e, Account::kWorkspace, "micro.attn.v");
  a.out = dev.alloc(q_elems * e, Account::kWorkspace, "micro.attn.out");
  a.lse = dev.alloc(s.B * s.Hq * s.T * 4, Account::kWorkspace, "micro.attn.lse");
  fill_values(dev, a.q.data(), t, q_elems);
  fill_values(dev, a.k.data(), t, kv_elems);
  fill_values(dev, a.v.data(), t, kv_elems);
  if (backward) {
    a.dout = dev.alloc(q_elems * e, Account::kWorkspace, "micro.attn.dout");
    a.dq = dev.alloc(q_elems * e, Account::kWorkspace, "micro.attn.dq");
    a.dk = dev.alloc(kv_elems * e, Account::kWorkspace, "micro.attn.dk");
    a.dv = dev.alloc(kv_elems * e, Account::kWorkspace, "micro.attn.dv");
    fill_values(dev, a.dout.data(), t, q_elems);
  }
  return a;
}

void run_materialized(benchmark::State& st, Backend& b, PresetAtTp p, int64_t mbs, bool backward, DType t) {
  guarded(st, [&] {
    const AttnShape s = layer_shapes(p.preset, p.tp, st.range(0), mbs).attn;
    Device& dev = *b.dev;
    AttnBuffers a = attn_buffers(dev, s, t, backward);
    const int64_t scores = s.B * s.Hq * s.T * s.T;
    Buffer f32 = dev.alloc(scores * 4, Account::kWorkspace, "micro.attn.scores");
    Buffer probs = dev.alloc(scores * dtype_bytes(t), Account::kWorkspace, "micro.attn.probs");
    fill_values(dev, f32.data(), DType::kFP32, scores);
    fill_values(dev, probs.data(), t, scores);
    double flops = 0;
    double total_s = 0;
    if (!backward) {
      auto g = attention_forward_gemms(s, t);
      g[0].a = a.q.data();
      g[0].b = a.k.data();
      g[0].c = f32.data();
      g[1].a = probs.data();
      g[1].b = a.v.data();
      g[1].c = a.out.data();
      for (const auto& x : g) flops += static_cast<double>(gemm_flops(x));
      total_s = time_op(st, dev, [&] {
        dev.gemm(g[0]);
        dev.softmax_forward(probs.data(), f32.as<float>(), t, s);
        dev.gemm(g[1]);
      });
    } else {
      // dS is rounded to t for the dQ and dK GEMMs when t is 16-bit (attention.cpp).
      Buffer ds_e;
      if (t != DType::kFP32) ds_e = dev.alloc(scores * dtype_bytes(t), Account::kWorkspace, "micro.attn.dS");
      const void* ds = t != DType::kFP32 ? ds_e.data() : f32.data();
      auto g = attention_backward_gemms(s, t);
      g[0].a = a.dout.data();
      g[0].b = a.v.data();
      g[0].c = f32.data();  // dP
      g[1].a = probs.data();
      g[1].b = a.dout.data();
      g[1].c = a.dv.data();  // dV
      g[2].a = ds;
      g[2].b = a.k.data();
      g[2].c = a.dq.data();  // dQ
      g[3].a = ds;
      g[3].b = a.q.data();
      g[3].c = a.dk.data();  // dK
      for (const auto& x : g) flops += static_cast<double>(gemm_flops(x));
      total_s = time_op(st, dev, [&] {
        dev.gemm(g[0]);
        dev.gemm(g[1]);
        dev.softmax_backward(f32.as<float>(), f32.as<float>(), probs.data(), t, s);
        if (t != DType::kFP32) dev.convert(ds_e.data(), t, f32.data(), DType::kFP32, scores);
        dev.gemm(g[2]);
        dev.gemm(g[3]);
      });
    }
    set_compute_counters(st, b, t, flops, total_s);
  });
}

void run_flash(benchmark::State& st, Backend& b, PresetAtTp p, int64_t mbs, bool backward, DType t) {
  guarded(st, [&] {
    const AttnShape s = layer_shapes(p.preset, p.tp, st.range(0), mbs).attn;
    Device& dev = *b.dev;
    AttnBuffers a = attn_buffers(dev, s, t, backward);
    const RngKey key{1234, 1};
    auto forward = [&] {
      dev.flash_attention_forward(a.out.data(), a.lse.as<float>(), a.q.data(), a.k.data(), a.v.data(), t, s, 0.0f, key);
    };
    double total_s = 0;
    if (!backward) {
      total_s = time_op(st, dev, forward);
      set_compute_counters(st, b, t, static_cast<double>(flash_forward_flops(s)), total_s);
      return;
    }
    forward();  // the saved out and lse the backward reads
    total_s = time_op(st, dev, [&] {
      dev.flash_attention_backward(a.dq.data(), a.dk.data(), a.dv.data(), a.dout.data(), a.q.data(), a.k.data(),
                                   a.v.data(), a.out.data(), a.lse.as<float>(), t, s, 0.0f, key);
    });
    set_compute_counters(st, b, t, static_cast<double>(flash_backward_flops(s)), total_s);
  });
}

void run_softmax(benchmark::State& st, Backend& b, PresetAtTp p, int64_t mbs, bool backward, DType t) {
  guarded(st, [&] {
    const AttnShape s = layer_shapes(p.preset, p.tp, st.range(0), mbs).attn;
    Device& dev = *b.dev;
    const int64_t scores = s.B * s.Hq * s.T * s.T;
    Buffer f32 = dev.alloc(scores * 4, Account::kWorkspace, "micro.softmax.scores");
    Buffer probs = dev.alloc(scores * dtype_bytes(t), Account::kWorkspace, "micro.softmax.probs");
    fill_values(dev, f32.data(), DType::kFP32, scores);
    fill_values(dev, probs.data(), t, scores);
    double total_s = 0;
    if (!backward) {
      total_s = time_op(st, dev, [&] { dev.softmax_forward(probs.data(), f32.as<float>(), t, s); });
      set_memory_counters(st, b, static_cast<double>(softmax_forward_bytes(s, t)), total_s);
    } else {
      total_s = time_op(st, dev, [&] { dev.softmax_backward(f32.as<float>(), f32.as<float>(), probs.data(), t, s); });
      set_memory_counters(st, b, static_cast<double>(softmax_backward_bytes(s, t)), total_s);
    }
  });
}

using Runner = void (*)(benchmark::State&, Backend&, PresetAtTp, int64_t, bool, DType);

}  // namespace

void register_attention(const MicroOptions& o) {
  struct Kind {
    const char* family;
    const char* what;  // "" for softmax
    Runner run;
  };
  const Kind kinds[] = {{"attention", "materialized/", run_materialized},
                        {"attention", "flash/", run_flash},
                        {"softmax", "", run_softmax}};
  for (const auto& name : o.backends) {
    Backend* b = backend(name);
    if (!b) continue;
    for (const auto& p : o.presets) {
      const std::string label = layer_shapes(p.preset, p.tp, o.seqs.front(), o.mbs).label;
      for (const auto& k : kinds)
        for (bool backward : {false, true})
          for (DType t : o.dtypes) {
            const std::string rest = label + "/" + k.what + (backward ? "bwd/" : "fwd/") + std::string(dtype_name(t));
            auto* bm = benchmark::RegisterBenchmark(bench_name(k.family, name, rest).c_str(),
                                                    [b, p, mbs = o.mbs, backward, t, run = k.run](
                                                        benchmark::State& st) { run(st, *b, p, mbs, backward, t); });
            configure(bm)->ArgName("seq");
            for (int64_t seq : o.seqs) bm->Arg(seq);
          }
    }
  }
}

}  // namespace gpuledger::micro
