// InferenceLayer: one transformer layer's forward for serving, against a KV
// cache (docs/architecture.md "Inference and the KV cache"). The same weights and the
// same math as TransformerLayer's forward, for a batch of sequences that each
// bring n_new new tokens (a prefill chunk, or one decode token):
//
//   x ─ norm1 ─ QKV ─ RoPE at each sequence's own positions ─ kv write ─ cached attention
//     ─ attn-out ─ AR ─ (+b) ─ + ─ norm2 ─ MLP ─ AR ─ (+b) ─ + ─ out
//
// Rows are packed sequence after sequence: x and out (n, h) with n = Σ n_new.
// Q, K, V and the context are per sequence (heads, n_new, d), packed in batch
// order — the layout Device::kv_cache_write / cached_attention take.
// Nothing is kept for a backward: every temporary is workspace, freed before
// return. Attention: the cache's (flash-like: no n × len scores), or with
// attention materialized, for a chunk that starts its sequence, the s × s
// scores and probabilities of TransformerLayer's materialized core. No
// dropout (inference). The norms and the MLP are TransformerLayer's own (it
// befriends this class), run on a layer configured for b = 1, s = n.
//
// A MoE layer's MLP is the MoeBlock (models/moe/moe_block.h), every routed
// token computed (no capacity factor at inference); the layer keeps the count
// of distinct experts the forward routed to, which is what a step reads of them.
//
// Tensor parallelism: the QKV / attention-out / MLP split of TransformerLayer
// (its all-reduces over `tp`), with the rank's k_t KV heads in the cache.
#pragma once
#include <cstdint>
#include <vector>

#include "comm/comm.h"
#include "kernels/device.h"
#include "models/kv/kv_cache.h"
#include "models/transformer/layer.h"

namespace gpuledger {

class InferenceLayer {
 public:
  // cfg: the layer shape (b and s are set per call); layer: the cache layer (0 … L_i − 1).
  InferenceLayer(Device& device, Comm& tp, const LayerConfig& cfg, const LayerParams& params, int64_t layer);

  // out (n, h) = layer(x (n, h)) for the new tokens of `batch`, whose K and V
  // are written into `cache` first (the cache already counts them: length(id)
  // includes the n_new tokens). out may not alias x.
  void forward(const void* x, void* out, const std::vector<kv::SeqStep>& batch, kv::KvCache& cache);

  int64_t layer() const { return layer_; }
  // A MoE layer: the distinct experts the last forward routed a token to (0: dense).
  int64_t experts_routed() const { return experts_routed_; }
  bool is_moe() const { return cfg_.moe; }  // the sparse block (else the dense MLP)

 private:
  // With attention materialized (cfg.attention), whether some sequence of the
  // batch brings its whole context (n_new == length): its scores are materialized.
  // Not under a KV budget, whose policy reads the cache's attention weights.
  bool materialized_chunks(const std::vector<kv::SeqStep>& batch, const kv::KvCache& cache) const;
  void attend_materialized(const std::vector<kv::SeqStep>& batch, kv::KvCache& cache, const void* q, const void* k,
                           const void* v, void* ctx);
  // out (n, h) = resid + y, or with post_norms (Gemma 2, 3: layer.h) resid +
  // RMSNorm(y), the normed rows written through `normed` (a free (n, h)
  // buffer) and the norm's statistics into `stats` (allocated here when null).
  void add_block_output(TransformerLayer& tl, void* out, const void* resid, const void* y, void* normed,
                        const void* post_norm_w, Buffer* stats);

  Device& dev_;
  Comm& tp_;
  LayerConfig cfg_;
  LayerParams p_;
  int64_t layer_;
  int64_t experts_routed_ = 0;
};

}  // namespace gpuledger
