// Pipeline schedule tables (parallel/pp/schedule.h): hand-written tables for
// small cases (Megatron's 1F1B: warm-up pp − stage − 1 forwards, steady 1F1B,
// cool-down), structural properties for pp ∈ {1, 2, 4} × m ∈ 1..8, and the
// in-flight count of every table against the analytic closed form
// (analytic/pipeline.h, written independently).
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <stdexcept>
#include <tuple>
#include <vector>

#include "analytic/pipeline.h"
#include "parallel/pp/schedule.h"

namespace gpuledger {
namespace {

TEST(Schedule, HandWrittenTables) {
  EXPECT_EQ(schedule_to_string(make_schedule(Schedule::kGPipe, 1, 0, 3)), "F0 F1 F2 B0 B1 B2");
  EXPECT_EQ(schedule_to_string(make_schedule(Schedule::k1F1B, 1, 0, 3)), "F0 B0 F1 B1 F2 B2");
  // pp 4, stage 0: 3 warm-up forwards, then pairs, then 3 cool-down backwards.
  EXPECT_EQ(schedule_to_string(make_schedule(Schedule::k1F1B, 4, 0, 6)), "F0 F1 F2 F3 B0 F4 B1 F5 B2 B3 B4 B5");
  EXPECT_EQ(schedule_to_string(make_schedule(Schedule::k1F1B, 4, 2, 6)), "F0 F1 B0 F2 B1 F3 B2 F4 B3 F5 B4 B5");
  EXPECT_EQ(schedule_to_string(make_schedule(Schedule::k1F1B, 4, 3, 3)), "F0 B0 F1 B1 F2 B2");
  // fewer microbatches than the warm-up wants: all forwards, then all backwards
  EXPECT_EQ(schedule_to_string(make_schedule(Schedule::k1F1B, 4, 0, 2)), "F0 F1 B0 B1");
  EXPECT_EQ(schedule_to_string(make_schedule(Schedule::kGPipe, 4, 1, 2)), "F0 F1 B0 B1");
}

TEST(Schedule, EveryMicrobatchForwardThenBackwardOnceAndInFlightMatchesClosedForm) {
  for (Schedule kind : {Schedule::kGPipe, Schedule::k1F1B})
    for (int64_t pp : {1, 2, 4})
      for (int64_t stage = 0; stage < pp; ++stage)
        for (int64_t m = 1; m <= 8; ++m) {
          const auto t = make_schedule(kind, pp, stage, m);
          SCOPED_TRACE(std::string(schedule_name(kind)) + " pp " + std::to_string(pp) + " stage " +
                       std::to_string(stage) + " m " + std::to_string(m) + ": " + schedule_to_string(t));
          ASSERT_EQ(static_cast<int64_t>(t.size()), 2 * m);
          std::vector<int> fwd_at(m, -1), bwd_at(m, -1);
          int64_t next_b = 0;
          for (size_t i = 0; i < t.size(); ++i) {
            const auto mb = t[i].microbatch;
            ASSERT_GE(mb, 0);
            ASSERT_LT(mb, m);
            auto& at = t[i].op == PipeOp::kForward ? fwd_at : bwd_at;
            EXPECT_EQ(at[mb], -1) << "microbatch " << mb << " twice";
            at[mb] = static_cast<int>(i);
            if (t[i].op == PipeOp::kBackward) {
              EXPECT_EQ(mb, next_b++) << "backwards in order";
            }
          }
          for (int64_t mb = 0; mb < m; ++mb) EXPECT_LT(fwd_at[mb], bwd_at[mb]) << "microbatch " << mb;
          EXPECT_EQ(max_in_flight(t), analytic::microbatches_in_flight(kind, pp, stage, m));
        }
}

// Interleaved 1F1B, pp 2, vpp 2, m 4, written out by hand from Megatron's
// rules: forward order (groups of pp microbatches through chunk 0, then
// chunk 1) 0.0 1.0 0.1 1.1 2.0 3.0 2.1 3.1; backward k is forward k with the
// chunk mirrored (vpp − 1 − chunk); warm-up (pp − stage − 1)·2 + (vpp − 1)·pp.
TEST(Schedule, InterleavedHandWrittenTables) {
  // stage 0: warm-up 2 + 2 = 4
  EXPECT_EQ(schedule_to_string(make_schedule(Schedule::k1F1B, 2, 0, 4, 2)),
            "F0.0 F1.0 F0.1 F1.1 F2.0 B0.1 F3.0 B1.1 F2.1 B0.0 F3.1 B1.0 B2.1 B3.1 B2.0 B3.0");
  // stage 1: warm-up 0 + 2 = 2
  EXPECT_EQ(schedule_to_string(make_schedule(Schedule::k1F1B, 2, 1, 4, 2)),
            "F0.0 F1.0 F0.1 B0.1 F1.1 B1.1 F2.0 B0.0 F3.0 B1.0 F2.1 B2.1 F3.1 B3.1 B2.0 B3.0");
  // warm-up capped at m·vpp: pp 2, stage 0, m 2, vpp 3 wants 2 + 4 = 6 forwards, has 6
  EXPECT_EQ(schedule_to_string(make_schedule(Schedule::k1F1B, 2, 0, 2, 3)),
            "F0.0 F1.0 F0.1 F1.1 F0.2 F1.2 B0.2 B1.2 B0.1 B1.1 B0.0 B1.0");
  // pp 4, vpp 2, m 4, last stage: warm-up 4
  EXPECT_EQ(schedule_to_string(make_schedule(Schedule::k1F1B, 4, 3, 4, 2)),
            "F0.0 F1.0 F2.0 F3.0 F0.1 B0.1 F1.1 B1.1 F2.1 B2.1 F3.1 B3.1 B0.0 B1.0 B2.0 B3.0");
}

// The op one (stage, op, microbatch, chunk) waits for on another stage, under
// virtual stage v = chunk·pp + stage: a forward takes its input from virtual
// stage v − 1, a backward its output gradient from v + 1 (Megatron's
// assignment: rank p − 1's chunk c feeds rank 0's chunk c + 1).
struct Dep {
  bool exists = false;
  int64_t stage = 0;
  ScheduleStep step;
};
Dep dependency(const ScheduleStep& s, int64_t stage, int64_t pp, int64_t vpp) {
  const int64_t v = s.chunk * pp + stage;
  const int64_t u = s.op == PipeOp::kForward ? v - 1 : v + 1;
  if (u < 0 || u >= pp * vpp) return {};
  return {true, u % pp, ScheduleStep{s.op, s.microbatch, u / pp}};
}

// Runs every stage's table with messages buffered without limit: a stage
// runs its next op once the op it depends on has run anywhere. Returns
// whether all tables finish (no stage waits forever).
bool tables_finish(const std::vector<std::vector<ScheduleStep>>& tables, int64_t pp, int64_t vpp) {
  using Key = std::tuple<int64_t, int, int64_t, int64_t>;
  std::map<Key, bool> done;
  std::vector<size_t> next(tables.size(), 0);
  for (bool progress = true; progress;) {
    progress = false;
    for (int64_t st = 0; st < pp; ++st) {
      auto& i = next[static_cast<size_t>(st)];
      while (i < tables[static_cast<size_t>(st)].size()) {
        const ScheduleStep& s = tables[static_cast<size_t>(st)][i];
        const Dep d = dependency(s, st, pp, vpp);
        if (d.exists && !done.count({d.stage, static_cast<int>(d.step.op), d.step.microbatch, d.step.chunk})) break;
        done[{st, static_cast<int>(s.op), s.microbatch, s.chunk}] = true;
        ++i;
        progress = true;
      }
    }
  }
  for (size_t st = 0; st < tables.size(); ++st)
    if (next[st] != tables[st].size()) return false;
  return true;
}

TEST(Schedule, InterleavedEveryPairOnceBackwardAfterForwardSatisfiableAndInFlightMatchesClosedForm) {
  for (int64_t pp : {2, 3, 4, 8})
    for (int64_t vpp : {1, 2, 3, 4})
      for (int64_t m = pp; m <= 4 * pp; m += pp) {
        std::vector<std::vector<ScheduleStep>> tables;
        for (int64_t stage = 0; stage < pp; ++stage) {
          const auto t = make_schedule(Schedule::k1F1B, pp, stage, m, vpp);
          SCOPED_TRACE("pp " + std::to_string(pp) + " vpp " + std::to_string(vpp) + " stage " + std::to_string(stage) +
                       " m " + std::to_string(m) + ": " + schedule_to_string(t));
          ASSERT_EQ(static_cast<int64_t>(t.size()), 2 * m * vpp);
          std::map<std::pair<int64_t, int64_t>, size_t> fwd_at, bwd_at;
          for (size_t i = 0; i < t.size(); ++i) {
            ASSERT_GE(t[i].microbatch, 0);
            ASSERT_LT(t[i].microbatch, m);
            ASSERT_GE(t[i].chunk, 0);
            ASSERT_LT(t[i].chunk, vpp);
            auto& at = t[i].op == PipeOp::kForward ? fwd_at : bwd_at;
            EXPECT_TRUE(at.emplace(std::pair{t[i].microbatch, t[i].chunk}, i).second) << "twice: step " << i;
          }
          ASSERT_EQ(static_cast<int64_t>(fwd_at.size()), m * vpp);
          ASSERT_EQ(static_cast<int64_t>(bwd_at.size()), m * vpp);
          for (const auto& [key, i] : fwd_at) EXPECT_LT(i, bwd_at.at(key)) << key.first << "." << key.second;
          EXPECT_EQ(max_in_flight(t), analytic::chunk_microbatches_in_flight(pp, stage, m, vpp));
          tables.push_back(t);
        }
        EXPECT_TRUE(tables_finish(tables, pp, vpp)) << "pp " << pp << " vpp " << vpp << " m " << m;
      }
}

// The most pairs of one chunk live at a point where the stage holds its most
// pairs, read off the table, against the closed form the activation budget
// uses (analytic::chunk_live_at_peak).
TEST(Schedule, InterleavedChunkLiveAtPeakMatchesClosedForm) {
  for (int64_t pp : {2, 3, 4})
    for (int64_t vpp : {1, 2, 3, 4})
      for (int64_t m = pp; m <= 4 * pp; m += pp)
        for (int64_t stage = 0; stage < pp; ++stage) {
          const auto t = make_schedule(Schedule::k1F1B, pp, stage, m, vpp);
          const int64_t peak = max_in_flight(t);
          for (int64_t c = 0; c < vpp; ++c) {
            int64_t live = 0, live_c = 0, most = 0;
            for (const auto& s : t) {
              const int64_t d = s.op == PipeOp::kForward ? 1 : -1;
              live += d;
              if (s.chunk == c) live_c += d;
              if (live == peak) most = std::max(most, live_c);
            }
            EXPECT_EQ(analytic::chunk_live_at_peak(pp, stage, m, vpp, c), most)
                << "pp " << pp << " vpp " << vpp << " m " << m << " stage " << stage << " chunk " << c;
          }
        }
}

// Megatron's estimator: the first stage holds L·(1 + (p − 1)/(p·v)) layers'
// worth, i.e. (p·(v + 1) − 1) chunks of L/(p·v) layers, when m >= p.
TEST(Schedule, InterleavedFirstStageMatchesMegatronsPenalty) {
  for (int64_t pp : {2, 4, 8, 16})
    for (int64_t vpp : {2, 4, 8}) {
      const int64_t chunks = max_in_flight(make_schedule(Schedule::k1F1B, pp, 0, 4 * pp, vpp));
      const double penalty = 1.0 + static_cast<double>(pp - 1) / static_cast<double>(pp * vpp);
      EXPECT_NEAR(static_cast<double>(chunks) / static_cast<double>(vpp), penalty * static_cast<double>(pp), 1e-12)
          << "pp " << pp << " vpp " << vpp;
    }
}

TEST(Schedule, InterleavedBubbleIsVTimesSmaller) {
  EXPECT_DOUBLE_EQ(analytic::bubble_over_ideal(4, 8, 1), 3.0 / 8.0);
  EXPECT_DOUBLE_EQ(analytic::bubble_over_ideal(4, 8, 2), 3.0 / 16.0);
}

TEST(Schedule, RejectsBadArguments) {
  EXPECT_THROW(make_schedule(Schedule::k1F1B, 2, 0, 4, 0), std::invalid_argument);
  EXPECT_THROW(make_schedule(Schedule::kGPipe, 2, 0, 4, 2), std::invalid_argument);
  EXPECT_THROW(make_schedule(Schedule::k1F1B, 1, 0, 4, 2), std::invalid_argument);
  EXPECT_THROW(make_schedule(Schedule::k1F1B, 2, 0, 3, 2), std::invalid_argument);
  EXPECT_THROW(make_schedule(Schedule::k1F1B, 0, 0, 1), std::invalid_argument);
  EXPECT_THROW(make_schedule(Schedule::k1F1B, 2, 2, 1), std::invalid_argument);
  EXPECT_THROW(make_schedule(Schedule::kGPipe, 2, -1, 1), std::invalid_argument);
  EXPECT_THROW(make_schedule(Schedule::kGPipe, 2, 0, 0), std::invalid_argument);
}

}  // namespace
}  // namespace gpuledger
