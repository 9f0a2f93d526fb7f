// calibrate's op classes (bench/run/calibrate_op_classes.h): the one bandwidth
// per class, through the model's own formula t = bytes / β + floor, recovers β
// exactly from times made by that formula, and is the median over sizes of
// each size's summed rate (worked by hand); the
// timings on the CPU backend cover every class, and each op's bytes are its
// least traffic, worked by hand from the op's contract.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <set>
#include <sstream>
#include <string>

#include "bench/run/calibrate_op_classes.h"
#include "kernels/registry/registry.h"

using namespace gpuledger;
using bench::OpTiming;
using perf::OpClass;

TEST(CalibrateOpClasses, FitRecoversTheBandwidthOfTimesMadeByTheModel) {
  const double beta = 7.5e9, floor_s = 2e-6;
  std::vector<OpTiming> t;
  int size = 0;
  for (int64_t bytes : {int64_t{1} << 12, int64_t{1} << 16, int64_t{1} << 20}) {
    // Two ops per size, as the model prices them.
    t.push_back({OpClass::kNorm, "x", DType::kFP32, bytes, static_cast<double>(bytes) / beta + floor_s, size});
    t.push_back({OpClass::kNorm, "y", DType::kFP32, 3 * bytes, static_cast<double>(3 * bytes) / beta + floor_s, size});
    ++size;
  }
  t.push_back({OpClass::kCopy, "z", DType::kFP32, 1000, 1.0, 0});  // another class: left out
  EXPECT_NEAR(bench::fit_class_bandwidth(t, OpClass::kNorm, floor_s), beta, beta * 1e-12);
  EXPECT_EQ(bench::fit_class_bandwidth(t, OpClass::kSoftmax, floor_s), 0.0);  // no timing
}

TEST(CalibrateOpClasses, FitIsTheMedianOverSizesOfEachSizesSummedRate) {
  // Size 0: 1 GB in 1 s and 6 GB in 2 s sum to 7 GB in 3 s: 2.333e9 — not the
  // mean of the two rates (2e9). Size 1: 4 GB in 1 s. Size 2: 1 GB in 1 s
  // (floor 0). Median of {2.333e9, 4e9, 1e9} = 2.333e9.
  std::vector<OpTiming> t = {{OpClass::kNorm, "a", DType::kFP32, 1'000'000'000, 1.0, 0},
                             {OpClass::kNorm, "b", DType::kFP32, 6'000'000'000, 2.0, 0},
                             {OpClass::kNorm, "a", DType::kFP32, 4'000'000'000, 1.0, 1},
                             {OpClass::kNorm, "a", DType::kFP32, 1'000'000'000, 1.0, 2}};
  EXPECT_NEAR(bench::fit_class_bandwidth(t, OpClass::kNorm, 0.0), 7e9 / 3, 1.0);
  // A floor of 0.5 s per op: size 0 is 7 GB in 2 s, size 1 4 GB in 0.5 s, size 2
  // 1 GB in 0.5 s: median of {3.5e9, 8e9, 2e9} = 3.5e9.
  EXPECT_NEAR(bench::fit_class_bandwidth(t, OpClass::kNorm, 0.5), 3.5e9, 1.0);
  // Every time at the floor: nothing left for the bytes, no figure.
  EXPECT_EQ(bench::fit_class_bandwidth(t, OpClass::kNorm, 2.0), 0.0);
}

TEST(CalibrateOpClasses, TimesEveryClassOnTheCpuBackendWithOpBytesCounts) {
  Ledger ledger;
  auto dev = make_device("cpu", ledger);
  bench::OpClassCalibration c;
  c.dtype = DType::kBF16;
  c.shapes = {{64, 256}};
  c.softmax_seqs = {64};
  c.softmax_heads = 4;
  c.warmup = 0;
  c.reps = 1;
  std::ostringstream progress;
  const auto t = bench::time_op_classes(*dev, c, progress);
  // Bytes worked by hand from each op's contract (kernels/device.h), n = 64·256 = 16384, bf16 2 bytes:
  const std::map<std::string, int64_t> expected = {
      // x read, out written (n·2 each), w and bias read (256·2 each), mean and rstd written (64·4 each)
      {"layernorm_forward", 2 * 16384 * 2 + 2 * 256 * 2 + 2 * 64 * 4},
      // m, v read and written (fp32), master read and written, bf16 weights written, bf16 grads read
      {"adamw", 16384 * (2 * 2 * 4 + 2 * 4 + 2 + 2)},
      {"convert_to_fp32", 16384 * (2 + 4)},
      // 4 heads of 64×64 scores: fp32 read, bf16 probs written
      {"softmax_forward", 4 * 64 * 64 * (4 + 2)},
      // fp32 logits read, dlogits written, int32 targets read
      {"cross_entropy_backward", 2 * 16384 * 4 + 64 * 4},
      // x read, out written (n·2 each), the uint8 mask written
      {"dropout_forward", 2 * 16384 * 2 + 16384}};
  std::set<OpClass> classes;
  std::set<std::string> seen;
  for (const auto& x : t) {
    classes.insert(x.op_class);
    EXPECT_GT(x.seconds, 0) << x.op;
    EXPECT_TRUE(x.dtype == DType::kBF16 || x.op.starts_with("cross_entropy")) << x.op;
    const auto it = expected.find(x.op);
    if (it == expected.end()) continue;
    EXPECT_EQ(x.bytes, it->second) << x.op;
    seen.insert(x.op);
  }
  EXPECT_EQ(seen.size(), expected.size());
  EXPECT_EQ(classes.size(), std::size(perf::kAllOpClasses));
  const auto bw = bench::op_class_bandwidths(t, c, 0.0, "test");
  for (OpClass cls : perf::kAllOpClasses) {
    ASSERT_EQ(bw.count(cls), 1u) << perf::op_class_name(cls);
    EXPECT_TRUE(std::isfinite(bw.at(cls).value) && bw.at(cls).value > 0);
    EXPECT_TRUE(bw.at(cls).source.starts_with("measured by gpuledger calibrate: ")) << bw.at(cls).source;
    EXPECT_NE(bw.at(cls).source.find("in bf16"), std::string::npos) << bw.at(cls).source;
  }
  EXPECT_NE(progress.str().find("calibrate: norm rmsnorm_backward bf16 64x256"), std::string::npos);
}
