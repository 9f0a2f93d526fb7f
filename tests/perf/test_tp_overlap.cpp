// TP communication beside its GEMMs (--tp-comm-overlap): on hand-made programs
// the rewritten step is t/tp + max(g, t·(tp − 1)/tp) per collective instead of
// t + g, worked by hand below; an all-reduce, a gather with no GEMM after it
// and tp 1 are left as they were.
#include <gtest/gtest.h>

#include "perf/sim/timeline.h"
#include "perf/sim/tp_overlap.h"

using namespace gpuledger::perf;

namespace {

SimEvent op(const char* name, double seconds) {
  SimEvent e;
  e.kind = SimEventKind::kCompute;
  e.name = name;
  e.seconds = seconds;
  return e;
}

SimEvent tp_collective(const char* kind, double seconds) {
  SimEvent e;
  e.kind = SimEventKind::kCollective;
  e.name = kind;
  e.seconds = seconds;
  e.stream = "comm tp";
  e.channel = "tp#0";
  e.bytes = 1 << 20;
  return e;
}

SimRankTimes simulate(std::vector<SimEvent> program, int64_t tp) {
  overlap_tp_comm(program, tp);
  SimRank r;
  r.program = std::move(program);
  return simulate_step({r}).ranks.front();
}

}  // namespace

TEST(TpOverlap, GatherHidesBehindTheGemmAfterIt) {
  // 1 s gather, a 0.5 s norm, a 3 s GEMM, tp 4. Blocking: 1 + 0.5 + 3 = 4.5 s.
  // Overlapped: the norm, the first quarter of the gather (0.25 s), then the
  // GEMM beside the other 0.75 s: 0.5 + 0.25 + max(3, 0.75) = 3.75 s.
  const std::vector<SimEvent> p = {tp_collective("all_gather", 1.0), op("layernorm_forward", 0.5), op("gemm", 3.0)};
  EXPECT_DOUBLE_EQ(simulate(p, 1).step_seconds, 4.5);
  const SimRankTimes t = simulate(p, 4);
  EXPECT_DOUBLE_EQ(t.step_seconds, 3.75);
  EXPECT_DOUBLE_EQ(t.exposed_comm_seconds.at("comm tp"), 0.25);
  EXPECT_DOUBLE_EQ(t.compute_seconds, 3.5);
}

TEST(TpOverlap, ReduceScatterLongerThanItsGemmShowsTheRest) {
  // A 1 s GEMM then a 4 s reduce-scatter, tp 2. Blocking: 5 s. Overlapped:
  // 2 s started beside the GEMM (1 s of it exposed at the wait), then the
  // last 2 s chunk: 4 s = t/tp + max(g, t·(tp − 1)/tp) = 2 + max(1, 2).
  const std::vector<SimEvent> p = {op("gemm", 1.0), tp_collective("reduce_scatter", 4.0)};
  EXPECT_DOUBLE_EQ(simulate(p, 1).step_seconds, 5.0);
  const SimRankTimes t = simulate(p, 2);
  EXPECT_DOUBLE_EQ(t.step_seconds, 4.0);
  EXPECT_DOUBLE_EQ(t.exposed_comm_seconds.at("comm tp"), 3.0);
}

TEST(TpOverlap, TheBackwardsGatherAndReduceScatterShareTheMergedGemms) {
  // Backward of a column-parallel layer: gather (0.8 s), GELU backward
  // (0.2 s), dgrad and wgrad GEMMs merged (2 s), reduce-scatter of the input
  // gradient (0.8 s), tp 4: 0.2 + 0.2 (first gather chunk) + max(2, 0.6 + 0.6)
  // + 0.2 (last reduce-scatter chunk) = 2.6 s, against 3.8 s blocking.
  const std::vector<SimEvent> p = {tp_collective("all_gather", 0.8), op("gelu_backward", 0.2), op("gemm", 2.0),
                                   tp_collective("reduce_scatter", 0.8)};
  EXPECT_DOUBLE_EQ(simulate(p, 1).step_seconds, 3.8);
  EXPECT_DOUBLE_EQ(simulate(p, 4).step_seconds, 2.6);
}

TEST(TpOverlap, AllReducesAndGathersWithoutAGemmStayBlocking) {
  // The loss's all-reduce, and a gather followed by another collective before
  // any GEMM: nothing to hide behind.
  std::vector<SimEvent> p = {tp_collective("all_reduce", 1.0), op("vocab_ce_exp", 0.5),
                             tp_collective("all_gather", 1.0), tp_collective("all_reduce", 1.0), op("gemm", 1.0)};
  const std::vector<SimEvent> before = p;
  overlap_tp_comm(p, 8);
  ASSERT_EQ(p.size(), before.size());
  for (size_t i = 0; i < p.size(); ++i) EXPECT_EQ(p[i].kind, before[i].kind) << i;
  EXPECT_DOUBLE_EQ(simulate(before, 8).step_seconds, 4.5);
}

TEST(TpOverlap, NewHandlesDoNotMeetTheProgramsOwn) {
  SimEvent dp_start;
  dp_start.kind = SimEventKind::kCollectiveStart;
  dp_start.name = "reduce_scatter";
  dp_start.seconds = 1.0;
  dp_start.stream = "comm dp";
  dp_start.channel = "dp#0";
  dp_start.handle = 7;
  SimEvent dp_wait = dp_start;
  dp_wait.kind = SimEventKind::kCollectiveWait;
  std::vector<SimEvent> p = {dp_start, tp_collective("all_gather", 1.0), op("gemm", 2.0), dp_wait};
  overlap_tp_comm(p, 2);
  int64_t tp_handles = 0;
  for (const SimEvent& e : p)
    if (e.stream == "comm tp" && e.kind == SimEventKind::kCollectiveStart) {
      EXPECT_GT(e.handle, 7);
      ++tp_handles;
    }
  EXPECT_EQ(tp_handles, 1);
  SimRank r;
  r.program = p;
  // 0.5 s chunk, then the 2 s GEMM beside the other 0.5 s; the DP collective
  // (started at 0, 1 s) is long done: 2.5 s.
  EXPECT_DOUBLE_EQ(simulate_step({r}).step_seconds, 2.5);
}
