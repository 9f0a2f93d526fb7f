// Device::optimizer_update on the CPU backend against PyTorch: each case of
// tests/data/optimizer_reference.json (scripts/make_optimizer_reference.py:
// torch.optim.SGD with and without momentum, torch.optim.Adagrad,
// torch.optim.AdamW, and Lion written from Chen et al. 2023, Alg. 2) is
// replayed step by step from the same fp32 parameters and gradients, and the
// parameters and states after every step must match. Beside it, one or two
// steps of each rule worked by hand, and the states each rule needs.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/cpu/cpu_device.h"

namespace gpuledger {
namespace {

struct Dev {
  Ledger ledger;
  CpuDevice d{ledger};
};

std::vector<float> floats(const nlohmann::json& a) { return a.get<std::vector<float>>(); }

OptimizerHyper hyper_of(const nlohmann::json& c) {
  OptimizerHyper h;
  h.kind = *optimizer_from_name(c.at("optimizer").get<std::string>());
  h.lr = c.at("lr").get<float>();
  h.weight_decay = c.at("weight_decay").get<float>();
  h.momentum = c.value("momentum", 0.0f);
  h.beta1 = c.value("beta1", 0.0f);
  h.beta2 = c.value("beta2", 0.0f);
  h.eps = c.value("eps", 0.0f);
  return h;
}

// Tolerance: PyTorch runs the same fp32 arithmetic, in places in another
// order (AdamW's step size lr/bc1 and √v/√bc2; Lion's 1 − lr·wd formed in
// double) — a few fp32 roundings per step, ≈ 1e-7 relative each; four steps
// stay below 2e-6 of the value plus 1e-7 absolute (values near 0 after a
// cancellation).
void expect_close(const std::vector<float>& got, const std::vector<float>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < want.size(); ++i)
    EXPECT_NEAR(got[i], want[i], 2e-6 * std::abs(want[i]) + 1e-7) << what << " [" << i << "]";
}

TEST(OptimizerReference, EveryRuleMatchesPyTorchStepByStep) {
  std::ifstream in(std::string(GPULEDGER_TEST_DATA_DIR) + "/optimizer_reference.json");
  ASSERT_TRUE(in) << "tests/data/optimizer_reference.json";
  const nlohmann::json doc = nlohmann::json::parse(in);
  ASSERT_EQ(doc.at("cases").size(), 5u);
  for (const auto& c : doc.at("cases")) {
    const OptimizerHyper h = hyper_of(c);
    const std::string name = c.at("optimizer").get<std::string>() + " momentum " + std::to_string(h.momentum);
    std::vector<float> p = floats(c.at("params0"));
    const size_t n = p.size();
    const int states = optimizer_state_count(h);
    ASSERT_EQ(static_cast<size_t>(states), c.at("state_names").size()) << name;
    std::vector<float> s1(n, 0.0f), s2(n, 0.0f);
    Dev dev;
    for (size_t step = 0; step < c.at("grads").size(); ++step) {
      const std::vector<float> g = floats(c.at("grads")[step]);
      dev.d.optimizer_update(nullptr, p.data(), DType::kFP32, g.data(), DType::kFP32, states >= 1 ? s1.data() : nullptr,
                             states >= 2 ? s2.data() : nullptr, static_cast<int64_t>(n), h,
                             static_cast<int64_t>(step + 1), 1.0f);
      const std::string at = name + " step " + std::to_string(step + 1);
      expect_close(p, floats(c.at("params")[step]), at + " params");
      if (states >= 1) expect_close(s1, floats(c.at("states")[step][0]), at + " state 1");
      if (states >= 2) expect_close(s2, floats(c.at("states")[step][1]), at + " state 2");
    }
  }
}

OptimizerHyper make(OptimizerKind kind, float lr, float wd) {
  OptimizerHyper h;
  h.kind = kind;
  h.lr = lr;
  h.weight_decay = wd;
  return h;
}

// Two elements through one call: p, g, and the states; returns p.
struct Steps {
  std::vector<float> p, s1, s2;
  void step(Dev& dev, const OptimizerHyper& h, std::vector<float> g, int64_t t, float grad_scale = 1.0f) {
    s1.resize(p.size());
    s2.resize(p.size());
    const int states = optimizer_state_count(h);
    dev.d.optimizer_update(nullptr, p.data(), DType::kFP32, g.data(), DType::kFP32, states >= 1 ? s1.data() : nullptr,
                           states >= 2 ? s2.data() : nullptr, static_cast<int64_t>(p.size()), h, t, grad_scale);
  }
};

TEST(OptimizerByHand, SgdMomentumAddsDecayToTheGradientAndKeepsTheBuffer) {
  Dev dev;
  OptimizerHyper h = make(OptimizerKind::kSGD, 0.1f, 0.1f);
  h.momentum = 0.9f;
  Steps r{{1.0f}, {0.0f}, {}};
  // d = 0.5 + 0.1·1 = 0.6; b = 0.6; p = 1 − 0.1·0.6 = 0.94
  r.step(dev, h, {0.5f}, 1);
  EXPECT_NEAR(r.p[0], 0.94f, 1e-7f);
  EXPECT_NEAR(r.s1[0], 0.6f, 1e-7f);
  // d = 0.5 + 0.094 = 0.594; b = 0.9·0.6 + 0.594 = 1.134; p = 0.94 − 0.1134 = 0.8266
  r.step(dev, h, {0.5f}, 2);
  EXPECT_NEAR(r.s1[0], 1.134f, 1e-6f);
  EXPECT_NEAR(r.p[0], 0.8266f, 1e-6f);
}

TEST(OptimizerByHand, SgdWithoutMomentumNeedsNoState) {
  Dev dev;
  const OptimizerHyper h = make(OptimizerKind::kSGD, 0.1f, 0.0f);
  EXPECT_EQ(optimizer_state_count(h), 0);
  std::vector<float> p = {1.0f, -2.0f}, g = {0.5f, 0.25f};
  dev.d.optimizer_update(nullptr, p.data(), DType::kFP32, g.data(), DType::kFP32, nullptr, nullptr, 2, h, 1, 1.0f);
  EXPECT_FLOAT_EQ(p[0], 0.95f);    // 1 − 0.1·0.5
  EXPECT_FLOAT_EQ(p[1], -2.025f);  // −2 − 0.1·0.25
}

TEST(OptimizerByHand, AdagradDividesByTheRootOfTheSumOfSquares) {
  Dev dev;
  OptimizerHyper h = make(OptimizerKind::kAdagrad, 0.1f, 0.0f);
  h.eps = 1e-10f;
  Steps r{{1.0f}, {0.0f}, {}};
  r.step(dev, h, {0.5f}, 1);  // s = 0.25; p = 1 − 0.1·0.5/0.5 = 0.9
  EXPECT_NEAR(r.s1[0], 0.25f, 0.0f);
  EXPECT_NEAR(r.p[0], 0.9f, 1e-7f);
  r.step(dev, h, {0.5f}, 2);  // s = 0.5; p = 0.9 − 0.1·0.5/√0.5 = 0.9 − 0.0707107
  EXPECT_NEAR(r.s1[0], 0.5f, 0.0f);
  EXPECT_NEAR(r.p[0], 0.9f - 0.1f * 0.5f / std::sqrt(0.5f), 1e-7f);
}

TEST(OptimizerByHand, LionMovesByLrTimesTheSignAndDecaysDecoupled) {
  Dev dev;
  OptimizerHyper h = make(OptimizerKind::kLion, 0.1f, 0.5f);
  h.beta1 = 0.9f;
  h.beta2 = 0.99f;
  Steps r{{1.0f, 2.0f, 3.0f}, {0.0f, 0.0f, 0.0f}, {}};
  // p·(1 − 0.05), then −0.1·sign(0.1·g): g < 0 moves up, g > 0 down, g = 0 not at all
  r.step(dev, h, {-0.5f, 0.25f, 0.0f}, 1);
  EXPECT_NEAR(r.p[0], 0.95f + 0.1f, 1e-6f);
  EXPECT_NEAR(r.p[1], 1.9f - 0.1f, 1e-6f);
  EXPECT_NEAR(r.p[2], 2.85f, 1e-6f);
  // m = (1 − β2)·g, and 1 − 0.99f is 0.0099999905 in fp32
  EXPECT_NEAR(r.s1[0], -0.005f, 1e-8f);
  EXPECT_NEAR(r.s1[1], 0.0025f, 1e-8f);
  // step 2, g = +0.01 on element 0: c = 0.9·(−0.005) + 0.1·0.01 = −0.0035 < 0, so
  // the old momentum still decides the sign and p moves up again.
  r.step(dev, h, {0.01f, 0.0f, 0.0f}, 2);
  EXPECT_NEAR(r.p[0], 1.05f * 0.95f + 0.1f, 1e-6f);
}

TEST(OptimizerByHand, GradScaleActsAsPrescaledGradientsForEveryRule) {
  for (OptimizerKind kind : {OptimizerKind::kSGD, OptimizerKind::kAdagrad, OptimizerKind::kLion}) {
    OptimizerHyper h = make(kind, 0.05f, 0.01f);
    h.momentum = 0.9f;
    h.beta1 = 0.9f;
    h.beta2 = 0.99f;
    h.eps = 1e-10f;
    Dev dev;
    Steps a{{1.0f, -1.0f}, {}, {}}, b{{1.0f, -1.0f}, {}, {}};
    for (int64_t t = 1; t <= 3; ++t) {
      a.step(dev, h, {0.25f, -0.75f}, t, 2.0f);  // ×2 is exact in fp32
      b.step(dev, h, {0.5f, -1.5f}, t, 1.0f);
    }
    EXPECT_EQ(a.p, b.p) << optimizer_name(kind);
    EXPECT_EQ(a.s1, b.s1) << optimizer_name(kind);
  }
}

TEST(OptimizerByHand, Bf16WeightsAreTheMasterRounded) {
  Dev dev;
  OptimizerHyper h = make(OptimizerKind::kAdagrad, 0.1f, 0.0f);
  h.eps = 1e-10f;
  std::vector<float> master = {1.0f, 0.3f}, sum(2, 0.0f);
  std::vector<uint16_t> w(2), g(2);
  const std::vector<float> g32 = {0.5f, -0.25f};
  convert_from_fp32(g32.data(), g.data(), DType::kBF16, 2);
  dev.d.optimizer_update(master.data(), w.data(), DType::kBF16, g.data(), DType::kBF16, sum.data(), nullptr, 2, h, 1,
                         1.0f);
  std::vector<float> w32(2);
  convert_to_fp32(w.data(), DType::kBF16, w32.data(), 2);
  std::vector<uint16_t> want(2);
  convert_from_fp32(master.data(), want.data(), DType::kBF16, 2);
  EXPECT_EQ(w, want);
  EXPECT_NEAR(master[0], 0.9f, 1e-7f);  // |g|/√(g²) = 1: each moves by lr against its gradient
  EXPECT_NEAR(master[1], 0.4f, 1e-7f);
}

TEST(OptimizerByHand, RulesNeedTheirStates) {
  Dev dev;
  std::vector<float> p(4, 1.0f), g(4, 0.5f);
  OptimizerHyper h = make(OptimizerKind::kAdagrad, 0.1f, 0.0f);
  EXPECT_THROW(
      try {
        dev.d.optimizer_update(nullptr, p.data(), DType::kFP32, g.data(), DType::kFP32, nullptr, nullptr, 4, h, 1,
                               1.0f);
      } catch (const std::invalid_argument& e) {
        EXPECT_STREQ(e.what(), "adagrad: needs 1 state buffer(s)");
        throw;
      },
      std::invalid_argument);
  h.kind = OptimizerKind::kLion;
  EXPECT_THROW(
      dev.d.optimizer_update(nullptr, p.data(), DType::kFP32, g.data(), DType::kFP32, nullptr, nullptr, 4, h, 0, 1.0f),
      std::invalid_argument);  // step 0
}

}  // namespace
}  // namespace gpuledger
