// The layer's remaining ops, so that the per-op times add up to a step:
// residual add, the MLP activation (SwiGLU for llama, GELU for gpt), the
// attention layout copies, and the token embedding. Memory-bound: bytes from
// op_bytes.h. Shapes per TP rank, n = B·T tokens.
// Name: elementwise/<backend>/<preset>/<op>/<dtype>/seq:T
#include <functional>

#include "bench/micro/families.h"
#include "bench/micro/layer_shapes.h"
#include "bench/micro/micro_context.h"
#include "kernels/op_bytes.h"

namespace gpuledger::micro {

namespace {

enum class Op { kAdd, kActFwd, kActBwd, kSplitQkv, kMergeQkvGrad, kMergeHeads, kSplitHeads, kEmbFwd, kEmbBwd };

const char* op_name(Op op, bool llama) {
  switch (op) {
    case Op::kAdd: return "add";
    case Op::kActFwd: return llama ? "swiglu_fwd" : "gelu_fwd";
    case Op::kActBwd: return llama ? "swiglu_bwd" : "gelu_bwd";
    case Op::kSplitQkv: return "split_qkv";
    case Op::kMergeQkvGrad: return "merge_qkv_grad";
    case Op::kMergeHeads: return "merge_heads";
    case Op::kSplitHeads: return "split_heads";
    case Op::kEmbFwd: return "embedding_fwd";
    case Op::kEmbBwd: return "embedding_bwd";
  }
  return "?";
}

void run_elementwise(benchmark::State& st, Backend& b, PresetAtTp p, int64_t mbs, Op op, DType t) {
  guarded(st, [&] {
    const LayerShapes s = layer_shapes(p.preset, p.tp, st.range(0), mbs);
    const AttnShape& a = s.attn;
    const int64_t n = s.tokens, e = dtype_bytes(t);
    const int64_t qkv_elems = n * (a.Hq + 2 * a.Hkv) * a.D, q_elems = n * a.Hq * a.D;
    Device& dev = *b.dev;
    // Three operands large enough for any of the ops, and one more for the backward ones.
    int64_t elems = n * s.hidden;
    if (op == Op::kActFwd || op == Op::kActBwd) elems = n * s.ffn_local;
    if (op == Op::kSplitQkv || op == Op::kMergeQkvGrad) elems = qkv_elems;
    if (op == Op::kMergeHeads || op == Op::kSplitHeads) elems = q_elems;
    Buffer x = dev.alloc(elems * e, Account::kWorkspace, "micro.ew.x");
    Buffer y = dev.alloc(elems * e, Account::kWorkspace, "micro.ew.y");
    Buffer z = dev.alloc(elems * e, Account::kWorkspace, "micro.ew.z");
    Buffer w = dev.alloc(elems * e, Account::kWorkspace, "micro.ew.w");
    for (Buffer* buf : {&x, &y, &z, &w}) fill_values(dev, buf->data(), t, elems);
    std::function<void()> call;
    int64_t bytes = 0;
    switch (op) {
      case Op::kAdd:
        call = [&] { dev.add(z.data(), x.data(), y.data(), t, elems); };
        bytes = add_bytes(elems, t);
        break;
      case Op::kActFwd:
        call = s.llama ? std::function<void()>([&] { dev.swiglu_forward(z.data(), x.data(), y.data(), t, elems); })
                       : std::function<void()>([&] { dev.gelu_forward(z.data(), x.data(), t, elems); });
        bytes = s.llama ? swiglu_forward_bytes(elems, t) : gelu_forward_bytes(elems, t);
        break;
      case Op::kActBwd:
        call = s.llama ? std::function<void()>(
                             [&] { dev.swiglu_backward(z.data(), w.data(), x.data(), y.data(), x.data(), t, elems); })
                       : std::function<void()>([&] { dev.gelu_backward(z.data(), x.data(), y.data(), t, elems); });
        bytes = s.llama ? swiglu_backward_bytes(elems, t) : gelu_backward_bytes(elems, t);
        break;
      case Op::kSplitQkv:  // qkv rows in x; q, k, v one after another in y
        call = [&] {
          char* q = static_cast<char*>(y.data());
          dev.split_qkv(q, q + q_elems * e, q + (q_elems + n * a.Hkv * a.D) * e, x.data(), t, a);
        };
        bytes = layout_copy_bytes(qkv_elems, t);
        break;
      case Op::kMergeQkvGrad:
        call = [&] {
          const char* dq = static_cast<const char*>(y.data());
          dev.merge_qkv_grad(x.data(), dq, dq + q_elems * e, dq + (q_elems + n * a.Hkv * a.D) * e, t, a);
        };
        bytes = layout_copy_bytes(qkv_elems, t);
        break;
      case Op::kMergeHeads:
        call = [&] { dev.merge_heads(z.data(), x.data(), t, a); };
        bytes = layout_copy_bytes(q_elems, t);
        break;
      case Op::kSplitHeads:
        call = [&] { dev.split_heads(z.data(), x.data(), t, a); };
        bytes = layout_copy_bytes(q_elems, t);
        break;
      case Op::kEmbFwd:
      case Op::kEmbBwd: {
        // The table: one row per token id used (ids 0 … n−1 cycle through
        // the vocabulary's first rows; a gather's cost does not depend on
        // which rows), in z; ids in w; gpt's positions in y.
        fill_ids(dev, static_cast<int32_t*>(w.data()), n, std::min<int64_t>(n, s.vocab));
        const void* wpe = s.llama ? nullptr : y.data();
        if (op == Op::kEmbFwd) {
          call = [&, wpe] {
            dev.embedding_forward(x.data(), static_cast<const int32_t*>(w.data()), z.data(), wpe, t, a.B, a.T, s.hidden,
                                  0);
          };
          bytes = embedding_forward_bytes(n, s.hidden, t);
        } else {
          call = [&] {
            dev.embedding_backward(z.data(), s.llama ? nullptr : y.data(), t, x.data(), t,
                                   static_cast<const int32_t*>(w.data()), a.B, a.T, s.hidden, 0);
          };
          bytes = embedding_backward_bytes(n, s.hidden, t, t);
        }
        break;
      }
    }
    const double total_s = time_op(st, dev, call);
    set_memory_counters(st, b, static_cast<double>(bytes), total_s);
  });
}

}  // namespace

void register_elementwise(const MicroOptions& o) {
  const Op ops[] = {Op::kAdd,        Op::kActFwd,     Op::kActBwd, Op::kSplitQkv, Op::kMergeQkvGrad,
                    Op::kMergeHeads, Op::kSplitHeads, Op::kEmbFwd, Op::kEmbBwd};
  for (const auto& name : o.backends) {
    Backend* b = backend(name);
    if (!b) continue;
    for (const auto& p : o.presets) {
      const LayerShapes s = layer_shapes(p.preset, p.tp, o.seqs.front(), o.mbs);
      for (Op op : ops)
        for (DType t : o.dtypes) {
          const std::string rest = s.label + "/" + op_name(op, s.llama) + "/" + std::string(dtype_name(t));
          auto* bm = benchmark::RegisterBenchmark(
              bench_name("elementwise", name, rest).c_str(),
              [b, p, mbs = o.mbs, op, t](benchmark::State& st) { run_elementwise(st, *b, p, mbs, op, t); });
          configure(bm)->ArgName("seq");
          for (int64_t seq : o.seqs) bm->Arg(seq);
        }
    }
  }
}

}  // namespace gpuledger::micro
