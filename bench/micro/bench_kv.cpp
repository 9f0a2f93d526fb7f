// The KV cache ops of decode: a batch of sequences, each holding `ctx`
// tokens, appends one token (kv_cache_write) and attends to all it holds
// (cached_attention), for each cache layout and value format. One layer of a
// preset's per-rank KV heads. Paged: 16-token blocks whose ids interleave the
// sequences (a pool after churn, no sequence contiguous); contiguous: one
// region of ctx slots per sequence. Quantized formats keep per-token-head
// scales. Activations (q, k, v, out) are bf16, as inference runs them.
// kv_cache_write is memory-bound; cached_attention gets both FLOP and byte
// counters (decode reads each cached byte for ~Hq/Hkv multiply-adds).
// Names: kv_cache_write/<backend>/<preset>/<paged|contiguous>/<bf16|fp8|int8>/ctx:n
//        cached_attention/…  (same)
#include "bench/micro/families.h"
#include "bench/micro/layer_shapes.h"
#include "bench/micro/micro_context.h"
#include "kernels/flop_counts.h"
#include "kernels/op_bytes.h"

namespace gpuledger::micro {

namespace {

constexpr int64_t kBlockTokens = 16;
constexpr DType kActType = DType::kBF16;

struct KvRig {
  Buffer pool;
  KvCacheView view;
};

KvRig make_cache(Device& dev, const AttnShape& a, KvFormat f, bool paged, int64_t batch, int64_t ctx) {
  KvRig r;
  KvCacheView& v = r.view;
  v.format = f;
  v.scales = KvScales::kPerTokenHead;
  v.Hkv = a.Hkv;
  v.D = a.D;
  v.block_tokens = paged ? kBlockTokens : ctx;
  v.block_bytes = v.block_tokens * v.layer_token_bytes();
  const int64_t blocks_per_seq = (ctx + v.block_tokens - 1) / v.block_tokens;
  r.pool = dev.alloc(batch * blocks_per_seq * v.block_bytes, Account::kKv, "micro.kv.pool");
  dev.fill_zero(r.pool.data(), r.pool.bytes());
  for (int64_t s = 0; s < batch; ++s) {
    KvSeqView q;
    q.len = ctx;
    q.n_new = 1;
    if (paged) {
      q.base = r.pool.data();
      for (int64_t j = 0; j < blocks_per_seq; ++j) q.blocks.push_back(static_cast<int32_t>(j * batch + s));
    } else {
      q.base = static_cast<char*>(r.pool.data()) + s * v.block_bytes;
      q.blocks.push_back(0);
    }
    v.seqs.push_back(std::move(q));
  }
  validate_kv_view(v, "gpl_micro");
  return r;
}

void run_kv(benchmark::State& st, Backend& b, PresetAtTp p, bool paged, KvFormat f, int64_t batch, bool attend) {
  guarded(st, [&] {
    const int64_t ctx = st.range(0);
    const AttnShape a = layer_shapes(p.preset, p.tp, ctx, 1).attn;
    Device& dev = *b.dev;
    KvRig r = make_cache(dev, a, f, paged, batch, ctx);
    const int64_t e = dtype_bytes(kActType);
    Buffer k = dev.alloc(batch * a.Hkv * a.D * e, Account::kWorkspace, "micro.kv.k");
    Buffer v = dev.alloc(batch * a.Hkv * a.D * e, Account::kWorkspace, "micro.kv.v");
    Buffer q = dev.alloc(batch * a.Hq * a.D * e, Account::kWorkspace, "micro.kv.q");
    Buffer out = dev.alloc(batch * a.Hq * a.D * e, Account::kWorkspace, "micro.kv.out");
    fill_values(dev, k.data(), kActType, batch * a.Hkv * a.D);
    fill_values(dev, v.data(), kActType, batch * a.Hkv * a.D);
    fill_values(dev, q.data(), kActType, batch * a.Hq * a.D);
    double total_s = 0;
    if (!attend) {
      total_s = time_op(st, dev, [&] { dev.kv_cache_write(r.view, k.data(), v.data(), kActType, false); });
      set_memory_counters(st, b, static_cast<double>(kv_cache_write_bytes(r.view, kActType)), total_s);
    } else {
      dev.kv_cache_write(r.view, k.data(), v.data(), kActType, false);
      total_s = time_op(st, dev, [&] { dev.cached_attention(out.data(), q.data(), kActType, a.Hq, r.view); });
      set_compute_counters(st, b, kActType, static_cast<double>(cached_attention_flops(a.Hq, r.view)), total_s);
      set_memory_counters(st, b, static_cast<double>(cached_attention_bytes(a.Hq, r.view, kActType)), total_s);
    }
  });
}

}  // namespace

void register_kv(const MicroOptions& o) {
  for (const auto& name : o.backends) {
    Backend* b = backend(name);
    if (!b) continue;
    for (const auto& p : o.presets) {
      const std::string label = layer_shapes(p.preset, p.tp, o.seqs.front(), o.mbs).label;
      for (bool attend : {false, true})
        for (bool paged : {true, false})
          for (KvFormat f : {KvFormat::kBF16, KvFormat::kFP8E4M3, KvFormat::kInt8}) {
            const std::string rest = label + (paged ? "/paged/" : "/contiguous/") + std::string(kv_format_name(f));
            auto* bm = benchmark::RegisterBenchmark(
                bench_name(attend ? "cached_attention" : "kv_cache_write", name, rest).c_str(),
                [b, p, paged, f, batch = o.kv_batch, attend](benchmark::State& st) {
                  run_kv(st, *b, p, paged, f, batch, attend);
                });
            configure(bm)->ArgName("ctx");
            for (int64_t ctx : o.kv_contexts) bm->Arg(ctx);
          }
    }
  }
}

}  // namespace gpuledger::micro
