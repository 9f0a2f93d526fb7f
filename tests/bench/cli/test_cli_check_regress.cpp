// CLI tests for `check` and `regress`: a report passes against itself, and a
// tampered one fails (exit 1) naming the check.
#include <gtest/gtest.h>

#include <fstream>

#include "run_cli.h"

using gpuledger::testing::read_json;
using gpuledger::testing::run_cli;
using gpuledger::testing::scratch_dir;
using gpuledger::testing::write_file;

namespace {

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
  EXPECT_NE(r.out.find("REGRESSED train: peak_bytes on rank 0:"), std::string::npos) << r.out;
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
  EXPECT_EQ(r.status, 2);  // a malformed report is bad input, with line:column
  EXPECT_NE(r.err.find("junk.json:1:5: malformed JSON"), std::string::npos) << r.err;
  EXPECT_EQ(run_cli({"check", dir_ + "/missing.json"}).status, 2);
  auto plan = dir_ + "/plan.json";
  ASSERT_EQ(run_cli({"plan", "--model", "gpt2", "--quiet", "--json", plan}).status, 0);
  EXPECT_EQ(run_cli({"check", plan}).status, 2);  // nothing measured to check
}

// A report with a field missing or of the wrong type is bad input (exit 2)
// whose message names the file and the JSON path, for check and regress alike.
TEST_F(CheckRegress, MalformedReportsNameTheFileAndTheJsonPath) {
  auto doc = read_json(report_);
  doc["ranks"][0]["measured"].erase("peak_by_account");
  const std::string missing = dir_ + "/missing_field.json";
  write_file(missing, doc.dump());
  auto r = run_cli({"check", missing});
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("missing_field.json: ranks[0].measured.peak_by_account: missing"), std::string::npos) << r.err;

  doc = read_json(report_);
  doc["ranks"][0]["measured"]["peak_bytes"] = "many";
  const std::string typed = dir_ + "/typed.json";
  write_file(typed, doc.dump());
  r = run_cli({"regress", typed, "--baseline", report_});
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("typed.json: ranks[0].measured.peak_bytes: expected a number, found a string"),
            std::string::npos)
      << r.err;

  doc = read_json(report_);
  doc["ranks"] = nlohmann::json::array();
  const std::string no_ranks = dir_ + "/no_ranks.json";
  write_file(no_ranks, doc.dump());
  r = run_cli({"regress", no_ranks, "--baseline", no_ranks});
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("no_ranks.json: ranks: no ranks"), std::string::npos) << r.err;

  doc = read_json(report_);
  doc["schema"] = "something/2";
  const std::string schema = dir_ + "/schema.json";
  write_file(schema, doc.dump());
  r = run_cli({"check", schema});
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("schema.json: schema: 'something/2' is not gpuledger.report/1"), std::string::npos) << r.err;

  write_file(schema, R"({"schema": "gpuledger.report/1", "kind": "train", "layers": 1e400})");
  r = run_cli({"check", schema});
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("malformed JSON: number overflow"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("[json.exception"), std::string::npos) << r.err;

  r = run_cli({"check", dir_});
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("is actually a directory"), std::string::npos) << r.err;
}

// The JSON written by check and regress says "ok" exactly when they exit 0.
TEST_F(CheckRegress, JsonStatusAgreesWithTheExitCode) {
  auto doc = read_json(report_);
  doc["ranks"][0]["measured"]["peak_by_account"]["weights"] =
      doc["ranks"][0]["measured"]["peak_by_account"]["weights"].get<int64_t>() + 1;
  const std::string bad = dir_ + "/bad_weights.json";
  write_file(bad, doc.dump());
  const std::string out = dir_ + "/check_out.json";
  EXPECT_EQ(run_cli({"check", bad, "--quiet", "--json", out}).status, 1);
  EXPECT_EQ(read_json(out)["status"], "failed");
  EXPECT_EQ(read_json(out)["run_status"], "ok");
  EXPECT_EQ(run_cli({"check", report_, "--quiet", "--json", out}).status, 0);
  EXPECT_EQ(read_json(out)["status"], "ok");

  auto base = read_json(report_);
  base["summary"]["tokens_per_s"] = base["summary"]["tokens_per_s"].get<double>() * 2.0;
  const std::string faster = dir_ + "/faster2.json";
  write_file(faster, base.dump());
  EXPECT_EQ(run_cli({"regress", report_, "--baseline", faster, "--quiet", "--json", out}).status, 1);
  EXPECT_EQ(read_json(out)["status"], "failed");
}

}  // namespace
