// CLI tests for `gpuledger train` on one rank: the report's shape, its checks
// (measured bytes == exact budget, executed FLOPs == analytic), a failed point
// (out of memory) that still writes its report, and the meta backend.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "run_cli.h"

using gpuledger::testing::read_json;
using gpuledger::testing::run_cli;
using gpuledger::testing::scratch_dir;

namespace {

TEST(CliTrain, ReportHoldsEveryStepAndPassesItsChecks) {
  auto r = run_cli({"train", "--model", "tiny-llama", "--seq", "32", "--mbs", "2", "--microbatches", "2", "--steps",
                    "4", "--recompute", "selective", "--attention", "flash", "--json", "-"});
  ASSERT_EQ(r.status, 0) << r.err;
  const auto doc = r.json();
  EXPECT_EQ(doc["schema"], "gpuledger.report/1");
  EXPECT_EQ(doc["kind"], "train");
  EXPECT_EQ(doc["status"], "ok");
  EXPECT_EQ(doc["summary"]["loss"].size(), 4u);
  ASSERT_EQ(doc["ranks"].size(), 1u);
  const auto& rank = doc["ranks"][0];
  EXPECT_EQ(rank["time"]["step_ms"].size(), 4u);
  // Every check passed, and there is one per account plus the FLOP check.
  ASSERT_GE(doc["checks"].size(), 9u);
  for (const auto& c : doc["checks"]) EXPECT_TRUE(c["ok"].get<bool>()) << c.dump();
  // The measured peak of every account equals the exact budget (but workspace).
  for (auto a : {"weights", "grads", "master", "optim", "activations", "kv", "comm"})
    EXPECT_EQ(rank["measured"]["peak_by_account"][a], rank["analytic"]["exact"][a]) << a;
  EXPECT_EQ(rank["flops"]["executed_per_step"], rank["flops"]["analytic_hardware"]);
  // MFU is taken against a peak this run measured, and says so.
  EXPECT_NE(doc["summary"]["peak_source"].get<std::string>().find("measured"), std::string::npos);
  EXPECT_GT(doc["summary"]["mfu"].get<double>(), 0.0);
  // The per-step table went to stderr (JSON on stdout).
  EXPECT_NE(r.err.find("loss"), std::string::npos);
}

// --offload optimizer on one rank (ZeRO 1): every check passes — bytes.host
// (the master, Adam's states and the copies' host buffers) and the copies
// copy_d2h@host and copy_h2d@host among them — and the loss equals the run
// without offload exactly (the same CPU update on the same values).
TEST(CliTrain, OffloadOptimizerPassesItsChecksAndTrainsAsWithout) {
  const std::vector<std::string> base = {"train",  "--model", "tiny-llama", "--seq", "32",     "--mbs", "2",
                                         "--zero", "1",       "--steps",    "3",     "--json", "-"};
  auto plain = run_cli(base);
  ASSERT_EQ(plain.status, 0) << plain.err;
  auto args = base;
  args.insert(args.end(), {"--offload", "optimizer"});
  auto off = run_cli(args);
  ASSERT_EQ(off.status, 0) << off.err;
  const auto doc = off.json();
  EXPECT_EQ(doc["config"]["run"]["offload"], "optimizer");
  int host_checks = 0, copy_checks = 0;
  for (const auto& c : doc["checks"]) {
    EXPECT_TRUE(c["ok"].get<bool>()) << c.dump();
    host_checks += c["name"] == "bytes.host" ? 1 : 0;
    copy_checks += c["name"].get<std::string>().rfind("comm.copy_", 0) == 0 ? 1 : 0;
  }
  EXPECT_EQ(host_checks, 1);
  EXPECT_EQ(copy_checks, 4);  // d2h and h2d, calls and bytes
  const auto& m = doc["ranks"][0]["measured"];
  EXPECT_GT(m["peak_host_bytes"].get<int64_t>(), 0);
  EXPECT_EQ(m["peak_by_account"]["master"], 0);
  EXPECT_EQ(m["peak_by_account"]["optim"], 0);
  EXPECT_EQ(doc["summary"]["loss"], plain.json()["summary"]["loss"]);
}

TEST(CliTrain, OutOfMemoryIsAReportWithTheLedgerAndAdvice) {
  const std::string path = scratch_dir("oom") + "/oom.json";
  // tiny-gpt's model states alone are ~1.7 MiB in fp32: 1 MiB cannot hold them.
  auto r = run_cli({"train", "--model", "tiny-gpt", "--dtype", "fp32", "--seq", "64", "--mbs", "4", "--steps", "2",
                    "--memory-limit", "1Mi", "--json", path});
  EXPECT_EQ(r.status, 1) << r.err;
  ASSERT_TRUE(std::filesystem::exists(path));
  const auto doc = read_json(path);
  EXPECT_EQ(doc["status"], "oom");
  EXPECT_FALSE(doc["error"].get<std::string>().empty());
  const auto& m = doc["ranks"][0]["measured"];
  ASSERT_TRUE(m.contains("at_failure"));
  EXPECT_LE(m["at_failure"]["live_total"].get<int64_t>() + m["at_failure"]["refused_bytes"].get<int64_t>(),
            int64_t{2} * 1048576);
  EXPECT_GT(m["at_failure"]["live_total"].get<int64_t>() + m["at_failure"]["refused_bytes"].get<int64_t>(), 1048576);
  EXPECT_TRUE(doc.contains("suggestions"));
  EXPECT_NE(r.out.find("FAILED (oom)"), std::string::npos);
  // The reason is on stderr too, where scripts look.
  EXPECT_NE(r.err.find("gpuledger train: failed: oom: "), std::string::npos) << r.err;
}

TEST(CliTrain, MidStepOutOfMemoryNamesWhatWouldFit) {
  // The budget of this point (gpuledger plan): about 25 MB with recompute none,
  // 12.75 MB with full (model states 1.8 MB). A 14 MiB device holds the model
  // states, fails in the first forward, and full recompute would fit.
  auto r = run_cli({"train", "--model", "tiny-gpt", "--dtype", "fp32", "--seq", "64", "--mbs", "16", "--steps", "1",
                    "--memory-limit", "14Mi", "--json", "-"});
  EXPECT_EQ(r.status, 1) << r.err;
  const auto doc = r.json();
  EXPECT_EQ(doc["status"], "oom");
  bool full_fits = false;
  for (const auto& s : doc["suggestions"])
    if (s["change"] == "--recompute full") full_fits = s["fits"].get<bool>();
  EXPECT_TRUE(full_fits) << doc["suggestions"].dump();
}

TEST(CliTrain, MetaBackendBooksTheSameBytesAndFlops) {
  auto r = run_cli({"train", "--model", "tiny-gpt", "--backend", "meta", "--seq", "64", "--mbs", "2", "--microbatches",
                    "3", "--schedule", "gpipe", "--steps", "2", "--json", "-"});
  ASSERT_EQ(r.status, 0) << r.err;
  const auto doc = r.json();
  for (const auto& c : doc["checks"]) EXPECT_TRUE(c["ok"].get<bool>()) << c.dump();
  const auto& rank = doc["ranks"][0];
  // The model's own temporaries (activation gradients) are booked on meta too;
  // only the backend's (a CPU GEMM's fp32 copies) are not — checked ≤ the bound.
  EXPECT_GT(rank["measured"]["peak_by_account"]["activations"].get<int64_t>(), 0);
}

TEST(CliTrain, UsageErrors) {
  auto r = run_cli({"train", "--model", "tiny-gpt", "--backend", "tpu"});
  EXPECT_EQ(r.status, 2);
  r = run_cli({"train", "--model", "tiny-gpt", "--seq", "32", "--memory-limit", "lots"});
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_NE(r.err.find("lots"), std::string::npos);
  // --trace on meta writes the predicted timeline: refused without a prediction, and to stdout, naming the option.
  r = run_cli({"train", "--model", "tiny-gpt", "--seq", "32", "--backend", "meta", "--trace", "t.json"});
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_NE(r.err.find("--trace on the meta backend writes the predicted timeline"), std::string::npos) << r.err;
  r = run_cli({"train", "--model", "tiny-gpt", "--seq", "32", "--trace", "-"});
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_NE(r.err.find("--trace needs a file"), std::string::npos) << r.err;
}

// One rank, --trace: the trace holds the run's ops on the compute stream, their
// FLOPs summing to every step's executed FLOPs.
TEST(CliTrain, TraceOfOneRankHoldsEveryStepsFlops) {
  const std::string dir = gpuledger::testing::scratch_dir("trace1");
  auto r = run_cli({"train", "--model", "tiny-gpt", "--seq", "32", "--steps", "3", "--trace", dir + "/t.json", "--json",
                    "-", "--quiet"});
  ASSERT_EQ(r.status, 0) << r.err;
  const auto doc = r.json();
  const auto trace = gpuledger::testing::read_json(dir + "/t.json");
  int64_t flops = 0, gemms = 0;
  for (const auto& e : trace["traceEvents"]) {
    if (e["ph"] != "X") continue;
    EXPECT_EQ(e["pid"], 0);
    EXPECT_EQ(e["tid"], 0);  // one rank, no collective: the compute stream alone
    flops += e["args"].value("flops", int64_t{0});
    gemms += e["name"] == "gemm" ? 1 : 0;
  }
  EXPECT_GT(gemms, 0);
  EXPECT_EQ(flops, 3 * doc["ranks"][0]["flops"]["executed_per_step"].get<int64_t>());
}

}  // namespace
