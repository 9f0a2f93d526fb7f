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

// The k largest of one token's probabilities, best first, ties to the lower index.
void top_k(const float* p, int64_t e, int64_t k, int32_t* out) {
  std::vector<int32_t> idx(static_cast<size_t>(e));
  std::iota(idx.begin(), idx.end(), 0);
  std::partial_sort(idx.begin(), idx.begin() + k, idx.end(),
                    [&](int32_t a, int32_t b) { return p[a] > p[b] || (p[a] == p[b] && a < b); });
  std::copy(idx.begin(), idx.begin() + k, out);
}

}  // namespace

RoutingPlan route(const RoutingConfig& c, const float* logits, int64_t tokens) {
  const int64_t E = c.experts, k = c.top_k, n = tokens;
  if (E < 1 || k < 1 || k > E) throw std::invalid_argument("moe::route: need 1 <= top_k <= experts");
  RoutingPlan plan;
  plan.tokens = n;
  plan.probs.resize(static_cast<size_t>(n * E));
  plan.expert.resize(static_cast<size_t>(n * k));
  plan.weight.resize(static_cast<size_t>(n * k));
  plan.row.assign(static_cast<size_t>(n * k), -1);
  plan.assigned.assign(static_cast<size_t>(E), 0);
  softmax_rows(logits, n, E, plan.probs.data());
  for (int64_t t = 0; t < n; ++t) {
    const float* p = plan.probs.data() + t * E;
    int32_t* ex = plan.expert.data() + t * k;
    top_k(p, E, k, ex);
    double sum = 0;
    for (int64_t j = 0; j < k; ++j) sum += p[ex[j]];
    for (int64_t j = 0; j < k; ++j)
      plan.weight[t * k + j] = c.norm_topk_prob ? static_cast<float>(p[ex[j]] / sum) : p[ex[j]];
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
  // E · Σ_e (assignments_e / N) · (Σ_t p_{t,e} / N), times the coefficient.
  double aux = 0;
  for (int64_t e = 0; e < E; ++e) {
    double p_sum = 0;
    for (int64_t t = 0; t < n; ++t) p_sum += plan.probs[t * E + e];
    aux += (static_cast<double>(plan.assigned[e]) / n) * (p_sum / n);
  }
  plan.aux_loss = c.aux_loss_coef * static_cast<double>(E) * aux;
  return plan;
}

void routing_backward(const RoutingConfig& c, const RoutingPlan& plan, const float* dweight, double aux_scale,
                      float* dlogits) {
  const int64_t E = c.experts, k = c.top_k, n = plan.tokens;
  std::vector<double> dp(static_cast<size_t>(E));
  for (int64_t t = 0; t < n; ++t) {
    const float* p = plan.probs.data() + t * E;
    // the load-balancing term: d aux / d p_{t,e} = α·E·f_e / N (f_e held constant, as it is a count)
    for (int64_t e = 0; e < E; ++e)
      dp[e] = aux_scale * c.aux_loss_coef * static_cast<double>(E) * (static_cast<double>(plan.assigned[e]) / n) / n;
    // the top-k weights: w_j = p_j / S (S = Σ_chosen p) gives dp_j = (g_j − Σ_l g_l·w_l) / S
    const int32_t* ex = plan.expert.data() + t * k;
    const float* g = dweight + t * k;
    if (c.norm_topk_prob) {
      double s = 0, gw = 0;
      for (int64_t j = 0; j < k; ++j) {
        s += p[ex[j]];
        gw += static_cast<double>(g[j]) * plan.weight[t * k + j];
      }
      // s > 0 for any softmax; the meta backend reads back zeros, and then no gradient flows
      if (s > 0)
        for (int64_t j = 0; j < k; ++j) dp[ex[j]] += (g[j] - gw) / s;
    } else {
      for (int64_t j = 0; j < k; ++j) dp[ex[j]] += g[j];
    }
    // softmax: dl_e = p_e·(dp_e − Σ_m p_m·dp_m)
    double pdp = 0;
    for (int64_t e = 0; e < E; ++e) pdp += p[e] * dp[e];
    for (int64_t e = 0; e < E; ++e) dlogits[t * E + e] = static_cast<float>(p[e] * (dp[e] - pdp));
  }
}

}  // namespace gpuledger::moe
