// `gpuledger check` trusts nothing in the report: it re-derives the budget from
// the report's config with this binary. A report whose measurement and budget
// were both edited, whose config was edited, or whose total peak disagrees
// with its accounts fails (exit 1) naming the rows that differ, and the
// --json status agrees with the exit code; a malformed report is exit 2.
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "run_cli.h"

using gpuledger::testing::read_json;
using gpuledger::testing::run_cli;
using gpuledger::testing::scratch_dir;
using gpuledger::testing::write_file;

namespace {

class CheckRederive : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = scratch_dir("check_rederive");
    report_ = dir_ + "/train.json";
    auto r = run_cli({"train", "--model", "tiny-llama", "--seq", "32", "--mbs", "2", "--microbatches", "2", "--steps",
                      "1", "--quiet", "--json", report_});
    ASSERT_EQ(r.status, 0) << r.err;
  }

  // Runs check on an edited copy; returns the exit status, with the --json result in `result`.
  int check(const nlohmann::json& doc, nlohmann::json& result) {
    const std::string path = dir_ + "/edited.json", out = dir_ + "/check.json";
    write_file(path, doc.dump());
    auto r = run_cli({"check", path, "--json", out, "--quiet"});
    if (r.status <= 1) result = read_json(out);
    last_err_ = r.err;
    return r.status;
  }
  static bool names(const nlohmann::json& result, const std::string& check) {
    for (const auto& c : result["failed_checks"])
      if (c.get<std::string>().rfind(check + " ", 0) == 0) return true;
    return false;
  }

  std::string dir_, report_, last_err_;
};

TEST_F(CheckRederive, AnUneditedReportPasses) {
  nlohmann::json result;
  EXPECT_EQ(check(read_json(report_), result), 0);
  EXPECT_EQ(result["status"], "ok");
  EXPECT_TRUE(result["failed_checks"].empty());
  // Every account was re-derived and compared.
  int rederived = 0;
  for (const auto& c : result["checks"]) rederived += c["name"].get<std::string>().rfind("rederive.", 0) == 0;
  EXPECT_GE(rederived, 10);
}

TEST_F(CheckRederive, MeasurementAndBudgetBothEditedFails) {
  auto doc = read_json(report_);
  auto& r = doc["ranks"][0];
  // The same 64 bytes added to both sides: the report agrees with itself.
  r["measured"]["peak_by_account"]["weights"] = r["measured"]["peak_by_account"]["weights"].get<int64_t>() + 64;
  r["analytic"]["exact"]["weights"] = r["analytic"]["exact"]["weights"].get<int64_t>() + 64;
  nlohmann::json result;
  EXPECT_EQ(check(doc, result), 1);
  EXPECT_EQ(result["status"], "failed");  // agrees with the exit code
  EXPECT_TRUE(names(result, "rederive.analytic.exact.weights")) << result["failed_checks"].dump();
  EXPECT_TRUE(names(result, "measured_vs_rederived.bytes.weights")) << result["failed_checks"].dump();
  EXPECT_FALSE(names(result, "bytes.weights"));  // the report's own check passes: that is the hole
}

TEST_F(CheckRederive, AnEditedConfigFails) {
  auto doc = read_json(report_);
  doc["config"]["run"]["seq"] = 64;  // the run trained 32-token sequences
  nlohmann::json result;
  EXPECT_EQ(check(doc, result), 1);
  EXPECT_EQ(result["status"], "failed");
  EXPECT_TRUE(names(result, "rederive.analytic.exact.activations")) << result["failed_checks"].dump();
  EXPECT_TRUE(names(result, "measured_vs_rederived.bytes.activations")) << result["failed_checks"].dump();
  EXPECT_TRUE(names(result, "rederive.flops.analytic_hardware")) << result["failed_checks"].dump();
  // Weights do not depend on the sequence: not named.
  EXPECT_FALSE(names(result, "rederive.analytic.exact.weights"));

  doc = read_json(report_);
  doc["config"]["model"]["ffn"] = 192;  // another model
  EXPECT_EQ(check(doc, result), 1);
  EXPECT_TRUE(names(result, "rederive.analytic.exact.weights")) << result["failed_checks"].dump();
}

TEST_F(CheckRederive, TotalPeakDisagreeingWithItsAccountsFails) {
  auto doc = read_json(report_);
  auto& m = doc["ranks"][0]["measured"];
  m["peak_bytes"] = m["peak_bytes"].get<int64_t>() + 1;
  nlohmann::json result;
  EXPECT_EQ(check(doc, result), 1);
  EXPECT_TRUE(names(result, "total.peak_bytes==sum(at_peak)")) << result["failed_checks"].dump();

  doc = read_json(report_);
  auto& m2 = doc["ranks"][0]["measured"];
  m2["peak_bytes"] = 1;  // below every account's own peak
  m2["at_peak"] = {{"weights", 1},     {"grads", 0}, {"master", 0}, {"optim", 0},
                   {"activations", 0}, {"kv", 0},    {"comm", 0},   {"workspace", 0}};
  EXPECT_EQ(check(doc, result), 1);
  EXPECT_TRUE(names(result, "total.max(peak_by_account)<=peak_bytes")) << result["failed_checks"].dump();
}

TEST_F(CheckRederive, AnInferReportsWeightsAreRederived) {
  const std::string path = dir_ + "/infer.json";
  auto r = run_cli({"infer", "--model", "tiny-llama", "--device-memory", "64Mi", "--requests", "4", "--prompt-len",
                    "16", "--gen-len", "8", "--quiet", "--json", path});
  ASSERT_EQ(r.status, 0) << r.err;
  nlohmann::json result;
  auto doc = read_json(path);
  EXPECT_EQ(check(doc, result), 0);
  EXPECT_EQ(result["status"], "ok");
  auto& rank = doc["ranks"][0];
  rank["measured"]["peak_by_account"]["weights"] = rank["measured"]["peak_by_account"]["weights"].get<int64_t>() + 2;
  rank["analytic"]["exact"]["weights"] = rank["analytic"]["exact"]["weights"].get<int64_t>() + 2;
  EXPECT_EQ(check(doc, result), 1);
  EXPECT_TRUE(names(result, "rederive.analytic.exact.weights")) << result["failed_checks"].dump();
  EXPECT_TRUE(names(result, "measured_vs_rederived.weights")) << result["failed_checks"].dump();
}

TEST_F(CheckRederive, MalformedReportIsAUsageError) {
  auto doc = read_json(report_);
  doc["config"]["run"].erase("recompute");
  nlohmann::json result;
  EXPECT_EQ(check(doc, result), 2);
  EXPECT_NE(last_err_.find("recompute"), std::string::npos) << last_err_;

  doc = read_json(report_);
  doc["config"]["layout"]["tp"] = 3;  // does not divide the heads
  EXPECT_EQ(check(doc, result), 2) << last_err_;
}

}  // namespace
