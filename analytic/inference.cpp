// Inference on one rank (see inference.h; docs/formulas/inference.md).
#include "analytic/inference.h"

#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <stdexcept>
#include <utility>

#include "analytic/moe.h"
#include "analytic/params.h"
#include "core/checked_math.h"

namespace gpuledger::analytic {

double expected_distinct_experts(int64_t experts, int64_t top_k, int64_t tokens) {
  if (experts < 1 || top_k < 1 || top_k > experts || tokens < 0)
    throw std::invalid_argument("expected distinct experts: need 1 <= k <= E and tokens >= 0, got E " +
                                std::to_string(experts) + ", k " + std::to_string(top_k) + ", tokens " +
                                std::to_string(tokens));
  // Uniform routing: each token's k experts a uniformly drawn k-subset of the
  // E, independent of the other tokens'. One token leaves expert e out with
  // probability 1 − k/E, all B tokens with (1 − k/E)^B; by linearity of
  // expectation over the E experts, E·(1 − (1 − k/E)^B) are routed to.
  const double E = static_cast<double>(experts), k = static_cast<double>(top_k);
  return E * (1.0 - std::pow(1.0 - k / E, static_cast<double>(tokens)));
}

int64_t moe_expert_weight_bytes(const ModelConfig& m, DType dtype) {
  return checked_product({3, m.hidden, m.expert_ffn, dtype_bytes(dtype)}, "expert weight bytes");
}

int64_t decode_weight_bytes_read_routed(const ModelConfig& m, const Layout& l, DType dtype, int64_t tokens,
                                        int64_t experts_routed) {
  if (!m.is_moe()) return decode_weight_bytes_read(m, l, dtype, tokens);
  const int64_t all_experts = checked_mul(moe_layers_on_stage(m, l, 0), m.num_experts, "experts on the rank");
  if (experts_routed < 0 || experts_routed > all_experts)
    throw std::invalid_argument("experts routed to must be in [0, " + std::to_string(all_experts) + "], got " +
                                std::to_string(experts_routed));
  // every expert once (the parameter count holds them all), less those not routed to
  return decode_weight_bytes_read(m, l, dtype, tokens) -
         checked_mul(all_experts - experts_routed, moe_expert_weight_bytes(m, dtype), "unread expert bytes");
}

int64_t decode_weight_bytes_read(const ModelConfig& m, const Layout& l, DType dtype, int64_t tokens) {
  if (tokens < 0) throw std::invalid_argument("decode tokens must be >= 0, got " + std::to_string(tokens));
  const int64_t e = dtype_bytes(dtype), h = m.hidden;
  int64_t bytes = checked_mul(rank_params(m, l, 0), e, "weight bytes");
  // The input embedding is a lookup: a step reads the rows of its tokens, not
  // the table — unless the head reads the table whole as its output matrix.
  const bool head_reads_table = m.tied_embeddings && l.pp == 1;
  if (!head_reads_table) bytes += (tokens - padded_vocab(m, l.tp) / l.tp) * h * e;
  if (m.is_gpt()) bytes += (tokens - m.max_seq) * h * e;  // learned positions, replicated over tp
  return bytes;
}

int64_t decode_weight_bytes_expected(const ModelConfig& m, const Layout& l, DType dtype, int64_t tokens) {
  if (!m.is_moe()) return decode_weight_bytes_read(m, l, dtype, tokens);
  const double unread =
      static_cast<double>(moe_layers_on_stage(m, l, 0)) *
      (static_cast<double>(m.num_experts) - expected_distinct_experts(m.num_experts, m.experts_per_token, tokens)) *
      static_cast<double>(moe_expert_weight_bytes(m, dtype));
  return decode_weight_bytes_read(m, l, dtype, tokens) - std::llround(unread);
}

int64_t decode_bytes_per_step(const ModelConfig& m, const Layout& l, DType dtype, const KvOptions& kv, int64_t batch,
                              int64_t kept_tokens) {
  const int64_t token_bytes = kv_bytes_per_token(m, l, kv.dtype) + kv_scale_bytes_per_token(m, l, kv);
  return checked_add(
      checked_add(decode_weight_bytes_expected(m, l, dtype, batch),
                  checked_product({batch, kept_tokens, token_bytes}, "decode K/V bytes"), "decode bytes per step"),
      kv_scale_bytes_fixed(m, l, kv), "decode bytes per step");
}

namespace {

// A MoE block's temporaries in the serving forward (models/moe/moe_block.cpp
// MoeBlock::forward with every tensor in workspace): first the router logits
// (n × E, e bytes) alone; then what the training forward saves, for all n·k
// rows (nothing dropped at inference: analytic/moe.h
// moe_block_activation_bytes), with the shared experts' output (n × h) last.
int64_t moe_serving_bytes(ModelConfig m, int64_t n, int64_t e, int64_t t) {
  // Under tp each expert's inner size splits as a dense MLP's does (analytic/params.cpp).
  m.expert_ffn /= t;
  m.shared_expert_ffn /= t;
  const int64_t rows = checked_mul(n, m.experts_per_token, "MoE rows");
  const int64_t logits = checked_product({e, n, m.num_experts}, "router logits bytes");
  int64_t block = moe_block_activation_bytes(m, n, rows, e);
  if (m.shared_experts > 0) block = checked_add(block, checked_product({e, n, m.hidden}, "shared out"), "MoE bytes");
  return std::max(logits, block);
}

// Multi-head latent attention's projections and core in the serving forward
// of n tokens on one of t ranks (docs/formulas/mla.md "Prefill"): the
// norm-1 output, the query latent and its norm (q_lora_rank > 0), the
// queries, the KV latent with the RoPE key and its normalised part, the
// up-projected k_nope and v, the keys assembled per head, and the context;
// fp32 statistics of the three RMSNorms; materialized adds the scores and
// probabilities of a_t · n² each. All counted alive at once at the core.
int64_t mla_attention_bytes(const ModelConfig& m, int64_t n, int64_t e, int64_t t, AttentionKind attention) {
  const int64_t a_t = m.heads / t, qk = a_t * (m.qk_nope_head_dim + m.qk_rope_head_dim);
  const int64_t latent = m.kv_lora_rank + m.qk_rope_head_dim, kv_up = a_t * (m.qk_nope_head_dim + m.v_head_dim);
  const int64_t values =
      m.hidden + 2 * m.q_lora_rank + qk + latent + m.kv_lora_rank + kv_up + qk + 2 * a_t * m.v_head_dim;
  int64_t bytes = checked_add(3 * 4 * n, checked_product({e, n, values}, "MLA bytes"), "MLA bytes");
  if (attention != AttentionKind::kFlash)
    bytes = checked_add(bytes, checked_product({4 + e, a_t, n, n}, "materialized scores bytes"), "MLA bytes");
  return bytes;
}

}  // namespace

PrefillActivation prefill_activation(const ModelConfig& m, const Layout& l, DType dtype, int64_t tokens,
                                     AttentionKind attention) {
  if (tokens < 1) throw std::invalid_argument("prefill tokens must be >= 1, got " + std::to_string(tokens));
  // vLLM takes this figure by measurement: vllm/v1/worker/gpu_worker.py
  // determine_available_memory (commit 0012cf69) resets the allocator's peak
  // statistics, runs self.model_runner.profile_run() (a dummy forward of
  // max_num_batched_tokens tokens, gpu_model_runner.py _dummy_run), and takes
  // torch.cuda.memory_stats()["allocated_bytes.all.peak"] — the temporaries
  // of that one forward above the weights. The same forward's temporaries are
  // counted here; infer measures them on its ledger (infer_setup.h).
  // The serving forward's temporaries in the order it allocates and frees them
  // (models/transformer/infer_model.cpp forward, embed, head_logits;
  // infer_layer.cpp forward; mlp.cpp mlp_forward), per rank: n tokens, hidden
  // h, a_t query and k_t KV heads of d, f_t = ffn / t, e bytes per value.
  const int64_t n = tokens, h = m.hidden, d = m.head_dim, e = dtype_bytes(dtype), t = l.tp;
  const int64_t a_t = m.heads / t, k_t = kv_heads_on_rank(m.kv_heads, t), f_t = m.ffn / t;
  const int64_t q_d = m.is_mla() ? a_t * m.v_head_dim : a_t * d, kv_d = k_t * d, vr = padded_vocab(m, t) / t;
  const int64_t stats = (m.is_gpt() ? 2 : 1) * 4 * n;  // fp32 norm statistics per token
  const int64_t enh = checked_product({e, n, h}, "prefill hidden bytes");
  PrefillActivation p;
  // embedding: the token ids (int32) and the first hidden buffer
  p.embed_bytes = 4 * n + enh;
  // The MLP: a MoE model's sparse block, and on a stage holding some of its
  // first dense_layers the dense MLP too, whichever is larger.
  const int64_t dense_mlp = checked_product({m.is_gpt() ? 2 : 3, e, n, f_t}, "MLP bytes");
  const int64_t first = first_layer_of_stage(m, l, 0);
  const bool stage_has_dense = !m.is_moe() || !m.is_moe_layer(first);
  const int64_t mlp =
      std::max(m.is_moe() ? moe_serving_bytes(m, n, e, t) : int64_t{0}, stage_has_dense ? dense_mlp : int64_t{0});
  // a layer, beside the two hidden buffers (input and output); an MLA layer's
  // attention is one phase (q_d above: its context is a_t·d_v wide):
  const std::pair<int64_t, const char*> phases[] = {
      // norm-1 output, QKV rows, and Q, K, V split from them
      {m.is_mla() ? mla_attention_bytes(m, n, e, t, attention)
                  : stats + e * n * (h + (q_d + 2 * kv_d) + q_d + 2 * kv_d),
       m.is_mla() ? "attention (MLA)" : "QKV"},
      // the attention core: flash keeps Q and the context; materialized also
      // K and V, the fp32 scores (4 bytes) and probabilities (e) of a_t · n² each
      {m.is_mla() ? int64_t{0}
       : attention == AttentionKind::kFlash
           ? stats + e * n * (h + 2 * q_d)
           : checked_add(stats + e * n * (h + 2 * q_d + 2 * kv_d),
                         checked_product({4 + e, a_t, n, n}, "materialized scores bytes"), "attention bytes"),
       attention == AttentionKind::kFlash ? "attention (flash)" : "attention (materialized scores)"},
      // context rows and the attention-out output
      {stats + e * n * (2 * h + q_d), "attention-out"},
      // norm-2 output, the attention-out output, the residual; then the MLP's inner tensors
      {stats + 3 * enh, "residual"},
      {3 * enh + mlp, "MLP"},
  };
  const auto* top = std::max_element(std::begin(phases), std::end(phases),
                                     [](const auto& x, const auto& y) { return x.first < y.first; });
  p.layer_bytes = 2 * enh + top->first;
  // head: the last token's row, the final norm, the fp32 logits of this rank's
  // vocabulary rows; under tp the (max, index) pairs all-gathered
  p.head_bytes = std::max(
      {enh + e * h, 2 * e * h + (m.is_gpt() ? 8 : 4), e * h + 4 * vr, t > 1 ? 4 * vr + 8 + 8 * t : int64_t{0}});
  p.peak_bytes = std::max({p.embed_bytes, p.layer_bytes, p.head_bytes});
  p.where = p.peak_bytes == p.layer_bytes   ? std::string("layer: ") + top->second
            : p.peak_bytes == p.embed_bytes ? "embedding"
                                            : "head";
  return p;
}

}  // namespace gpuledger::analytic
