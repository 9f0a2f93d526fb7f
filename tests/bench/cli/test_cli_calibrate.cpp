// `gpuledger calibrate`: --quick writes a device profile that loads
// (perf/profile_json.h) and whose GEMM at 1024³ is within a factor 3 of what
// `gpuledger peak --quick` measures for the 1024² sgemm (two processes on a
// shared machine: the factor is for the load, not the method); every op class
// and both attention kinds are measured, with positive finite figures and
// calibrate's sources, and a table point survives perf's JSON both ways;
// --threads is the CPU backend's thread count, recorded in the fingerprint;
// bad input is exit 2 naming the problem, before anything is measured; under
// mpiexec -n 2 a network profile is written too, fitted from the measured
// collectives.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "perf/op_time.h"
#include "perf/profile_json.h"
#include "run_cli.h"

using gpuledger::DType;
using gpuledger::OpCost;
using gpuledger::OpCostKind;
using gpuledger::testing::contains;
using gpuledger::testing::read_json;
using gpuledger::testing::run_cli;
using gpuledger::testing::scratch_dir;
using namespace gpuledger::perf;

TEST(CliCalibrate, QuickProfileLoadsAndAgreesWithPeak) {
  const std::string dir = scratch_dir("calibrate-quick");
  const auto r = run_cli({"calibrate", "--quick", "--dtypes", "fp32", "--name", "test-host", "--out", dir + "/p.json"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(contains(r.err, "calibrate: gemm fp32 m=1024 n=1024 k=1024")) << r.err;
  EXPECT_TRUE(contains(r.out, "# gemm fp32: best")) << r.out;
  EXPECT_FALSE(std::filesystem::exists(dir + "/p.network.json"));  // no launcher: no network

  const DeviceProfile p = load_device_profile(dir + "/p.json");
  EXPECT_EQ(p.name, "test-host");
  EXPECT_EQ(p.provenance.kind, kMeasured);
  EXPECT_TRUE(contains(p.provenance.command, "calibrate --quick")) << p.provenance.command;
  ASSERT_EQ(p.dtypes.count(DType::kFP32), 1u);
  ASSERT_TRUE(p.dtypes.at(DType::kFP32).gemm);
  EXPECT_EQ(p.dtypes.at(DType::kFP32).gemm->table.points().size(), 8u);
  EXPECT_GT(p.memory_bandwidth_bytes_per_s.value, 0);

  const auto peak = run_cli({"peak", "--quick", "--dtypes", "fp32", "--json", dir + "/peak.json", "--quiet"});
  ASSERT_EQ(peak.status, 0) << peak.err;
  double peak_1024 = 0;
  const auto peak_doc = read_json(dir + "/peak.json");
  for (const auto& g : peak_doc.at("gemm"))
    if (g.at("m") == 1024 && g.at("dtype") == "fp32") peak_1024 = g.at("flops_per_s").get<double>();
  ASSERT_GT(peak_1024, 0);
  const double profile_1024 = 2.0 * 1024 * 1024 * 1024 / gemm_seconds(p, 1024, 1024, 1024, DType::kFP32);
  EXPECT_GT(profile_1024, peak_1024 / 3) << "profile " << profile_1024 << " vs peak " << peak_1024;
  EXPECT_LT(profile_1024, peak_1024 * 3) << "profile " << profile_1024 << " vs peak " << peak_1024;
}

TEST(CliCalibrate, QuickProfileHasEveryOpClassAndAttentionKind) {
  const std::string dir = scratch_dir("calibrate-classes");
  const auto r = run_cli({"calibrate", "--quick", "--threads", "1", "--dtypes", "bf16,fp32", "--out", dir + "/p.json"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(contains(r.err, "calibrate: norm layernorm_forward bf16 64x256")) << r.err;
  EXPECT_TRUE(contains(r.out, "# threads: 1")) << r.out;
  const DeviceProfile p = load_device_profile(dir + "/p.json");
  const std::string measured = "measured by gpuledger calibrate: ";
  for (OpClass cls : kAllOpClasses) {
    ASSERT_EQ(p.op_class_bandwidth.count(cls), 1u) << op_class_name(cls);
    const Sourced& bw = p.op_class_bandwidth.at(cls);
    EXPECT_TRUE(std::isfinite(bw.value) && bw.value > 0) << op_class_name(cls) << " " << bw.value;
    EXPECT_TRUE(bw.source.starts_with(measured)) << bw.source;
    EXPECT_TRUE(contains(bw.source, "in bf16")) << bw.source;  // the first of --dtypes
    // What the model prices a class's op with is this figure, not the STREAM.
    EXPECT_EQ(op_class_bandwidth_bytes_per_s(p, cls), bw.value);
  }
  for (AttentionKind kind : {AttentionKind::kFlash, AttentionKind::kMaterialized}) {
    ASSERT_EQ(p.attention.count(kind), 1u) << attention_kind_name(kind);
    const AttentionFigures& f = p.attention.at(kind);
    EXPECT_TRUE(f.table_source.starts_with(measured)) << f.table_source;
    ASSERT_EQ(f.table.points().size(), 2u);  // --quick: seq 128 and 256 at 8 heads of 32
    for (const ShapePoint& pt : f.table.points()) {
      EXPECT_EQ(pt.b, 8);
      EXPECT_EQ(pt.c, 32);
      EXPECT_TRUE(std::isfinite(pt.per_s) && pt.per_s > 0);
    }
    EXPECT_GT(f.efficiency.value, 0);
    EXPECT_LE(f.efficiency.value, 1);
    // A table point prices its shape exactly: time = flops / the measured rate.
    const ShapePoint& pt = f.table.points().front();
    const double flops = 1e9;
    EXPECT_NEAR(attention_seconds(p, kind, {pt.a, pt.b, pt.c}, flops, 1, DType::kBF16), flops / pt.per_s,
                1e-12 * flops / pt.per_s);
  }
  // Each timed op's own figure by size, under the name a step reports it by.
  for (const char* op : {"rmsnorm_forward", "rope_backward", "optimizer_update", "convert", "merge_qkv_grad"}) {
    ASSERT_EQ(p.op_bandwidth.count(op), 1u) << op;
    const OpBandwidth& b = p.op_bandwidth.find(op)->second;
    EXPECT_EQ(b.points.size(), 2u) << op;  // --quick: two sizes
    EXPECT_TRUE(b.source.starts_with(measured)) << b.source;
    const auto [bytes, rate] = b.points.front();
    EXPECT_DOUBLE_EQ(memory_bound_seconds(p, bytes, op, OpClass::kCopy),
                     static_cast<double>(bytes) / rate + p.launch_floor_seconds.value);
  }
  EXPECT_EQ(p.op_bandwidth.count("adamw"), 0u);  // reported as optimizer_update
  EXPECT_EQ(p.fingerprint.at("calibrate_threads"), 1);
  EXPECT_TRUE(contains(p.fingerprint.at("threads").at("policy").get<std::string>(), "OpenMP owns 1 thread"));

  // Through perf's JSON and back: every figure, table points included, is kept.
  const DeviceProfile again = device_profile_from_json(device_profile_to_json(p), "round trip");
  EXPECT_EQ(again, p);
  const auto doc = read_json(dir + "/p.json");
  const auto& first = doc.at("attention").at("flash").at("table").at("points").at(0);
  const ShapePoint& pt = p.attention.at(AttentionKind::kFlash).table.points().front();
  EXPECT_EQ(first.at(0), pt.a);
  EXPECT_EQ(first.at(3).get<double>(), pt.per_s);
}

// --for: every GEMM call of the run is measured, with its transposes, batch,
// C's dtype and accumulation; tiny-llama (hidden 64, 4 heads of 16 over 2 KV
// heads, vocabulary 97) at 1 × 16 tokens, fp32.
TEST(CliCalibrate, ForARunMeasuresEachOfItsGemmCalls) {
  const std::string dir = scratch_dir("calibrate-for");
  const auto r = run_cli({"calibrate", "--quick", "--threads", "1", "--dtypes", "fp32", "--out", dir + "/p.json",
                          "--for", "--model tiny-llama --seq 16 --mbs 1 --dtype fp32"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "# gemm fp32: ")) << r.out;
  const DeviceProfile p = load_device_profile(dir + "/p.json");
  const GemmPoints& g = p.dtypes.at(DType::kFP32).gemm_points;
  EXPECT_TRUE(contains(g.source, "calibrate --for")) << g.source;
  // The LM head: forward X·Wᵀ (16 × 97 × 64), dgrad dY·W (16 × 64 × 97), wgrad dYᵀ·X accumulated (97 × 64 × 16).
  const GemmCall head_forward{16, 97, 64, 1, false, true, DType::kFP32, false};
  const GemmCall head_dgrad{16, 64, 97, 1, false, false, DType::kFP32, false};
  const GemmCall head_wgrad{97, 64, 16, 1, true, false, DType::kFP32, true};
  for (const GemmCall& c : {head_forward, head_dgrad, head_wgrad}) {
    ASSERT_EQ(g.seconds.count(c), 1u) << c.m << "x" << c.n << "x" << c.k;
    EXPECT_GT(g.seconds.at(c), 0);
  }
  // Attention's per-head products are batched calls; every call is a distinct shape.
  bool batched = false;
  for (const auto& [c, s] : g.seconds) batched = batched || c.batch > 1;
  EXPECT_TRUE(batched);
  // A prediction of the run prices the head's forward by its own time.
  OpCost op;
  op.kind = OpCostKind::kGemm;
  op.dtype = DType::kFP32;
  op.m = 16;
  op.n = 97;
  op.k = 64;
  op.batch = 1;
  op.trans_b = true;
  EXPECT_EQ(op_seconds(p, op), g.seconds.at(head_forward));
}

TEST(CliCalibrate, BadInputIsExitTwo) {
  auto r = run_cli({"calibrate", "--quick"});
  EXPECT_EQ(r.status, 2);
  EXPECT_TRUE(contains(r.err, "--out")) << r.err;
  r = run_cli({"calibrate", "--quick", "--dtypes", "fp8", "--out", scratch_dir("calibrate-bad") + "/p.json"});
  EXPECT_EQ(r.status, 2);
  EXPECT_TRUE(contains(r.err, "fp8")) << r.err;
  const std::string dir = scratch_dir("calibrate-dir");
  r = run_cli({"calibrate", "--quick", "--out", dir});
  EXPECT_EQ(r.status, 2);
  EXPECT_TRUE(contains(r.err, dir)) << r.err;
  EXPECT_FALSE(contains(r.err, "calibrate: gemm")) << "measured before refusing: " << r.err;
  r = run_cli({"calibrate", "--quick", "--out", scratch_dir("calibrate-for-bad") + "/p.json", "--for",
               "--model tiny-llama --steps 3"});
  EXPECT_EQ(r.status, 2);
  EXPECT_TRUE(contains(r.err, "--for '--model tiny-llama --steps 3'")) << r.err;
  EXPECT_FALSE(contains(r.err, "calibrate: gemm")) << "measured before refusing: " << r.err;
  r = run_cli({"calibrate", "--quick", "--out", scratch_dir("calibrate-for-model") + "/p.json", "--for",
               "--model no-such-model"});
  EXPECT_EQ(r.status, 2);
  EXPECT_TRUE(contains(r.err, "no-such-model")) << r.err;
  r = run_cli({"calibrate", "--quick", "--threads", "0", "--out", scratch_dir("calibrate-threads") + "/p.json"});
  EXPECT_EQ(r.status, 2);
  EXPECT_TRUE(contains(r.err, "--threads")) << r.err;
}

#if GPULEDGER_HAVE_MPI && defined(GPULEDGER_MPIEXEC)
TEST(CliCalibrate, UnderMpiexecWritesANetworkProfile) {
  const std::string dir = scratch_dir("calibrate-mpi");
  // timeout(1) ends a hung job; ctest's environment carries the Open MPI settings.
  const std::string cmd = "timeout 120 " + std::string(GPULEDGER_MPIEXEC) + " -n 2 --oversubscribe " + GPULEDGER_BIN +
                          " calibrate --quick --dtypes fp32 --out " + dir + "/p.json > " + dir + "/out.txt 2> " + dir +
                          "/err.txt";
  const int rc = std::system(cmd.c_str());
  std::ifstream err(dir + "/err.txt");
  std::stringstream err_text;
  err_text << err.rdbuf();
  ASSERT_EQ(rc, 0) << err_text.str();
  EXPECT_TRUE(contains(err_text.str(), "calibrate: all_reduce over 2 ranks")) << err_text.str();
  const NetworkProfile n = load_network_profile(dir + "/p.network.json");
  EXPECT_EQ(n.provenance.kind, kMeasured);
  EXPECT_EQ(n.ranks_per_node_count(), 2);
  ASSERT_TRUE(n.intra_node);
  EXPECT_FALSE(n.inter_node);
  EXPECT_GT(n.intra_node->busbw_bytes_per_s.value, 0);
  EXPECT_EQ(n.samples.size(), 12u);  // 4 kinds × 3 sizes
  EXPECT_TRUE(contains(n.intra_node->busbw_bytes_per_s.source, "over MPI in fp32"))
      << n.intra_node->busbw_bytes_per_s.source;
  load_device_profile(dir + "/p.json");
}
#else
TEST(CliCalibrate, UnderMpiexecWritesANetworkProfile) { GTEST_SKIP() << "built without MPI"; }
#endif
