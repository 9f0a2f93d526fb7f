// ZeRO-Offload of the optimizer on real ranks (np 2 and 4, cpu backend):
// under ZeRO 1, 2 and 3 with --offload optimizer, every rank against one rank
// without offload (tests/parallel/mpi/layout_check.h: fp32 losses and weights
// within 1e-5, bf16 within bf16_tolerance) and against its meta simulation
// (every account but workspace and every counter, the device-host copies
// included, to the byte); and every rank's accounts against the analytic
// budget, its copies against the analytic copies, exactly.
#include <gtest/gtest.h>

#include <string>

#include "../comm_expect.h"
#include "analytic/budget.h"
#include "analytic/comm_volume.h"
#include "layout_check.h"

namespace gpuledger {
namespace {

using namespace testing;

Layout zero_layout(int zero) {
  Layout l;
  l.dp = world_size();
  l.zero = zero;
  return l;
}

RunConfig offloaded(DType dt) {
  RunConfig r = small_run(2, Schedule::k1F1B, dt);
  r.offload_optimizer = true;
  return r;
}

TEST(Offload, Zero1Fp32MatchesOneRank) {
  check_layout(load_model("tiny-llama"), offloaded(DType::kFP32), zero_layout(1), 3, Tolerance{});
}
TEST(Offload, Zero2Fp32MatchesOneRank) {
  check_layout(load_model("tiny-llama"), offloaded(DType::kFP32), zero_layout(2), 3, Tolerance{});
}
TEST(Offload, Zero3Fp32MatchesOneRank) {
  check_layout(load_model("tiny-llama"), offloaded(DType::kFP32), zero_layout(3), 3, Tolerance{});
}
TEST(Offload, Zero2Bf16WithinRounding) {
  check_layout(load_model("tiny-llama"), offloaded(DType::kBF16), zero_layout(2), 3, bf16_tolerance());
}

TEST(Offload, EveryRankBooksTheAnalyticBudgetAndCopies) {
  const ModelConfig m = load_model("tiny-llama");
  for (int zero : {1, 2, 3}) {
    const RunConfig r = offloaded(DType::kBF16);
    const Layout l = zero_layout(zero);
    RankRig rig(RankRig::Mpi{}, "cpu", m, r, l);
    rig.build(m, r, l);
    const int64_t rank = rig.groups.rank;
    SCOPED_TRACE("zero " + std::to_string(zero) + " rank " + std::to_string(rank));
    rig.counters.reset();
    rig.trainer->step(0);
    const auto budget = analytic::rank_budget(m, l, r, rank);
    for (Account a : kAllAccounts)
      if (a != Account::kWorkspace) {
        EXPECT_EQ(rig.ledger.peak(a), budget.exact[a]) << account_name(a);
      }
    EXPECT_GT(rig.ledger.peak(Account::kHost), 0);
    expect_comm_equals(rig.counters.by_key(), analytic::rank_comm_per_step(m, l, r, rank));
  }
}

}  // namespace
}  // namespace gpuledger
