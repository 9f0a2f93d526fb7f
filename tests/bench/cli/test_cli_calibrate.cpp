// `gpuledger calibrate`: --quick writes a device profile that loads
// (perf/profile_json.h) and whose GEMM at 1024³ is within a factor 3 of what
// `gpuledger peak --quick` measures for the 1024² sgemm (two processes on a
// shared machine: the factor is for the load, not the method); bad input is
// exit 2 naming the problem, before anything is measured; under mpiexec -n 2
// a network profile is written too, fitted from the measured collectives.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "perf/op_time.h"
#include "perf/profile_json.h"
#include "run_cli.h"

using gpuledger::DType;
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
  load_device_profile(dir + "/p.json");
}
#else
TEST(CliCalibrate, UnderMpiexecWritesANetworkProfile) { GTEST_SKIP() << "built without MPI"; }
#endif
