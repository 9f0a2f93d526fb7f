// The host routing of a MoE block (see moe_routing.h).
#include "models/moe/moe_routing.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>

namespace gpuledger::moe {

int64_t expert_capacity(const RoutingConfig& c, int64_t tokens) {
  if (!c.capacity_factor) return tokens;
  // Megatron-LM megatron/core/transformer/moe/moe_utils.py get_capacity (commit
  // 00611e6eeb0b09b5ee074750956855215ddbd67f): ceil((num_tokens / num_experts)
  // · capacity_factor), called with num_tokens = N·k. Capped at N: one expert
  // holds a token at most once.
  const double cap = std::ceil(*c.capacity_factor * static_cast<double>(tokens * c.top_k) / c.experts);
  return std::min<int64_t>(tokens, static_cast<int64_t>(cap));
}

namespace {

// p = softmax(logits) per token, in double then stored fp32 (HF: softmax in fp32).
void softmax_rows(const float* logits, int64_t n, int64_t e, float* probs) {
  for (int64_t t = 0; t < n; ++t) {
    const float* l = logits + t * e;
    const float mx = *std::max_element(l, l + e);
    double sum = 0;
    for (int64_t i = 0; i < e; ++i) sum += std::exp(static_cast<double>(l[i] - mx));
    for (int64_t i = 0; i < e; ++i)
      probs[t * e + i] = static_cast<float>(std::exp(static_cast<double>(l[i] - mx)) / sum);
  }
}

// σ(l) per expert, in double then stored fp32 (Megatron: sigmoid of the fp32 logits).
void sigmoid_rows(const float* logits, int64_t n, int64_t e, float* scores) {
  for (int64_t i = 0; i < n * e; ++i)
    scores[i] = static_cast<float>(1.0 / (1.0 + std::exp(-static_cast<double>(logits[i]))));
}

// The k largest of one token's scores, best first, ties to the lower index.
void top_k(const float* p, int64_t e, int64_t k, int32_t* out) {
  std::vector<int32_t> idx(static_cast<size_t>(e));
  std::iota(idx.begin(), idx.end(), 0);
  std::partial_sort(idx.begin(), idx.begin() + k, idx.end(),
                    [&](int32_t a, int32_t b) { return p[a] > p[b] || (p[a] == p[b] && a < b); });
  std::copy(idx.begin(), idx.begin() + k, out);
}

// The sum the chosen scores are divided by: Σ_chosen s, + 1e-20 for sigmoid
// scores (Megatron-LM and HF DeepSeek-V3 guard the division; a softmax sum is > 0).
double chosen_sum(const RoutingConfig& c, const float* p, const int32_t* ex) {
  double sum = c.sigmoid ? 1e-20 : 0.0;
  for (int64_t j = 0; j < c.top_k; ++j) sum += p[ex[j]];
  return sum;
}

// The load-balancing loss's per-expert scores p̂ of one token: the softmax
// itself, or σ(l) / (Σ_E σ + 1e-20) (Megatron-LM compute_routing_scores_for_aux_loss).
void aux_scores(const RoutingConfig& c, const float* p, int64_t e, double* out) {
  double sum = 1e-20;
  for (int64_t i = 0; i < e; ++i) sum += p[i];
  for (int64_t i = 0; i < e; ++i) out[i] = c.sigmoid ? p[i] / sum : p[i];
}

// f_e: the choices per expert, before drops, of the top k of the unbiased
// scores (with a bias, Megatron's aux loss takes its own top k of p̂).
std::vector<int64_t> aux_counts(const RoutingConfig& c, const RoutingPlan& plan, const float* bias) {
  if (bias == nullptr) return plan.assigned;
  std::vector<int64_t> counts(static_cast<size_t>(c.experts), 0);
  std::vector<int32_t> ex(static_cast<size_t>(c.top_k));
  for (int64_t t = 0; t < plan.tokens; ++t) {
    top_k(plan.probs.data() + t * c.experts, c.experts, c.top_k, ex.data());
    for (int32_t e : ex) ++counts[e];
  }
  return counts;
}

}  // namespace

RoutingPlan route(const RoutingConfig& c, const float* logits, int64_t tokens, const float* expert_bias) {
  const int64_t E = c.experts, k = c.top_k, n = tokens;
  if (E < 1 || k < 1 || k > E) throw std::invalid_argument("moe::route: need 1 <= top_k <= experts");
  RoutingPlan plan;
  plan.tokens = n;
  plan.probs.resize(static_cast<size_t>(n * E));
  plan.expert.resize(static_cast<size_t>(n * k));
  plan.weight.resize(static_cast<size_t>(n * k));
  plan.row.assign(static_cast<size_t>(n * k), -1);
  plan.assigned.assign(static_cast<size_t>(E), 0);
  if (c.sigmoid)
    sigmoid_rows(logits, n, E, plan.probs.data());
  else
    softmax_rows(logits, n, E, plan.probs.data());
  std::vector<float> biased(expert_bias ? static_cast<size_t>(E) : 0);
  for (int64_t t = 0; t < n; ++t) {
    const float* p = plan.probs.data() + t * E;
    int32_t* ex = plan.expert.data() + t * k;
    if (expert_bias) {  // selection on s + b (fp32, as Megatron adds them); the weights from s
      for (int64_t e = 0; e < E; ++e) biased[e] = p[e] + expert_bias[e];
      top_k(biased.data(), E, k, ex);
    } else {
      top_k(p, E, k, ex);
    }
    const double sum = chosen_sum(c, p, ex);
    for (int64_t j = 0; j < k; ++j)
      plan.weight[t * k + j] = static_cast<float>((c.norm_topk_prob ? p[ex[j]] / sum : p[ex[j]]) * c.scaling);
  }
  // capacity, in token order; then rows sorted by expert, tokens in order within an expert
  const int64_t cap = expert_capacity(c, n);
  std::vector<int64_t> kept(static_cast<size_t>(E), 0);
  for (int64_t a = 0; a < n * k; ++a) {
    const int32_t e = plan.expert[a];
    ++plan.assigned[e];
    if (kept[e] < cap) {
      plan.row[a] = static_cast<int32_t>(kept[e]++);  // the row within expert e, made global below
    } else {
      ++plan.dropped;
    }
  }
  plan.rows_begin.assign(static_cast<size_t>(E + 1), 0);
  for (int64_t e = 0; e < E; ++e) plan.rows_begin[e + 1] = plan.rows_begin[e] + kept[e];
  plan.row_token.resize(static_cast<size_t>(plan.kept_rows()));
  for (int64_t a = 0; a < n * k; ++a) {
    if (plan.row[a] < 0) continue;
    plan.row[a] += static_cast<int32_t>(plan.rows_begin[plan.expert[a]]);
    plan.row_token[plan.row[a]] = static_cast<int32_t>(a / k);
  }
  // Load-balancing loss, HF load_balancing_loss_func (modeling_mixtral.py):
  // E · Σ_e (assignments_e / N) · (Σ_t p̂_{t,e} / N), times the coefficient.
  set_aux_over_ranks(c, plan, aux_counts(c, plan, expert_bias), n);
  return plan;
}

void set_aux_over_ranks(const RoutingConfig& c, RoutingPlan& plan, const std::vector<int64_t>& counts,
                        int64_t total_tokens) {
  const int64_t E = c.experts;
  plan.aux_counts = counts;
  plan.aux_tokens = total_tokens;
  const auto nt = static_cast<double>(total_tokens);
  std::vector<double> p_sum(static_cast<size_t>(E), 0.0), ph(static_cast<size_t>(E));
  for (int64_t t = 0; t < plan.tokens; ++t) {
    aux_scores(c, plan.probs.data() + t * E, E, ph.data());
    for (int64_t e = 0; e < E; ++e) p_sum[e] += ph[e];
  }
  double aux = 0;
  for (int64_t e = 0; e < E; ++e) aux += (static_cast<double>(plan.aux_counts[e]) / nt) * (p_sum[e] / nt);
  plan.aux_loss = c.aux_loss_coef * static_cast<double>(E) * aux;
}

void routing_backward(const RoutingConfig& c, const RoutingPlan& plan, const float* dweight, double aux_scale,
                      float* dlogits) {
  const int64_t E = c.experts, k = c.top_k, n = plan.tokens, nt = plan.aux_tokens > 0 ? plan.aux_tokens : n;
  std::vector<double> dp(static_cast<size_t>(E)), ph(static_cast<size_t>(E));
  for (int64_t t = 0; t < n; ++t) {
    const float* p = plan.probs.data() + t * E;
    // the load-balancing term: d aux / d p̂_{t,e} = α·E·f_e / N (f_e held
    // constant, as it is a count); for sigmoid scores p̂ = s / S_E, so
    // d/ds_m = (c_m − Σ_e c_e·p̂_e) / S_E
    for (int64_t e = 0; e < E; ++e)
      dp[e] =
          aux_scale * c.aux_loss_coef * static_cast<double>(E) * (static_cast<double>(plan.aux_counts[e]) / nt) / nt;
    if (c.sigmoid) {
      aux_scores(c, p, E, ph.data());
      double s_all = 1e-20, cp = 0;
      for (int64_t e = 0; e < E; ++e) {
        s_all += p[e];
        cp += dp[e] * ph[e];
      }
      for (int64_t e = 0; e < E; ++e) dp[e] = (dp[e] - cp) / s_all;
    }
    // the top-k weights: w_j = σ·s_j / S (S = Σ_chosen s) gives
    // ds_j = (σ·g_j − Σ_l g_l·w_l) / S; without renormalisation ds_j = σ·g_j
    const int32_t* ex = plan.expert.data() + t * k;
    const float* g = dweight + t * k;
    if (c.norm_topk_prob) {
      const double s = chosen_sum(c, p, ex);
      double gw = 0;
      for (int64_t j = 0; j < k; ++j) gw += static_cast<double>(g[j]) * plan.weight[t * k + j];
      // s > 0 for any softmax; the meta backend reads back zeros, and then no gradient flows
      if (s > 1e-20)
        for (int64_t j = 0; j < k; ++j) dp[ex[j]] += (c.scaling * g[j] - gw) / s;
    } else {
      for (int64_t j = 0; j < k; ++j) dp[ex[j]] += c.scaling * g[j];
    }
    if (c.sigmoid) {  // σ'(l) = s·(1 − s)
      for (int64_t e = 0; e < E; ++e) dlogits[t * E + e] = static_cast<float>(dp[e] * p[e] * (1.0 - p[e]));
      continue;
    }
    // softmax: dl_e = p_e·(dp_e − Σ_m p_m·dp_m)
    double pdp = 0;
    for (int64_t e = 0; e < E; ++e) pdp += p[e] * dp[e];
    for (int64_t e = 0; e < E; ++e) dlogits[t * E + e] = static_cast<float>(p[e] * (dp[e] - pdp));
  }
}

}  // namespace gpuledger::moe
