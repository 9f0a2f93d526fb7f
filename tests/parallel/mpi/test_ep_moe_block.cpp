// The MoE block under expert parallelism (models/moe/moe_block.h, shape.ep >
// 1) on real ranks (np 2 and 4): each rank routes its own tokens, holds E/ep
// experts and exchanges its tokens by all-to-all. Checked against the same
// block on one rank with every expert, run by each rank on its own tokens:
// the output, the load-balancing loss, the input gradient, the router's and
// the shared experts' gradients equal that rank's reference, and each local
// expert's gradient equals the sum over the group's ranks of the reference
// gradients of that expert (fp32, within 1e-5 relative: the same GEMMs, cut
// into other row blocks). The ledger's activations equal
// analytic::moe_block_ep_activation_bytes to the byte, the FLOPs
// analytic::moe_block_forward_flops over E·C rows exactly, and the all-to-alls
// booked equal analytic::moe_ep_all_to_all_bytes (4 per block step).
#include <gtest/gtest.h>
#include <mpi.h>

#include <cmath>
#include <random>
#include <vector>

#include "analytic/moe.h"
#include "comm/mpi_comm.h"
#include "core/model_config.h"
#include "kernels/ledger.h"
#include "kernels/registry/registry.h"
#include "models/moe/moe_block.h"
#include "parallel/groups.h"
#include "tests/models/moe/moe_test_model.h"
#include "tests/parallel/mpi/mpi_world.h"

namespace gpuledger {
namespace {

using testing::world_rank;
using testing::world_size;

// N = 8 tokens per rank, h = 16, E = 4, k = 2, f_e = 8, one shared expert of f_s = 4, α = 0.05.
constexpr int64_t kN = 8, kH = 16, kE = 4, kK = 2, kF = 8, kFs = 4;

constexpr testing::MoeTestDims kDims{kN, kH, kE, kK, kF, kFs};

ModelConfig moe_model(std::optional<double> capacity_factor) { return testing::moe_test_model(kDims, capacity_factor); }

MoeShape moe_shape(const ModelConfig& m, int64_t ep) { return testing::moe_test_shape(kDims, m, DType::kFP32, ep); }

std::vector<float> normal(int64_t n, double scale, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, static_cast<float>(scale));
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = nd(rng);
  return v;
}

// The block's tensors as host vectors: index 0 the input, 1 router, 2-4 the
// experts' gate, up, down (all E), 5-7 the shared gate, up, down.
std::vector<std::vector<float>> host_tensors(int64_t world_rank) {
  return {normal(kN * kH, 1.0, 100 + static_cast<uint32_t>(world_rank)),  // each rank its own tokens
          normal(kE * kH, 0.5, 1),
          normal(kE * kF * kH, 0.3, 2),
          normal(kE * kF * kH, 0.3, 3),
          normal(kE * kH * kF, 0.3, 4),
          normal(kFs * kH, 0.3, 5),
          normal(kFs * kH, 0.3, 6),
          normal(kH * kFs, 0.3, 7)};
}

struct Result {
  std::vector<float> y, dx;
  std::vector<std::vector<float>> grads;  // as host_tensors' 1..7
  double aux = 0;
  int64_t dropped = 0;  // choices past capacity on this rank
  int64_t activations = 0, forward_flops = 0, total_flops = 0;
};

// Runs the block on the CPU over `tensors`, holding experts [first, first + count).
Result run_block(const ModelConfig& m, const std::vector<std::vector<float>>& tensors, int64_t ep, int64_t first,
                 Comm* comm) {
  Ledger ledger;
  auto dev = make_device("cpu", ledger);
  const int64_t count = kE / ep;
  auto upload = [&](const float* src, int64_t n, Account acc) {
    Buffer b = dev->alloc(n * 4, acc, "t");
    dev->copy_from_host(b.data(), src, n * 4);
    return b;
  };
  auto download = [&](const Buffer& b) {
    std::vector<float> v(static_cast<size_t>(b.bytes() / 4));
    dev->copy_to_host(v.data(), b.data(), b.bytes());
    return v;
  };
  std::vector<Buffer> w, g;
  for (size_t i = 1; i < tensors.size(); ++i) {
    const bool expert = i >= 2 && i <= 4;
    const int64_t per = static_cast<int64_t>(tensors[i].size()) / (expert ? kE : 1);
    const float* src = tensors[i].data() + (expert ? first * per : 0);
    const int64_t n = expert ? count * per : per;
    w.push_back(upload(src, n, Account::kWeights));
    g.push_back(dev->alloc(n * 4, Account::kGrads, "g"));
    dev->fill_zero(g.back().data(), n * 4);
  }
  const MoeWeights mw{w[0].data(), w[1].data(), w[2].data(), w[3].data(), w[4].data(), w[5].data(), w[6].data(),
                      g[0].data(), g[1].data(), g[2].data(), g[3].data(), g[4].data(), g[5].data(), g[6].data()};
  Buffer x = upload(tensors[0].data(), kN * kH, Account::kWorkspace);
  Buffer y = dev->alloc(kN * kH * 4, Account::kWorkspace, "y");
  MoeBlock block(*dev, moe_shape(m, ep), mw, comm);
  MoeSaved saved;
  Result r;
  r.aux = block.forward(x.data(), y.data(), saved, Account::kActivations);
  r.dropped = saved.plan.dropped;
  r.activations = ledger.live(Account::kActivations);
  r.forward_flops = dev->executed_flops();
  r.y = download(y);
  const std::vector<float> dy = normal(kN * kH, 1.0, 200);  // the same upstream gradient on every rank
  Buffer dyb = upload(dy.data(), kN * kH, Account::kWorkspace);
  Buffer dx = dev->alloc(kN * kH * 4, Account::kWorkspace, "dx");
  block.backward(x.data(), dyb.data(), dx.data(), saved, 1.0);
  EXPECT_EQ(ledger.live(Account::kActivations), 0);
  r.total_flops = dev->executed_flops();
  r.dx = download(dx);
  for (const Buffer& b : g) r.grads.push_back(download(b));
  return r;
}

void expect_near_all(const std::vector<float>& got, const std::vector<float>& want, const char* what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_NEAR(got[i], want[i], 1e-5 * (1.0 + std::fabs(want[i]))) << what << " [" << i << "]";
}

// The ep groups of dp = world (make_mpi_groups: ep consecutive dp ranks, {0,1}
// {2,3} for ep 2 on 4 ranks).
void check_ep(const ModelConfig& m, int64_t ep) {
  const int64_t rank = world_rank();
  Layout l;
  l.dp = world_size();
  l.ep = ep;
  CommCounters counters, ref_counters;
  Ledger group_ledger;
  auto group_dev = make_device("cpu", group_ledger);
  Groups groups = make_mpi_groups(l, counters, *group_dev);
  Comm* comm = groups.ep.get();
  ASSERT_EQ(comm->size(), ep);
  ASSERT_EQ(comm->rank(), rank % ep);
  auto ref_comm = split_world_comm("ep_ref", ref_counters, l.ep_group(rank));  // sums the reference gradients
  const auto tensors = host_tensors(rank);

  const Result ref = run_block(m, tensors, 1, 0, nullptr);
  const Result got = run_block(m, tensors, ep, comm->rank() * (kE / ep), comm);

  expect_near_all(got.y, ref.y, "y");
  expect_near_all(got.dx, ref.dx, "dx");
  EXPECT_DOUBLE_EQ(got.aux, ref.aux);
  EXPECT_EQ(got.dropped, ref.dropped);
  if (m.capacity_factor) {
    EXPECT_GT(got.dropped, 0);  // C = 3 < the 4 choices an expert averages
  } else {
    EXPECT_EQ(got.dropped, 0);
  }
  expect_near_all(got.grads[0], ref.grads[0], "router");
  for (size_t i = 4; i < 7; ++i) expect_near_all(got.grads[i], ref.grads[i], "shared");
  for (size_t i = 1; i < 4; ++i) {
    std::vector<float> sum = ref.grads[i];  // every expert's gradient from this rank's tokens
    ref_comm->all_reduce(sum.data(), static_cast<int64_t>(sum.size()), DType::kFP32);
    const int64_t per = static_cast<int64_t>(sum.size()) / kE, first = comm->rank() * (kE / ep) * per;
    expect_near_all(got.grads[i], std::vector<float>(sum.begin() + first, sum.begin() + first + per * (kE / ep)),
                    "expert");
  }

  const int64_t slots = analytic::moe_ep_slots(m, kN);
  EXPECT_EQ(got.activations, analytic::moe_block_ep_activation_bytes(m, kN, 4));
  EXPECT_EQ(got.forward_flops, analytic::moe_block_forward_flops(m, kN, slots));
  EXPECT_EQ(got.total_flops, 3 * analytic::moe_block_forward_flops(m, kN, slots));
  ASSERT_EQ(counters.by_key().size(), 1u);  // nothing on dp or edp
  const CommCount& a2a = counters.by_key().at("all_to_all@ep");
  EXPECT_EQ(a2a.calls, analytic::kMoeEpAllToAllsPerBlockStep);
  EXPECT_EQ(a2a.bytes, analytic::kMoeEpAllToAllsPerBlockStep * analytic::moe_ep_all_to_all_bytes(m, kN, 4));
}

// No capacity factor: C = N = 8 slots per expert per source, E·C = 32 rows per rank.
TEST(ExpertParallelMoe, DroplessMatchesOneRankPerRank) {
  const ModelConfig m = moe_model(std::nullopt);
  EXPECT_EQ(analytic::moe_ep_slots(m, kN), 32);
  EXPECT_EQ(analytic::moe_ep_all_to_all_bytes(m, kN, 4), 32 * kH * 4);
  check_ep(m, world_size());
  if (world_size() == 4) check_ep(m, 2);
}

// c = 0.75: C = ⌈0.75·8·2/4⌉ = 3 slots; choices past 3 dropped in token
// order, the same ones the one-rank block drops on these tokens.
TEST(ExpertParallelMoe, CapacityDropsMatchOneRankPerRank) {
  const ModelConfig m = moe_model(0.75);
  EXPECT_EQ(analytic::moe_ep_slots(m, kN), 12);
  check_ep(m, world_size());
  if (world_size() == 4) check_ep(m, 2);
}

}  // namespace
}  // namespace gpuledger
