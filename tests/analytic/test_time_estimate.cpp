// Time estimates (analytic/time_estimate.h): 6·P·T / (n·peak·MFU) and
// the step-time lower bound.
#include <gtest/gtest.h>

#include "analytic/time_estimate.h"

namespace gpuledger::analytic {
namespace {

TEST(TimeEstimate, SevenBillionOnEightA100s) {
  // 6 × 7e9 × 100e9 = 4.2e21 FLOPs over 8 × 312e12 × 0.5 = 1.248e15 FLOP/s:
  // 3.3654e6 s = 38.95 days.
  const double s = training_seconds(7e9, 100e9, 8, 312e12, 0.5);
  EXPECT_NEAR(s, 3.3654e6, 100.0);
  EXPECT_NEAR(s / 86400.0, 38.95, 0.01);
  // Twice the GPUs, half the time.
  EXPECT_DOUBLE_EQ(training_seconds(7e9, 100e9, 16, 312e12, 0.5), s / 2);
  EXPECT_THROW(training_seconds(7e9, 1e9, 0, 312e12, 0.5), std::invalid_argument);
  EXPECT_THROW(training_seconds(7e9, 1e9, 8, 312e12, 0.0), std::invalid_argument);
}

TEST(TimeEstimate, StepLowerBound) {
  EXPECT_DOUBLE_EQ(*step_time_lower_bound_s(989'400'000'000'000, 989.4e12), 1.0);
  EXPECT_FALSE(step_time_lower_bound_s(1'000'000, std::nullopt));
}

}  // namespace
}  // namespace gpuledger::analytic
