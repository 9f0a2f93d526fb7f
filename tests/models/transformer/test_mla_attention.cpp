// Multi-head latent attention on the CPU backend (models/transformer/mla_attention.cpp)
// against PyTorch autograd in float64 (tests/data/mla_reference.json, written by
// scripts/make_mla_reference.py from Hugging Face's DeepseekV3Attention form and
// its weight layout): the output and the gradients of L = Σ y·dy with respect to
// the input and every weight, in fp32 and in bf16, with and without the query latent.
// fp32 tolerance: 2e-5 of each tensor's largest magnitude (fp32 products of at most
// 32 terms against float64; the worst seen is 4.2e-7). Then the bytes: every
// saved tensor is freed by the backward and the ledger ends where it began.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "harness.h"
#include "models/transformer/mla_attention.h"

namespace gpuledger {
namespace {

using testing::Env;
using testing::from_host;
using testing::to_host;

nlohmann::json reference() {
  std::ifstream in(std::string(GPULEDGER_TEST_DATA_DIR) + "/mla_reference.json");
  EXPECT_TRUE(in) << "tests/data/mla_reference.json";
  return nlohmann::json::parse(in);
}

void expect_close(const std::vector<float>& got, const std::vector<double>& want, const std::string& what,
                  double tolerance) {
  ASSERT_EQ(got.size(), want.size()) << what;
  double scale = 0;
  for (double w : want) scale = std::max(scale, std::abs(w));
  ASSERT_GT(scale, 0) << what << ": a reference of zeros checks nothing";
  double worst = 0;
  for (size_t i = 0; i < got.size(); ++i) worst = std::max(worst, std::abs(got[i] - want[i]));
  EXPECT_LE(worst, tolerance * scale) << what << ": largest difference " << worst << " of scale " << scale;
}

// One reference case with activations and weights in `e` (gradients fp32), held to `tolerance` of each
// tensor's largest magnitude.
void check_case(const nlohmann::json& c, DType e, double tolerance) {
  {
    SCOPED_TRACE(c["name"].get<std::string>());
    const auto& j = c["shape"];
    MlaShape sh;
    sh.b = j["b"];
    sh.s = j["s"];
    sh.h = j["h"];
    sh.a_t = j["a"];
    sh.r_q = j["r_q"];
    sh.r_kv = j["r_kv"];
    sh.d_n = j["d_n"];
    sh.d_r = j["d_r"];
    sh.d_v = j["d_v"];
    sh.norm_eps = j["norm_eps"].get<float>();
    sh.rope_theta = j["rope_theta"].get<float>();
    sh.e = e;
    sh.g = DType::kFP32;
    const int64_t n = sh.tokens(), eb = dtype_bytes(e);

    Env env;
    Device& dev = *env.dev;
    std::map<std::string, Buffer> weight, grad;
    for (const auto& [name, values] : c["inputs"].items()) {
      if (name == "xn" || name == "dy") continue;
      const auto v = values.get<std::vector<float>>();
      weight[name] = dev.alloc(eb * static_cast<int64_t>(v.size()), Account::kWeights, name);
      from_host(dev, weight[name].data(), e, v);
      grad[name] = dev.alloc(4 * static_cast<int64_t>(v.size()), Account::kGrads, name);
      from_host(dev, grad[name].data(), DType::kFP32, std::vector<float>(v.size(), 0.0f));
    }
    MlaWeights w;
    const auto ptr = [&](std::map<std::string, Buffer>& m, const char* k) {
      return m.count(k) ? m.at(k).data() : nullptr;
    };
    w.q_down = ptr(weight, "q_down");
    w.q_norm = ptr(weight, "q_norm");
    w.q_up = ptr(weight, "q_up");
    w.kv_down = ptr(weight, "kv_down");
    w.kv_norm = ptr(weight, "kv_norm");
    w.kv_up = ptr(weight, "kv_up");
    w.out = ptr(weight, "out");
    w.d_q_down = ptr(grad, "q_down");
    w.d_q_norm = ptr(grad, "q_norm");
    w.d_q_up = ptr(grad, "q_up");
    w.d_kv_down = ptr(grad, "kv_down");
    w.d_kv_norm = ptr(grad, "kv_norm");
    w.d_kv_up = ptr(grad, "kv_up");
    w.d_out = ptr(grad, "out");

    Buffer xn = dev.alloc(eb * n * sh.h, Account::kActivations, "xn");
    from_host(dev, xn.data(), e, c["inputs"]["xn"].get<std::vector<float>>());
    Buffer dy = dev.alloc(eb * n * sh.h, Account::kWorkspace, "dy");
    from_host(dev, dy.data(), e, c["inputs"]["dy"].get<std::vector<float>>());
    Buffer y = dev.alloc(eb * n * sh.h, Account::kWorkspace, "y");
    Buffer dxn = dev.alloc(eb * n * sh.h, Account::kWorkspace, "dxn");

    const int64_t before = env.ledger.live(Account::kActivations);
    MlaSaved saved;
    dev.reset_flops();
    mla_forward(dev, sh, w, xn.data(), y.data(), saved, Account::kActivations);
    const int64_t forward_flops = dev.executed_flops();
    // Saved, fp32, n = 10 tokens, a = 4 heads: the query latent, its rstd and its norm 640 + 40 + 640 (q_lora_rank
    // 16 only); the KV latent, rstd, norm 480 + 40 + 480; q_nope 1,280, q_rope 640, k_nope 1,280, k_rope 160,
    // v 960; probabilities 2·4·5²·4 = 800; context 960.
    // In bf16 every tensor but the fp32 rstds (40 B each) halves: 4,240 and 3,560.
    const int64_t saved_bytes = eb == 4 ? (sh.r_q > 0 ? 8'400 : 7'080) : (sh.r_q > 0 ? 4'240 : 3'560);
    EXPECT_EQ(env.ledger.live(Account::kActivations) - before, saved_bytes);
    // GEMM FLOPs: 2·n·(h·r_q + r_q·a·(d_n + d_r) + h·(r_kv + d_r) + r_kv·a·(d_n + d_v) + a·d_v·h) = 64,640
    // (without the latent, h·a·(d_n + d_r) in place of the first two: 2·10·(1,536 + 512 + 672 + 768) = 69,760),
    // scores 2·B·a·T²·(d_n + d_r) = 4,800, P·V 2·B·a·T²·d_v = 2,400; the backward twice the forward.
    EXPECT_EQ(forward_flops, sh.r_q > 0 ? 71'840 : 76'960);
    dev.reset_flops();
    mla_backward(dev, sh, w, xn.data(), dy.data(), dxn.data(), saved);
    EXPECT_EQ(dev.executed_flops(), 2 * forward_flops);
    EXPECT_EQ(env.ledger.live(Account::kActivations), before);  // every saved tensor freed

    expect_close(to_host(dev, y.data(), e, n * sh.h), c["y"].get<std::vector<double>>(), "y", tolerance);
    expect_close(to_host(dev, dxn.data(), e, n * sh.h), c["dxn"].get<std::vector<double>>(), "dxn", tolerance);
    for (const auto& [name, values] : c["grads"].items()) {
      const auto want = values.get<std::vector<double>>();
      expect_close(to_host(dev, grad.at(name).data(), DType::kFP32, static_cast<int64_t>(want.size())), want,
                   "d " + name, tolerance);
    }
  }
}

TEST(MlaAttention, MatchesPyTorchReferenceFp32) {
  const auto doc = reference();
  ASSERT_EQ(doc["cases"].size(), 2u);
  for (const auto& c : doc["cases"]) check_case(c, DType::kFP32, 2e-5);
}

// bf16 activations and weights (the inputs rounded to bf16, fp32 accumulation and gradients): within
// 4e-2 of each tensor's largest magnitude, a few bf16 roundings (2^-8 each) along the chain; the worst
// seen is 1.8e-2 (the q_up gradient).
TEST(MlaAttention, MatchesPyTorchReferenceBf16) {
  const auto doc = reference();
  for (const auto& c : doc["cases"]) check_case(c, DType::kBF16, 4e-2);
}

// The meta backend books the same bytes and counts the same FLOPs, touching nothing (the figures above, case
// q_latent), so the block can be budgeted at any size.
TEST(MlaAttention, MetaBackendBooksTheSameBytesAndFlops) {
  Env env("meta");
  Device& dev = *env.dev;
  MlaShape sh;
  sh.b = 2;
  sh.s = 5;
  sh.h = 32;
  sh.a_t = 4;
  sh.r_q = 16;
  sh.r_kv = 12;
  sh.d_n = 8;
  sh.d_r = 4;
  sh.d_v = 6;
  sh.e = sh.g = DType::kFP32;
  const int64_t n = sh.tokens();
  std::vector<Buffer> held;
  const auto make = [&](int64_t elems, Account acc) {
    held.push_back(dev.alloc(4 * elems, acc, "t"));
    return held.back().data();
  };
  MlaWeights w;
  w.q_down = make(32 * 16, Account::kWeights);
  w.q_norm = make(16, Account::kWeights);
  w.q_up = make(48 * 16, Account::kWeights);
  w.kv_down = make(16 * 32, Account::kWeights);
  w.kv_norm = make(12, Account::kWeights);
  w.kv_up = make(56 * 12, Account::kWeights);
  w.out = make(32 * 24, Account::kWeights);
  w.d_q_down = make(32 * 16, Account::kGrads);
  w.d_q_norm = make(16, Account::kGrads);
  w.d_q_up = make(48 * 16, Account::kGrads);
  w.d_kv_down = make(16 * 32, Account::kGrads);
  w.d_kv_norm = make(12, Account::kGrads);
  w.d_kv_up = make(56 * 12, Account::kGrads);
  w.d_out = make(32 * 24, Account::kGrads);
  void* xn = make(n * sh.h, Account::kWorkspace);
  void* y = make(n * sh.h, Account::kWorkspace);
  void* dy = make(n * sh.h, Account::kWorkspace);
  void* dxn = make(n * sh.h, Account::kWorkspace);
  MlaSaved saved;
  mla_forward(dev, sh, w, xn, y, saved, Account::kActivations);
  EXPECT_EQ(env.ledger.live(Account::kActivations), 8'400);
  EXPECT_EQ(dev.executed_flops(), 71'840);
  mla_backward(dev, sh, w, xn, dy, dxn, saved);
  EXPECT_EQ(dev.executed_flops(), 3 * 71'840);
  EXPECT_EQ(env.ledger.live(Account::kActivations), 0);
}

}  // namespace
}  // namespace gpuledger
