// The routing of a mixture-of-experts block, on the host: from the router's
// logits to the plan that says, for each token and each of its k choices,
// which expert, which row of that expert's buffer (or dropped), and which
// combine weight; the load-balancing loss; and the backward of all of it to
// the logits. Pure functions of their inputs (docs/formulas/moe.md).
//
// Sigmoid scores (RoutingConfig::sigmoid; DeepSeek-V3, arXiv 2412.19437
// §2.1.2 eq. 15-16): s = σ(l) per expert, the k largest chosen, w_j = s_j /
// (Σ_chosen s + 1e-20) with norm_topk_prob (Megatron-LM moe_utils.py
// topk_routing_with_score_function; HF DeepSeek-V3's MoEGate the same); the
// load-balancing loss takes p̂ = s / (Σ_E s + 1e-20) (Megatron-LM
// compute_routing_scores_for_aux_loss). Either way w is then multiplied by
// RoutingConfig::scaling.
//
// Top-k follows Hugging Face transformers 5.24 (models/mixtral/
// modeling_mixtral.py MixtralTopKRouter.forward; models/qwen3_moe/
// modeling_qwen3_moe.py Qwen3MoeTopKRouter.forward): p = softmax over all E
// logits, the k largest p chosen (ties: the lower expert index), then, with
// norm_topk_prob, w_j = p_j / Σ_chosen p (Mixtral always renormalises, which
// equals a softmax over the k chosen logits); without it w_j = p_j.
//
// Capacity (Switch Transformer, Fedus et al. 2022 §2.2; Megatron-LM's
// moe_token_drop_policy "position"): with a capacity factor c an expert takes
// at most C = ⌈c·N·k/E⌉ rows; assignments are taken in token order (choice j
// of token t before token t + 1), and an assignment past its expert's C is
// dropped: that choice adds nothing to the token's output (the residual
// carries the token), and the weights of the kept choices are not
// renormalised again.
#pragma once
#include <cstdint>
#include <optional>
#include <vector>

namespace gpuledger::moe {

struct RoutingConfig {
  int64_t experts = 0;  // E
  int64_t top_k = 0;    // k
  bool norm_topk_prob = true;
  std::optional<double> capacity_factor;  // none: no drops
  double aux_loss_coef = 0.0;             // α
  bool sigmoid = false;                   // scores σ(l) per expert (DeepSeek-V3), else softmax over the E
  double scaling = 1.0;                   // the combine weights' factor (routed_scaling_factor)
};

// C = ⌈c·N·k/E⌉, or N when there is no capacity factor (an expert can take
// every token once: a token never picks one expert twice).
int64_t expert_capacity(const RoutingConfig& c, int64_t tokens);

struct RoutingPlan {
  int64_t tokens = 0;
  std::vector<float> probs;         // (N, E) softmax of the logits
  std::vector<int32_t> expert;      // (N, k) the chosen experts, best first
  std::vector<float> weight;        // (N, k) their combine weights
  std::vector<int32_t> row;         // (N, k) row in the expert-sorted buffer, −1 when dropped
  std::vector<int64_t> rows_begin;  // (E + 1) expert e owns rows [rows_begin[e], rows_begin[e + 1])
  std::vector<int32_t> row_token;   // (A) the token of each kept row, A = rows_begin[E]
  std::vector<int64_t> assigned;    // (E) choices per expert before drops (the expert bias's load counts)
  std::vector<int64_t> aux_counts;  // (E) the f_e counts: the top k of the unbiased scores (= assigned without a bias)
  int64_t aux_tokens = 0;           // N of the f_e and P_e means: the plan's tokens, or the sequence's over cp
  int64_t dropped = 0;              // choices past capacity
  double aux_loss = 0.0;            // α·E·Σ_e f_e·P_e, f_e = aux_counts_e / N, P_e = mean_t p̂_{t,e}

  int64_t kept_rows() const { return rows_begin.empty() ? 0 : rows_begin.back(); }
  int64_t rows_of(int64_t e) const { return rows_begin[e + 1] - rows_begin[e]; }
};

// logits (N, E) fp32 → the plan. expert_bias (E fp32, or null): DeepSeek-V3's
// aux-loss-free balancing (arXiv 2412.19437 §2.1.2): the k experts are the
// largest s + b, the weights the unbiased s of those k (Megatron-LM
// moe_utils.py topk_routing_with_score_function, scores_for_routing =
// scores + expert_bias, at d98e8a64ddf34856e74b24714e3bedb2f5a39553).
RoutingPlan route(const RoutingConfig& c, const float* logits, int64_t tokens, const float* expert_bias = nullptr);

// Context parallelism: the microbatch's tokens are split over cp ranks and
// each routes its own (routing is per token), but f_e and P_e are means over
// the whole microbatch. Given the f_e counts summed over the cp ranks
// (Megatron-LM get_tokens_per_expert_and_token_count all-reduces them over
// the tp·cp group, moe_utils.py at d98e8a64ddf34856e74b24714e3bedb2f5a39553)
// and total_tokens = N·cp, sets plan.aux_counts, plan.aux_tokens and this
// rank's share α·E·Σ_e (F_e/N_t)·(Σ_local p̂_e/N_t) of the loss: the shares of
// the cp ranks sum to the one-rank L_aux, and each share's gradient on its
// tokens is the one-rank gradient's (F held constant).
void set_aux_over_ranks(const RoutingConfig& c, RoutingPlan& plan, const std::vector<int64_t>& counts,
                        int64_t total_tokens);

// dlogits (N, E) fp32 = d(loss)/d(logits) given dweight (N, k) = d(loss)/d(w)
// (zero for dropped choices) and aux_scale = d(loss)/d(aux_loss).
void routing_backward(const RoutingConfig& c, const RoutingPlan& plan, const float* dweight, double aux_scale,
                      float* dlogits);

}  // namespace gpuledger::moe
