// The predicted step from the real step code: with a profile in which every op
// costs exactly its launch floor, one rank's step is (ops recorded) × floor;
// the FLOPs recorded are the FLOPs the rank executes; a pipeline of two stages
// is slower than either stage's compute and faster than both in sequence; a
// data-parallel gradient sum on a slow network adds exposed time that a fast
// one hides; a layout larger than one rank asks for a network profile.
#include <gtest/gtest.h>

#include <stdexcept>

#include "analytic/flops.h"
#include "bench/run/predict_step.h"
#include "core/model_config.h"

using namespace gpuledger;

namespace {

constexpr double kFloorSeconds = 1e-3;

// Peaks and bandwidths so large that every op costs its launch floor alone.
perf::DeviceProfile floor_only_device() {
  perf::DeviceProfile p;
  p.name = "floor-only";
  p.provenance = {perf::kPublished, "", ""};
  for (DType t : {DType::kBF16, DType::kFP32}) p.dtypes[t] = {{1e30, "test"}, {1.0, "test"}, std::nullopt, {}};
  p.memory_bandwidth_bytes_per_s = {1e30, "test"};
  p.launch_floor_seconds = {kFloorSeconds, "test"};
  p.host_copy_bytes_per_s = {1e30, "test"};
  return p;
}

perf::NetworkProfile net(double busbw_bytes_per_s) {
  perf::NetworkProfile n;
  n.name = "test";
  n.provenance = {perf::kPublished, "", ""};
  n.ranks_per_node = {8, "test"};
  n.intra_node = perf::LinkFigures{"test", {0.0, "test"}, {busbw_bytes_per_s, "test"}};
  return n;
}

ResolvedConfig tiny(Layout l, int64_t microbatches) {
  ResolvedConfig c;
  c.model = load_model("tiny-llama");
  c.layout = l;
  c.run.seq = 32;
  c.run.mbs = 2;
  c.run.microbatches = microbatches;
  return c;
}

}  // namespace

TEST(PredictStep, OneRankIsItsOpsInSequence) {
  const ResolvedConfig c = tiny(Layout{}, 2);
  const run::StepPrediction p = run::predict_step(c, {floor_only_device(), net(1e9)});
  ASSERT_EQ(p.ranks.size(), 1u);
  const run::PredictedRank& r = p.ranks[0];
  EXPECT_GT(r.ops, 100);
  EXPECT_EQ(r.collectives, 0);
  EXPECT_NEAR(p.step_seconds, static_cast<double>(r.ops) * kFloorSeconds, 1e-9);
  EXPECT_NEAR(r.compute_seconds, p.step_seconds, 1e-12);
  // Every GEMM FLOP the rank executes is in its program.
  const auto job = analytic::job_step_flops(c.model, c.layout, c.run);
  EXPECT_EQ(r.flops, job.hardware);
  EXPECT_EQ(p.tokens_per_step, 2 * 2 * 32);
  EXPECT_DOUBLE_EQ(p.tokens_per_s, 128.0 / p.step_seconds);
  EXPECT_DOUBLE_EQ(p.mfu, static_cast<double>(job.model) / (p.step_seconds * 1e30));
}

TEST(PredictStep, TwoStagesOverlapButWaitForEachOther) {
  Layout l;
  l.pp = 2;
  const ResolvedConfig c = tiny(l, 4);
  const run::StepPrediction p = run::predict_step(c, {floor_only_device(), net(1e30)});
  ASSERT_EQ(p.ranks.size(), 2u);
  const double c0 = p.ranks[0].compute_seconds, c1 = p.ranks[1].compute_seconds;
  EXPECT_GT(p.step_seconds, std::max(c0, c1));
  EXPECT_LT(p.step_seconds, c0 + c1);
  // Each stage idles while the other fills and drains the pipeline.
  EXPECT_GT(p.ranks[0].wait_seconds, 0);
  EXPECT_GT(p.ranks[1].wait_seconds, 0);
  EXPECT_DOUBLE_EQ(p.bubble_formula_fraction, 1.0 / 5.0);
  // Both stages' GEMM FLOPs together are the pipeline's.
  const auto job = analytic::job_step_flops(c.model, l, c.run);
  EXPECT_EQ(p.ranks[0].flops + p.ranks[1].flops, job.hardware);
}

TEST(PredictStep, ASlowNetworkExposesTheGradientSum) {
  Layout l;
  l.dp = 2;
  const ResolvedConfig c = tiny(l, 1);
  const run::StepPrediction fast = run::predict_step(c, {floor_only_device(), net(1e30)});
  const run::StepPrediction slow = run::predict_step(c, {floor_only_device(), net(1e3)});
  ASSERT_EQ(fast.ranks.size(), 1u);
  EXPECT_GT(fast.ranks[0].collectives, 0);
  EXPECT_DOUBLE_EQ(fast.ranks[0].compute_seconds, slow.ranks[0].compute_seconds);
  EXPECT_NEAR(fast.step_seconds, fast.ranks[0].compute_seconds, 1e-9);
  // At 1 kB/s the all-reduced gradients (hundreds of kB) take minutes, far past the compute.
  EXPECT_GT(slow.step_seconds, 100.0);
  EXPECT_GT(slow.ranks[0].exposed_comm_seconds.at("comm dp"), 100.0);
}

TEST(PredictStep, ProfilesResolveFromTheDevicePresetOrAskForANetwork) {
  const auto h100 = find_device("h100-sxm");
  ASSERT_TRUE(h100);
  const auto p = run::resolve_perf_profiles("", "", h100, 16);
  ASSERT_TRUE(p);
  EXPECT_EQ(p->device.name, "h100-sxm");
  EXPECT_EQ(p->network.name, "h100-sxm");
  EXPECT_FALSE(run::resolve_perf_profiles("", "", std::nullopt, 16));
  EXPECT_THROW(run::resolve_perf_profiles("no-such-profile", "", std::nullopt, 1), std::invalid_argument);
  EXPECT_THROW(run::resolve_perf_profiles("", "h100-sxm", std::nullopt, 2), std::invalid_argument);
}
