// A TransformerLayer whose attention is multi-head latent attention
// (layer.h, mla_layer.cpp), on the cpu backend in fp32:
//  - the layer's forward and backward equal the standalone block's
//    (mla_attention.h, itself held to PyTorch by test_mla_attention.cpp) on
//    the same weights, with the MLP silenced (its output projection zero);
//  - every parameter and the input gradient against central finite
//    differences (the independent reference), with a query latent (tiny-mla)
//    and without (q_lora_rank 0);
//  - the three recompute modes give bitwise identical gradients;
//  - the activations one layer books equal the exact budget
//    (analytic::activation_bytes_per_layer), worked by hand below for tiny-mla.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <utility>

#include "analytic/activations.h"
#include "core/model_config.h"
#include "harness.h"
#include "models/transformer/layer.h"
#include "models/transformer/mla_attention.h"
#include "models/transformer/param_layout.h"
#include "models/transformer/params.h"

namespace gpuledger {
namespace {

using testing::Env;
using testing::from_host;
using testing::randn;
using testing::to_host;

ModelConfig mla_model(bool query_latent) {
  ModelConfig m = load_model("tiny-mla");
  if (!query_latent) m.q_lora_rank = 0;  // V2-Lite's direct query projection
  return m;
}

RunConfig fp32_run(Recompute rc) {
  RunConfig r;
  r.dtype = DType::kFP32;
  r.grad_dtype = DType::kFP32;
  r.seq = 8;
  r.mbs = 2;
  r.dropout = 0;
  r.attention = AttentionKind::kMaterialized;
  r.recompute = rc;
  return r;
}

// One layer of tiny-mla on one rank; loss = Σ out ⊙ R.
struct MlaRig {
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

  // Weights: the layout's init plus noise (norm γ not 1); silence_mlp zeroes MLP-out.
  MlaRig(bool query_latent, Recompute rc, bool silence_mlp = false) : m(mla_model(query_latent)), r(fp32_run(rc)) {
    params = std::make_unique<Params>(*env.dev, make_param_layout(m, Layout{}, Coords{}), DType::kFP32, DType::kFP32);
    for (size_t u = 0; u < params->units(); ++u) {
      const UnitLayout& ul = params->layout().units[u];
      auto v = init_unit_values(ul, 99, m.layers);
      const auto noise = randn(v.size(), 1000 + static_cast<uint32_t>(u), 0.05f);
      for (size_t i = 0; i < v.size(); ++i) v[i] += noise[i];
      if (const TensorSlot* o = ul.find("mlp_out.weight"); o && silence_mlp)
        std::fill(v.begin() + o->offset, v.begin() + o->offset + o->elems(), 0.0f);
      from_host(*env.dev, params->weights(u).data(), DType::kFP32, v);
    }
    unit = static_cast<size_t>(params->layout().first_layer_unit);
    layer =
        std::make_unique<TransformerLayer>(*env.dev, *env.tp, make_layer_config(m, r, 1), layer_params(*params, unit));
    hid = r.mbs * r.seq * m.hidden;
    hx = randn(static_cast<size_t>(hid), 1);
    R = randn(static_cast<size_t>(hid), 2);
    x = env.dev->alloc(4 * hid, Account::kActivations, "x");
    from_host(*env.dev, x.data(), DType::kFP32, hx);
  }
  std::vector<float> forward() {
    Buffer out = env.dev->alloc(4 * hid, Account::kWorkspace, "out");
    LayerSaved s;
    layer->forward(x.data(), out.data(), keys, s);
    return to_host(*env.dev, out.data(), DType::kFP32, hid);
  }
  double loss() { return testing::dot(forward(), R); }
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

// The layer with its MLP silenced is x + block(RMSNorm(x)): its output, and
// the gradients of the block's tensors and of x, equal the block's own run on
// the same weights (the same ops on the same inputs: to 1e-6 relative).
TEST(MlaLayer, EqualsTheStandaloneBlock) {
  for (bool latent : {true, false}) {
    SCOPED_TRACE(latent ? "q_lora_rank 32" : "q_lora_rank 0");
    MlaRig rig(latent, Recompute::kNone, /*silence_mlp=*/true);
    Device& dev = *rig.env.dev;
    const auto out = rig.forward();
    const auto [dx, dw] = rig.grads();

    const UnitLayout& ul = rig.params->layout().units[rig.unit];
    const int64_t n = rig.r.mbs * rig.r.seq, h = rig.m.hidden;
    // the block's gradients into a unit-sized buffer of its own
    Buffer g = dev.alloc(4 * ul.elems, Account::kGrads, "block.grads");
    dev.fill_zero(g.data(), g.bytes());
    const void* w = rig.params->weights(rig.unit).data();
    const auto wt = [&](const char* role) -> const void* {
      const TensorSlot* t = ul.find(role);
      return t ? byte_offset(w, 4 * t->offset) : nullptr;
    };
    const auto gt = [&](const char* role) -> void* {
      const TensorSlot* t = ul.find(role);
      return t ? byte_offset(g.data(), 4 * t->offset) : nullptr;
    };
    MlaWeights mw;
    const char* q_up = latent ? "mla.q_up.weight" : "mla.q.weight";
    mw.q_down = wt("mla.q_down.weight");
    mw.d_q_down = gt("mla.q_down.weight");
    mw.q_norm = wt("mla.q_norm.weight");
    mw.d_q_norm = gt("mla.q_norm.weight");
    mw.q_up = wt(q_up);
    mw.d_q_up = gt(q_up);
    mw.kv_down = wt("mla.kv_down.weight");
    mw.d_kv_down = gt("mla.kv_down.weight");
    mw.kv_norm = wt("mla.kv_norm.weight");
    mw.d_kv_norm = gt("mla.kv_norm.weight");
    mw.kv_up = wt("mla.kv_up.weight");
    mw.d_kv_up = gt("mla.kv_up.weight");
    mw.out = wt("attn_out.weight");
    mw.d_out = gt("attn_out.weight");
    MlaShape sh;
    sh.b = rig.r.mbs;
    sh.s = rig.r.seq;
    sh.h = h;
    sh.a_t = rig.m.heads;
    sh.r_q = rig.m.q_lora_rank;
    sh.r_kv = rig.m.kv_lora_rank;
    sh.d_n = rig.m.qk_nope_head_dim;
    sh.d_r = rig.m.qk_rope_head_dim;
    sh.d_v = rig.m.v_head_dim;
    sh.norm_eps = static_cast<float>(rig.m.norm_eps);
    sh.rope_theta = static_cast<float>(rig.m.rope_theta);
    sh.e = sh.g = DType::kFP32;

    Buffer xn = dev.alloc(4 * n * h, Account::kWorkspace, "xn"), rstd = dev.alloc(4 * n, Account::kWorkspace, "rstd");
    dev.rmsnorm_forward(xn.data(), rstd.as<float>(), rig.x.data(), wt("norm1.weight"), DType::kFP32, n, h, sh.norm_eps);
    Buffer y = dev.alloc(4 * n * h, Account::kWorkspace, "y"), dxn = dev.alloc(4 * n * h, Account::kWorkspace, "dxn");
    Buffer dy = dev.alloc(4 * n * h, Account::kWorkspace, "dy");
    from_host(dev, dy.data(), DType::kFP32, rig.R);
    MlaSaved saved;
    mla_forward(dev, sh, mw, xn.data(), y.data(), saved, Account::kActivations);
    mla_backward(dev, sh, mw, xn.data(), dy.data(), dxn.data(), saved);
    // dx = R + RMSNormᵀ(dxn): the residual and the norm's backward
    Buffer dxb = dev.alloc(4 * n * h, Account::kWorkspace, "dx");
    from_host(dev, dxb.data(), DType::kFP32, rig.R);
    Buffer dgamma = dev.alloc(4 * h, Account::kWorkspace, "dgamma");
    dev.fill_zero(dgamma.data(), dgamma.bytes());
    dev.rmsnorm_backward(dxb.data(), dgamma.data(), DType::kFP32, dxn.data(), rig.x.data(), wt("norm1.weight"),
                         rstd.as<float>(), DType::kFP32, n, h, /*accumulate_dx=*/true);

    const auto yb = to_host(dev, y.data(), DType::kFP32, n * h);
    const auto close = [](float a, float b) { return std::abs(a - b) <= 1e-6f * (1.0f + std::abs(b)); };
    for (int64_t i = 0; i < n * h; ++i) ASSERT_TRUE(close(out[i], rig.hx[i] + yb[i])) << "out[" << i << "]";
    const auto dxe = to_host(dev, dxb.data(), DType::kFP32, n * h);
    for (int64_t i = 0; i < n * h; ++i) ASSERT_TRUE(close(dx[i], dxe[i])) << "dx[" << i << "]";
    const auto gb = to_host(dev, g.data(), DType::kFP32, ul.elems);
    int64_t compared = 0;
    for (const TensorSlot& t : ul.tensors) {
      if (t.role.rfind("mla.", 0) != 0 && t.role != "attn_out.weight") continue;
      for (int64_t i = 0; i < t.elems(); ++i)
        ASSERT_TRUE(close(dw[t.offset + i], gb[t.offset + i])) << t.name << "[" << i << "]";
      compared += t.elems();
    }
    // tiny-mla's attention tensors (docs/formulas/mla.md "Parameters", h 64, a 4, r_q 32, r_kv 16, d 8 + 4, d_v 8):
    // 64·32 + 32 + 32·4·12 + 64·20 + 16 + 16·4·16 + 4·8·64 = 7,984; without the latent 64·4·12 + 64·20 + 16 +
    // 16·4·16 + 4·8·64 = 7,440
    EXPECT_EQ(compared, latent ? 7'984 : 7'440);
  }
}

// |fd − analytic| <= atol + rtol·max(|fd|, |analytic|)
void expect_close_fd(double fd, double an, const std::string& what) {
  EXPECT_LE(std::abs(fd - an), 1e-3 + 5e-3 * std::max(std::abs(fd), std::abs(an)))
      << what << ": finite difference " << fd << " vs backward " << an;
}

constexpr double kEps = 1e-2;  // fp32 forward: loss noise ~1e-5, truncation O(eps²)

TEST(MlaLayer, ParametersAndInputMatchFiniteDifferences) {
  for (bool latent : {true, false}) {
    SCOPED_TRACE(latent ? "q_lora_rank 32" : "q_lora_rank 0");
    MlaRig rig(latent, Recompute::kNone);
    const auto [dx, dw] = rig.grads();
    Device& dev = *rig.env.dev;
    const UnitLayout& unit = rig.params->layout().units[rig.unit];
    auto w = to_host(dev, rig.params->weights(rig.unit).data(), DType::kFP32, unit.elems);
    const auto at = [&](int64_t j, float v) {
      w[j] = v;
      from_host(dev, rig.params->weights(rig.unit).data(), DType::kFP32, w);
      return rig.loss();
    };
    for (const TensorSlot& t : unit.tensors) {
      for (int64_t i : testing::sample_indices(t.elems(), 6)) {
        const int64_t j = t.offset + i;
        const float w0 = w[j];
        const double lp = at(j, w0 + kEps), lm = at(j, w0 - kEps);
        at(j, w0);
        expect_close_fd((lp - lm) / (2 * kEps), dw[j], t.name + "[" + std::to_string(i) + "]");
      }
    }
    for (int64_t i : testing::sample_indices(rig.hid, 12)) {
      const float x0 = rig.hx[i];
      const auto at_x = [&](float v) {
        rig.hx[i] = v;
        from_host(dev, rig.x.data(), DType::kFP32, rig.hx);
        return rig.loss();
      };
      const double lp = at_x(x0 + kEps), lm = at_x(x0 - kEps);
      at_x(x0);
      expect_close_fd((lp - lm) / (2 * kEps), dx[i], "x[" + std::to_string(i) + "]");
    }
  }
}

TEST(MlaLayer, RecomputeModesGiveIdenticalGradients) {
  for (bool latent : {true, false}) {
    const auto ref = MlaRig(latent, Recompute::kNone).grads();
    for (Recompute rc : {Recompute::kSelective, Recompute::kFull}) {
      const auto got = MlaRig(latent, rc).grads();
      EXPECT_EQ(got.first, ref.first) << "dx, recompute " << recompute_name(rc);
      EXPECT_EQ(got.second, ref.second) << "parameter gradients, recompute " << recompute_name(rc);
    }
  }
}

// What one layer's forward books, plus the caller's input, equals the exact
// budget; and backward frees it all. By hand for tiny-mla (h 64, a 4, r_q 32,
// r_kv 16, d_n 8, d_r 4, d_v 8, ffn 176), fp32, b 2, s 8 (n = 16 tokens):
//   layer input, norm-1 output, norm-2 input, norm-2 output  4·4·16·64 = 16,384
//   norm-1 and norm-2 rstd                                   2·4·16     =    128
//   query latent and its norm 2·4·16·32 + rstd 4·16          = 4,096 + 64
//   KV latent and its norm 2·4·16·16 + rstd 4·16             = 2,048 + 64
//   q_nope, k_nope, q_rope 4·16·4·(8 + 8 + 4)                =  5,120
//   k_rope 4·16·4                                            =    256
//   v, context 4·16·4·(8 + 8)                                =  4,096
//   probabilities 4·2·4·8·8 (none only)                      =  2,048
//   SwiGLU gate, up, output 3·4·16·176                       = 33,792
// none: 68,096; selective: 66,048; full: the layer input alone, 4,096.
TEST(MlaLayer, ActivationsEqualTheExactBudget) {
  const std::pair<Recompute, int64_t> cases[] = {
      {Recompute::kNone, 68'096}, {Recompute::kSelective, 66'048}, {Recompute::kFull, 4'096}};
  for (const auto& [rc, expected] : cases) {
    MlaRig rig(true, rc);
    Ledger& led = rig.env.ledger;
    const int64_t act0 = led.live(Account::kActivations), ws0 = led.live(Account::kWorkspace);
    Buffer out = rig.env.dev->alloc(4 * rig.hid, Account::kWorkspace, "out");
    LayerSaved s;
    rig.layer->forward(rig.x.data(), out.data(), rig.keys, s);
    const int64_t kept = led.live(Account::kActivations) - act0 + 4 * rig.hid;  // + the caller's x
    EXPECT_EQ(kept, expected) << recompute_name(rc);
    EXPECT_EQ(analytic::activation_bytes_per_layer(rig.m, Layout{}, rig.r), expected) << recompute_name(rc);
    Buffer dres = rig.env.dev->alloc(4 * rig.hid, Account::kWorkspace, "dres");
    rig.env.dev->fill_zero(dres.data(), dres.bytes());
    rig.layer->backward(rig.x.data(), dres.data(), rig.keys, s);
    EXPECT_EQ(led.live(Account::kActivations), act0) << "backward frees every saved tensor";
    EXPECT_EQ(led.live(Account::kWorkspace), ws0 + out.bytes() + dres.bytes());
  }
}

}  // namespace
}  // namespace gpuledger
