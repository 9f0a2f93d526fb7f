// CLI tests for the orders `gpuledger regress` takes its files in
// (bench/cli/regress_sides.h): new reports first and everything after
// --baseline a baseline (today's form, repetitions included), or --baseline
// first, one file each, and the new reports after it. Which file landed on
// which side is read back from the verdict's env.reports and env.baselines,
// and from the exit status against a baseline twice as fast (exit 1 when the
// new report is gated against it, 0 when the sides are swapped).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "bench/cli/regress_sides.h"
#include "run_cli.h"

using gpuledger::testing::contains;
using gpuledger::testing::read_json;
using gpuledger::testing::run_cli;
using gpuledger::testing::scratch_dir;
using gpuledger::testing::write_file;
using nlohmann::json;

namespace {

class RegressOrder : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = scratch_dir("regress-order");
    report_ = dir_ + "/new.json";
    const auto r =
        run_cli({"train", "--model", "tiny-gpt", "--seq", "32", "--steps", "2", "--quiet", "--json", report_});
    ASSERT_EQ(r.status, 0) << r.err;
    json base = read_json(report_);
    base["summary"]["tokens_per_s"] = base["summary"]["tokens_per_s"].get<double>() * 2.0;
    faster_ = dir_ + "/faster.json";
    write_file(faster_, base.dump());
  }

  // Runs regress with `files` and returns (exit status, the verdict's reports, its baselines).
  struct Verdict {
    int status = -1;
    std::vector<std::string> reports, baselines;
    std::string err;
  };
  static Verdict regress(std::vector<std::string> files) {
    const std::string out = dir_ + "/verdict.json";
    std::vector<std::string> args = {"regress"};
    args.insert(args.end(), files.begin(), files.end());
    args.insert(args.end(), {"--quiet", "--json", out});
    const auto r = run_cli(args);
    Verdict v{r.status, {}, {}, r.err};
    if (r.status == 0 || r.status == 1) {
      const json doc = read_json(out);
      v.reports = doc["env"]["reports"].get<std::vector<std::string>>();
      v.baselines = doc["env"]["baselines"].get<std::vector<std::string>>();
    }
    return v;
  }

  static inline std::string dir_, report_, faster_;
};

TEST_F(RegressOrder, NewReportFirstOrBaselineFirstGateTheSameSides) {
  for (const auto& files : std::vector<std::vector<std::string>>{
           {report_, "--baseline", faster_}, {"--baseline", faster_, report_}, {"--baseline=" + faster_, report_}}) {
    const Verdict v = regress(files);
    EXPECT_EQ(v.status, 1) << files[0] << " " << files[1] << "\n" << v.err;  // gated against the faster baseline
    EXPECT_EQ(v.reports, std::vector<std::string>{report_});
    EXPECT_EQ(v.baselines, std::vector<std::string>{faster_});
  }
  // The sides swapped, in either order: the new report is the faster one, no regression.
  EXPECT_EQ(regress({"--baseline", report_, faster_}).status, 0);
  EXPECT_EQ(regress({faster_, "--baseline", report_}).status, 0);
}

TEST_F(RegressOrder, RepetitionsInEitherOrder) {
  const std::vector<std::string> both_new = {report_, report_};
  const std::vector<std::string> both_base = {faster_, faster_};
  // Today's documented form: everything after --baseline is a baseline.
  Verdict v = regress({report_, report_, "--baseline", faster_, faster_});
  EXPECT_EQ(v.status, 1) << v.err;
  EXPECT_EQ(v.reports, both_new);
  EXPECT_EQ(v.baselines, both_base);
  // --baseline repeated, before or after the new reports.
  v = regress({"--baseline", faster_, "--baseline", faster_, report_, report_});
  EXPECT_EQ(v.status, 1) << v.err;
  EXPECT_EQ(v.reports, both_new);
  EXPECT_EQ(v.baselines, both_base);
  v = regress({report_, report_, "--baseline", faster_, "--baseline", faster_});
  EXPECT_EQ(v.status, 1) << v.err;
  EXPECT_EQ(v.reports, both_new);
  EXPECT_EQ(v.baselines, both_base);
}

TEST_F(RegressOrder, NoNewReportOrNoBaselineIsAUsageError) {
  Verdict v = regress({"--baseline", faster_});
  EXPECT_EQ(v.status, 2);
  EXPECT_TRUE(contains(v.err, "no new report to gate")) << v.err;
  v = regress({report_});
  EXPECT_EQ(v.status, 2);
  EXPECT_TRUE(contains(v.err, "--baseline is required")) << v.err;
  // --help shows both orders.
  const auto h = run_cli({"regress", "--help"});
  EXPECT_EQ(h.status, 0);
  EXPECT_TRUE(contains(h.out, "gpuledger regress --baseline base.json new.json")) << h.out;
}

// The rule alone, without files on disk.
TEST(RegressSides, ReportsFirstKeepsEveryLaterFileAsABaselineBaselineFirstTakesOneEach) {
  using gpuledger::cli::regress_sides;
  using gpuledger::cli::TypedFile;
  auto s = regress_sides({{false, "n1"}, {false, "n2"}, {true, "b1"}, {false, "b2"}});
  EXPECT_EQ(s.reports, (std::vector<std::string>{"n1", "n2"}));
  EXPECT_EQ(s.baselines, (std::vector<std::string>{"b1", "b2"}));
  s = regress_sides({{true, "b1"}, {false, "n1"}, {true, "b2"}, {false, "n2"}});
  EXPECT_EQ(s.reports, (std::vector<std::string>{"n1", "n2"}));
  EXPECT_EQ(s.baselines, (std::vector<std::string>{"b1", "b2"}));
  s = regress_sides({{true, "b1"}});
  EXPECT_TRUE(s.reports.empty());
  EXPECT_EQ(s.baselines, (std::vector<std::string>{"b1"}));
  EXPECT_TRUE(regress_sides({}).baselines.empty());
}

}  // namespace
