// The host routing of a MoE block on hand-made logits: the top-k choices, the
// renormalised weights, the capacity drops counted by hand, the rows, and the
// load-balancing loss written out.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "models/moe/moe_routing.h"

namespace gpuledger::moe {
namespace {

// 8 tokens, E = 4, k = 2, c = 0.5: C = ⌈0.5·8·2/4⌉ = 2. Tokens 0-5 rank
// experts 0 then 1; tokens 6-7 rank 2 then 3.
std::vector<float> hand_logits() {
  std::vector<float> l;
  for (int t = 0; t < 8; ++t) {
    if (t < 6)
      l.insert(l.end(), {2.0f, 1.0f, 0.0f, 0.0f});
    else
      l.insert(l.end(), {0.0f, 0.0f, 2.0f, 1.0f});
  }
  return l;
}

TEST(MoeRouting, CapacityDropsCountedByHand) {
  const RoutingConfig c{4, 2, true, 0.5, 0.01};
  EXPECT_EQ(expert_capacity(c, 8), 2);
  const std::vector<float> logits = hand_logits();
  const RoutingPlan p = route(c, logits.data(), 8);
  // expert 0: tokens 0-5 choose it (6), the first two kept, 4 dropped; expert
  // 1 the same; experts 2 and 3: tokens 6 and 7, both kept. 16 choices, 8 dropped.
  EXPECT_EQ(p.dropped, 8);
  EXPECT_EQ(p.kept_rows(), 8);
  EXPECT_EQ(p.rows_begin, (std::vector<int64_t>{0, 2, 4, 6, 8}));
  EXPECT_EQ(p.row_token, (std::vector<int32_t>{0, 1, 0, 1, 6, 7, 6, 7}));
  EXPECT_EQ(p.assigned, (std::vector<int64_t>{6, 6, 2, 2}));
  EXPECT_EQ(p.expert[0], 0);
  EXPECT_EQ(p.expert[1], 1);
  EXPECT_EQ(p.expert[12], 2);
  EXPECT_EQ(p.expert[13], 3);
  EXPECT_EQ(p.row[0], 0);   // token 0 → expert 0 row 0
  EXPECT_EQ(p.row[3], 3);   // token 1 → expert 1's second row (global row 3)
  EXPECT_EQ(p.row[4], -1);  // token 2's first choice: expert 0 full
  EXPECT_EQ(p.row[15], 7);  // token 7 → expert 3's second row
  // weights: softmax over the two chosen logits 2 and 1
  const double e2 = std::exp(2.0), e1 = std::exp(1.0);
  EXPECT_NEAR(p.weight[0], e2 / (e2 + e1), 1e-6);
  EXPECT_NEAR(p.weight[1], e1 / (e2 + e1), 1e-6);
  // aux = α·E·Σ f_e·P_e: p = (e², e, 1, 1)/(e² + e + 2) for 6 tokens, (1, 1, e², e)/(…) for 2
  const double z = e2 + e1 + 2;
  const double P[4] = {(6 * e2 + 2) / z / 8, (6 * e1 + 2) / z / 8, (6 + 2 * e2) / z / 8, (6 + 2 * e1) / z / 8};
  const double f[4] = {6.0 / 8, 6.0 / 8, 2.0 / 8, 2.0 / 8};
  double aux = 0;
  for (int e = 0; e < 4; ++e) aux += f[e] * P[e];
  EXPECT_NEAR(p.aux_loss, 0.01 * 4 * aux, 1e-9);
}

TEST(MoeRouting, NoCapacityFactorKeepsEveryChoice) {
  const RoutingConfig c{4, 2, false, std::nullopt, 0.0};
  EXPECT_EQ(expert_capacity(c, 8), 8);
  const std::vector<float> logits = hand_logits();
  const RoutingPlan p = route(c, logits.data(), 8);
  EXPECT_EQ(p.dropped, 0);
  EXPECT_EQ(p.kept_rows(), 16);
  EXPECT_EQ(p.rows_of(0), 6);
  // without norm_topk_prob the weight is the softmax probability over all E (Qwen3-MoE norm_topk_prob = false)
  const double e2 = std::exp(2.0), e1 = std::exp(1.0);
  EXPECT_NEAR(p.weight[0], e2 / (e2 + e1 + 2), 1e-6);
  EXPECT_EQ(p.aux_loss, 0.0);
}

// routing_backward against central differences of the weights and the aux loss in the logits.
TEST(MoeRouting, BackwardMatchesFiniteDifferences) {
  for (const bool norm : {true, false}) {
    SCOPED_TRACE(norm);
    const RoutingConfig c{4, 2, norm, 0.75, 0.05};
    std::vector<float> logits = {0.3f, -0.2f, 0.9f, 0.1f, 1.1f, 0.4f, -0.5f, 0.2f, -0.1f, 0.6f, 0.0f, 0.35f};
    const int64_t n = 3;
    const std::vector<float> g = {0.7f, -0.4f, 0.25f, 0.5f, -0.9f, 0.3f};  // d loss / d w
    const RoutingPlan p = route(c, logits.data(), n);
    std::vector<float> dl(logits.size());
    auto loss = [&](const std::vector<float>& l) {
      const RoutingPlan q = route(c, l.data(), n);
      double s = q.aux_loss;
      for (size_t a = 0; a < g.size(); ++a) s += (q.row[a] >= 0 ? 1.0 : 0.0) * g[a] * q.weight[a];
      return s;
    };
    // A dropped choice has no output to weigh: its gradient is zero (g set to 0 there by the block).
    std::vector<float> g_kept = g;
    for (size_t a = 0; a < g.size(); ++a)
      if (p.row[a] < 0) g_kept[a] = 0;
    routing_backward(c, p, g_kept.data(), 1.0, dl.data());
    for (size_t i = 0; i < logits.size(); ++i) {
      std::vector<float> hi = logits, lo = logits;
      hi[i] += 1e-3f;
      lo[i] -= 1e-3f;
      const double fd = (loss(hi) - loss(lo)) / (hi[i] - lo[i]);
      EXPECT_NEAR(dl[i], fd, 2e-4) << i;
    }
  }
}

// Sigmoid scores with DeepSeek-V3's expert bias, one token, E 4, k 2,
// routed_scaling_factor 2.5, α 0.1: logits (0, ln 3, −ln 3, ln 2) give
// s = σ(l) = (1/2, 3/4, 1/4, 2/3). The bias (0, 0, 0.6, 0) lifts expert 2 to
// 0.85: the choices are experts 2 then 1 (the largest s + b), weighed by the
// unbiased s renormalised, times 2.5: 2.5·(1/4)/(1/4 + 3/4) = 0.625 and
// 2.5·(3/4)/1 = 1.875. The load-balancing loss counts the top 2 of the
// unbiased scores (experts 1 and 3) against p̂ = s/Σs, Σs = 13/6:
// 0.1·4·(3/4 + 2/3)/(13/6) = 0.4·17/26.
TEST(MoeRouting, SigmoidExpertBiasSelectsByBiasedScoreAndWeighsByScore) {
  RoutingConfig c{4, 2, true, std::nullopt, 0.1};
  c.sigmoid = true;
  c.scaling = 2.5;
  const std::vector<float> logits = {0.0f, std::log(3.0f), -std::log(3.0f), std::log(2.0f)};
  const std::vector<float> bias = {0.0f, 0.0f, 0.6f, 0.0f};
  const RoutingPlan p = route(c, logits.data(), 1, bias.data());
  EXPECT_EQ(p.expert, (std::vector<int32_t>{2, 1}));
  EXPECT_NEAR(p.weight[0], 0.625, 1e-6);
  EXPECT_NEAR(p.weight[1], 1.875, 1e-6);
  EXPECT_EQ(p.assigned, (std::vector<int64_t>{0, 1, 1, 0}));
  EXPECT_EQ(p.aux_counts, (std::vector<int64_t>{0, 1, 0, 1}));
  EXPECT_NEAR(p.aux_loss, 0.4 * 17.0 / 26.0, 1e-7);
  // without the bias: experts 1 then 3, the load counts those of the aux loss
  const RoutingPlan q = route(c, logits.data(), 1);
  EXPECT_EQ(q.expert, (std::vector<int32_t>{1, 3}));
  EXPECT_EQ(q.assigned, q.aux_counts);
  EXPECT_NEAR(q.weight[0], 2.5 * 0.75 / (0.75 + 2.0 / 3.0), 1e-6);
}

// The sigmoid routing's backward (the scaled, renormalised weights, the
// load-balancing loss through p̂ = s/Σs and σ') against central differences,
// with the bias fixed (it only selects), with and without renormalisation.
TEST(MoeRouting, SigmoidBackwardMatchesFiniteDifferences) {
  for (const bool norm : {true, false}) {
    SCOPED_TRACE(norm);
    RoutingConfig c{4, 2, norm, std::nullopt, 0.05};
    c.sigmoid = true;
    c.scaling = 2.5;
    const std::vector<float> bias = {0.02f, -0.3f, 0.1f, 0.0f};
    std::vector<float> logits = {0.3f, -0.2f, 0.9f, 0.1f, 1.1f, 0.4f, -0.5f, 0.2f, -0.1f, 0.6f, 0.0f, 0.35f};
    const int64_t n = 3;
    const std::vector<float> g = {0.7f, -0.4f, 0.25f, 0.5f, -0.9f, 0.3f};  // d loss / d w
    const RoutingPlan p = route(c, logits.data(), n, bias.data());
    auto loss = [&](const std::vector<float>& l) {
      const RoutingPlan q = route(c, l.data(), n, bias.data());
      double s = q.aux_loss;
      for (size_t a = 0; a < g.size(); ++a) s += g[a] * q.weight[a];
      return s;
    };
    std::vector<float> dl(logits.size());
    routing_backward(c, p, g.data(), 1.0, dl.data());
    for (size_t i = 0; i < logits.size(); ++i) {
      std::vector<float> hi = logits, lo = logits;
      hi[i] += 1e-3f;
      lo[i] -= 1e-3f;
      const double fd = (loss(hi) - loss(lo)) / (hi[i] - lo[i]);
      EXPECT_NEAR(dl[i], fd, 2e-4) << i;
    }
  }
}

}  // namespace
}  // namespace gpuledger::moe
