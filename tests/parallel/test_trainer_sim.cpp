// Every rank of 2- to 4-rank layouts (data, pipeline, ZeRO 1, 2 and 3 with
// --prefetch 0, 1 and 2, mixed),
// simulated in this process on the meta backend (make_sim_groups: SimComm
// books what a real comm of that group would): its ledger peak per account
// equals the analytic rank_budget (models/analytic/budget.h, written
// independently from docs/exact-budget.md) to the byte for every account but
// workspace — model states with ZeRO shards, the first stage's in-flight
// microbatches, the DP bucket and PP buffers — and its comm counters equal
// rank_comm_per_step (docs/formulas/comm.md) call for call and byte for byte.
// tests/parallel/mpi/ checks that real MPI ranks book what these simulated
// ranks book.
#include <gtest/gtest.h>

#include <string>

#include "models/analytic/budget.h"
#include "models/analytic/comm_volume.h"
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
    const auto& got = rig.counters.by_key();
    for (const auto& [key, c] : want) {
      auto it = got.find(key);
      if (it == got.end()) {
        ADD_FAILURE() << "missing " << key;
        continue;
      }
      EXPECT_EQ(it->second.calls, c.calls) << key;
      EXPECT_EQ(it->second.bytes, c.bytes) << key;
    }
    for (const auto& [key, c] : got)
      if (!want.count(key)) ADD_FAILURE() << "unexpected " << key << " (" << c.calls << " calls)";
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
      if (mn == "llama") {  // ZeRO 2 with dp > 1 needs untied embeddings
        pts.push_back({model, 2, lay(2, 1, 2), Schedule::k1F1B, 3, dt, mn + "_dp2_zero2_" + dn});
        pts.push_back({model, 2, lay(3, 1, 2), Schedule::kGPipe, 2, dt, mn + "_dp3_zero2_padded_" + dn});
        pts.push_back({model, 4, lay(2, 2, 2), Schedule::k1F1B, 2, dt, mn + "_dp2_pp2_zero2_" + dn});
        pts.push_back({model, 2, lay(2, 1, 3), Schedule::k1F1B, 3, dt, mn + "_dp2_zero3_" + dn});
        pts.push_back({model, 3, lay(3, 1, 3), Schedule::kGPipe, 2, dt, mn + "_dp3_zero3_padded_" + dn});
        pts.push_back({model, 4, lay(2, 2, 3), Schedule::k1F1B, 2, dt, mn + "_dp2_pp2_zero3_" + dn});
        pts.push_back({model, 4, lay(2, 1, 3), Schedule::k1F1B, 2, dt, mn + "_dp2_zero3_prefetch0_" + dn, 0});
        pts.push_back({model, 4, lay(2, 1, 3), Schedule::kGPipe, 2, dt, mn + "_dp2_zero3_prefetch2_" + dn, 2});
      }
    }
  }
  return pts;
}

INSTANTIATE_TEST_SUITE_P(Layouts, TrainerSim, ::testing::ValuesIn(sim_points()),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace gpuledger
