// Serving capacity (analytic/serving_plan.h): the nearest-rank percentile,
// headroom, Little's law with the roofline step time, and the fit decision on
// two devices, each figure worked by hand in the comments.
#include <gtest/gtest.h>

#include <stdexcept>

#include "analytic/serving_plan.h"

namespace gpuledger::analytic {
namespace {

TEST(ServingPlan, PercentileNearestRank) {
  std::vector<int64_t> v;
  for (int64_t i = 1; i <= 20; ++i) v.push_back(i);
  EXPECT_EQ(percentile_nearest_rank(v, 95), 19);  // ceil(0.95 · 20) = 19th value
  EXPECT_EQ(percentile_nearest_rank(v, 50), 10);
  EXPECT_EQ(percentile_nearest_rank(v, 100), 20);
  EXPECT_EQ(percentile_nearest_rank(v, 1), 1);  // ceil(0.2) = 1st
  // Unsorted input: sorted 100 200 300 500 700; p95 → ceil(4.75) = 5th, p60 → 3rd.
  const std::vector<int64_t> w = {700, 100, 300, 200, 500};
  EXPECT_EQ(percentile_nearest_rank(w, 95), 700);
  EXPECT_EQ(percentile_nearest_rank(w, 60), 300);
  EXPECT_DOUBLE_EQ(mean_of(w), 360.0);
  EXPECT_THROW(percentile_nearest_rank({}, 95), std::invalid_argument);
  EXPECT_THROW(percentile_nearest_rank(w, 0), std::invalid_argument);
  EXPECT_THROW(percentile_nearest_rank(w, 100.5), std::invalid_argument);
}

TEST(ServingPlan, Headroom) {
  EXPECT_EQ(with_headroom(700, 1.2), 840);
  EXPECT_EQ(with_headroom(701, 1.2), 842);  // 841.2 → 842
  EXPECT_EQ(with_headroom(10, 1.0), 10);
  EXPECT_THROW(with_headroom(10, 0.9), std::invalid_argument);
}

// P = 1e9 parameters, 2e9 weight bytes, 1e5 KV bytes per token over 8 KV heads;
// 32 attention heads.
ServingModel hand_model() { return {1'000'000'000, 2'000'000'000, 100'000, 8, 32}; }

// λ = 10/s, 100 in / 200 out, KV sized at 300 tokens, headroom 1.2.
ServingDemand hand_demand(double qps) {
  ServingDemand d;
  d.qps = qps;
  d.prompt_tokens = 100;
  d.output_tokens = 200;
  d.kv_sizing_tokens = 300;
  d.headroom = 1.2;
  return d;
}

// bandwidth 1e12 B/s at MBU 0.5 (5e11 effective), peak 1e14 at MFU 0.5 (5e13),
// utilization 0.9, CUDA context 5e8, workspace 1e8.
ServingDevice hand_device(int64_t memory_bytes) {
  ServingDevice dev;
  dev.name = "hand";
  dev.memory_bytes = memory_bytes;
  dev.bandwidth_bytes_per_s = 1e12;
  dev.peak_flops = 1e14;
  dev.mbu = 0.5;
  dev.mfu = 0.5;
  dev.memory_utilization = 0.9;
  dev.cuda_context_bytes = 500'000'000;
  dev.workspace_bytes = 100'000'000;
  return dev;
}

TEST(ServingPlan, LittlesLawOnOneDevice) {
  // a = 2e9 / 5e11 = 4 ms; b = 1e5 · (100 + 200/2) / 5e11 = 40 µs; c = 2e9 / 5e13 = 40 µs;
  // prefill = 2e9 · 100 / 5e13 = 4 ms. λ·n·b = 10 · 200 · 4e-5 = 0.08.
  // L = 10 · (0.004 + 200 · 0.004) / 0.92 = 8.7391304; TPOT = 0.004 + 4e-5 · L;
  // W = 0.004 + 200 · TPOT = L / λ. Sized: ceil(1.2 · 8.7391304 = 10.487) = 11 sequences,
  // KV 11 · 300 · 1e5 = 3.3e8; need 2e9 + 3.3e8 + 1e8 = 2.43e9;
  // usable min(0.9 · 4e9, 4e9 − 5e8) = 3.5e9: fits.
  const auto p = serving_point(hand_demand(10), hand_model(), hand_device(4'000'000'000), 1, 1);
  EXPECT_DOUBLE_EQ(p.decode_fixed_s, 0.004);
  EXPECT_NEAR(p.decode_per_seq_s, 4e-5, 1e-15);
  EXPECT_NEAR(p.decode_flop_per_seq_s, 4e-5, 1e-15);
  EXPECT_NEAR(p.prefill_s, 0.004, 1e-15);
  EXPECT_TRUE(p.stable);
  EXPECT_NEAR(p.concurrency, 8.0400 / 0.92, 1e-9);
  EXPECT_NEAR(p.tpot_s, 0.004 + 4e-5 * 8.0400 / 0.92, 1e-12);
  EXPECT_NEAR(p.time_in_system_s, p.concurrency / 10, 1e-12);  // Little's law, W = L / λ
  EXPECT_EQ(p.sized_sequences, 11);
  EXPECT_EQ(p.kv_bytes, 330'000'000);
  EXPECT_EQ(p.need_bytes, 2'430'000'000);
  EXPECT_EQ(p.usable_bytes, 3'500'000'000);
  EXPECT_TRUE(p.fits);
}

TEST(ServingPlan, SmallDeviceNeedsTensorParallelism) {
  // 2.4e9 bytes: usable min(2.16e9, 1.9e9) = 1.9e9 < 2.43e9 at t = 1, and weights +
  // workspace alone (2.1e9) exceed it, so no replica count helps. At t = 2 a rank
  // holds 1e9 of weights and 4 of 8 KV heads (5e4 B/token): a = 2 ms, b = 20 µs,
  // prefill 2 ms; L = 10 · (0.002 + 0.4) / (1 − 0.04) = 4.1875; ceil(5.025) = 6
  // sequences, KV 6 · 300 · 5e4 = 9e7; need 1e9 + 9e7 + 1e8 = 1.19e9: fits, 2 devices.
  const auto plan = plan_serving(hand_demand(10), hand_model(), hand_device(2'400'000'000));
  EXPECT_FALSE(plan.single.fits);
  EXPECT_EQ(plan.single.need_bytes, 2'430'000'000);
  EXPECT_EQ(plan.single.usable_bytes, 1'900'000'000);
  ASSERT_TRUE(plan.chosen);
  EXPECT_EQ(plan.chosen->tp, 2);
  EXPECT_EQ(plan.chosen->replicas, 1);
  EXPECT_NEAR(plan.chosen->concurrency, 4.1875, 1e-12);
  EXPECT_EQ(plan.chosen->sized_sequences, 6);
  EXPECT_EQ(plan.chosen->kv_bytes, 90'000'000);
  EXPECT_EQ(plan.chosen->need_bytes, 1'190'000'000);
}

TEST(ServingPlan, RateBeyondTheBandwidthNeedsReplicas) {
  // λ = 200 on the 4e9 device at t = 1: λ·n·b = 200 · 200 · 4e-5 = 1.6 >= 1, unstable.
  // t = 1 with r replicas (λ_r = 200/r) fits when 2.1e9 + ceil(1.2 L) · 3e7 <= 3.5e9,
  // i.e. ceil(1.2 L) <= 46: r = 5: L = 40 · 0.804 / 0.68 = 47.29 → 57, no; r = 6:
  // L = (200/6) · 0.804 / (1 − 0.8/3) = 36.5454… → ceil(43.85) = 44, yes: 6 devices.
  // t = 2 (a = 2 ms, b = 20 µs, prefill 2 ms, 1.5e7 B per 300-token sequence):
  // r = 1: L = 200 · 0.402 / 0.2 = 402 → 483 sequences, 1.1e9 + 7.245e9 > 3.5e9, no;
  // r = 2: L = 100 · 0.402 / 0.6 = 67 → ceil(80.4) = 81, need 1e9 + 81 · 1.5e7 + 1e8
  // = 2.315e9 <= 3.5e9: 4 devices. t = 4, r = 1 is also 4 devices; the tie goes to t = 2.
  const auto plan = plan_serving(hand_demand(200), hand_model(), hand_device(4'000'000'000));
  EXPECT_FALSE(plan.single.stable);
  EXPECT_FALSE(plan.single.fits);
  ASSERT_TRUE(plan.chosen);
  EXPECT_EQ(plan.chosen->tp, 2);
  EXPECT_EQ(plan.chosen->replicas, 2);
  EXPECT_NEAR(plan.chosen->concurrency, 67.0, 1e-9);
  EXPECT_EQ(plan.chosen->sized_sequences, 81);
  EXPECT_EQ(plan.chosen->need_bytes, 2'315'000'000);
  const auto r5 = serving_point(hand_demand(200), hand_model(), hand_device(4'000'000'000), 1, 5);
  EXPECT_EQ(r5.sized_sequences, 57);
  EXPECT_FALSE(r5.fits);
  const auto r6 = serving_point(hand_demand(200), hand_model(), hand_device(4'000'000'000), 1, 6);
  EXPECT_NEAR(r6.concurrency, (200.0 / 6) * 0.804 / (1 - 0.8 / 3), 1e-9);
  EXPECT_EQ(r6.sized_sequences, 44);
  EXPECT_TRUE(r6.fits);
  const auto t2r1 = serving_point(hand_demand(200), hand_model(), hand_device(4'000'000'000), 2, 1);
  EXPECT_EQ(t2r1.sized_sequences, 483);
  EXPECT_FALSE(t2r1.fits);
}

TEST(ServingPlan, Targets) {
  auto d = hand_demand(10);
  d.tpot_s = 0.004;  // TPOT is 4.35 ms at t = 1: missed
  d.ttft_s = 0.005;  // prefill 4 ms: met
  const auto p = serving_point(d, hand_model(), hand_device(4'000'000'000), 1, 1);
  EXPECT_FALSE(p.meets_tpot);
  EXPECT_TRUE(p.meets_ttft);
  EXPECT_FALSE(p.fits);
  // t = 2: TPOT = 0.002 + 2e-5 · 4.1875 = 2.08 ms: met with 2 devices.
  const auto plan = plan_serving(d, hand_model(), hand_device(4'000'000'000));
  ASSERT_TRUE(plan.chosen);
  EXPECT_EQ(plan.chosen->tp * plan.chosen->replicas, 2);
}

TEST(ServingPlan, BadInputs) {
  EXPECT_THROW(serving_point(hand_demand(0), hand_model(), hand_device(4'000'000'000), 1, 1), std::invalid_argument);
  auto dev = hand_device(4'000'000'000);
  dev.mbu = 1.5;
  EXPECT_THROW(serving_point(hand_demand(10), hand_model(), dev, 1, 1), std::invalid_argument);
  EXPECT_THROW(serving_point(hand_demand(10), hand_model(), hand_device(4'000'000'000), 0, 1), std::invalid_argument);
}

}  // namespace
}  // namespace gpuledger::analytic
