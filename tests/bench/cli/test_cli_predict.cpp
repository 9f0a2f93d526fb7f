// CLI tests of the predicted step: `train --backend meta` with a device preset
// that has a published profile predicts the step (report, summary, checks, the
// table), its --trace is the simulated timeline of every stage (a Chrome trace
// holding every FLOP the stages execute), the meta backend's bookkeeping time is
// no MFU, and bad profile options are exit 2 naming the problem.
#include <gtest/gtest.h>
#include <algorithm>

#include <fstream>
#include <map>
#include <sstream>

#include "run_cli.h"

using gpuledger::testing::contains;
using gpuledger::testing::read_json;
using gpuledger::testing::run_cli;
using gpuledger::testing::scratch_dir;
using gpuledger::testing::write_file;

namespace {

const std::vector<std::string> kPipeline = {
    "train", "--backend", "meta", "--model",        "tiny-llama", "--pp",    "2", "--dp",     "2", "--seq",
    "32",    "--mbs",     "2",    "--microbatches", "4",          "--steps", "1", "--warmup", "0"};

std::vector<std::string> with(std::vector<std::string> a, const std::vector<std::string>& more) {
  a.insert(a.end(), more.begin(), more.end());
  return a;
}

TEST(CliPredict, MetaRunPredictsTheStepOnThePublishedProfile) {
  const std::string dir = scratch_dir("predict-pp2");
  const auto r = run_cli(
      with(kPipeline, {"--device", "h100-sxm", "--trace", dir + "/trace.json", "--json", dir + "/report.json"}));
  ASSERT_EQ(r.status, 0) << r.err << r.out;
  const auto doc = read_json(dir + "/report.json");
  const auto& p = doc["prediction"];
  EXPECT_EQ(p["device_profile"]["name"], "h100-sxm");
  EXPECT_EQ(p["network_profile"]["provenance"], "published, not measured here");
  ASSERT_EQ(p["ranks"].size(), 2u);  // one per stage
  EXPECT_EQ(p["ranks"][0]["rank"], 0);
  EXPECT_EQ(p["ranks"][1]["rank"], 2);  // stage 1 at dp 0: rank tp + tp·(dp + dp·pp) = 2
  double slowest = 0;
  for (const auto& rank : p["ranks"]) {
    slowest = std::max(slowest, rank["step_ms"].get<double>());
    EXPECT_GT(rank["compute_ms"].get<double>(), 0.0);
    EXPECT_GT(rank["bubble_ms"].get<double>(), 0.0);
  }
  EXPECT_DOUBLE_EQ(p["step_ms"].get<double>(), slowest);
  const auto& s = doc["summary"];
  EXPECT_DOUBLE_EQ(s["predicted"]["step_ms"].get<double>(), slowest);
  const double tokens = 2.0 * 4 * 2 * 32;  // dp · microbatches · mbs · seq
  EXPECT_DOUBLE_EQ(s["predicted"]["tokens_per_s"].get<double>(), tokens / (slowest / 1e3));
  const double mfu = s["predicted"]["mfu"];
  EXPECT_GT(mfu, 0.0);
  EXPECT_LE(mfu, 1.0);
  EXPECT_DOUBLE_EQ(mfu, s["model_flops_per_step"].get<double>() / (slowest / 1e3) / (989.4e12 * 4));
  // Bookkeeping time is not a measurement: no MFU of its own.
  EXPECT_TRUE(s["mfu"].is_null());
  // Every check passes, each reported rank's recorded FLOPs among them.
  int flop_checks = 0;
  for (const auto& c : doc["checks"]) {
    EXPECT_TRUE(c["ok"].get<bool>()) << c.dump();
    if (c["name"] == "prediction.flops==executed") ++flop_checks;
  }
  EXPECT_EQ(flop_checks, 2);

  // The simulated timeline: a process per stage, every slice complete, the FLOPs of a step.
  const auto trace = read_json(dir + "/trace.json");
  std::map<int64_t, int64_t> flops;
  std::map<int64_t, std::map<int64_t, std::string>> threads;
  for (const auto& e : trace["traceEvents"])
    if (e["ph"] == "M" && e["name"] == "thread_name") threads[e["pid"]][e["tid"]] = e["args"]["name"];
  ASSERT_EQ(threads.size(), 2u);
  size_t slices = 0;
  for (const auto& e : trace["traceEvents"]) {
    if (e["ph"] != "X") continue;
    ++slices;
    for (auto k : {"ts", "dur"}) ASSERT_TRUE(e.contains(k) && e[k].is_number()) << e.dump();
    for (auto k : {"pid", "tid"}) ASSERT_TRUE(e.contains(k) && e[k].is_number_integer()) << e.dump();
    EXPECT_GE(e["ts"].get<double>(), 0.0);
    flops[e["pid"]] += e["args"].value("flops", int64_t{0});
  }
  EXPECT_GT(slices, 100u);
  for (const auto& rank : doc["ranks"])
    EXPECT_EQ(flops[rank["rank"]], rank["flops"]["executed_per_step"].get<int64_t>());
  // The table says it too.
  const auto t = run_cli(with(kPipeline, {"--device", "h100-sxm"}));
  ASSERT_EQ(t.status, 0) << t.err;
  EXPECT_TRUE(contains(t.out, "# predicted step: device profile h100-sxm")) << t.out;
}

TEST(CliPredict, NoProfileNoPrediction) {
  const auto r = run_cli(with(kPipeline, {"--json", "-"}));
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_FALSE(r.json().contains("prediction"));
}

TEST(CliPredict, MegatronOptionsHideCommunicationAndAreNamed) {
  // tiny-llama at tp 2 with sequence parallelism: overlapping its TP collectives with their GEMMs
  // (and reducing the DP buckets in place) can only shorten the step; the FLOPs stay.
  const std::vector<std::string> tp2 = {
      "train",    "--backend", "meta",   "--model", "tiny-llama",     "--tp", "2",       "--dp", "2",        "--sp",
      "--seq",    "32",        "--mbs",  "2",       "--microbatches", "4",    "--steps", "1",    "--warmup", "0",
      "--device", "h100-sxm",  "--json", "-"};
  const auto base = run_cli(tp2);
  const auto both = run_cli(with(tp2, {"--tp-comm-overlap", "--contiguous-grad-buffer"}));
  ASSERT_EQ(base.status, 0) << base.err;
  ASSERT_EQ(both.status, 0) << both.err;
  const auto b = base.json()["prediction"], o = both.json()["prediction"];
  EXPECT_FALSE(b["tp_comm_overlap"].get<bool>());
  EXPECT_TRUE(o["tp_comm_overlap"].get<bool>());
  EXPECT_TRUE(o["contiguous_grad_buffer"].get<bool>());
  EXPECT_LT(o["ranks"][0]["exposed_comm_ms"]["tp"].get<double>(), b["ranks"][0]["exposed_comm_ms"]["tp"].get<double>());
  EXPECT_LT(o["step_ms"].get<double>(), b["step_ms"].get<double>());
  EXPECT_EQ(o["ranks"][0]["flops"], b["ranks"][0]["flops"]);
  // Megatron refuses --tp-comm-overlap without sequence parallelism: a usage error.
  std::vector<std::string> no_sp = tp2;
  no_sp.erase(std::find(no_sp.begin(), no_sp.end(), "--sp"));
  const auto refused = run_cli(with(no_sp, {"--tp-comm-overlap"}));
  EXPECT_EQ(refused.status, 2);
  EXPECT_NE(refused.err.find("--sp"), std::string::npos) << refused.err;
}

TEST(CliPredict, BadProfileOptionsAreUsageErrors) {
  auto r = run_cli(with(kPipeline, {"--device-profile", "h100-sxn"}));
  EXPECT_EQ(r.status, 2);
  EXPECT_TRUE(contains(r.err, "h100-sxn")) << r.err;
  EXPECT_TRUE(contains(r.err, "h100-sxm")) << r.err;  // the published names listed
  r = run_cli(with(kPipeline, {"--device-profile", "/nonexistent/host.json"}));
  EXPECT_EQ(r.status, 2);
  EXPECT_TRUE(contains(r.err, "/nonexistent/host.json")) << r.err;
  // A device profile of one's own for 4 ranks needs a network profile.
  const std::string dir = scratch_dir("predict-bad");
  const auto cal = run_cli({"calibrate", "--quick", "--dtypes", "fp32", "--out", dir + "/host.json"});
  ASSERT_EQ(cal.status, 0) << cal.err;
  r = run_cli(with(kPipeline, {"--device-profile", dir + "/host.json"}));
  EXPECT_EQ(r.status, 2);
  EXPECT_TRUE(contains(r.err, "--network-profile")) << r.err;
  // --trace on meta without a prediction has nothing to write.
  r = run_cli(with(kPipeline, {"--trace", dir + "/t.json"}));
  EXPECT_EQ(r.status, 2);
  EXPECT_TRUE(contains(r.err, "--device-profile")) << r.err;
  write_file(dir + "/not-a-profile.json", "{\"schema\": \"something else\"}");
  r = run_cli(with(kPipeline, {"--device", "h100-sxm", "--network-profile", dir + "/not-a-profile.json"}));
  EXPECT_EQ(r.status, 2);
  EXPECT_TRUE(contains(r.err, "not-a-profile.json")) << r.err;
}

}  // namespace

namespace {

// A layout search: sweep train on meta over layout=auto with a device profile
// lists the points that ran fastest predicted first, and the CSV carries the
// predicted figures of every point.
TEST(CliPredict, MetaSweepRanksLayoutsByPredictedTokensPerSecond) {
  const std::string dir = scratch_dir("predict-sweep");
  const auto r = run_cli({"sweep",    "train",    "--backend", "meta",        "--world", "4", "--model",  "tiny-llama",
                          "--seq",    "32",       "--gbs",     "8",           "--steps", "1", "--warmup", "0",
                          "--device", "h100-sxm", "--grid",    "layout=auto", "--out",   dir});
  ASSERT_EQ(r.status, 0) << r.err << r.out;
  const auto index = read_json(dir + "/sweep.json");
  std::map<std::string, double> rate;
  for (const auto& p : index["points"])
    if (p["status"] == "ok") rate[p["name"]] = p["headline"]["predicted_tokens_per_s"].get<double>();
  ASSERT_GE(rate.size(), 3u) << r.out;
  // The table's rows of ok points, in printed order, have non-increasing predicted rates.
  double last = 1e300;
  size_t rows = 0;
  std::istringstream table(r.out);
  for (std::string line; std::getline(table, line);) {
    std::istringstream words(line);
    std::string name;
    words >> name;
    if (!rate.count(name)) continue;
    EXPECT_LE(rate[name], last) << line;
    last = rate[name];
    ++rows;
  }
  EXPECT_EQ(rows, rate.size()) << r.out;
  EXPECT_TRUE(contains(r.out, "the fastest layout that fits is")) << r.out;
  std::ifstream csv(dir + "/sweep.csv");
  std::string head;
  std::getline(csv, head);
  EXPECT_TRUE(contains(head, ",predicted_step_ms,predicted_tokens_per_s,predicted_mfu,seconds,reason")) << head;
}

}  // namespace
