// The MoE block (models/moe/moe_block.h) on the CPU in fp32 against a
// double-precision reference written here: the output, the load-balancing
// loss, the dropped choices, and the gradient of every parameter and of the
// input (central differences of the reference, tolerance stated below); the
// ledger's activations against analytic/moe.h to the byte; the FLOPs exactly —
// without and with gpt-oss's biases (the router's on its logits, each expert's
// on gate, up and down). Then on meta in bf16: the same bytes and FLOPs for
// the routing it makes.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "analytic/moe.h"
#include "comm/sim_comm.h"
#include "kernels/device.h"
#include "kernels/ledger.h"
#include "kernels/registry/registry.h"
#include "models/moe/moe_block.h"
#include "tests/models/moe/moe_test_model.h"

namespace gpuledger {
namespace {

// N = 8 tokens, h = 32, E = 4, k = 2, f_e = 16, one shared expert f_s = 8,
// c = 0.75 (C = ⌈0.75·8·2/4⌉ = 3: some choices dropped), α = 0.05.
constexpr int64_t kN = 8, kH = 32, kE = 4, kK = 2, kF = 16, kFs = 8;

constexpr testing::MoeTestDims kDims{kN, kH, kE, kK, kF, kFs};

ModelConfig moe_model() { return testing::moe_test_model(kDims, 0.75); }

MoeShape moe_shape(DType t) { return testing::moe_test_shape(kDims, moe_model(), t); }

// The tensors of the block, as doubles (layouts as moe_block.h states); the
// biases empty unless the block has them.
struct Tensors {
  std::vector<double> x, router, gate, up, down, sgate, sup, sdown;
  std::vector<double> router_b, gate_b, up_b, down_b;
  double glu_limit = 0;  // > 0: the routed experts' clamped GLU at this limit (gpt-oss)
  std::vector<std::vector<double>*> all() {
    std::vector<std::vector<double>*> v = {&x, &router, &gate, &up, &down, &sgate, &sup, &sdown};
    if (!router_b.empty()) v.insert(v.end(), {&router_b, &gate_b, &up_b, &down_b});
    return v;
  }
};

Tensors random_tensors(uint32_t seed, bool biases = false) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> nd(0.0, 1.0);
  auto fill = [&](int64_t n, double scale) {
    std::vector<double> v(static_cast<size_t>(n));
    for (auto& x : v) x = scale * nd(rng);
    return v;
  };
  Tensors t;
  t.x = fill(kN * kH, 1.0);
  t.router = fill(kE * kH, 0.3);
  t.gate = fill(kE * kF * kH, 0.2);
  t.up = fill(kE * kF * kH, 0.2);
  t.down = fill(kE * kH * kF, 0.2);
  t.sgate = fill(kFs * kH, 0.2);
  t.sup = fill(kFs * kH, 0.2);
  t.sdown = fill(kH * kFs, 0.2);
  if (biases) {
    t.router_b = fill(kE, 0.5);
    t.gate_b = fill(kE * kF, 0.3);
    t.up_b = fill(kE * kF, 0.3);
    t.down_b = fill(kE * kH, 0.3);
  }
  return t;
}

// ---- the double-precision reference, written from docs/formulas/moe.md ----

struct RefOut {
  std::vector<double> y;
  double aux = 0;
  int64_t dropped = 0, kept = 0;
};

// y = W_down·(silu(W_gate·x + b_g) ⊙ (W_up·x + b_u)) + b_d for one row, weights
// (f × h), (h × f); the biases null when absent. With a limit L, gpt-oss's
// clamped GLU instead: (clamp(u, ±L) + 1)·g·σ(1.702·g), g = min(g, L).
void swiglu_ffn(const double* x, const double* wg, const double* wu, const double* wd, int64_t f, double scale,
                double* y, const double* bg = nullptr, const double* bu = nullptr, const double* bd = nullptr,
                double limit = 0) {
  for (int64_t i = 0; i < f; ++i) {
    double g = bg ? bg[i] : 0, u = bu ? bu[i] : 0;
    for (int64_t c = 0; c < kH; ++c) {
      g += wg[i * kH + c] * x[c];
      u += wu[i * kH + c] * x[c];
    }
    double a = g / (1 + std::exp(-g)) * u;
    if (limit > 0) {
      g = std::min(g, limit);
      a = (std::clamp(u, -limit, limit) + 1) * g / (1 + std::exp(-1.702 * g));
    }
    for (int64_t c = 0; c < kH; ++c) y[c] += scale * wd[c * f + i] * a;
  }
  if (bd)
    for (int64_t c = 0; c < kH; ++c) y[c] += scale * bd[c];
}

RefOut reference(const Tensors& t) {
  const int64_t cap = static_cast<int64_t>(std::ceil(0.75 * kN * kK / kE));
  RefOut r;
  r.y.assign(kN * kH, 0.0);
  std::vector<int64_t> used(kE, 0), assigned(kE, 0);
  std::vector<double> p_sum(kE, 0.0);
  for (int64_t n = 0; n < kN; ++n) {
    const double* x = t.x.data() + n * kH;
    double l[kE], p[kE], z = 0;
    for (int64_t e = 0; e < kE; ++e) {
      l[e] = t.router_b.empty() ? 0 : t.router_b[e];
      for (int64_t c = 0; c < kH; ++c) l[e] += t.router[e * kH + c] * x[c];
    }
    for (int64_t e = 0; e < kE; ++e) z += std::exp(l[e]);
    for (int64_t e = 0; e < kE; ++e) p_sum[e] += p[e] = std::exp(l[e]) / z;
    int64_t best[kK];  // the k largest, ties to the lower index
    bool taken[kE] = {};
    for (int64_t j = 0; j < kK; ++j) {
      int64_t b = -1;
      for (int64_t e = 0; e < kE; ++e)
        if (!taken[e] && (b < 0 || p[e] > p[b])) b = e;
      taken[b] = true;
      best[j] = b;
    }
    const double s = p[best[0]] + p[best[1]];
    for (int64_t j = 0; j < kK; ++j) {
      const int64_t e = best[j];
      ++assigned[e];
      if (used[e]++ >= cap) {
        ++r.dropped;
        continue;
      }
      ++r.kept;
      const bool b = !t.gate_b.empty();
      swiglu_ffn(x, t.gate.data() + e * kF * kH, t.up.data() + e * kF * kH, t.down.data() + e * kH * kF, kF, p[e] / s,
                 r.y.data() + n * kH, b ? t.gate_b.data() + e * kF : nullptr, b ? t.up_b.data() + e * kF : nullptr,
                 b ? t.down_b.data() + e * kH : nullptr, t.glu_limit);
    }
    swiglu_ffn(x, t.sgate.data(), t.sup.data(), t.sdown.data(), kFs, 1.0, r.y.data() + n * kH);
  }
  for (int64_t e = 0; e < kE; ++e) r.aux += (double(assigned[e]) / kN) * (p_sum[e] / kN);
  r.aux *= 0.05 * kE;
  return r;
}

// loss = Σ G ⊙ y + aux
double ref_loss(const Tensors& t, const std::vector<double>& G) {
  const RefOut r = reference(t);
  double s = r.aux;
  for (size_t i = 0; i < G.size(); ++i) s += G[i] * r.y[i];
  return s;
}

// ---- the block on a device ----

struct Rig {
  Ledger ledger;
  std::unique_ptr<Device> dev;
  DType t;
  Buffer x, router, gate, up, down, sgate, sup, sdown, router_b, gate_b, up_b, down_b;
  Buffer dx, drouter, dgate, dup, ddown, dsgate, dsup, dsdown, drouter_b, dgate_b, dup_b, ddown_b;

  Rig(const std::string& backend, DType dtype, Tensors& ts) : dev(make_device(backend, ledger)), t(dtype) {
    Buffer* w[] = {&x, &router, &gate, &up, &down, &sgate, &sup, &sdown, &router_b, &gate_b, &up_b, &down_b};
    Buffer* g[] = {&dx,   &drouter, &dgate,     &dup,     &ddown, &dsgate,
                   &dsup, &dsdown,  &drouter_b, &dgate_b, &dup_b, &ddown_b};
    auto tensors = ts.all();
    for (size_t i = 0; i < tensors.size(); ++i) {
      const auto n = static_cast<int64_t>(tensors[i]->size());
      *w[i] = dev->alloc(n * dtype_bytes(t), i == 0 ? Account::kWorkspace : Account::kWeights, "w");
      *g[i] = dev->alloc(n * dtype_bytes(t), i == 0 ? Account::kWorkspace : Account::kGrads, "g");
      upload(*w[i], *tensors[i]);
      dev->fill_zero(g[i]->data(), n * dtype_bytes(t));
    }
  }
  void upload(Buffer& b, const std::vector<double>& v) {
    std::vector<float> f(v.begin(), v.end());
    std::vector<unsigned char> raw(f.size() * dtype_bytes(t));
    convert_from_fp32(f.data(), raw.data(), t, static_cast<int64_t>(f.size()));
    dev->copy_from_host(b.data(), raw.data(), static_cast<int64_t>(raw.size()));
  }
  std::vector<float> download(const Buffer& b) {
    const int64_t n = b.bytes() / dtype_bytes(t);
    std::vector<unsigned char> raw(static_cast<size_t>(b.bytes()));
    dev->copy_to_host(raw.data(), b.data(), b.bytes());
    std::vector<float> f(static_cast<size_t>(n));
    convert_to_fp32(raw.data(), t, f.data(), n);
    return f;
  }
  MoeWeights weights() {
    MoeWeights w{router.data(),  gate.data(),  up.data(),  down.data(),  sgate.data(),  sup.data(),  sdown.data(),
                 drouter.data(), dgate.data(), dup.data(), ddown.data(), dsgate.data(), dsup.data(), dsdown.data()};
    w.router_b = router_b.data(), w.gate_b = gate_b.data(), w.up_b = up_b.data(), w.down_b = down_b.data();
    w.d_router_b = drouter_b.data(), w.d_gate_b = dgate_b.data(), w.d_up_b = dup_b.data(), w.d_down_b = ddown_b.data();
    return w;
  }
};

// The bias adds are element-wise ops: the same GEMM FLOPs with or without them.
// limit > 0: the routed experts' clamped GLU (the shared expert stays SwiGLU).
void check_against_reference(bool biases, double limit = 0) {
  Tensors ts = random_tensors(7, biases);
  ts.glu_limit = limit;
  std::vector<double> G(kN * kH);
  std::mt19937 rng(11);
  std::normal_distribution<double> nd(0.0, 1.0);
  for (auto& g : G) g = nd(rng);

  Rig rig("cpu", DType::kFP32, ts);
  MoeShape shape = moe_shape(DType::kFP32);
  shape.router_logit_bias = shape.expert_biases = biases;
  if (limit > 0) shape.swiglu_limit = static_cast<float>(limit);
  MoeBlock block(*rig.dev, shape, rig.weights());
  Buffer y = rig.dev->alloc(kN * kH * 4, Account::kWorkspace, "y");
  MoeSaved saved;
  rig.dev->reset_flops();
  const double aux = block.forward(rig.x.data(), y.data(), saved, Account::kActivations);

  // the output, the aux loss and the drops against the reference
  const RefOut ref = reference(ts);
  ASSERT_GT(ref.dropped, 0);  // the capacity factor drops some choices
  EXPECT_EQ(saved.plan.dropped, ref.dropped);
  EXPECT_EQ(saved.plan.kept_rows(), ref.kept);
  EXPECT_NEAR(aux, ref.aux, 1e-6);
  const std::vector<float> yv = rig.download(y);
  for (size_t i = 0; i < yv.size(); ++i) EXPECT_NEAR(yv[i], ref.y[i], 1e-4 * (1 + std::abs(ref.y[i]))) << i;

  // the saved bytes to the byte, against the actual rows and below the capacity-bound prediction
  const ModelConfig m = moe_model();
  const int64_t rows = saved.plan.kept_rows();
  EXPECT_EQ(rig.ledger.live(Account::kActivations), analytic::moe_block_activation_bytes(m, kN, rows, 4));
  EXPECT_EQ(rig.ledger.peak(Account::kActivations), analytic::moe_block_activation_bytes(m, kN, rows, 4));
  EXPECT_LE(rows, analytic::moe_worst_case_rows(m, kN));
  EXPECT_EQ(analytic::moe_worst_case_rows(m, kN), 12);  // E·C = 4·3 < N·k = 16
  EXPECT_EQ(rig.dev->executed_flops(), analytic::moe_block_forward_flops(m, kN, rows));

  // backward: dy = G, aux scale 1
  Buffer dy = rig.dev->alloc(kN * kH * 4, Account::kWorkspace, "dy");
  rig.upload(dy, G);
  block.backward(rig.x.data(), dy.data(), rig.dx.data(), saved, 1.0);
  EXPECT_EQ(rig.ledger.live(Account::kActivations), 0);
  EXPECT_EQ(rig.dev->executed_flops(), 3 * analytic::moe_block_forward_flops(m, kN, rows));

  // every gradient against central differences of the double reference:
  // |measured − reference| <= 2e-4·(1 + |reference|) (fp32 compute vs double, steps of 1e-6)
  const Buffer* grads[] = {&rig.dx,   &rig.drouter, &rig.dgate,     &rig.dup,     &rig.ddown, &rig.dsgate,
                           &rig.dsup, &rig.dsdown,  &rig.drouter_b, &rig.dgate_b, &rig.dup_b, &rig.ddown_b};
  const char* names[] = {"x",         "router",      "gate",        "up",        "down",    "shared.gate",
                         "shared.up", "shared.down", "router.bias", "gate.bias", "up.bias", "down.bias"};
  auto tensors = ts.all();
  for (size_t i = 0; i < tensors.size(); ++i) {
    const std::vector<float> got = rig.download(*grads[i]);
    std::vector<double>& v = *tensors[i];
    for (size_t j = 0; j < v.size(); ++j) {
      const double keep = v[j], step = 1e-6;
      v[j] = keep + step;
      const double hi = ref_loss(ts, G);
      v[j] = keep - step;
      const double lo = ref_loss(ts, G);
      v[j] = keep;
      const double fd = (hi - lo) / (2 * step);
      ASSERT_NEAR(got[j], fd, 2e-4 * (1 + std::abs(fd))) << names[i] << "[" << j << "]";
    }
  }
}

TEST(MoeBlock, MatchesDoubleReferenceWithExactLedgerAndFlops) { check_against_reference(false); }

// gpt-oss's biases: each gradient checked as above, and some of each nonzero
// (a bias whose gradient stayed 0 would pass the comparison only if unused).
TEST(MoeBlock, WithRouterAndExpertBiasesMatchesDoubleReference) { check_against_reference(true); }

// gpt-oss's experts: the biases and the clamped GLU, at a limit of 0.5 so that
// the clamps cut some of the rows' values (gpt-oss's is 7).
TEST(MoeBlock, GptOssClampedGluMatchesDoubleReference) { check_against_reference(true, 0.5); }

// Meta touches nothing: its router reads zeros, so every token ties and
// chooses experts 0 and 1; with C = 3 each keeps 3 rows. Bytes and FLOPs
// still follow the analytic terms for those rows, in bf16.
TEST(MoeBlock, MetaBooksTheSameBytesAndFlops) {
  Tensors ts = random_tensors(3);
  Rig rig("meta", DType::kBF16, ts);
  MoeBlock block(*rig.dev, moe_shape(DType::kBF16), rig.weights());
  Buffer y = rig.dev->alloc(kN * kH * 2, Account::kWorkspace, "y");
  MoeSaved saved;
  rig.dev->reset_flops();
  block.forward(rig.x.data(), y.data(), saved, Account::kActivations);
  EXPECT_EQ(saved.plan.kept_rows(), 6);
  EXPECT_EQ(saved.plan.dropped, 10);
  const ModelConfig m = moe_model();
  EXPECT_EQ(rig.ledger.peak(Account::kActivations), analytic::moe_block_activation_bytes(m, kN, 6, 2));
  EXPECT_LT(rig.ledger.peak(Account::kActivations),
            analytic::moe_block_activation_bytes(m, kN, analytic::moe_worst_case_rows(m, kN), 2));
  Buffer dy = rig.dev->alloc(kN * kH * 2, Account::kWorkspace, "dy");
  block.backward(rig.x.data(), dy.data(), rig.dx.data(), saved, 1.0);
  EXPECT_EQ(rig.dev->executed_flops(), 3 * analytic::moe_block_forward_flops(m, kN, 6));
  EXPECT_EQ(rig.ledger.live(Account::kActivations), 0);
}

// Expert parallelism on meta: rank 1 of a simulated ep group of 2 holds
// experts 2 and 3 (the weight buffers are larger than it reads: fine on meta).
// Whatever the routing, it saves and computes E·C rows (C = 3 slots per
// expert per source rank) and books four all-to-alls of E·C·h·e bytes.
TEST(MoeBlock, ExpertParallelOnMetaBooksTheSlots) {
  Tensors ts = random_tensors(7);
  Rig rig("meta", DType::kBF16, ts);
  CommCounters counters;
  SimComm ep("ep", counters, 2, 1);
  MoeShape shape = moe_shape(DType::kBF16);
  shape.ep = 2;
  MoeBlock block(*rig.dev, shape, rig.weights(), &ep);
  Buffer y = rig.dev->alloc(kN * kH * 2, Account::kWorkspace, "y");
  MoeSaved saved;
  block.forward(rig.x.data(), y.data(), saved, Account::kActivations);
  const ModelConfig m = moe_model();
  EXPECT_EQ(analytic::moe_ep_slots(m, kN), 12);
  EXPECT_EQ(rig.ledger.peak(Account::kActivations), analytic::moe_block_ep_activation_bytes(m, kN, 2));
  // 4·8·4 + 2·12·32·2 + 3·12·16·2 + 3·8·8·2, by hand
  EXPECT_EQ(analytic::moe_block_ep_activation_bytes(m, kN, 2), 128 + 1536 + 1152 + 384);
  Buffer dy = rig.dev->alloc(kN * kH * 2, Account::kWorkspace, "dy");
  block.backward(rig.x.data(), dy.data(), rig.dx.data(), saved, 1.0);
  EXPECT_EQ(rig.dev->executed_flops(), 3 * analytic::moe_block_forward_flops(m, kN, 12));
  EXPECT_EQ(rig.ledger.live(Account::kActivations), 0);
  ASSERT_EQ(counters.by_key().size(), 1u);
  EXPECT_EQ(counters.by_key().at("all_to_all@ep").calls, 4);
  EXPECT_EQ(counters.by_key().at("all_to_all@ep").bytes, 4 * 12 * kH * 2);
  EXPECT_THROW(MoeBlock(*rig.dev, shape, rig.weights(), nullptr), std::invalid_argument);
  shape.ep = 3;  // does not divide E = 4
  EXPECT_THROW(MoeBlock(*rig.dev, shape, rig.weights(), &ep), std::invalid_argument);
}

}  // namespace
}  // namespace gpuledger
