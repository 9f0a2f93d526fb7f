// InferenceModel: the whole transformer for serving on one rank — the
// weights (deterministic init, the same values Params gives for the same
// seed: no checkpoint), the embedding at each sequence's own positions, the
// InferenceLayers against a KV cache, the final norm and the head GEMM into
// fp32 logits for each sequence's last new token, and greedy sampling (argmax
// on the host, over the V real vocabulary columns).
//
// Memory: the weights are booked in `weights` (no gradients: a serving engine
// holds none); everything a step allocates is `workspace`, freed before the
// step returns; the cache books its own `kv`.
//
// One pipeline stage; tensor parallelism over the `tp` comm (its size is t,
// its rank this rank's coordinate): the layers split as TransformerLayer's
// (a_t query heads, k_t KV heads, replicated when t > kv_heads), the
// embedding and head vocabulary-parallel (as StageModel): the embedding
// all-reduced, the head's local logits slice reduced to one greedy token per
// sequence that every rank agrees on (each rank's local max and its index,
// all-gathered; padded columns never count).
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "comm/comm.h"
#include "core/model_config.h"
#include "kernels/device.h"
#include "models/kv/kv_cache.h"
#include "models/transformer/infer_layer.h"
#include "models/transformer/param_layout.h"

namespace gpuledger {

// A rank's weights, one flat buffer per unit of its ParamLayout (account weights).
class InferWeights {
 public:
  InferWeights(Device& device, ParamLayout layout, DType weight_type);
  // The values init_unit_values gives (Params' initialisation); a no-op on meta.
  void initialise(uint64_t seed, int64_t total_layers);
  // Each unit's fp32 values from `values` (e.g. a checkpoint's, models/io/hf_weights.h).
  using UnitValues = std::function<std::vector<float>(const UnitLayout&)>;
  void initialise_from(const UnitValues& values);

  const ParamLayout& layout() const { return layout_; }
  DType type() const { return type_; }
  int64_t bytes() const;
  void* weight(size_t unit, std::string_view role) const;  // throws when absent
  void* weight_or_null(size_t unit, std::string_view role) const;
  LayerParams layer_params(size_t unit) const;  // weights only, no gradients

 private:
  Device& device_;
  ParamLayout layout_;
  DType type_;
  std::vector<Buffer> units_;
};

class InferenceModel {
 public:
  // One stage, tp = tp.size() (1: the one-rank model); weights in `dtype`,
  // initialised from `seed`, or from `values` when given. `attention`:
  // flash, the cache's attention for every token; materialized, the s × s
  // scores of a chunk that starts its sequence (InferenceLayer).
  InferenceModel(Device& device, Comm& tp, const ModelConfig& model, DType dtype, uint64_t seed,
                 const InferWeights::UnitValues& values = {}, AttentionKind attention = AttentionKind::kFlash);

  // One engine step: each sequence of `batch` brings n_new tokens (host ids,
  // packed in batch order, Σ n_new of them); the cache already counts them.
  // Returns the greedy next token of each sequence (argmax of the logits of
  // its last new token); `logits`, when given, receives those rows (B × V,
  // all-gathered over tp). Every tp rank calls it with the same batch.
  std::vector<int32_t> forward(const std::vector<kv::SeqStep>& batch, const std::vector<int32_t>& tokens,
                               kv::KvCache& cache, std::vector<float>* logits = nullptr);

  const ModelConfig& model() const { return model_; }
  const InferWeights& weights() const { return weights_; }
  // The weight bytes a forward over `tokens` (the step's new token ids) reads
  // on this rank: every tensor once, but the input embedding tables only in
  // the rows looked up — one word row per token whose id this rank holds, and
  // (gpt) one learned-position row per token. The word table is read whole
  // when the head reads it too (tied embeddings, one stage).
  // A MoE model reads only the experts its last forward routed a token to:
  // call it after the forward over `tokens`.
  int64_t weight_bytes_read(const std::vector<int32_t>& tokens) const;
  // Σ over the layers of the distinct experts the last forward routed to (0: dense).
  int64_t experts_routed() const;
  const LayerConfig& layer_config() const { return lcfg_; }
  Device& device() { return dev_; }

 private:
  // The n new tokens' embeddings [n, h] (e), at each sequence's positions
  // len − n_new … len − 1 (gpt: + learned positions); vocabulary-parallel under tp.
  Buffer embed(const std::vector<kv::SeqStep>& batch, const std::vector<int32_t>& tokens, kv::KvCache& cache,
               int64_t n);
  // Each sequence's last row of `hidden` [n, h] -> final norm -> head GEMM:
  // fp32 logits [B, V'/t] of this rank's vocabulary columns. Frees `hidden`.
  Buffer head_logits(const std::vector<kv::SeqStep>& batch, Buffer& hidden);
  // Greedy next tokens from this rank's logits [B, V'/t] (argmax over the
  // full row: across tp, each rank's best all-gathered); `logits`, when
  // given, receives the full rows [B, V].
  std::vector<int32_t> sample(const Buffer& logits_rank, int64_t B, std::vector<float>* logits);
  Buffer workspace(int64_t bytes, const char* what) { return dev_.alloc(bytes, Account::kWorkspace, what); }

  Device& dev_;
  Comm& tp_;
  ModelConfig model_;
  LayerConfig lcfg_;
  InferWeights weights_;
  int64_t vocab_begin_ = 0;  // the first vocabulary row this tp rank holds
  std::vector<std::unique_ptr<InferenceLayer>> layers_;
};

// Index of the largest of the first n values (the first one on ties).
int32_t argmax(const float* x, int64_t n);

}  // namespace gpuledger
