// The regression gate on synthetic reports: what passes, and that each kind of
// change (a loss, one byte of one account, one collective's bytes, a median
// MFU drop beyond the baseline's noise) fails naming what changed; the exact
// U test; the refusals (another configuration, another machine).
#include "bench/report/regress_gate.h"

#include <gtest/gtest.h>

#include "bench/report/gate_stats.h"
#include "bench/report/train_repeats.h"
#include "core/model_config.h"

namespace gpuledger::report {
namespace {

using nlohmann::json;

// A train report as the schema has it, with the parts the gate reads.
json synthetic_doc(std::vector<double> mfu_repeats, const std::string& backend = "cpu") {
  json doc = {{"schema", "gpuledger.report/1"}, {"kind", "train"}, {"status", "ok"}, {"checks", json::array()}};
  doc["env"] = {{"backend", backend}, {"fingerprint", {{"cpu_model", "X"}, {"blas", {{"corename", "Haswell"}}}}}};
  doc["config"] = {{"model", {{"name", "tiny-gpt"}}}, {"layout", {{"dp", 2}}}, {"run", {{"dtype", "fp32"}}}};
  json repeats = json::array();
  for (double m : mfu_repeats) repeats.push_back({{"mfu", m}, {"tokens_per_s", m * 1e6}});
  doc["summary"] = {{"loss", {10.5, 10.25, 10.0}}, {"repeats", repeats}, {"mfu", median_of(mfu_repeats)}};
  for (int rank = 0; rank < 2; ++rank) {
    json acc = {{"weights", 4096}, {"grads", 4096}, {"master", 0},     {"optim", 0}, {"activations", 65536 + rank},
                {"kv", 0},         {"comm", 1024},  {"workspace", 512}};
    doc["ranks"].push_back({{"rank", rank},
                            {"measured", {{"peak_by_account", acc}, {"peak_bytes", 75264 + rank}}},
                            {"comm", {{"all_reduce@dp", {{"calls", 3}, {"bytes", 8192}}}}}});
  }
  return doc;
}

ReportFile synthetic(std::vector<double> mfu_repeats, const std::string& backend = "cpu") {
  return {synthetic_doc(std::move(mfu_repeats), backend), "synthetic.json"};
}
ReportFile file(json doc) { return {std::move(doc), "edited.json"}; }

const std::vector<double> kBase = {0.300, 0.305, 0.310, 0.302, 0.308};

bool names(const GateResult& g, const std::string& text) {
  for (const auto& r : g.regressions)
    if (r.find(text) != std::string::npos) return true;
  return false;
}

TEST(RegressGate, AReportPassesAgainstItself) {
  const GateResult g = run_gate({synthetic(kBase)}, {synthetic(kBase)}, {});
  EXPECT_TRUE(g.ok()) << (g.regressions.empty() ? "" : g.regressions[0]);
  EXPECT_DOUBLE_EQ(g.metrics["mfu"]["median"].get<double>(), 0.305);
  EXPECT_EQ(g.metrics["peak_bytes"], 75265);
  EXPECT_DOUBLE_EQ(g.metrics["final_loss"].get<double>(), 10.0);
}

TEST(RegressGate, ATenPercentMedianMfuDropFails) {
  std::vector<double> slower;
  for (double m : kBase) slower.push_back(m * 0.9);
  const GateResult g = run_gate({synthetic(slower)}, {synthetic(kBase)}, {});
  EXPECT_FALSE(g.ok());
  EXPECT_TRUE(names(g, "mfu: median 0.2745 vs baseline 0.305 (-10.0%")) << g.regressions[0];
  EXPECT_TRUE(names(g, "tokens_per_s: median"));
  // Five repetitions a side: the U test decides with the median rule (all five lower: p = 1/252).
  int found = 0;
  for (const auto& c : g.checks) {
    if (c["name"] != "median mfu") continue;
    EXPECT_NEAR(c["u_test_p"].get<double>(), 1.0 / 252, 1e-12);
    ++found;
  }
  EXPECT_EQ(found, 1);
}

TEST(RegressGate, ADropWithinTheBaselinesSpreadPasses) {
  // The baseline's repetitions spread over 20%: an 8% lower median is noise.
  const std::vector<double> noisy = {0.25, 0.30, 0.28, 0.27, 0.26};
  std::vector<double> lower;
  for (double m : noisy) lower.push_back(m * 0.92);
  EXPECT_TRUE(run_gate({synthetic(lower)}, {synthetic(noisy)}, {}).ok());
  // Beyond the spread, it fails.
  lower.clear();
  for (double m : noisy) lower.push_back(m * 0.75);
  EXPECT_FALSE(run_gate({synthetic(lower)}, {synthetic(noisy)}, {}).ok());
}

TEST(RegressGate, AMedianDropTheUTestCannotTellFromNoisePasses) {
  // The median is 3.7% lower (past the 2% tolerance and the baseline's 1.2%
  // spread), but two of the five new runs beat every baseline run: U = 10 of
  // 25, p = P(U ≤ 10) ≈ 0.35, not a shift.
  const std::vector<double> base = {0.320, 0.321, 0.322, 0.323, 0.324};
  const std::vector<double> cur = {0.25, 0.30, 0.31, 0.33, 0.34};
  GateOptions o;
  o.perf_tol = 0.02;
  const GateResult g = run_gate({synthetic(cur)}, {synthetic(base)}, o);
  EXPECT_TRUE(g.ok()) << (g.regressions.empty() ? "" : g.regressions[0]);
}

// A report whose repetitions' MFU was taken against peak_flops; its tokens/s
// are those of the kBase runs (the same speed) unless MFU and peak say otherwise.
ReportFile with_peak(std::vector<double> mfu_repeats, double peak_flops) {
  json doc = synthetic_doc(mfu_repeats);
  doc["summary"]["peak_flops"] = peak_flops;
  for (size_t i = 0; i < mfu_repeats.size(); ++i)
    doc["summary"]["repeats"][i]["tokens_per_s"] = mfu_repeats[i] * peak_flops / 100e9 * 1e6;
  return file(doc);
}

TEST(RegressGate, MfuIsComparedAgainstTheBaselinesPeak) {
  // The same achieved FLOP/s measured against a peak 25% higher reads as an
  // MFU 20% lower: not a regression (0.244 × 125 / 100 = 0.305).
  std::vector<double> same_speed;
  for (double m : kBase) same_speed.push_back(m * 100.0 / 125.0);
  const GateResult same = run_gate({with_peak(same_speed, 125e9)}, {with_peak(kBase, 100e9)}, {});
  EXPECT_TRUE(same.ok()) << (same.regressions.empty() ? "" : same.regressions[0]);
  for (const auto& c : same.checks)
    if (c["name"] == "median mfu") {
      EXPECT_NEAR(c["measured"].get<double>(), 0.305, 1e-12);
      EXPECT_NE(c["note"].get<std::string>().find("against the baseline's peak 1e+11 FLOP/s"), std::string::npos)
          << c["note"];
    }
  // A real 10% drop hidden by a peak measured 10% lower (equal MFU figures) is caught.
  std::vector<double> slower_same_mfu = kBase;
  const GateResult slower = run_gate({with_peak(slower_same_mfu, 90e9)}, {with_peak(kBase, 100e9)}, {});
  EXPECT_FALSE(slower.ok());
  EXPECT_TRUE(names(slower, "mfu: median 0.2745 vs baseline 0.305 (-10.0%"))
      << (slower.regressions.empty() ? "" : slower.regressions[0]);
}

TEST(RegressGate, AChangedLossFailsAtItsStep) {
  json cur = synthetic_doc(kBase);
  cur["summary"]["loss"][1] = 10.25 * 1.02;
  const GateResult g = run_gate({file(cur)}, {synthetic(kBase)}, {});
  ASSERT_EQ(g.regressions.size(), 1u);
  EXPECT_TRUE(names(g, "loss at step 1: 10.455000 vs baseline 10.250000")) << g.regressions[0];
  // Within fp32's tolerance (1e-5 relative) it passes; bf16's is wider.
  cur["summary"]["loss"][1] = 10.25 + 5e-5;
  EXPECT_TRUE(run_gate({file(cur)}, {synthetic(kBase)}, {}).ok());
  EXPECT_DOUBLE_EQ(loss_tolerance("bf16"), 1e-2);
}

TEST(RegressGate, OneExtraKibOnOneAccountFails) {
  json cur = synthetic_doc(kBase);
  cur["ranks"][1]["measured"]["peak_by_account"]["activations"] = 65537 + 1024;
  const GateResult g = run_gate({file(cur)}, {synthetic(kBase)}, {});
  ASSERT_EQ(g.regressions.size(), 1u);
  EXPECT_EQ(g.regressions[0], "peak_bytes.activations on rank 1: 66561 vs baseline 65537 (+1024 bytes)");
}

TEST(RegressGate, CommBytesPerCollectiveAreExact) {
  json cur = synthetic_doc(kBase);
  cur["ranks"][0]["comm"]["all_gather@dp"] = {{"calls", 1}, {"bytes", 64}};
  cur["ranks"][1]["comm"]["all_reduce@dp"]["bytes"] = 8200;
  const GateResult g = run_gate({file(cur)}, {synthetic(kBase)}, {});
  EXPECT_TRUE(names(g, "comm_bytes.all_gather@dp on rank 0: 64 vs baseline (absent)"));
  EXPECT_TRUE(names(g, "comm_bytes.all_reduce@dp on rank 1: 8200 vs baseline 8192 (+8 bytes)"));
}

TEST(RegressGate, TheMetaBackendIsGatedOnBytesAndChecksOnly) {
  std::vector<double> half;
  for (double m : kBase) half.push_back(m / 2);
  const GateResult g = run_gate({synthetic(half, "meta")}, {synthetic(kBase, "meta")}, {});
  EXPECT_TRUE(g.ok());
  ASSERT_FALSE(g.notes.empty());
  EXPECT_NE(g.notes[0].find("meta backend"), std::string::npos);
  EXPECT_TRUE(g.metrics["mfu"].is_null());  // the history records no timing for it
  EXPECT_EQ(g.metrics["peak_bytes"], 75265);
  json failed = synthetic_doc(kBase, "meta");
  failed["checks"] = json::array({{{"name", "bytes.weights"}, {"ok", false}}});
  EXPECT_FALSE(run_gate({file(failed)}, {synthetic(kBase, "meta")}, {}).ok());
}

TEST(RegressGate, AnotherMachineIsRefusedOrFlagged) {
  json other = synthetic_doc(kBase);
  other["env"]["fingerprint"]["blas"]["corename"] = "SkylakeX";
  try {
    run_gate({synthetic(kBase)}, {file(other)}, {});
    FAIL() << "another machine's baseline was accepted";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("blas.corename: \"SkylakeX\" vs \"Haswell\""), std::string::npos) << e.what();
  }
  GateOptions o;
  o.allow_other_machine = true;
  std::vector<double> slower;
  for (double m : kBase) slower.push_back(m * 0.5);
  const GateResult g = run_gate({synthetic(slower)}, {file(other)}, o);
  EXPECT_TRUE(g.ok());  // timing not gated across machines; bytes and loss are
  EXPECT_NE(g.notes.at(0).find("other machine"), std::string::npos);
}

TEST(RegressGate, AnotherConfigurationOrAnotherKindIsRefused) {
  json other = synthetic_doc(kBase);
  other["config"]["layout"]["dp"] = 4;
  EXPECT_THROW(run_gate({synthetic(kBase)}, {file(other)}, {}), ConfigError);
  json plan = synthetic_doc(kBase);
  plan["kind"] = "plan";
  EXPECT_THROW(run_gate({file(plan)}, {synthetic(kBase)}, {}), ConfigError);
  // A figure of the wrong type is named by file and JSON path.
  json typed = synthetic_doc(kBase);
  typed["ranks"][1]["measured"]["peak_bytes"] = "many";
  try {
    run_gate({file(typed)}, {synthetic(kBase)}, {});
    FAIL() << "a string peak was read";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("edited.json: ranks[1].measured.peak_bytes: expected a number"),
              std::string::npos)
        << e.what();
  }
  json broken = synthetic_doc(kBase);
  broken["summary"].erase("loss");
  EXPECT_THROW(run_gate({file(broken)}, {synthetic(kBase)}, {}), ConfigError);
}

TEST(RegressGate, NReportsAreNRepetitions) {
  const ReportFile a = synthetic({0.30}), b = synthetic({0.31}), c = synthetic({0.32});
  EXPECT_EQ(figure_samples({a, b, c}, "mfu"), (std::vector<double>{0.30, 0.31, 0.32}));
}

TEST(GateStats, ExactMannWhitneyMatchesItsDistribution) {
  // 3 vs 3, all lower: the one arrangement of 20 with U = 0.
  EXPECT_NEAR(mann_whitney_p_lower({1, 2, 3}, {4, 5, 6}), 1.0 / 20, 1e-12);
  // 4 vs 4 all lower: 1 / C(8,4).
  EXPECT_NEAR(mann_whitney_p_lower({1, 2, 3, 4}, {5, 6, 7, 8}), 1.0 / 70, 1e-12);
  // U = 1 of 2 vs 2 ({1,3} vs {2,4}): arrangements with U ≤ 1 are 2 of 6.
  EXPECT_NEAR(mann_whitney_p_lower({1, 3}, {2, 4}), 2.0 / 6, 1e-12);
  EXPECT_DOUBLE_EQ(mann_whitney_p_lower({5, 6}, {1, 2}), 1.0);
  EXPECT_DOUBLE_EQ(relative_spread({0.9, 1.0, 1.1}), 0.2 / 1.0);
  EXPECT_DOUBLE_EQ(median_of({3, 1, 2, 10}), 2.5);
}

TEST(TrainRepeats, TheMedianRepetitionCarriesEveryRepetitionsFigures) {
  std::vector<json> docs;
  for (double ms : {12.0, 10.0, 11.0}) {
    json d = synthetic_doc({0.3});
    d["summary"].erase("repeats");
    d["summary"]["median_step_ms"] = ms;
    d["summary"]["mfu"] = 1.0 / ms;
    docs.push_back(d);
  }
  json doc = combine_repeats(docs);
  EXPECT_EQ(doc["summary"]["median_step_ms"], 11.0);
  ASSERT_EQ(doc["summary"]["repeats"].size(), 3u);
  EXPECT_EQ(doc["summary"]["repeats"][1]["median_step_ms"], 10.0);
  ASSERT_EQ(doc["checks"].size(), 2u);
  EXPECT_TRUE(doc["checks"][0]["ok"].get<bool>());
  docs[2]["ranks"][0]["measured"]["peak_by_account"]["weights"] = 1;
  doc = combine_repeats(docs);
  EXPECT_FALSE(doc["checks"][1]["ok"].get<bool>());
}

}  // namespace
}  // namespace gpuledger::report
