// One transformer layer split over t tensor-parallel ranks (threads in this
// process, each with its own Device, joined by a host all-reduce) computes the
// same function as the one-rank layer: the same output and input gradient
// within fp32 rounding, and parameter gradients that are the slices of the
// one-rank gradients — Megatron's column/row-parallel split with its four
// all-reduces (Shoeybi et al. 2019 §3). Cases: tiny-gpt (a = k = 4) at t = 2, 4;
// tiny-llama (GQA a = 4, k = 2) at t = 2 (KV heads split) and t = 4 (each KV
// head replicated on t/k = 2 ranks: their K, V weight gradients are partial
// sums, whose sum over the replicas is the one-rank gradient — the reduction
// among replicas belongs to the gradient synchronisation, not the layer).
#include <gtest/gtest.h>

#include <barrier>
#include <cmath>
#include <map>
#include <thread>

#include "core/model_config.h"
#include "harness.h"
#include "kernels/registry/registry.h"
#include "models/transformer/layer.h"
#include "models/transformer/param_layout.h"
#include "models/transformer/params.h"

namespace gpuledger {
namespace {

using testing::from_host;
using testing::to_host;

// Ranks of one process summing host copies, every rank in the same order.
struct ThreadGroup {
  explicit ThreadGroup(int n) : size(n), bar(n), bufs(n) {}
  int size;
  std::barrier<> bar;
  std::vector<std::vector<float>> bufs;
};

class ThreadComm final : public Comm {
 public:
  ThreadComm(ThreadGroup& g, int rank, Device& dev, CommCounters& c) : Comm("tp", c), g_(g), rank_(rank), dev_(dev) {}
  int64_t size() const override { return g_.size; }
  int64_t rank() const override { return rank_; }
  void all_reduce(void* buf, int64_t n, DType t, ReduceOp op) override {
    g_.bufs[rank_] = to_host(dev_, buf, t, n);
    g_.bar.arrive_and_wait();
    std::vector<float> sum(static_cast<size_t>(n), 0.0f);
    for (int r = 0; r < g_.size; ++r)
      for (int64_t i = 0; i < n; ++i) sum[i] += g_.bufs[r][i];
    g_.bar.arrive_and_wait();  // nobody overwrites a buffer another rank still reads
    from_host(dev_, buf, t, sum);
  }
  void all_gather(void*, const void*, int64_t, DType) override { throw std::logic_error("unused"); }
  void reduce_scatter(void*, const void*, int64_t, DType) override { throw std::logic_error("unused"); }
  void all_to_all(void*, const void*, int64_t, DType) override { throw std::logic_error("unused"); }
  void broadcast(void*, int64_t, DType, int64_t) override { throw std::logic_error("unused"); }
  void send(const void*, int64_t, DType, int64_t) override { throw std::logic_error("unused"); }
  void recv(void*, int64_t, DType, int64_t) override { throw std::logic_error("unused"); }
  void barrier() override { g_.bar.arrive_and_wait(); }

 private:
  ThreadGroup& g_;
  int rank_;
  Device& dev_;
};

struct RankOut {
  std::vector<float> out, dx, grads;
  ParamLayout layout;
};

// Full-tensor values: the seeded init plus noise keyed by the global element
// index (so norm weights are not 1 nor biases 0, on every layout alike).
float full_value(const std::vector<float>& ref_unit, const TensorSlot& full, int64_t gi) {
  const uint64_t h = static_cast<uint64_t>(gi) * 2654435761u + full.tensor_id * 97;  // Knuth's multiplicative hash
  const float noise = 0.05f * (static_cast<float>(h % 2001) - 1000.0f) / 1000.0f;
  return ref_unit[full.offset + gi] + noise;
}

RankOut run_rank(const ModelConfig& m, const RunConfig& r, int64_t tp, int64_t j, ThreadGroup* group,
                 const std::vector<float>& hx, const std::vector<float>& R) {
  Ledger ledger;
  auto dev = make_device("cpu", ledger);
  CommCounters counters;
  std::unique_ptr<Comm> comm = group
                                   ? std::unique_ptr<Comm>(new ThreadComm(*group, static_cast<int>(j), *dev, counters))
                                   : make_self_comm("tp", counters, *dev);
  Layout l;
  l.tp = tp;
  const ParamLayout one = make_param_layout(m, Layout{}, Coords{});
  const size_t u1 = static_cast<size_t>(one.first_layer_unit);
  const auto ref = init_unit_values(one.units[u1], 5, m.layers);
  ParamLayout pl = make_param_layout(m, l, Coords{0, j, 0});
  Params params(*dev, pl, DType::kFP32, DType::kFP32);
  const size_t u = static_cast<size_t>(pl.first_layer_unit);
  std::vector<float> w(static_cast<size_t>(pl.units[u].elems));
  for (const TensorSlot& t : pl.units[u].tensors) {
    const TensorSlot& full = one.units[u1].at(t.role);
    for (int64_t rr = 0; rr < t.rows; ++rr)
      for (int64_t c = 0; c < t.cols; ++c)
        w[t.offset + rr * t.cols + c] = full_value(ref, full, *global_element_index(t, rr, c));
  }
  from_host(*dev, params.weights(u).data(), DType::kFP32, w);
  TransformerLayer layer(*dev, *comm, make_layer_config(m, r, tp), layer_params(params, u));
  const int64_t hid = static_cast<int64_t>(hx.size());
  Buffer x = dev->alloc(4 * hid, Account::kActivations), out = dev->alloc(4 * hid, Account::kActivations),
         dres = dev->alloc(4 * hid, Account::kWorkspace);
  from_host(*dev, x.data(), DType::kFP32, hx);
  from_host(*dev, dres.data(), DType::kFP32, R);
  const LayerKeys keys{{9, 1}, {9, 2}, {9, 3}};
  LayerSaved s;
  layer.forward(x.data(), out.data(), keys, s);
  RankOut o;
  o.out = to_host(*dev, out.data(), DType::kFP32, hid);
  layer.backward(x.data(), dres.data(), keys, s);
  o.dx = to_host(*dev, dres.data(), DType::kFP32, hid);
  o.grads = to_host(*dev, params.grads(u).data(), DType::kFP32, pl.units[u].elems);
  o.layout = pl;
  return o;
}

void expect_near_vec(const std::vector<float>& a, const std::vector<float>& b, double tol, const std::string& what) {
  ASSERT_EQ(a.size(), b.size());
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_TRUE(std::isfinite(a[i]) && std::isfinite(b[i])) << what << "[" << i << "]";
    worst = std::max(worst, static_cast<double>(std::abs(a[i] - b[i])));
  }
  EXPECT_LE(worst, tol) << what;
}

class LayerTensorParallel : public ::testing::TestWithParam<std::tuple<std::string, int64_t, AttentionKind>> {};

TEST_P(LayerTensorParallel, SameFunctionAndSlicedGradients) {
  const auto [name, tp, att] = GetParam();
  const ModelConfig m = load_model(name);
  RunConfig r;
  r.dtype = DType::kFP32;
  r.grad_dtype = DType::kFP32;
  r.seq = 12;
  r.mbs = 2;
  r.attention = att;
  const int64_t hid = r.mbs * r.seq * m.hidden;
  const auto hx = testing::randn(static_cast<size_t>(hid), 1), R = testing::randn(static_cast<size_t>(hid), 2);

  const RankOut ref = run_rank(m, r, 1, 0, nullptr, hx, R);
  ThreadGroup group(static_cast<int>(tp));
  std::vector<RankOut> ranks(static_cast<size_t>(tp));
  std::vector<std::thread> threads;
  for (int64_t j = 0; j < tp; ++j) threads.emplace_back([&, j] { ranks[j] = run_rank(m, r, tp, j, &group, hx, R); });
  for (auto& t : threads) t.join();

  const ParamLayout one = make_param_layout(m, Layout{}, Coords{});
  const UnitLayout& ref_unit = one.units[static_cast<size_t>(one.first_layer_unit)];
  // (role, global index) -> values on the ranks holding it
  std::map<std::pair<std::string, int64_t>, std::vector<float>> held;
  for (int64_t j = 0; j < tp; ++j) {
    SCOPED_TRACE("tp rank " + std::to_string(j));
    expect_near_vec(ranks[j].out, ref.out, 1e-5, "output");
    expect_near_vec(ranks[j].dx, ref.dx, 1e-5, "input gradient");
    const UnitLayout& unit = ranks[j].layout.units[static_cast<size_t>(ranks[j].layout.first_layer_unit)];
    for (const TensorSlot& t : unit.tensors)
      for (int64_t rr = 0; rr < t.rows; ++rr)
        for (int64_t c = 0; c < t.cols; ++c)
          held[{t.role, *global_element_index(t, rr, c)}].push_back(ranks[j].grads[t.offset + rr * t.cols + c]);
  }
  int64_t split = 0, replicated = 0, kv_partial = 0;
  for (const TensorSlot& full : ref_unit.tensors)
    for (int64_t gi = 0; gi < full.elems(); ++gi) {
      const auto it = held.find({full.role, gi});
      ASSERT_NE(it, held.end()) << full.name << "[" << gi << "] held by no rank";
      const float want = ref.grads[full.offset + gi];
      const auto& got = it->second;
      const double tol = 1e-5 + 1e-4 * std::abs(want);
      if (got.size() == 1) {
        ++split;
        EXPECT_NEAR(got[0], want, tol) << full.name << "[" << gi << "]";
      } else if (full.role.rfind("qkv.", 0) == 0) {  // a replicated KV head: partial sums
        ++kv_partial;
        float sum = 0;
        for (float v : got) sum += v;
        EXPECT_NEAR(sum, want, tol) << full.name << "[" << gi << "] summed over " << got.size() << " replicas";
      } else {  // replicated norm weights and row-parallel biases: the full gradient everywhere
        ++replicated;
        for (float v : got) EXPECT_NEAR(v, want, tol) << full.name << "[" << gi << "]";
      }
    }
  EXPECT_GT(split, 0);
  EXPECT_GT(replicated, 0);
  EXPECT_EQ(kv_partial > 0, tp > m.kv_heads);
}

INSTANTIATE_TEST_SUITE_P(
    Tiny, LayerTensorParallel,
    ::testing::Values(std::tuple{std::string("tiny-gpt"), int64_t{2}, AttentionKind::kMaterialized},
                      std::tuple{std::string("tiny-gpt"), int64_t{4}, AttentionKind::kFlash},
                      std::tuple{std::string("tiny-llama"), int64_t{2}, AttentionKind::kMaterialized},
                      std::tuple{std::string("tiny-llama"), int64_t{4}, AttentionKind::kMaterialized},
                      std::tuple{std::string("tiny-llama"), int64_t{4}, AttentionKind::kFlash}),
    [](const auto& info) {
      std::string n = std::get<0>(info.param) + "_tp" + std::to_string(std::get<1>(info.param)) + "_" +
                      std::string(attention_name(std::get<2>(info.param)));
      for (auto& c : n)
        if (c == '-') c = '_';
      return n;
    });

}  // namespace
}  // namespace gpuledger
