// Gradient checks of the transformer in fp32 against central finite
// differences (the independent reference), for one whole layer and for the
// whole tiny model (embedding, layers, final norm, head, cross-entropy):
// both flavours, both attention kinds, dropout 0 and 0.1 (fixed Philox keys:
// the masks are the same in every evaluation, so the function is smooth).
// Then the three recompute modes must give identical gradients (bitwise: a
// recompute runs the same ops on the same inputs with the same keys).
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "analytic/activations.h"
#include "core/model_config.h"
#include "harness.h"
#include "models/transformer/data.h"
#include "models/transformer/layer.h"
#include "models/transformer/model.h"
#include "models/transformer/param_layout.h"
#include "models/transformer/params.h"

namespace gpuledger {
namespace {

using testing::Env;
using testing::from_host;
using testing::randn;
using testing::to_host;

struct Case {
  std::string model;
  AttentionKind attention;
  float dropout;
  bool qk_norm = false;     // Qwen3's QK norm switched on in the model
  bool post_norms = false;  // Gemma's post-block norms switched on in the model
  bool sinks = false;       // gpt-oss's attention: sinks and the attention-out bias switched on in the model
};

std::string case_name(const ::testing::TestParamInfo<Case>& info) {
  std::string n = info.param.model + "_" + std::string(attention_name(info.param.attention)) +
                  (info.param.dropout > 0 ? "_dropout" : "_nodropout") + (info.param.qk_norm ? "_qknorm" : "") +
                  (info.param.post_norms ? "_postnorms" : "") + (info.param.sinks ? "_sinks" : "");
  for (auto& c : n)
    if (c == '-') c = '_';
  return n;
}

RunConfig fp32_run(const Case& c, Recompute rc, int64_t seq = 8, int64_t mbs = 2) {
  RunConfig r;
  r.dtype = DType::kFP32;
  r.grad_dtype = DType::kFP32;
  r.seq = seq;
  r.mbs = mbs;
  r.dropout = c.dropout;
  r.attention = c.attention;
  r.recompute = rc;
  return r;
}

// Parameters with the layout-independent init plus noise, so norm weights are
// not 1 and biases not 0 (a check at those special points could miss a term).
std::unique_ptr<Params> noisy_params(Env& env, const ModelConfig& m, DType t) {
  auto p = std::make_unique<Params>(*env.dev, make_param_layout(m, Layout{}, Coords{}), t, t);
  for (size_t u = 0; u < p->units(); ++u) {
    auto v = init_unit_values(p->layout().units[u], 99, m.layers);
    const auto noise = randn(v.size(), 1000 + static_cast<uint32_t>(u), 0.05f);
    for (size_t i = 0; i < v.size(); ++i) v[i] += noise[i];
    from_host(*env.dev, p->weights(u).data(), t, v);
  }
  return p;
}

// ---- one layer: loss = Σ out ⊙ R ----
struct LayerRig {
  Env env;
  ModelConfig m;
  RunConfig r;
  std::unique_ptr<Params> params;
  size_t unit = 0;
  std::unique_ptr<TransformerLayer> layer;
  Buffer x;
  std::vector<float> hx, R;
  LayerKeys keys{{7, 101}, {7, 102}, {7, 103}};
  int64_t hid = 0;

  LayerRig(const Case& c, Recompute rc) : m(load_model(c.model)), r(fp32_run(c, rc)) {
    m.qk_norm = c.qk_norm;
    m.post_norms = c.post_norms;
    m.attention_sinks = m.attn_out_bias = c.sinks;
    params = noisy_params(env, m, DType::kFP32);
    unit = static_cast<size_t>(params->layout().first_layer_unit);
    layer =
        std::make_unique<TransformerLayer>(*env.dev, *env.tp, make_layer_config(m, r, 1), layer_params(*params, unit));
    hid = r.mbs * r.seq * m.hidden;
    hx = randn(static_cast<size_t>(hid), 1);
    R = randn(static_cast<size_t>(hid), 2);
    x = env.dev->alloc(4 * hid, Account::kActivations, "x");
    from_host(*env.dev, x.data(), DType::kFP32, hx);
  }
  double loss() {
    Buffer out = env.dev->alloc(4 * hid, Account::kWorkspace, "out");
    LayerSaved s;
    layer->forward(x.data(), out.data(), keys, s);
    return testing::dot(to_host(*env.dev, out.data(), DType::kFP32, hid), R);
  }
  // dL/dx and the unit's parameter gradients.
  std::pair<std::vector<float>, std::vector<float>> grads() {
    params->zero_grads();
    Buffer out = env.dev->alloc(4 * hid, Account::kActivations, "out");
    LayerSaved s;
    layer->forward(x.data(), out.data(), keys, s);
    Buffer dres = env.dev->alloc(4 * hid, Account::kWorkspace, "dres");
    from_host(*env.dev, dres.data(), DType::kFP32, R);
    layer->backward(x.data(), dres.data(), keys, s);
    return {to_host(*env.dev, dres.data(), DType::kFP32, hid),
            to_host(*env.dev, params->grads(unit).data(), DType::kFP32, params->layout().units[unit].elems)};
  }
};

// |fd − analytic| <= atol + rtol·max(|fd|, |analytic|)
void expect_close_fd(double fd, double an, double atol, double rtol, const std::string& what) {
  EXPECT_LE(std::abs(fd - an), atol + rtol * std::max(std::abs(fd), std::abs(an)))
      << what << ": finite difference " << fd << " vs backward " << an;
}

constexpr double kEps = 1e-2;  // fp32 forward: loss noise ~1e-5, truncation O(eps²)

class LayerGradCheck : public ::testing::TestWithParam<Case> {};

TEST_P(LayerGradCheck, ParametersAndInputMatchFiniteDifferences) {
  LayerRig rig(GetParam(), Recompute::kNone);
  const auto [dx, dw] = rig.grads();
  Device& dev = *rig.env.dev;
  const UnitLayout& unit = rig.params->layout().units[rig.unit];
  auto w = to_host(dev, rig.params->weights(rig.unit).data(), DType::kFP32, unit.elems);
  for (const TensorSlot& t : unit.tensors) {
    for (int64_t i : testing::sample_indices(t.elems(), 6)) {
      const int64_t j = t.offset + i;
      const float w0 = w[j];
      w[j] = w0 + kEps;
      from_host(dev, rig.params->weights(rig.unit).data(), DType::kFP32, w);
      const double lp = rig.loss();
      w[j] = w0 - kEps;
      from_host(dev, rig.params->weights(rig.unit).data(), DType::kFP32, w);
      const double lm = rig.loss();
      w[j] = w0;
      from_host(dev, rig.params->weights(rig.unit).data(), DType::kFP32, w);
      expect_close_fd((lp - lm) / (2 * kEps), dw[j], 1e-3, 5e-3, t.name + "[" + std::to_string(i) + "]");
      // the QK norm's γ and the sinks take part (a zero gradient would pass the comparison above)
      if (t.role == "q_norm.weight" || t.role == "k_norm.weight" || t.role == "attn.sinks") {
        EXPECT_GT(std::abs(dw[j]), 1e-4) << t.name;
      }
    }
  }
  for (int64_t i : testing::sample_indices(rig.hid, 12)) {
    const float x0 = rig.hx[i];
    rig.hx[i] = x0 + kEps;
    from_host(dev, rig.x.data(), DType::kFP32, rig.hx);
    const double lp = rig.loss();
    rig.hx[i] = x0 - kEps;
    from_host(dev, rig.x.data(), DType::kFP32, rig.hx);
    const double lm = rig.loss();
    rig.hx[i] = x0;
    from_host(dev, rig.x.data(), DType::kFP32, rig.hx);
    expect_close_fd((lp - lm) / (2 * kEps), dx[i], 1e-3, 5e-3, "x[" + std::to_string(i) + "]");
  }
}

TEST_P(LayerGradCheck, RecomputeModesGiveIdenticalGradients) {
  LayerRig none(GetParam(), Recompute::kNone);
  const auto ref = none.grads();
  for (Recompute rc : {Recompute::kSelective, Recompute::kFull}) {
    LayerRig rig(GetParam(), rc);
    const auto got = rig.grads();
    EXPECT_EQ(got.first, ref.first) << "dx, recompute " << recompute_name(rc);
    EXPECT_EQ(got.second, ref.second) << "parameter gradients, recompute " << recompute_name(rc);
  }
}

// Activations booked by one layer's forward: what recompute keeps (none > selective > full = 0).
TEST_P(LayerGradCheck, RecomputeKeepsLessAndFreesEverything) {
  int64_t kept[3];
  int i = 0;
  for (Recompute rc : {Recompute::kNone, Recompute::kSelective, Recompute::kFull}) {
    LayerRig rig(GetParam(), rc);
    Ledger& led = rig.env.ledger;
    const int64_t act0 = led.live(Account::kActivations), ws0 = led.live(Account::kWorkspace);
    rig.grads();
    EXPECT_EQ(led.live(Account::kActivations), act0) << "backward frees every saved tensor";
    EXPECT_EQ(led.live(Account::kWorkspace), ws0);
    Buffer out = rig.env.dev->alloc(4 * rig.hid, Account::kWorkspace, "out");
    LayerSaved s;
    rig.layer->forward(rig.x.data(), out.data(), rig.keys, s);
    kept[i++] = led.live(Account::kActivations) - act0;
  }
  EXPECT_GT(kept[0], kept[1]);
  EXPECT_EQ(kept[2], 0);
}

const Case kCases[] = {
    {"tiny-gpt", AttentionKind::kMaterialized, 0.0f},
    {"tiny-gpt", AttentionKind::kMaterialized, 0.1f},
    {"tiny-gpt", AttentionKind::kFlash, 0.0f},
    {"tiny-gpt", AttentionKind::kFlash, 0.1f},
    {"tiny-llama", AttentionKind::kMaterialized, 0.0f},
    {"tiny-llama", AttentionKind::kMaterialized, 0.1f},
    {"tiny-llama", AttentionKind::kFlash, 0.0f},
    {"tiny-llama", AttentionKind::kFlash, 0.1f},
    {"tiny-llama", AttentionKind::kMaterialized, 0.0f, true},
    {"tiny-llama", AttentionKind::kFlash, 0.1f, true},
    {"tiny-llama", AttentionKind::kMaterialized, 0.0f, false, true},
    {"tiny-llama", AttentionKind::kFlash, 0.1f, false, true},
    {"tiny-llama", AttentionKind::kMaterialized, 0.0f, false, false, true},
    {"tiny-llama", AttentionKind::kMaterialized, 0.1f, false, false, true},
    {"tiny-llama", AttentionKind::kFlash, 0.0f, false, false, true},
    {"tiny-llama", AttentionKind::kFlash, 0.1f, false, false, true},
};
INSTANTIATE_TEST_SUITE_P(Tiny, LayerGradCheck, ::testing::ValuesIn(kCases), case_name);

// The QK norm's saved tensors, booked and in the exact budget to the byte:
// tiny-llama (a_t 4, k_t 2, d 16), fp32, b 2, s 8 — Q and K before the norm,
// 4·2·8·(4 + 2)·16 = 6144 B, and one fp32 rstd per head row, 4·2·8·6 = 384 B.
TEST(QkNorm, SavedTensorsBookedAndBudgeted) {
  int64_t kept[2];
  for (int qk = 0; qk < 2; ++qk) {
    for (Recompute rc : {Recompute::kNone, Recompute::kSelective, Recompute::kFull}) {
      LayerRig rig({"tiny-llama", AttentionKind::kFlash, 0.0f, qk == 1}, rc);
      Ledger& led = rig.env.ledger;
      const int64_t act0 = led.live(Account::kActivations);
      Buffer out = rig.env.dev->alloc(4 * rig.hid, Account::kWorkspace, "out");
      LayerSaved s;
      rig.layer->forward(rig.x.data(), out.data(), rig.keys, s);
      const int64_t layer_input = 4 * rig.hid;  // the caller's x, inside the per-layer budget
      EXPECT_EQ(led.live(Account::kActivations) - act0 + layer_input,
                analytic::activation_bytes_per_layer(rig.m, Layout{}, rig.r))
          << "qk_norm " << qk << ", recompute " << recompute_name(rc);
      if (rc == Recompute::kNone) kept[qk] = led.live(Account::kActivations) - act0;
    }
  }
  EXPECT_EQ(kept[1] - kept[0], 6144 + 384);
}

// The post norms' saved tensors, booked and in the exact budget to the byte:
// tiny-llama (h 64), fp32, b 2, s 8 — the attention and MLP outputs before
// their norms, 2·4·2·8·64 = 8192 B, and each norm's fp32 rstd, 2·4·2·8 = 128 B.
TEST(PostNorms, SavedTensorsBookedAndBudgeted) {
  int64_t kept[2];
  for (int post = 0; post < 2; ++post) {
    for (Recompute rc : {Recompute::kNone, Recompute::kSelective, Recompute::kFull}) {
      LayerRig rig({"tiny-llama", AttentionKind::kMaterialized, 0.1f, false, post == 1}, rc);
      Ledger& led = rig.env.ledger;
      const int64_t act0 = led.live(Account::kActivations);
      Buffer out = rig.env.dev->alloc(4 * rig.hid, Account::kWorkspace, "out");
      LayerSaved s;
      rig.layer->forward(rig.x.data(), out.data(), rig.keys, s);
      const int64_t layer_input = 4 * rig.hid;
      EXPECT_EQ(led.live(Account::kActivations) - act0 + layer_input,
                analytic::activation_bytes_per_layer(rig.m, Layout{}, rig.r))
          << "post_norms " << post << ", recompute " << recompute_name(rc);
      if (rc == Recompute::kNone) kept[post] = led.live(Account::kActivations) - act0;
      // Backward frees every saved tensor.
      Buffer dres = rig.env.dev->alloc(4 * rig.hid, Account::kWorkspace, "dres");
      rig.layer->backward(rig.x.data(), dres.data(), rig.keys, s);
      EXPECT_EQ(led.live(Account::kActivations), act0) << "post_norms " << post << ", recompute " << recompute_name(rc);
    }
  }
  EXPECT_EQ(kept[1] - kept[0], 8192 + 128);
}

// Attention sinks' saved tensor, booked and in the exact budget to the byte:
// tiny-llama (a_t 4), fp32, b 2, s 8 — the materialized core's fp32
// log-denominator per row, 4·2·4·8 = 256 B (none; selective recomputes it);
// flash saves its lse with or without sinks: 0 B more.
TEST(AttentionSinks, SavedTensorsBookedAndBudgeted) {
  for (AttentionKind kind : {AttentionKind::kMaterialized, AttentionKind::kFlash}) {
    int64_t kept[2];
    for (int sinks = 0; sinks < 2; ++sinks) {
      for (Recompute rc : {Recompute::kNone, Recompute::kSelective, Recompute::kFull}) {
        LayerRig rig({"tiny-llama", kind, 0.0f, false, false, sinks == 1}, rc);
        Ledger& led = rig.env.ledger;
        const int64_t act0 = led.live(Account::kActivations);
        Buffer out = rig.env.dev->alloc(4 * rig.hid, Account::kWorkspace, "out");
        LayerSaved s;
        rig.layer->forward(rig.x.data(), out.data(), rig.keys, s);
        EXPECT_EQ(led.live(Account::kActivations) - act0 + 4 * rig.hid,
                  analytic::activation_bytes_per_layer(rig.m, Layout{}, rig.r))
            << attention_name(kind) << " sinks " << sinks << ", recompute " << recompute_name(rc);
        if (rc == Recompute::kNone) kept[sinks] = led.live(Account::kActivations) - act0;
        Buffer dres = rig.env.dev->alloc(4 * rig.hid, Account::kWorkspace, "dres");
        rig.layer->backward(rig.x.data(), dres.data(), rig.keys, s);
        EXPECT_EQ(led.live(Account::kActivations), act0) << "backward frees every saved tensor";
      }
    }
    EXPECT_EQ(kept[1] - kept[0], kind == AttentionKind::kMaterialized ? 256 : 0) << attention_name(kind);
  }
}

// ---- the whole tiny model: loss = Σ token cross-entropies ----
struct ModelRig {
  Env env;
  ModelConfig m;
  RunConfig r;
  std::unique_ptr<Params> params;
  std::unique_ptr<StageModel> model;
  std::vector<int32_t> ids, targets;

  ModelRig(const Case& c, Recompute rc) : m(load_model(c.model)), r(fp32_run(c, rc)) {
    m.qk_norm = c.qk_norm;
    m.post_norms = c.post_norms;
    m.attention_sinks = m.attn_out_bias = c.sinks;
    params = noisy_params(env, m, DType::kFP32);
    model = std::make_unique<StageModel>(*env.dev, *env.tp, m, r, Layout{}, Coords{}, *params);
    const int64_t n = r.mbs * r.seq;
    ids.resize(static_cast<size_t>(n));
    targets.resize(static_cast<size_t>(n));
    BigramData(m.vocab, 5).batch(0, r.mbs, 0, r.mbs, r.seq, ids.data(), targets.data());
  }
  double loss() {
    const double l = model->forward(0, 3, 0, ids.data(), targets.data());
    model->discard(0);
    return l;
  }
  std::vector<std::vector<float>> grads() {
    params->zero_grads();
    model->forward(0, 3, 0, ids.data(), targets.data());
    model->backward(0, 1.0f);
    std::vector<std::vector<float>> g;
    for (size_t u = 0; u < params->units(); ++u)
      g.push_back(to_host(*env.dev, params->grads(u).data(), DType::kFP32, params->layout().units[u].elems));
    return g;
  }
};

class ModelGradCheck : public ::testing::TestWithParam<Case> {};

TEST_P(ModelGradCheck, EveryUnitMatchesFiniteDifferences) {
  ModelRig rig(GetParam(), Recompute::kNone);
  const auto g = rig.grads();
  Device& dev = *rig.env.dev;
  for (size_t u = 0; u < rig.params->units(); ++u) {
    const UnitLayout& unit = rig.params->layout().units[u];
    auto w = to_host(dev, rig.params->weights(u).data(), DType::kFP32, unit.elems);
    for (const TensorSlot& t : unit.tensors) {
      // embedding rows of tokens that occur, plus spread samples
      std::vector<int64_t> idx = testing::sample_indices(t.elems(), 4);
      if (t.role == "word.weight") idx.push_back(static_cast<int64_t>(rig.ids[3]) * t.cols + 5);
      for (int64_t i : idx) {
        const int64_t j = t.offset + i;
        const float w0 = w[j];
        w[j] = w0 + kEps;
        from_host(dev, rig.params->weights(u).data(), DType::kFP32, w);
        const double lp = rig.loss();
        w[j] = w0 - kEps;
        from_host(dev, rig.params->weights(u).data(), DType::kFP32, w);
        const double lm = rig.loss();
        w[j] = w0;
        from_host(dev, rig.params->weights(u).data(), DType::kFP32, w);
        expect_close_fd((lp - lm) / (2 * kEps), g[u][j], 1e-3, 5e-3, t.name + "[" + std::to_string(i) + "]");
      }
    }
  }
}

TEST_P(ModelGradCheck, RecomputeModesGiveIdenticalGradients) {
  const auto ref = ModelRig(GetParam(), Recompute::kNone).grads();
  for (Recompute rc : {Recompute::kSelective, Recompute::kFull}) {
    ModelRig rig(GetParam(), rc);
    EXPECT_EQ(rig.grads(), ref) << "recompute " << recompute_name(rc);
  }
}

INSTANTIATE_TEST_SUITE_P(Tiny, ModelGradCheck, ::testing::ValuesIn(kCases), case_name);

}  // namespace
}  // namespace gpuledger
