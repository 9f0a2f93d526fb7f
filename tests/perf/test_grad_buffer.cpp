// DP gradient buckets reduced in place (Megatron's contiguous gradient buffer):
// on a hand-made two-stage pipeline, the last stage's backward no longer waits
// for its first bucket's slot, so it sends its gradient earlier and the first
// stage's wait for it (and the step) shrink by what the slot wait cost —
// worked by hand below.
#include <gtest/gtest.h>

#include "perf/sim/grad_buffer.h"
#include "perf/sim/timeline.h"

using namespace gpuledger::perf;

namespace {

SimEvent op(double seconds) {
  SimEvent e;
  e.kind = SimEventKind::kCompute;
  e.name = "gemm";
  e.seconds = seconds;
  return e;
}

SimEvent dp(SimEventKind kind, int64_t handle, const char* channel, double seconds = 0) {
  SimEvent e;
  e.kind = kind;
  e.name = "reduce_scatter";
  e.stream = "comm dp";
  e.channel = channel;
  e.handle = handle;
  e.seconds = seconds;
  return e;
}

SimEvent pipe(SimEventKind kind) {
  SimEvent e;
  e.kind = kind;
  e.name = kind == SimEventKind::kSend ? "send" : "recv";
  e.stream = "comm pp";
  e.channel = "pp 1>0";
  return e;
}

// Stage 1 (last): 0.5 s of backward, bucket 1 started (1 s), 0.5 s, the
// wait for bucket 1's slot, bucket 2 started (1 s), 0.5 s, the gradient sent
// to stage 0, the finish (bucket 2). Stage 0: the recv, 1 s of backward, its
// bucket (1 s), the finish.
std::vector<SimRank> pipeline(bool in_place) {
  SimRank last{1,
               "pp1",
               {op(0.5), dp(SimEventKind::kCollectiveStart, 1, "dp#1", 1.0), op(0.5),
                dp(SimEventKind::kCollectiveWait, 1, "dp#1"), dp(SimEventKind::kCollectiveStart, 2, "dp#1", 1.0),
                op(0.5), pipe(SimEventKind::kSend), dp(SimEventKind::kCollectiveWait, 2, "dp#1")}};
  SimRank first{0,
                "pp0",
                {pipe(SimEventKind::kRecv), op(1.0), dp(SimEventKind::kCollectiveStart, 3, "dp#0", 1.0),
                 dp(SimEventKind::kCollectiveWait, 3, "dp#0")}};
  if (in_place) {
    defer_grad_reduce_waits(last.program);
    defer_grad_reduce_waits(first.program);
  }
  return {first, last};
}

}  // namespace

TEST(GradBuffer, NoBucketWaitsForAnothersSlot) {
  // Staged: stage 1 waits for bucket 1 until 1.5 s, bucket 2 runs 1.5–2.5 s,
  // the gradient leaves at 2.0 s; stage 0 waits 2.0 s, computes to 3.0 s and
  // reduces to 4.0 s.
  const SimResult staged = simulate_step(pipeline(false));
  EXPECT_DOUBLE_EQ(staged.step_seconds, 4.0);
  EXPECT_DOUBLE_EQ(staged.ranks[0].wait_seconds, 2.0);
  EXPECT_DOUBLE_EQ(staged.ranks[1].exposed_comm_seconds.at("comm dp"), 1.0);  // 0.5 at the slot, 0.5 at the end
  // In place: stage 1 computes on (bucket 2 still follows bucket 1 on the DP
  // stream, 1.5–2.5 s) and sends at 1.5 s; stage 0 computes 1.5–2.5 s and
  // reduces to 3.5 s.
  const SimResult in_place = simulate_step(pipeline(true));
  EXPECT_DOUBLE_EQ(in_place.step_seconds, 3.5);
  EXPECT_DOUBLE_EQ(in_place.ranks[0].wait_seconds, 1.5);
  EXPECT_DOUBLE_EQ(in_place.ranks[1].step_seconds, 2.5);
  EXPECT_DOUBLE_EQ(in_place.ranks[1].exposed_comm_seconds.at("comm dp"), 1.0);  // all of it at the finish
}

TEST(GradBuffer, OtherWaitsStayAndOneReductionIsLeftAlone) {
  // A ZeRO-3 gather's wait is not a gradient reduction; a lone reduction has nothing to defer.
  SimEvent gather = dp(SimEventKind::kCollectiveStart, 4, "dp#0", 1.0);
  gather.name = "all_gather";
  SimEvent gather_wait = dp(SimEventKind::kCollectiveWait, 4, "dp#0");
  gather_wait.name = "all_gather";
  std::vector<SimEvent> p = {gather,      op(0.5),
                             gather_wait, dp(SimEventKind::kCollectiveStart, 5, "dp#0", 1.0),
                             op(0.5),     dp(SimEventKind::kCollectiveWait, 5, "dp#0")};
  const std::vector<SimEvent> before = p;
  defer_grad_reduce_waits(p);
  ASSERT_EQ(p.size(), before.size());
  for (size_t i = 0; i < p.size(); ++i) {
    EXPECT_EQ(p[i].kind, before[i].kind) << i;
    EXPECT_EQ(p[i].handle, before[i].handle) << i;
  }
}
