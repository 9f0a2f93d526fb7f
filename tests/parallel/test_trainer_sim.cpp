// Every rank of 2- to 8-rank layouts (data, pipeline, ZeRO 1, 2 and 3 with
// --prefetch 0, 1 and 2, mixed; ZeRO 2/3 with tied embeddings at p = 1: the
// head's word-gradient side buffer, and under ZeRO 3 the embedding unit
// gathered for the head; at p > 1 the word's units reduce-scattered after the
// embedding-group sum; interleaved stages with ZeRO 0-3; a MoE model with
// ZeRO 1-3, its experts sharded over the expert-data-parallel group; context
// parallelism alone and with pipeline and interleaved stages and tensor
// parallelism, with and without sp),
// simulated in this process on the meta backend (make_sim_groups: SimComm
// books what a real comm of that group would): its ledger peak per account
// equals the analytic rank_budget (analytic/budget.h, written
// independently from docs/exact-budget.md) to the byte for every account but
// workspace — model states with ZeRO shards, the first stage's in-flight
// microbatches, the DP bucket and PP buffers — and its comm counters equal
// rank_comm_per_step (docs/formulas/comm.md) call for call and byte for byte.
// tests/parallel/mpi/ checks that real MPI ranks book what these simulated
// ranks book.
#include <gtest/gtest.h>

#include <string>
#include <tuple>

#include "analytic/budget.h"
#include "analytic/comm_volume.h"
#include "comm_expect.h"
#include "rank_rig.h"

namespace gpuledger {
namespace {

using testing::RankRig;

struct SimPoint {
  std::string model;
  int64_t layers;
  Layout layout;
  Schedule schedule;
  int64_t microbatches;
  DType dtype;
  std::string name;
  int64_t prefetch = 1;
  int64_t vocab = 0;  // > 0: the preset's vocabulary replaced
  OptimizerKind optimizer = OptimizerKind::kAdamW;
  double momentum = 0.9;  // SGD's (0: no momentum buffer)
  Recompute recompute = Recompute::kNone;
  bool offload = false;      // --offload optimizer
  int64_t dense_layers = 0;  // a MoE model's first layers with the dense MLP (DeepSeek's first_k_dense_replace)
  bool router_bias = false;  // DeepSeek-V3's sigmoid router with the expert bias (scaling 2.5)
};

RunConfig sim_run(const SimPoint& p) {
  RunConfig r;
  r.seq = 16;
  r.mbs = 2;
  r.microbatches = p.microbatches;
  r.schedule = p.schedule;
  r.dtype = p.dtype;
  r.dropout = 0.1;
  r.bucket_mb = 0.01;  // 10485 B: several buckets per rank, some spanning units
  r.prefetch = p.prefetch;
  r.optimizer = p.optimizer;
  r.momentum = p.momentum;
  r.recompute = p.recompute;
  r.offload_optimizer = p.offload;
  if (p.layout.cp > 1) r.attention = AttentionKind::kFlash;  // the ring merges flash blocks
  return r;
}

Layout lay(int64_t dp, int64_t pp, int zero) {
  Layout l;
  l.dp = dp;
  l.pp = pp;
  l.zero = zero;
  return l;
}

class TrainerSim : public ::testing::TestWithParam<SimPoint> {};

TEST_P(TrainerSim, EveryRankBooksTheAnalyticBytesAndComm) {
  const SimPoint& p = GetParam();
  ModelConfig m = load_model(p.model);
  m.layers = p.layers;
  m.dense_layers = p.dense_layers;
  if (p.router_bias) {
    m.router_bias = m.router_sigmoid = true;
    m.routed_scaling_factor = 2.5;
  }
  if (p.vocab > 0) m.vocab = p.vocab;
  const RunConfig r = sim_run(p);
  for (int64_t rank = 0; rank < p.layout.world(); ++rank) {
    SCOPED_TRACE("rank " + std::to_string(rank));
    RankRig rig("meta", m, r, p.layout, rank);
    rig.counters.reset();
    rig.trainer->step(0);
    const auto budget = analytic::rank_budget(m, p.layout, r, rank);
    const AccountBytes peak = rig.ledger.peak_by_account();
    for (Account a : kAllAccounts) {
      if (a == Account::kWorkspace) continue;
      EXPECT_EQ(peak[a], budget.exact[a]) << account_name(a);
    }
    const auto want = analytic::rank_comm_per_step(m, p.layout, r, rank);
    testing::expect_comm_equals(rig.counters.by_key(), want);
    // a second step books the same again and holds no more
    rig.counters.reset();
    rig.trainer->step(1);
    for (Account a : kAllAccounts)
      if (a != Account::kWorkspace) {
        EXPECT_EQ(rig.ledger.peak_by_account()[a], peak[a]) << account_name(a);
      }
    for (const auto& [key, c] : want) EXPECT_EQ(rig.counters.by_key().at(key).calls, c.calls) << key;
  }
}

std::vector<SimPoint> sim_points() {
  std::vector<SimPoint> pts;
  for (const char* model : {"tiny-llama", "tiny-gpt"}) {
    const std::string mn = std::string(model) == "tiny-gpt" ? "gpt" : "llama";
    for (DType dt : {DType::kBF16, DType::kFP32}) {
      const std::string dn(dtype_name(dt));
      pts.push_back({model, 2, lay(2, 1, 0), Schedule::k1F1B, 2, dt, mn + "_dp2_" + dn});
      pts.push_back({model, 2, lay(4, 1, 1), Schedule::k1F1B, 1, dt, mn + "_dp4_zero1_" + dn});
      pts.push_back({model, 2, lay(1, 2, 0), Schedule::k1F1B, 4, dt, mn + "_pp2_1f1b_m4_" + dn});
      pts.push_back({model, 2, lay(1, 2, 0), Schedule::kGPipe, 3, dt, mn + "_pp2_gpipe_m3_" + dn});
      pts.push_back({model, 4, lay(1, 4, 0), Schedule::k1F1B, 4, dt, mn + "_pp4_1f1b_m4_" + dn});
      pts.push_back({model, 4, lay(2, 2, 1), Schedule::k1F1B, 2, dt, mn + "_dp2_pp2_zero1_" + dn});
      pts.push_back({model, 2, lay(3, 1, 1), Schedule::kGPipe, 2, dt, mn + "_dp3_zero1_padded_" + dn});
      // ZeRO 2/3 at p = 1: tiny-gpt is tied (the head's side buffer; ZeRO 3
      // gathers the embedding unit for the head: with --prefetch 0 and 1 also
      // in the backward, with --prefetch 4 at L = 3 the head's backward window
      // already reaches it).
      pts.push_back({model, 2, lay(2, 1, 2), Schedule::k1F1B, 3, dt, mn + "_dp2_zero2_" + dn});
      pts.push_back({model, 2, lay(3, 1, 2), Schedule::kGPipe, 2, dt, mn + "_dp3_zero2_padded_" + dn});
      pts.push_back({model, 2, lay(2, 1, 3), Schedule::k1F1B, 3, dt, mn + "_dp2_zero3_" + dn});
      pts.push_back({model, 3, lay(3, 1, 3), Schedule::kGPipe, 2, dt, mn + "_dp3_zero3_padded_" + dn});
      pts.push_back({model, 4, lay(2, 1, 3), Schedule::k1F1B, 2, dt, mn + "_dp2_zero3_prefetch0_" + dn, 0});
      pts.push_back({model, 4, lay(2, 1, 3), Schedule::kGPipe, 2, dt, mn + "_dp2_zero3_prefetch2_" + dn, 2});
      pts.push_back({model, 3, lay(4, 1, 3), Schedule::kGPipe, 2, dt, mn + "_dp4_zero3_prefetch4_" + dn, 4});
      // a word embedding larger than a layer (V = 2000: 2000·64 > 49,984 of a
      // tiny-gpt layer): the head's gathered embedding sets the weights peak
      // (docs/exact-budget.md "Model states", tied + ZeRO 3)
      pts.push_back({model, 2, lay(2, 1, 3), Schedule::k1F1B, 2, dt, mn + "_dp2_zero3_v2000_" + dn, 1, 2000});
      pts.push_back({model, 2, lay(2, 1, 2), Schedule::kGPipe, 2, dt, mn + "_dp2_zero2_v2000_" + dn, 1, 2000});
      // interleaved stages (--vpp): each rank's chunks, the stage extras on
      // the embedding's and the head's chunks, every rank all four PP buffers
      // and vpp times the messages; m at, above and below the warm-up
      for (auto [pp, vpp, layers, m, zero, dp] : {std::tuple{2, 2, 4, 2, 0, 1},
                                                  {2, 2, 4, 4, 0, 1},
                                                  {2, 2, 4, 6, 0, 1},
                                                  {2, 3, 6, 4, 0, 1},
                                                  {4, 2, 8, 4, 0, 1},
                                                  {4, 2, 8, 8, 0, 1},
                                                  {2, 2, 4, 2, 1, 2},
                                                  {2, 2, 4, 4, 2, 2},
                                                  {2, 2, 4, 2, 3, 2},
                                                  {2, 2, 8, 4, 3, 2},
                                                  {4, 2, 8, 8, 3, 2}}) {
        Layout l = lay(dp, pp, zero);
        l.vpp = vpp;
        pts.push_back({model, layers, l, Schedule::k1F1B, m, dt,
                       mn + "_dp" + std::to_string(dp) + "_pp" + std::to_string(pp) + "_vpp" + std::to_string(vpp) +
                           "_m" + std::to_string(m) + "_zero" + std::to_string(zero) + "_" + dn});
      }
      // with pp > 1 (gpt: tied, the word's units reduce-scattered after the embedding-group sum)
      pts.push_back({model, 4, lay(2, 2, 2), Schedule::k1F1B, 2, dt, mn + "_dp2_pp2_zero2_" + dn});
      pts.push_back({model, 4, lay(2, 2, 3), Schedule::k1F1B, 2, dt, mn + "_dp2_pp2_zero3_" + dn});
      pts.push_back({model, 4, lay(3, 2, 2), Schedule::kGPipe, 3, dt, mn + "_dp3_pp2_zero2_padded_" + dn});
    }
  }
  // Each optimizer's states (SGD's momentum buffer, or none with momentum 0;
  // Adagrad's sum; Lion's momentum) whole and sharded by ZeRO 1, 2, 3.
  for (auto [opt, momentum, on] : {std::tuple{OptimizerKind::kSGD, 0.9, "sgd"},
                                   {OptimizerKind::kSGD, 0.0, "sgd_m0"},
                                   {OptimizerKind::kAdagrad, 0.9, "adagrad"},
                                   {OptimizerKind::kLion, 0.9, "lion"}}) {
    const std::string n = std::string("llama_") + on;
    auto add = [&](Layout l, const std::string& name) {
      SimPoint sp{"tiny-llama", 2, l, Schedule::k1F1B, 2, DType::kBF16, n + name};
      sp.optimizer = opt;
      sp.momentum = momentum;
      pts.push_back(sp);
    };
    add(lay(2, 1, 0), "_dp2");
    add(lay(3, 1, 1), "_dp3_zero1_padded");
    add(lay(2, 1, 2), "_dp2_zero2");
    add(lay(3, 1, 3), "_dp3_zero3_padded");
    add(lay(2, 2, 1), "_dp2_pp2_zero1");
  }
  // A MoE model (tiny-moe: E 4, k 2, one shared expert) under data
  // parallelism, and expert parallelism carved out of it: E/ep experts per
  // rank (their weights, gradients, master and optimizer state), the E·C
  // dispatch slots and buffers, four all-to-alls per layer and microbatch
  // over ep, the expert gradients' buckets over the expert-data-parallel group
  // (none at dp = ep), the norm's expert share over ep. With pp > 1 each
  // stage has its own ep groups.
  for (DType dt : {DType::kBF16, DType::kFP32})
    for (auto [dp, pp, ep] : {std::tuple{2, 1, 1}, {2, 1, 2}, {4, 1, 2}, {4, 1, 4}, {8, 1, 2}, {1, 2, 1}, {2, 2, 2}}) {
      Layout l = lay(dp, pp, 0);
      l.ep = ep;
      pts.push_back({"tiny-moe", 2, l, Schedule::k1F1B, 2, dt,
                     "moe_dp" + std::to_string(dp) + "_pp" + std::to_string(pp) + "_ep" + std::to_string(ep) + "_" +
                         std::string(dtype_name(dt))});
    }
  // ZeRO 1-3 over the MoE model: each unit's dense part sharded over dp, a
  // MoE layer's routed experts under ep > 1 over the expert-data-parallel
  // group (dp/ep ranks; nothing to shard at dp = ep), each part padded to its
  // group (dp 3, dp 6 with ep 2: padded parts); the reduce-scatters and
  // all-gathers over dp and edp; the norm's sum over dp only.
  for (DType dt : {DType::kBF16, DType::kFP32})
    for (int zero : {1, 2, 3})
      for (auto [dp, pp, ep] :
           {std::tuple{2, 1, 1}, {3, 1, 1}, {2, 1, 2}, {4, 1, 2}, {4, 1, 4}, {6, 1, 2}, {2, 2, 2}}) {
        Layout l = lay(dp, pp, zero);
        l.ep = ep;
        pts.push_back({"tiny-moe", 2, l, zero == 2 ? Schedule::kGPipe : Schedule::k1F1B, 2, dt,
                       "moe_zero" + std::to_string(zero) + "_dp" + std::to_string(dp) + "_pp" + std::to_string(pp) +
                           "_ep" + std::to_string(ep) + "_" + std::string(dtype_name(dt)),
                       zero == 3 ? dp - 1 : 1});
      }
  // --offload optimizer over the MoE model's parts: the host copies of each
  // part's shard (the experts' over edp), one copy per unit and direction.
  for (int zero : {1, 2, 3})
    for (auto [dp, ep] : {std::pair{4, 2}, {2, 2}, {3, 1}}) {
      Layout l = lay(dp, 1, zero);
      l.ep = ep;
      SimPoint sp{"tiny-moe",
                  2,
                  l,
                  Schedule::k1F1B,
                  2,
                  DType::kBF16,
                  "moe_offload_zero" + std::to_string(zero) + "_dp" + std::to_string(dp) + "_ep" + std::to_string(ep)};
      sp.offload = true;
      pts.push_back(sp);
    }
  // A MoE model under --recompute full (the backward re-runs each layer's
  // forward: the router, the experts and under ep the dispatch and combine
  // all-to-alls again; only the layer input kept) and with interleaved stages
  // (--vpp 2: L/(p·v) MoE layers per chunk, each chunk's load-balancing loss on
  // its stage).
  for (DType dt : {DType::kBF16, DType::kFP32}) {
    for (auto [dp, pp, ep, zero] : {std::tuple{1, 1, 1, 0}, {2, 1, 2, 0}, {4, 1, 2, 1}, {2, 1, 1, 3}, {2, 2, 2, 2}}) {
      Layout l = lay(dp, pp, zero);
      l.ep = ep;
      SimPoint sp{"tiny-moe",
                  2,
                  l,
                  Schedule::k1F1B,
                  2,
                  dt,
                  "moe_full_dp" + std::to_string(dp) + "_pp" + std::to_string(pp) + "_ep" + std::to_string(ep) +
                      "_zero" + std::to_string(zero) + "_" + std::string(dtype_name(dt))};
      sp.recompute = Recompute::kFull;
      pts.push_back(sp);
    }
    for (auto [dp, ep, zero, m] : {std::tuple{1, 1, 0, 2}, {2, 2, 0, 4}, {4, 2, 1, 2}, {2, 1, 3, 2}}) {
      Layout l = lay(dp, 2, zero);
      l.ep = ep;
      l.vpp = 2;
      pts.push_back({"tiny-moe", 4, l, Schedule::k1F1B, m, dt,
                     "moe_vpp2_dp" + std::to_string(dp) + "_ep" + std::to_string(ep) + "_zero" + std::to_string(zero) +
                         "_m" + std::to_string(m) + "_" + std::string(dtype_name(dt))});
    }
  }
  // DeepSeek's first dense layers (dense_layers): layer units of two sizes,
  // the dense MLP's saved tensors and FLOPs beside the sparse block's; a
  // stage of dense layers alone (pp 2 at 2 layers) has no dispatch buffer and
  // no all-to-all; ZeRO pads each unit to its own size.
  for (DType dt : {DType::kBF16, DType::kFP32})
    for (auto [layers, dense, dp, pp, ep, zero] : {std::tuple{3, 1, 1, 1, 1, 0},
                                                   {3, 2, 2, 1, 2, 0},
                                                   {2, 1, 2, 2, 2, 0},
                                                   {4, 1, 2, 2, 2, 1},
                                                   {3, 1, 4, 1, 2, 2},
                                                   {4, 3, 2, 2, 2, 3}}) {
      Layout l = lay(dp, pp, zero);
      l.ep = ep;
      SimPoint sp{"tiny-moe",
                  layers,
                  l,
                  Schedule::k1F1B,
                  2,
                  dt,
                  "moe_dense" + std::to_string(dense) + "_of" + std::to_string(layers) + "_dp" + std::to_string(dp) +
                      "_pp" + std::to_string(pp) + "_ep" + std::to_string(ep) + "_zero" + std::to_string(zero) + "_" +
                      std::string(dtype_name(dt))};
      sp.dense_layers = dense;
      if (zero == 2) sp.recompute = Recompute::kFull;
      pts.push_back(sp);
      // with DeepSeek-V3's expert bias: E fp32 per MoE layer under weights,
      // the load counts all-reduced over dp once per step
      sp.router_bias = true;
      sp.name += "_bias";
      pts.push_back(sp);
    }
  // A MoE model over the cp ring (ep 1): the block's saved tensors and FLOPs
  // at s/cp tokens, one all-reduce of the E f_e counts over cp per MoE
  // layer and forward (two under full recompute); with DeepSeek's first
  // dense layer and expert bias too.
  for (DType dt : {DType::kBF16, DType::kFP32})
    for (auto [dp, pp, cp, rc, bias] : {std::tuple{1, 1, 2, Recompute::kNone, false},
                                        {2, 1, 2, Recompute::kFull, false},
                                        {1, 2, 2, Recompute::kSelective, true},
                                        {1, 1, 4, Recompute::kNone, true}}) {
      Layout l = lay(dp, pp, 0);
      l.cp = cp;
      SimPoint sp{"tiny-moe",
                  4,
                  l,
                  Schedule::k1F1B,
                  2,
                  dt,
                  "moe_dp" + std::to_string(dp) + "_pp" + std::to_string(pp) + "_cp" + std::to_string(cp) +
                      (rc == Recompute::kFull        ? "_full"
                       : rc == Recompute::kSelective ? "_selective"
                                                     : "") +
                      (bias ? "_dense1_bias_" : "_") + std::string(dtype_name(dt))};
      sp.recompute = rc;
      if (bias) {
        sp.dense_layers = 1;
        sp.router_bias = true;
      }
      pts.push_back(sp);
    }
  // Context parallelism (ring attention, models/transformer/context_ring.h):
  // the ring's buffers and send/recv@cp, the activations of s/cp tokens, the
  // gradient buckets over dp·cp; a recompute runs the ring's forward twice.
  for (const char* model : {"tiny-llama", "tiny-gpt"})
    for (DType dt : {DType::kBF16, DType::kFP32})
      for (auto [dp, cp, rc, rn] : {std::tuple{1, 2, Recompute::kNone, ""},
                                    {2, 2, Recompute::kNone, ""},
                                    {1, 4, Recompute::kNone, ""},
                                    {1, 2, Recompute::kSelective, "_selective"},
                                    {2, 2, Recompute::kFull, "_full"}}) {
        Layout l = lay(dp, 1, 0);
        l.cp = cp;
        SimPoint sp{model,
                    2,
                    l,
                    Schedule::k1F1B,
                    2,
                    dt,
                    std::string(model[5] == 'l' ? "llama" : "gpt") + "_dp" + std::to_string(dp) + "_cp" +
                        std::to_string(cp) + rn + (dt == DType::kBF16 ? "_bf16" : "_fp32")};
        sp.recompute = rc;
        pts.push_back(sp);
      }
  // Context parallelism with pipeline stages: every stage runs its ring over
  // its own cp group and the pipeline's messages carry the rank's s/cp
  // tokens; interleaved stages (vpp) hold their chunk-microbatches in flight
  // at s/cp tokens each.
  struct CpPipe {
    int64_t dp, pp, vpp, cp, layers, m;
    Schedule schedule;
    Recompute recompute;
    const char* tag;
    int64_t tp = 1;
    bool sp = false;
    int zero = 0;
  };
  std::vector<CpPipe> cp_pipes = {
      CpPipe{1, 2, 1, 2, 2, 4, Schedule::k1F1B, Recompute::kNone, ""},
      CpPipe{1, 2, 1, 2, 2, 3, Schedule::kGPipe, Recompute::kNone, "_gpipe"},
      CpPipe{1, 2, 1, 4, 4, 2, Schedule::k1F1B, Recompute::kSelective, "_selective"},
      CpPipe{2, 2, 1, 2, 4, 2, Schedule::k1F1B, Recompute::kFull, "_full"},
      CpPipe{1, 2, 2, 2, 4, 4, Schedule::k1F1B, Recompute::kNone, ""},
      CpPipe{1, 4, 2, 2, 8, 4, Schedule::k1F1B, Recompute::kNone, ""},
      CpPipe{2, 2, 3, 2, 6, 2, Schedule::k1F1B, Recompute::kNone, ""},
      // tensor parallelism beside the ring: K/V heads per TP rank in the
      // ring's blocks (tp 4 replicates tiny-llama's 2 KV heads), sp over
      // the rank's s/cp tokens
      CpPipe{1, 1, 1, 2, 2, 2, Schedule::k1F1B, Recompute::kNone, "", 2, false},
      CpPipe{1, 1, 1, 2, 2, 2, Schedule::k1F1B, Recompute::kNone, "", 2, true},
      CpPipe{1, 1, 1, 4, 2, 2, Schedule::k1F1B, Recompute::kSelective, "_selective", 2, true},
      CpPipe{1, 1, 1, 2, 2, 2, Schedule::k1F1B, Recompute::kFull, "_full", 4, true},
      CpPipe{2, 1, 1, 2, 2, 2, Schedule::k1F1B, Recompute::kNone, "", 4, false},
      CpPipe{1, 2, 1, 2, 2, 2, Schedule::k1F1B, Recompute::kNone, "", 2, true},
      CpPipe{1, 2, 2, 2, 4, 4, Schedule::k1F1B, Recompute::kNone, "", 2, true},
      // ZeRO 1-3 over the dp·cp ranks (tiny models' units pad to the shards)
      CpPipe{1, 1, 1, 2, 2, 2, Schedule::k1F1B, Recompute::kNone, "_zero1", 1, false, 1},
      CpPipe{2, 1, 1, 2, 2, 2, Schedule::k1F1B, Recompute::kNone, "_zero1", 1, false, 1},
      CpPipe{1, 1, 1, 2, 2, 3, Schedule::k1F1B, Recompute::kNone, "_zero2", 1, false, 2},
      CpPipe{2, 1, 1, 2, 2, 2, Schedule::kGPipe, Recompute::kNone, "_zero2", 1, false, 2},
      CpPipe{1, 1, 1, 2, 2, 3, Schedule::k1F1B, Recompute::kNone, "_zero3", 1, false, 3},
      CpPipe{2, 1, 1, 4, 3, 2, Schedule::kGPipe, Recompute::kFull, "_zero3", 1, false, 3},
      CpPipe{1, 2, 1, 2, 4, 2, Schedule::k1F1B, Recompute::kNone, "_zero2", 1, false, 2},
      CpPipe{2, 2, 2, 2, 4, 2, Schedule::k1F1B, Recompute::kNone, "_zero3", 2, true, 3}};
  for (const char* model : {"tiny-llama", "tiny-gpt"})
    for (DType dt : {DType::kBF16, DType::kFP32})
      for (const CpPipe& c : cp_pipes) {
        Layout l = lay(c.dp, c.pp, c.zero);
        l.cp = c.cp;
        l.vpp = c.vpp;
        l.tp = c.tp;
        l.sp = c.sp;
        SimPoint sp{model,
                    c.layers,
                    l,
                    c.schedule,
                    c.m,
                    dt,
                    std::string(model[5] == 'l' ? "llama" : "gpt") + "_dp" + std::to_string(c.dp) + "_tp" +
                        std::to_string(c.tp) + (c.sp ? "sp" : "") + "_pp" + std::to_string(c.pp) + "_vpp" +
                        std::to_string(c.vpp) + "_cp" + std::to_string(c.cp) + "_m" + std::to_string(c.m) + c.tag +
                        (dt == DType::kBF16 ? "_bf16" : "_fp32")};
        sp.recompute = c.recompute;
        pts.push_back(sp);
      }
  return pts;
}

INSTANTIATE_TEST_SUITE_P(Layouts, TrainerSim, ::testing::ValuesIn(sim_points()),
                         [](const auto& info) { return info.param.name; });

// Tied embeddings + ZeRO 2/3 + dp > 1 at p = 1 on the cpu backend (SimComm
// moves no data, so the values are meaningless; the allocations are the real
// backend's): every rank books the analytic budget to the byte, as on meta
// above. tests/parallel/mpi/test_zero_train.cpp checks the values on real ranks.
TEST(TrainerSimTied, CpuRanksBookTheAnalyticBytes) {
  std::vector<SimPoint> pts;
  for (DType dt : {DType::kBF16, DType::kFP32}) {
    pts.push_back({"tiny-gpt", 2, lay(2, 1, 2), Schedule::k1F1B, 2, dt, "zero2"});
    pts.push_back({"tiny-gpt", 2, lay(3, 1, 2), Schedule::kGPipe, 2, dt, "zero2_dp3"});
    pts.push_back({"tiny-gpt", 2, lay(2, 1, 3), Schedule::k1F1B, 2, dt, "zero3", 1, 2000});
    pts.push_back({"tiny-gpt", 3, lay(2, 1, 3), Schedule::kGPipe, 2, dt, "zero3_prefetch0", 0, 2000});
    pts.push_back({"tiny-gpt", 3, lay(2, 1, 3), Schedule::kGPipe, 2, dt, "zero3_prefetch4", 4});
    pts.push_back({"tiny-gpt", 4, lay(2, 2, 2), Schedule::k1F1B, 2, dt, "zero2_pp2"});
    pts.push_back({"tiny-gpt", 4, lay(2, 2, 3), Schedule::k1F1B, 2, dt, "zero3_pp2"});
  }
  for (const SimPoint& p : pts) {
    ModelConfig m = load_model(p.model);
    m.layers = p.layers;
    if (p.vocab > 0) m.vocab = p.vocab;
    const RunConfig r = sim_run(p);
    for (int64_t rank = 0; rank < p.layout.world(); ++rank) {
      SCOPED_TRACE(p.name + " " + std::string(dtype_name(p.dtype)) + " rank " + std::to_string(rank));
      RankRig rig("cpu", m, r, p.layout, rank);
      rig.trainer->step(0);
      const auto budget = analytic::rank_budget(m, p.layout, r, rank);
      const AccountBytes peak = rig.ledger.peak_by_account();
      for (Account a : kAllAccounts) {
        if (a == Account::kWorkspace) {
          EXPECT_LE(peak[a], budget.exact[a]) << account_name(a);
          continue;
        }
        EXPECT_EQ(peak[a], budget.exact[a]) << account_name(a);
      }
    }
  }
}

// Every optimizer on the cpu backend, one rank and ZeRO 0-3 at dp 2 (bf16
// with an fp32 master, and fp32): each rank books the analytic budget to the
// byte, optimizer state included (AdamW 8 B per shard element, SGD, Adagrad
// and Lion 4, SGD without momentum 0).
TEST(TrainerSimOptimizers, CpuRanksBookTheAnalyticBytesForEveryOptimizer) {
  for (auto [opt, momentum] : {std::pair{OptimizerKind::kAdamW, 0.9},
                               {OptimizerKind::kSGD, 0.9},
                               {OptimizerKind::kSGD, 0.0},
                               {OptimizerKind::kAdagrad, 0.9},
                               {OptimizerKind::kLion, 0.9}})
    for (DType dt : {DType::kBF16, DType::kFP32})
      for (auto [dp, zero] : {std::pair{1, 0}, {2, 0}, {2, 1}, {2, 2}, {2, 3}}) {
        SimPoint p{"tiny-llama", 2, lay(dp, 1, zero), Schedule::k1F1B, 2, dt, ""};
        p.optimizer = opt;
        p.momentum = momentum;
        ModelConfig m = load_model(p.model);
        m.layers = p.layers;
        const RunConfig r = sim_run(p);
        for (int64_t rank = 0; rank < p.layout.world(); ++rank) {
          SCOPED_TRACE(std::string(optimizer_name(opt)) + " momentum " + std::to_string(momentum) + " " +
                       std::string(dtype_name(dt)) + " dp " + std::to_string(dp) + " zero " + std::to_string(zero) +
                       " rank " + std::to_string(rank));
          for (const char* backend : {"cpu", "meta"}) {
            RankRig rig(backend, m, r, p.layout, rank);
            rig.trainer->step(0);
            rig.trainer->step(1);
            const auto budget = analytic::rank_budget(m, p.layout, r, rank);
            const AccountBytes peak = rig.ledger.peak_by_account();
            for (Account a : kAllAccounts) {
              if (a != Account::kWorkspace) {
                EXPECT_EQ(peak[a], budget.exact[a]) << backend << " " << account_name(a);
              }
            }
          }
        }
      }
}

// Tied embeddings + ZeRO 2/3 + dp > 1 + pp > 1, on the meta backend: the
// word's unit holds its whole gradient from its first backward to its
// reduce-scatter after the schedule, booked under grads by name; the emb
// all-reduce precedes that unit's one reduce-scatter of the step.
TEST(TrainerSimTied, WordUnitGradientHeldUntilAfterTheSchedule) {
  ModelConfig m = load_model("tiny-gpt");
  m.layers = 4;
  const RunConfig r = sim_run({"tiny-gpt", 4, lay(2, 2, 2), Schedule::k1F1B, 3, DType::kBF16, ""});
  for (int zero : {2, 3}) {
    SCOPED_TRACE("zero " + std::to_string(zero));
    const Layout l = lay(2, 2, zero);
    RankRig rig("meta", m, r, l, 0);  // stage 0, dp rank 0
    rig.trainer->step(0);
    // stage 0: the embedding unit 97·64 + 64·64 = 10 304 elements, bf16
    // gradients; its shard 5 152 and the two layers' 2 · 49 984 / 2
    EXPECT_EQ(rig.ledger.peak_by_account()[Account::kGrads], 2 * (5152 + 49984) + 2 * 10304);
    EXPECT_EQ(rig.ledger.live_by_account()[Account::kGrads], 2 * (5152 + 49984));  // freed after the step
    const auto& c = rig.counters.by_key();
    EXPECT_EQ(c.at("all_reduce@emb").calls, 1);
    EXPECT_EQ(c.at("all_reduce@emb").bytes, 2 * 97 * 64);
    // the two layers' reduce-scatters every microbatch, the embedding's once
    EXPECT_EQ(c.at("reduce_scatter@dp").calls, 2 * 3 + 1);
    EXPECT_EQ(c.at("reduce_scatter@dp").bytes, 2 * 3 * 2 * 49984 + 2 * 10304);
  }
}

}  // namespace
}  // namespace gpuledger
