// InferenceLayer (see infer_layer.h): the serving forward of one layer against
// a KV cache. The per-sequence loops only move pointers (split/merge of the
// head layout, RoPE offsets); the GEMMs run over all n rows of the step at once.
#include "models/transformer/infer_layer.h"
#include "models/transformer/tp_mappings.h"

#include <stdexcept>
#include <string>

#include "models/linear/linear.h"

namespace gpuledger {
namespace {
// The experts a routing sent at least one token to.
int64_t experts_with_rows(const moe::RoutingPlan& plan, int64_t experts) {
  int64_t n = 0;
  for (int64_t ex = 0; ex < experts; ++ex) n += plan.rows_of(ex) > 0 ? 1 : 0;
  return n;
}
}  // namespace

InferenceLayer::InferenceLayer(Device& device, Comm& tp, const LayerConfig& cfg, const LayerParams& params,
                               int64_t layer)
    : dev_(device), tp_(tp), cfg_(cfg), p_(params), layer_(layer) {
  cfg_.b = 1;
  cfg_.dropout = 0.0f;
  cfg_.recompute = Recompute::kNone;
  TransformerLayer check(dev_, tp_, cfg_, p_);  // the same shape checks (GQA grouping, RoPE head dim)
}

void InferenceLayer::forward(const void* x, void* out, const std::vector<kv::SeqStep>& batch, kv::KvCache& cache) {
  int64_t n = 0;
  for (const auto& s : batch) {
    if (s.n_new < 1)
      throw std::invalid_argument("InferenceLayer: sequence " + std::to_string(s.id) + " brings no new token");
    n += s.n_new;
  }
  if (n == 0) return;
  LayerConfig c = cfg_;
  c.s = n;  // one "sample" of n packed rows: the norms and the MLP are row-wise
  TransformerLayer tl(dev_, tp_, c, p_);
  tl.discard_ = true;  // the MLP frees each temporary after its last use
  const int64_t e = dtype_bytes(c.e), hid = n * c.h;
  auto ws = [&](int64_t bytes, const char* what) { return dev_.alloc(bytes, Account::kWorkspace, what); };

  // norm 1
  Buffer stats = ws(c.norm_stats_bytes(), "infer.norm.stats");
  Buffer xn = ws(e * hid, "infer.norm.out");
  tl.norm_forward(xn.data(), stats, x, p_.norm1_w, p_.norm1_b);

  // QKV rows (n, (a_t + 2k_t)·d), then per sequence the head layout (heads, n_new, d)
  Buffer rows = ws(e * n * c.qkv_dim(), "infer.qkv.rows");
  linear_forward(dev_, rows.data(), xn.data(), p_.qkv_w, c.e, n, c.h, c.qkv_dim());
  if (c.qkv_bias) dev_.bias_add(rows.data(), p_.qkv_b, c.e, n, c.qkv_dim());
  Buffer q = ws(e * n * c.q_dim(), "infer.q");
  Buffer k = ws(e * n * c.kv_dim(), "infer.k");
  Buffer v = ws(e * n * c.kv_dim(), "infer.v");
  int64_t r0 = 0;
  for (const auto& s : batch) {
    AttnShape sh;
    sh.B = 1;
    sh.Hq = c.a_t;
    sh.Hkv = c.k_t;
    sh.T = s.n_new;
    sh.D = c.d;
    void* qs = byte_offset(q.data(), e * r0 * c.q_dim());
    void* ks = byte_offset(k.data(), e * r0 * c.kv_dim());
    dev_.split_qkv(qs, ks, byte_offset(v.data(), e * r0 * c.kv_dim()), byte_offset(rows.data(), e * r0 * c.qkv_dim()),
                   c.e, sh);
    // Qwen3's QK norm before RoPE, in place (attention.cpp: qk_norm_forward)
    if (c.qk_norm) tl.qk_norm_forward(qs, ks, nullptr, qs, ks, c.a_t * s.n_new, c.k_t * s.n_new);
    if (!c.gpt) {  // RoPE (Su et al. 2021) at the sequence's own positions len − n_new …
      const int64_t pos = cache.length(s.id) - s.n_new;
      dev_.rope_forward(qs, c.e, 1, c.a_t, s.n_new, c.d, pos, c.rope_theta);
      dev_.rope_forward(ks, c.e, 1, c.k_t, s.n_new, c.d, pos, c.rope_theta);
    }
    r0 += s.n_new;
  }
  rows.reset();

  // the cache: write the new K, V, then attend every new query to its cached keys
  cache.write(layer_, batch, k.data(), v.data(), c.e);
  Buffer ctx;
  if (materialized_chunks(batch, cache)) {
    ctx = ws(e * n * c.q_dim(), "infer.ctx");
    attend_materialized(batch, cache, q.data(), k.data(), v.data(), ctx.data());
    k.reset();
    v.reset();
  } else {
    k.reset();
    v.reset();
    ctx = ws(e * n * c.q_dim(), "infer.ctx");
    cache.attend(layer_, batch, ctx.data(), q.data(), c.e, c.a_t);
  }
  q.reset();
  Buffer ctx_rows = ws(e * n * c.q_dim(), "infer.ctx.rows");
  r0 = 0;
  for (const auto& s : batch) {
    AttnShape sh;
    sh.B = 1;
    sh.Hq = c.a_t;
    sh.Hkv = c.k_t;
    sh.T = s.n_new;
    sh.D = c.d;
    dev_.merge_heads(byte_offset(ctx_rows.data(), e * r0 * c.q_dim()), byte_offset(ctx.data(), e * r0 * c.q_dim()), c.e,
                     sh);
    r0 += s.n_new;
  }
  ctx.reset();

  // attention-out (row-parallel, all-reduced), residual
  Buffer y = ws(e * hid, "infer.y");
  linear_forward(dev_, y.data(), ctx_rows.data(), p_.out_w, c.e, n, c.q_dim(), c.h);
  ctx_rows.reset();
  reduce_from_tensor_model_parallel_region(tp_, y.data(), hid, c.e);
  if (c.out_bias) dev_.bias_add(y.data(), p_.out_b, c.e, n, c.h);
  Buffer resid = ws(e * hid, "infer.resid");
  add_block_output(tl, resid.data(), x, y.data(), xn.data(), p_.post_attn_norm_w, &stats);  // xn: free since QKV

  // norm 2, MLP (TransformerLayer's, all workspace), residual
  tl.norm_forward(xn.data(), stats, resid.data(), p_.norm2_w, p_.norm2_b);
  stats.reset();
  LayerSaved scratch;
  tl.mlp_forward(xn.data(), y.data(), scratch, Account::kWorkspace);
  experts_routed_ = c.moe ? experts_with_rows(scratch.moe.plan, c.routing.experts) : 0;
  scratch.clear();
  // xn: the MLP's input, no longer read; the statistics allocated after the MLP's temporaries are gone
  add_block_output(tl, out, resid.data(), y.data(), xn.data(), p_.post_mlp_norm_w, nullptr);
  xn.reset();
}

void InferenceLayer::add_block_output(TransformerLayer& tl, void* out, const void* resid, const void* y, void* normed,
                                      const void* post_norm_w, Buffer* stats) {
  const LayerConfig& c = tl.config();
  const int64_t hid = c.tokens() * c.h;
  if (!c.post_norms) {
    dev_.add(out, resid, y, c.e, hid);
    return;
  }
  Buffer own;
  if (stats == nullptr) {
    own = dev_.alloc(c.norm_stats_bytes(), Account::kWorkspace, "infer.post_norm.stats");
    stats = &own;
  }
  tl.norm_forward(normed, *stats, y, post_norm_w, nullptr);
  dev_.add(out, resid, normed, c.e, hid);
}

bool InferenceLayer::materialized_chunks(const std::vector<kv::SeqStep>& batch, const kv::KvCache& cache) const {
  if (cfg_.attention != AttentionKind::kMaterialized || cache.eviction().evicts()) return false;
  for (const auto& s : batch)
    if (cache.length(s.id) == s.n_new) return true;
  return false;
}

void InferenceLayer::attend_materialized(const std::vector<kv::SeqStep>& batch, kv::KvCache& cache, const void* q,
                                         const void* k, const void* v, void* ctx) {
  // A chunk that is its sequence's whole context (a prefill from position 0)
  // runs TransformerLayer's materialized core on its own Q, K, V: the fp32
  // scores and the probabilities of every head, n_new² each, as the training
  // forward makes them (attention.cpp), freed after. Every other sequence
  // (decodes, later chunks, prefix hits) attends to the cache, one at a time.
  const int64_t e = dtype_bytes(cfg_.e);
  int64_t r0 = 0;
  for (const auto& s : batch) {
    const void* qs = byte_offset(q, e * r0 * cfg_.q_dim());
    void* cs = byte_offset(ctx, e * r0 * cfg_.q_dim());
    if (cache.length(s.id) == s.n_new) {
      LayerConfig one = cfg_;
      one.s = s.n_new;
      TransformerLayer tl(dev_, tp_, one, p_);
      LayerSaved scratch;
      tl.materialized_core(qs, byte_offset(k, e * r0 * cfg_.kv_dim()), byte_offset(v, e * r0 * cfg_.kv_dim()), cs,
                           scratch, LayerKeys{}, Account::kWorkspace);
    } else {
      cache.attend(layer_, {s}, cs, qs, cfg_.e, cfg_.a_t);
    }
    r0 += s.n_new;
  }
}

}  // namespace gpuledger
