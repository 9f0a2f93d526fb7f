// Op time: a measured GEMM table is exact at its points; outside it the
// roofline max(flops/(peak·eff), bytes/bw) + floor, hand-computed; bandwidth-
// bound ops, attention and host copies.
#include <gtest/gtest.h>

#include <stdexcept>

#include "perf/op_time.h"

using namespace gpuledger;
using namespace gpuledger::perf;

namespace {

DeviceProfile test_device() {
  DeviceProfile p;
  p.name = "test";
  p.provenance = {kPublished, "", ""};
  DTypeFigures bf16;
  bf16.peak_flops_per_s = {1000e12, "test"};
  bf16.gemm_efficiency = {0.5, "test"};
  std::vector<ShapePoint> pts;
  for (int64_t m : {256, 1024})
    for (int64_t n : {256, 1024})
      for (int64_t k : {256, 1024}) pts.push_back({m, n, k, (m == 1024 && n == 1024 && k == 1024) ? 400e12 : 100e12});
  bf16.gemm = GemmTable{false, true, ShapeTable(pts), "test"};
  p.dtypes[DType::kBF16] = bf16;
  p.memory_bandwidth_bytes_per_s = {2e12, "test"};
  p.op_class_bandwidth[OpClass::kOptimizer] = {1e12, "test"};
  p.attention[AttentionKind::kFlash] = {{0.25, "test"}, ShapeTable(), ""};
  p.launch_floor_seconds = {5e-6, "test"};
  p.host_copy_bytes_per_s = {50e9, "test"};
  return p;
}

}  // namespace

TEST(GemmSeconds, ExactAtTablePoints) {
  const DeviceProfile p = test_device();
  EXPECT_DOUBLE_EQ(gemm_seconds(p, 1024, 1024, 1024, DType::kBF16), 2.0 * 1024 * 1024 * 1024 / 400e12);
  EXPECT_DOUBLE_EQ(gemm_seconds(p, 256, 1024, 256, DType::kBF16), 2.0 * 256 * 1024 * 256 / 100e12);
}

TEST(GemmSeconds, BetweenPointsTheThroughputIsBetween) {
  const DeviceProfile p = test_device();
  const double flops = 2.0 * 1024 * 1024 * 512;
  const double t = gemm_seconds(p, 1024, 1024, 512, DType::kBF16);
  EXPECT_GT(t, flops / 400e12);
  EXPECT_LT(t, flops / 100e12);
  EXPECT_DOUBLE_EQ(t, flops / 250e12);  // 512 is halfway between 256 and 1024 in log space
}

TEST(GemmSeconds, PastTheGridTheEdgeOfTheTable) {
  const DeviceProfile p = test_device();
  // 8192³ lies past the grid (largest 1024) on every axis: the 1024³ edge's
  // 400 TFLOP/s, not the roofline's 1000 · 0.5 = 500 plus the floor.
  const double big = 2.0 * 8192 * 8192 * 8192;
  EXPECT_DOUBLE_EQ(gemm_seconds(p, 8192, 8192, 8192, DType::kBF16), big / 400e12);
  // Past the grid on k only: (1024, 256, 1024)'s 100 TFLOP/s; between the
  // grid's 256 and 1024 on n (512, halfway in log space) and past it on m and
  // k: halfway between 100 and 400 T.
  EXPECT_DOUBLE_EQ(gemm_seconds(p, 1024, 256, 65536, DType::kBF16), 2.0 * 1024 * 256 * 65536 / 100e12);
  EXPECT_DOUBLE_EQ(gemm_seconds(p, 4096, 512, 4096, DType::kBF16), 2.0 * 4096 * 512 * 4096 / 250e12);
}

TEST(GemmSeconds, RooflineOutsideTheTable) {
  DeviceProfile p = test_device();
  // Below the grid on one axis (m = 128): the roofline, whatever the others — here its bytes
  // term, (128·8192 + 8192·8192 + 128·8192) · 2 bytes over 2 TB/s.
  const double small_bytes = (128.0 * 8192 * 2 + 8192.0 * 8192) * 2;
  EXPECT_DOUBLE_EQ(gemm_seconds(p, 128, 8192, 8192, DType::kBF16), small_bytes / 2e12 + 5e-6);
  // No table: the roofline. Compute-bound: 8192³ · 2 FLOPs at 1000 TFLOP/s · 0.5, plus the 5 µs floor.
  p.dtypes[DType::kBF16].gemm.reset();
  const double big = 2.0 * 8192 * 8192 * 8192;
  EXPECT_DOUBLE_EQ(gemm_seconds(p, 8192, 8192, 8192, DType::kBF16), big / 500e12 + 5e-6);
  // Memory-bound: m = 1 (a GEMV): bytes (1·8192 + 8192·8192 + 1·8192)·2 over 2 TB/s.
  const double bytes = (8192.0 + 8192.0 * 8192 + 8192.0) * 2;
  EXPECT_DOUBLE_EQ(gemm_seconds(p, 1, 8192, 8192, DType::kBF16), bytes / 2e12 + 5e-6);
  EXPECT_THROW(gemm_seconds(p, 64, 64, 64, DType::kFP32), std::invalid_argument);  // no fp32 figures
  EXPECT_THROW(gemm_seconds(p, 0, 64, 64, DType::kBF16), std::invalid_argument);
}

TEST(MemoryBoundSeconds, ClassFigureOrTheOneFigure) {
  const DeviceProfile p = test_device();
  EXPECT_DOUBLE_EQ(memory_bound_seconds(p, int64_t{1} << 30, OpClass::kNorm), 1073741824.0 / 2e12 + 5e-6);
  EXPECT_DOUBLE_EQ(memory_bound_seconds(p, int64_t{1} << 30, OpClass::kOptimizer), 1073741824.0 / 1e12 + 5e-6);
  EXPECT_DOUBLE_EQ(memory_bound_seconds(p, 0, OpClass::kCopy), 5e-6);
}

TEST(AttentionSeconds, KindEfficiencyOrGemmEfficiency) {
  const DeviceProfile p = test_device();
  const AttentionShape s{4096, 32, 128};
  const double flops = 4.0 * 4096 * 4096 * 32 * 128;
  // flash: 0.25 of the peak; materialized (absent): the GEMM efficiency 0.5.
  EXPECT_DOUBLE_EQ(attention_seconds(p, AttentionKind::kFlash, s, flops, 1 << 20, DType::kBF16), flops / 250e12 + 5e-6);
  EXPECT_DOUBLE_EQ(attention_seconds(p, AttentionKind::kMaterialized, s, flops, 1 << 20, DType::kBF16),
                   flops / 500e12 + 5e-6);
  // A huge score matrix through memory makes it bandwidth-bound.
  EXPECT_DOUBLE_EQ(attention_seconds(p, AttentionKind::kMaterialized, s, flops, int64_t{1} << 40, DType::kBF16),
                   1099511627776.0 / 2e12 + 5e-6);
}

TEST(AttentionSeconds, TableWhereItCovers) {
  DeviceProfile p = test_device();
  p.attention[AttentionKind::kFlash].table = ShapeTable({{1024, 32, 128, 300e12}, {4096, 32, 128, 600e12}});
  p.attention[AttentionKind::kFlash].table_source = "test";
  EXPECT_DOUBLE_EQ(attention_seconds(p, AttentionKind::kFlash, {4096, 32, 128}, 1e12, 0, DType::kBF16), 1e12 / 600e12);
  EXPECT_DOUBLE_EQ(attention_seconds(p, AttentionKind::kFlash, {2048, 32, 128}, 1e12, 0, DType::kBF16), 1e12 / 450e12);
}

TEST(HostCopySeconds, BandwidthPlusFloor) {
  EXPECT_DOUBLE_EQ(host_copy_seconds(test_device(), 50'000'000'000), 1.0 + 5e-6);
}

TEST(OpSeconds, AMeasuredGemmCallIsItsOwnTimeTransposesIncluded) {
  DeviceProfile p = test_device();
  // A·B (dgrad's layout) measured at 3 ms; A·Bᵀ of the same shape is not a point.
  const GemmCall nn{1024, 1024, 1024, 1, false, false, DType::kBF16, false};
  p.dtypes[DType::kBF16].gemm_points = {{{nn, 3e-3}}, "test"};
  OpCost op;
  op.kind = OpCostKind::kGemm;
  op.dtype = DType::kBF16;
  op.m = op.n = op.k = 1024;
  op.batch = 1;
  op.c_dtype = DType::kBF16;
  EXPECT_DOUBLE_EQ(op_seconds(p, op), 3e-3);
  op.trans_b = true;  // the grid's 400 TFLOP/s at 1024³
  EXPECT_DOUBLE_EQ(op_seconds(p, op), 2.0 * 1024 * 1024 * 1024 / 400e12);
  op.trans_b = false;
  op.accumulate = true;  // C read and added to: another call
  EXPECT_DOUBLE_EQ(op_seconds(p, op), 2.0 * 1024 * 1024 * 1024 / 400e12);
  op.accumulate = false;
  op.batch = 2;  // two products in one call: another call
  EXPECT_DOUBLE_EQ(op_seconds(p, op), 2.0 * 2.0 * 1024 * 1024 * 1024 / 400e12);
}

TEST(OpSeconds, AnOpsOwnBandwidthInterpolatedInLogBytes) {
  DeviceProfile p = test_device();
  // add: 1 GB/s at 1 KiB, 4 GB/s at 1 MiB; the class (activation) would be the one 2 TB/s figure.
  p.op_bandwidth["add"] = {{{1024, 1e9}, {1048576, 4e9}}, "test"};
  const double floor = 5e-6;
  EXPECT_DOUBLE_EQ(memory_bound_seconds(p, 1024, "add", OpClass::kActivation), 1024 / 1e9 + floor);
  // 32 KiB is half-way in log bytes between 1 KiB and 1 MiB: 2.5 GB/s.
  EXPECT_DOUBLE_EQ(memory_bound_seconds(p, 32768, "add", OpClass::kActivation), 32768 / 2.5e9 + floor);
  // Outside the points the nearest point's rate.
  EXPECT_DOUBLE_EQ(memory_bound_seconds(p, 512, "add", OpClass::kActivation), 512 / 1e9 + floor);
  EXPECT_DOUBLE_EQ(memory_bound_seconds(p, 1 << 24, "add", OpClass::kActivation), (1 << 24) / 4e9 + floor);
  // Another op of the class keeps the class figure; op_seconds reads the op's name.
  EXPECT_DOUBLE_EQ(memory_bound_seconds(p, 32768, "scale", OpClass::kActivation), 32768 / 2e12 + floor);
  EXPECT_DOUBLE_EQ(op_seconds(p, memory_bound_op("add", OpClass::kActivation, 32768)), 32768 / 2.5e9 + floor);
}

TEST(DeviceProfileChecks, RefuseBadMeasuredPoints) {
  DeviceProfile p = test_device();
  p.op_bandwidth["add"] = {{{1024, 1e9}, {512, 4e9}}, "test"};  // bytes not ascending
  EXPECT_THROW(validate_device_profile(p), std::invalid_argument);
  p.op_bandwidth["add"] = {{{1024, 1e9}}, ""};  // no source
  EXPECT_THROW(validate_device_profile(p), std::invalid_argument);
  p.op_bandwidth.clear();
  p.dtypes[DType::kBF16].gemm_points = {{{GemmCall{16, 16, 0, 1}, 1e-6}}, "test"};  // k = 0
  EXPECT_THROW(validate_device_profile(p), std::invalid_argument);
  p.dtypes[DType::kBF16].gemm_points = {{{GemmCall{16, 16, 16, 1}, 1e-6}}, "test"};
  EXPECT_NO_THROW(validate_device_profile(p));
}

TEST(OpSeconds, AnFp8GemmRunsAtTheFp8RateWhereTheProfileHasOne) {
  DeviceProfile p = test_device();
  // An FP8 GEMM as the step reports it: fp32 operands holding FP8 values (the CPU's emulation).
  p.dtypes[DType::kFP32] = {{500e12, "test"}, {0.5, "test"}, std::nullopt, {}};
  OpCost op;
  op.kind = OpCostKind::kGemm;
  op.dtype = DType::kFP32;
  op.m = op.n = op.k = 8192;
  op.batch = 1;
  op.fp8 = true;
  const double flops = 2.0 * 8192 * 8192 * 8192;
  // No fp8_gemm figures: the fp32 GEMM it is emulated with (compute-bound: 2mnk / (500 T · 0.5) + floor).
  EXPECT_DOUBLE_EQ(op_seconds(p, op), flops / 250e12 + 5e-6);
  // With them: 2mnk / (2000 T · 0.7) + floor; the bytes term (1-byte operands) is far below.
  p.fp8_gemm = DTypeFigures{{2000e12, "test"}, {0.7, "test"}, std::nullopt, {}};
  EXPECT_DOUBLE_EQ(op_seconds(p, op), flops / 1400e12 + 5e-6);
  EXPECT_DOUBLE_EQ(fp8_gemm_seconds(p, 8192, 8192, 8192), flops / 1400e12 + 5e-6);
  // A skinny one is bound by its bytes at one byte per element: (m·k + k·n + m·n) / bandwidth + floor.
  EXPECT_DOUBLE_EQ(fp8_gemm_seconds(p, 1, 8192, 8192), (8192.0 + 8192.0 * 8192 + 8192.0) / 2e12 + 5e-6);
  op.fp8 = false;  // the same call not marked FP8 keeps the fp32 figures
  EXPECT_DOUBLE_EQ(op_seconds(p, op), flops / 250e12 + 5e-6);
  p.fp8_gemm.reset();
  EXPECT_THROW(fp8_gemm_seconds(p, 16, 16, 16), std::invalid_argument);
}
