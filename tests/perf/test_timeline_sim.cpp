// The step simulator's logic on hand-made programs with known op times
// (perf/sim/timeline.h): the textbook pipeline bubble out of the schedule
// tables, a DP all-reduce hidden behind a longer backward and exposed past a
// shorter one, a collective that waits for its slowest member, and deadlocks
// reported rather than hung.
#include "perf/sim/timeline.h"

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "parallel/pp/schedule.h"

namespace gpuledger::perf {
namespace {

SimEvent compute(const std::string& name, double s) { return {SimEventKind::kCompute, name, s, "", "", -1, 0, 0}; }
SimEvent send(const std::string& channel, double s) {
  return {SimEventKind::kSend, "send", s, "comm pp", channel, -1, 0, 0};
}
SimEvent recv(const std::string& channel) { return {SimEventKind::kRecv, "recv", 0, "comm pp", channel, -1, 0, 0}; }
SimEvent collective(SimEventKind kind, const std::string& channel, double s, int64_t handle = -1) {
  return {kind, "all_reduce", s, "comm dp", channel, handle, 0, 0};
}

// Stage `stage` of a pipeline of `pp` stages following the schedule table:
// forward f, backward b seconds per microbatch, each activation and gradient
// message `p2p` seconds.
SimRank pipeline_stage(Schedule kind, int64_t pp, int64_t stage, int64_t m, double f, double b, double p2p) {
  SimRank r{stage, "pp" + std::to_string(stage), {}};
  auto pipe = [](int64_t from, int64_t to, const char* dir) {
    return "pp " + std::to_string(from) + ">" + std::to_string(to) + ":" + dir;
  };
  for (const ScheduleStep& st : make_schedule(kind, pp, stage, m)) {
    if (st.op == PipeOp::kForward) {
      if (stage > 0) r.program.push_back(recv(pipe(stage - 1, stage, "fwd")));
      r.program.push_back(compute("forward", f));
      if (stage < pp - 1) r.program.push_back(send(pipe(stage, stage + 1, "fwd"), p2p));
    } else {
      if (stage < pp - 1) r.program.push_back(recv(pipe(stage + 1, stage, "bwd")));
      r.program.push_back(compute("backward", b));
      if (stage > 0) r.program.push_back(send(pipe(stage, stage - 1, "bwd"), p2p));
    }
  }
  return r;
}

std::vector<SimRank> pipeline(Schedule kind, int64_t pp, int64_t m, double f, double b, double p2p) {
  std::vector<SimRank> ranks;
  for (int64_t s = 0; s < pp; ++s) ranks.push_back(pipeline_stage(kind, pp, s, m, f, b, p2p));
  return ranks;
}

// With free messages a pipeline of p stages and m microbatches takes
// (m + p − 1)·(f + b), and each stage idles (p − 1)·(f + b) of it: the bubble
// fraction (p − 1)/(m + p − 1) of Narayanan et al. 2021 §2.2, for GPipe and 1F1B alike.
TEST(TimelineSim, TwoStagePipelineGivesTheTextbookBubble) {
  for (Schedule kind : {Schedule::kGPipe, Schedule::k1F1B})
    for (int64_t m : {1, 2, 4, 8}) {
      const double f = 1.0, b = 2.0;
      const SimResult r = simulate_step(pipeline(kind, 2, m, f, b, 0.0));
      EXPECT_DOUBLE_EQ(r.step_seconds, static_cast<double>(m + 1) * (f + b)) << m;
      for (const auto& rank : r.ranks) {
        EXPECT_DOUBLE_EQ(rank.compute_seconds, static_cast<double>(m) * (f + b));
        const double bubble = (r.step_seconds - rank.compute_seconds) / r.step_seconds;
        EXPECT_DOUBLE_EQ(bubble, 1.0 / static_cast<double>(m + 1)) << m;
      }
    }
}

TEST(TimelineSim, FourStagesWithFreeMessages) {
  // p = 4, m = 8, f = 1, b = 2: (m + p − 1)(f + b) = 33 s.
  EXPECT_DOUBLE_EQ(simulate_step(pipeline(Schedule::k1F1B, 4, 8, 1.0, 2.0, 0.0)).step_seconds, 33.0);
}

// 1F1B, p = 2, m = 4, f = 1, b = 2, each message 0.5 s, worked by hand. Stage 0
// runs F0 F1 B0 F2 B1 F3 B2 B3, stage 1 F0 B0 F1 B1 F2 B2 F3 B3:
//   stage 0: F0 0–1, F1 1–2, (wait for B0's gradient, at 5) B0 5–7, F2 7–8,
//            B1 8–10, F3 10–11, (wait 1) B2 12–14, (wait 1) B3 15–17;
//   stage 1: (wait 1.5) F0 1.5–2.5, B0 2.5–4.5, F1 4.5–5.5, B1 5.5–7.5,
//            (wait 1: F2's activation at 8.5) F2 8.5–9.5, B2 9.5–11.5,
//            F3 11.5–12.5, B3 12.5–14.5, its gradient sent by 15.
// 17 s: one more than (m + p − 1)(f + b) + 2(p − 1)·0.5 = 16 — in the steady
// state a forward of stage 1 waits on a round trip through stage 0.
TEST(TimelineSim, TwoStagesWithMessagesWorkedByHand) {
  const SimResult r = simulate_step(pipeline(Schedule::k1F1B, 2, 4, 1.0, 2.0, 0.5));
  EXPECT_DOUBLE_EQ(r.step_seconds, 17.0);
  EXPECT_DOUBLE_EQ(r.ranks[0].step_seconds, 17.0);
  EXPECT_DOUBLE_EQ(r.ranks[1].step_seconds, 15.0);
  EXPECT_DOUBLE_EQ(r.ranks[0].wait_seconds, 3.0 + 1.0 + 1.0);
  EXPECT_DOUBLE_EQ(r.ranks[1].wait_seconds, 1.5 + 1.0);
  EXPECT_DOUBLE_EQ(r.ranks[0].compute_seconds, 12.0);
}

// One rank: a bucket's all-reduce started after the first half of the
// backward, waited for after the second half.
std::vector<SimRank> overlapped(double second_half, double all_reduce) {
  return {{0,
           "r0",
           {compute("backward", 4.0),
            collective(SimEventKind::kCollectiveStart, "dp 0", all_reduce, 7),
            compute("backward", second_half),
            {SimEventKind::kCollectiveWait, "wait", 0, "", "", 7, 0, 0},
            compute("optimizer", 1.0)}}};
}

TEST(TimelineSim, AnAllReduceHiddenBehindALongerBackwardAddsNothing) {
  SimResult r = simulate_step(overlapped(/*second_half=*/3.0, /*all_reduce=*/2.0));
  EXPECT_DOUBLE_EQ(r.step_seconds, 4.0 + 3.0 + 1.0);
  EXPECT_DOUBLE_EQ(r.ranks[0].exposed_comm_seconds["comm dp"], 0.0);
}

TEST(TimelineSim, AnAllReduceLongerThanTheBackwardAddsTheDifference) {
  SimResult r = simulate_step(overlapped(/*second_half=*/3.0, /*all_reduce=*/5.0));
  EXPECT_DOUBLE_EQ(r.step_seconds, 4.0 + 5.0 + 1.0);
  EXPECT_DOUBLE_EQ(r.ranks[0].exposed_comm_seconds["comm dp"], 2.0);
}

TEST(TimelineSim, ACollectiveWaitsForItsSlowestMember) {
  SimResult r =
      simulate_step({{0, "fast", {compute("forward", 1.0), collective(SimEventKind::kCollective, "tp 0", 1.0)}},
                     {1, "slow", {compute("forward", 3.0), collective(SimEventKind::kCollective, "tp 0", 1.0)}}});
  EXPECT_DOUBLE_EQ(r.ranks[0].step_seconds, 4.0);
  EXPECT_DOUBLE_EQ(r.ranks[1].step_seconds, 4.0);
  EXPECT_DOUBLE_EQ(r.ranks[0].wait_seconds, 2.0);  // the fast rank waited for the slow one
  EXPECT_DOUBLE_EQ(r.ranks[1].wait_seconds, 0.0);
  EXPECT_DOUBLE_EQ(r.ranks[0].exposed_comm_seconds["comm dp"], 1.0);
  // Both ranks' trace slices of the collective start together.
  EXPECT_DOUBLE_EQ(r.ranks[0].slices.back().start_us, 3e6);
  EXPECT_DOUBLE_EQ(r.ranks[1].slices.back().start_us, 3e6);
}

TEST(TimelineSim, DeadlocksAndMalformedProgramsAreErrors) {
  // Each rank receives before it sends: neither can go on.
  EXPECT_THROW(simulate_step({{0, "a", {recv("x"), send("y", 1.0)}}, {1, "b", {recv("y"), send("x", 1.0)}}}),
               std::runtime_error);
  EXPECT_THROW(simulate_step({{0, "a", {recv("nobody sends here")}}}), std::invalid_argument);
  EXPECT_THROW(simulate_step({{0, "a", {{SimEventKind::kCollectiveWait, "wait", 0, "", "", 3, 0, 0}}}}),
               std::invalid_argument);
  EXPECT_THROW(simulate_step({{0, "a", {compute("forward", -1.0)}}}), std::invalid_argument);
}

}  // namespace
}  // namespace gpuledger::perf
