// Pipeline schedule tables (parallel/pp/schedule.h): hand-written tables for
// small cases (Megatron's 1F1B: warm-up pp − stage − 1 forwards, steady 1F1B,
// cool-down), structural properties for pp ∈ {1, 2, 4} × m ∈ 1..8, and the
// in-flight count of every table against the analytic closed form
// (analytic/pipeline.h, written independently).
#include <gtest/gtest.h>

#include <stdexcept>
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

TEST(Schedule, RejectsBadArguments) {
  EXPECT_THROW(make_schedule(Schedule::k1F1B, 0, 0, 1), std::invalid_argument);
  EXPECT_THROW(make_schedule(Schedule::k1F1B, 2, 2, 1), std::invalid_argument);
  EXPECT_THROW(make_schedule(Schedule::kGPipe, 2, -1, 1), std::invalid_argument);
  EXPECT_THROW(make_schedule(Schedule::kGPipe, 2, 0, 0), std::invalid_argument);
}

}  // namespace
}  // namespace gpuledger
