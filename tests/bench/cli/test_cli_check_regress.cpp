// CLI tests for `check` and `regress`: a report passes against itself, and a
// tampered one fails (exit 1) naming the check.
#include <gtest/gtest.h>

#include <fstream>

#include "run_cli.h"

using gpuledger::testing::run_cli;
using gpuledger::testing::scratch_dir;
using gpuledger::testing::write_file;

namespace {

nlohmann::json read_json(const std::string& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in);
}

class CheckRegress : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = scratch_dir("check");
    report_ = dir_ + "/train.json";
    auto r = run_cli({"train", "--model", "tiny-gpt", "--seq", "32", "--steps", "2", "--quiet", "--json", report_});
    ASSERT_EQ(r.status, 0) << r.err;
  }
  std::string dir_, report_;
};

TEST_F(CheckRegress, AReportPassesItsOwnChecksAndItsOwnBaseline) {
  EXPECT_EQ(run_cli({"check", report_}).status, 0);
  EXPECT_EQ(run_cli({"regress", report_, "--baseline", report_}).status, 0);
}

TEST_F(CheckRegress, CheckFailsWhenAMeasuredAccountDiffersByOneByte) {
  auto doc = read_json(report_);
  doc["ranks"][0]["measured"]["peak_by_account"]["activations"] =
      doc["ranks"][0]["measured"]["peak_by_account"]["activations"].get<int64_t>() + 1;
  const std::string bad = dir_ + "/tampered.json";
  write_file(bad, doc.dump());
  auto r = run_cli({"check", bad});
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.out.find("bytes.activations"), std::string::npos);
  EXPECT_NE(r.out.find("FAIL"), std::string::npos);
  // A tolerance admits it.
  EXPECT_EQ(run_cli({"check", bad, "--bytes-tol", "0.01"}).status, 0);
}

TEST_F(CheckRegress, RegressFailsWhenTokensPerSecondFallOrBytesGrow) {
  auto base = read_json(report_);
  base["summary"]["tokens_per_s"] = base["summary"]["tokens_per_s"].get<double>() * 2.0;  // a faster baseline
  const std::string faster = dir_ + "/faster.json";
  write_file(faster, base.dump());
  EXPECT_EQ(run_cli({"regress", report_, "--baseline", faster}).status, 1);

  auto small = read_json(report_);
  small["ranks"][0]["measured"]["peak_bytes"] = small["ranks"][0]["measured"]["peak_bytes"].get<int64_t>() - 1;
  const std::string smaller = dir_ + "/smaller.json";
  write_file(smaller, small.dump());
  auto r = run_cli({"regress", report_, "--baseline", smaller, "--mfu-tol", "1"});
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.out.find("regress.peak_bytes"), std::string::npos);
}

// A baseline of another configuration is a usage error naming each setting
// that differs — including one the baseline predates (absent there).
TEST_F(CheckRegress, RegressNamesTheSettingsThatDiffer) {
  auto base = read_json(report_);
  base["config"]["run"].erase("overlap_grad_reduce");
  base["config"]["run"]["seq"] = 16;
  const std::string older = dir_ + "/older.json";
  write_file(older, base.dump());
  auto r = run_cli({"regress", report_, "--baseline", older});
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("run.overlap_grad_reduce: report true vs baseline (absent"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("run.seq: report 32 vs baseline 16"), std::string::npos) << r.err;
}

TEST_F(CheckRegress, UsageErrors) {
  const std::string junk = dir_ + "/junk.json";
  write_file(junk, "{ not json");
  auto r = run_cli({"check", junk});
  EXPECT_EQ(r.status, 1);  // a malformed report is a failed check, with line:column
  EXPECT_NE(r.err.find("junk.json:1:"), std::string::npos) << r.err;
  EXPECT_EQ(run_cli({"check", dir_ + "/missing.json"}).status, 2);
  auto plan = dir_ + "/plan.json";
  ASSERT_EQ(run_cli({"plan", "--model", "gpt2", "--quiet", "--json", plan}).status, 0);
  EXPECT_EQ(run_cli({"check", plan}).status, 2);  // nothing measured to check
}

}  // namespace
