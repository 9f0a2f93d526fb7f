// Inference on one rank, closed form (docs/formulas/inference.md):
//   - the bytes one decode step reads — every weight once, but the input
//     embedding tables only in the rows looked up, and the K/V each sequence
//     holds, in its stored dtype with its scales;
//   - the activation peak of one prefill forward of `tokens` tokens (one
//     sequence from position 0): the largest set of temporaries alive at once
//     in the serving forward, with the attention core the run chose (flash:
//     no s × s tensor; materialized: fp32 scores and probabilities, s² per
//     head). This is what vLLM's profiling forward measures before it sizes the
//     KV pool, and what `kv` subtracts for it.
// Pure functions of config and layout, written from the contract in
// docs/exact-budget.md; never reads models/ (which they are checked against).
#pragma once
#include <cstdint>
#include <string>

#include "analytic/kv_cache.h"
#include "core/dtype.h"
#include "core/layout.h"
#include "core/model_config.h"
#include "core/run_config.h"

namespace gpuledger::analytic {

// Weight bytes a forward over `tokens` new tokens reads on the first stage's
// rank: its parameters × dtype bytes, less the word embedding table but one
// row per token (the table is read whole when the head reads it too: tied
// embeddings on one stage), less the learned positions (gpt) but one row per
// token. Under tp every token's row is counted on the rank (exact at tp = 1;
// there a rank reads only the rows of its vocabulary range).
// A MoE model counts every expert here (all of them are held); the two below
// count the experts a step reads.
int64_t decode_weight_bytes_read(const ModelConfig& m, const Layout& l, DType dtype, int64_t tokens);

// The expected number of distinct experts `tokens` tokens route to in one
// layer, each choosing top_k of `experts`, under uniform routing (every
// token's k-subset uniform and independent): E·(1 − (1 − k/E)^B).
double expected_distinct_experts(int64_t experts, int64_t top_k, int64_t tokens);
// One expert's gate, up and down weights: 3·h·f_e·e bytes.
int64_t moe_expert_weight_bytes(const ModelConfig& m, DType dtype);
// MoE: the weights a step reads when its layers routed to `experts_routed`
// distinct experts in all (Σ over the rank's layers): the dense and shared
// weights and the router once, the routed experts once each. Dense: as above.
int64_t decode_weight_bytes_read_routed(const ModelConfig& m, const Layout& l, DType dtype, int64_t tokens,
                                        int64_t experts_routed);
// MoE: the same with the expected distinct experts of `tokens` tokens in each
// layer (rounded to the byte). Dense: decode_weight_bytes_read.
int64_t decode_weight_bytes_expected(const ModelConfig& m, const Layout& l, DType dtype, int64_t tokens);

// One decode step of `batch` sequences, each holding `kept_tokens` K/V tokens
// (the new one included): the weights read for `batch` tokens (a MoE model's
// expected experts, decode_weight_bytes_expected), plus
// batch × kept × (K/V bytes + per-token scales) per token, plus the fixed scales once.
int64_t decode_bytes_per_step(const ModelConfig& m, const Layout& l, DType dtype, const KvOptions& kv, int64_t batch,
                              int64_t kept_tokens);

// The live temporaries of one prefill forward of one sequence of `tokens`
// tokens at its three peaks: the embedding, a layer (with the two hidden
// buffers the layers pass between them), the head (final norm and fp32
// logits of the last token).
struct PrefillActivation {
  int64_t embed_bytes = 0, layer_bytes = 0, head_bytes = 0;
  int64_t peak_bytes = 0;  // the largest
  std::string where;       // "embedding" | "layer: <phase>" | "head"
};
PrefillActivation prefill_activation(const ModelConfig& m, const Layout& l, DType dtype, int64_t tokens,
                                     AttentionKind attention);
inline int64_t prefill_activation_bytes(const ModelConfig& m, const Layout& l, DType dtype, int64_t tokens,
                                        AttentionKind attention) {
  return prefill_activation(m, l, dtype, tokens, attention).peak_bytes;
}

}  // namespace gpuledger::analytic
