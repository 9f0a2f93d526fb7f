// CLI tests for `gpuledger sweep`: one report per point plus the sweep.json
// index; every point's report equals what the subcommand alone writes for that
// point (to the byte); a failed point is a report too and the sweep goes on
// (exit 1), a refused one is skipped (exit 0 when another ran); grid usage errors exit 2
// before anything runs. (Layouts, resume, job arrays, the CSV and failure
// isolation: test_cli_sweep_cluster.cpp.) The plot script
// test runs only under the plot_sweep ctest (registered when /usr/bin/python3
// has matplotlib), which sets GPULEDGER_PLOT_PYTHON.
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "run_cli.h"

using gpuledger::testing::contains;
using gpuledger::testing::read_json;
using gpuledger::testing::run_cli;
using gpuledger::testing::scratch_dir;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

// The fixed options of the plan sweeps: llama2-7b (32 heads, 32 layers) on an H100.
const std::vector<std::string> kPlanFixed = {"--model", "llama2-7b",      "--seq", "4096",     "--mbs",
                                             "1",       "--microbatches", "8",     "--device", "h100-sxm"};

std::vector<std::string> cat(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

TEST(CliSweep, PlanGridWritesOneReportPerPointEqualToPlanAlone) {
  const std::string out = scratch_dir("sweep-plan");
  auto r = run_cli(cat(cat({"sweep", "plan"}, kPlanFixed), {"--grid", "tp=1,2", "--grid", "pp=1,4", "--out", out}));
  ASSERT_EQ(r.status, 0) << r.err;
  // Progress on stderr, one line per point before it runs.
  EXPECT_TRUE(contains(r.err, "[1/4] tp=1 pp=1")) << r.err;
  EXPECT_TRUE(contains(r.err, "[4/4] tp=2 pp=4")) << r.err;

  const json index = read_json(out + "/sweep.json");
  EXPECT_EQ(index["schema"], "gpuledger.sweep/1");
  EXPECT_EQ(index["kind"], "plan");
  EXPECT_EQ(index["summary"]["points"], 4);
  EXPECT_EQ(index["summary"]["failed"], 0);
  EXPECT_EQ(index["summary"]["done"], 4);
  EXPECT_EQ(index["summary"]["complete"], true);
  ASSERT_EQ(index["points"].size(), 4u);
  // The first --grid varies slowest.
  const std::vector<std::string> names = {"tp1_pp1", "tp1_pp4", "tp2_pp1", "tp2_pp4"};
  const std::vector<std::pair<std::string, std::string>> layouts = {{"1", "1"}, {"1", "4"}, {"2", "1"}, {"2", "4"}};
  for (size_t i = 0; i < 4; ++i) {
    const json& p = index["points"][i];
    EXPECT_EQ(p["name"], names[i]);
    EXPECT_EQ(p["status"], "ok");
    EXPECT_EQ(p["report"], names[i] + ".json");
    EXPECT_EQ(p["values"]["tp"], layouts[i].first);
    EXPECT_EQ(p["values"]["pp"], layouts[i].second);
    const json doc = read_json(out + "/" + names[i] + ".json");

    // The same point run alone: the same analytic figures, to the byte.
    auto alone =
        run_cli(cat(cat({"plan"}, kPlanFixed), {"--tp", layouts[i].first, "--pp", layouts[i].second, "--json", "-"}));
    ASSERT_EQ(alone.status, 0) << alone.err;
    const json single = alone.json();
    EXPECT_EQ(doc["config"], single["config"]);
    EXPECT_EQ(doc["params"], single["params"]);
    EXPECT_EQ(doc["ranks"], single["ranks"]);
    EXPECT_EQ(doc["summary"], single["summary"]);

    // Headline: the busiest role's exact total, and whether every role fits.
    int64_t busiest = 0;
    for (const auto& rank : single["ranks"])
      busiest = std::max(busiest, rank["analytic"]["exact"]["total"].get<int64_t>());
    EXPECT_EQ(p["headline"]["budget_peak_bytes"].get<int64_t>(), busiest);
    EXPECT_EQ(p["headline"]["fits"], single["summary"]["fits"]);
  }
  // By hand: llama2-7b (Ψ = 6,738,415,616, Meta's model card; vocab 32000 needs no
  // padding at tp 1) holds 2Ψ bytes of bf16 weights on one rank without TP or PP.
  const json one = read_json(out + "/tp1_pp1.json");
  EXPECT_EQ(one["ranks"][0]["analytic"]["exact"]["weights"].get<int64_t>(), 2 * int64_t{6738415616});
  // The table at the end names every point.
  for (const auto& n : names) EXPECT_TRUE(contains(r.out, n)) << r.out;
  EXPECT_TRUE(contains(r.out, "4 of 4 points ok")) << r.out;
}

TEST(CliSweep, AFlagKeyTakesOneAndZero) {
  const std::string out = scratch_dir("sweep-flag");
  auto r = run_cli(cat(cat({"sweep", "plan"}, kPlanFixed), {"--tp", "2", "--grid", "sp=0,1", "--out", out}));
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(read_json(out + "/sp0.json")["config"]["layout"]["sp"], false);
  EXPECT_EQ(read_json(out + "/sp1.json")["config"]["layout"]["sp"], true);
}

TEST(CliSweep, ARefusedPointIsSkippedNotFailed) {
  const std::string out = scratch_dir("sweep-skip");
  // llama2-7b has 32 heads: tp 3 does not divide them; tp 3 comes first.
  auto r = run_cli(cat(cat({"sweep", "plan"}, kPlanFixed), {"--grid", "tp=3,1,2", "--out", out}));
  EXPECT_EQ(r.status, 0) << r.err;  // skipped is not failed
  const json index = read_json(out + "/sweep.json");
  ASSERT_EQ(index["points"].size(), 3u);
  EXPECT_EQ(index["points"][0]["status"], "skipped");
  EXPECT_EQ(index["points"][1]["status"], "ok");
  EXPECT_EQ(index["points"][2]["status"], "ok");
  EXPECT_EQ(index["summary"]["skipped"], 1);
  EXPECT_EQ(index["summary"]["failed"], 0);
  // The reason is the subcommand's own (what does not divide); nothing ran, so no report and no figures.
  EXPECT_TRUE(contains(index["points"][0]["reason"].get<std::string>(), "heads")) << index["points"][0];
  EXPECT_FALSE(index["points"][0].contains("headline"));
  EXPECT_FALSE(fs::exists(out + "/tp3.json"));
  EXPECT_EQ(read_json(out + "/tp2.json")["status"], "ok");
  // The table: one line for the skipped points, not a row each.
  EXPECT_FALSE(contains(r.out, "tp3 ")) << r.out;
  EXPECT_TRUE(contains(r.out, "1 points skipped")) << r.out;
  EXPECT_TRUE(contains(r.out, "2 of 3 points ok, 1 skipped, 0 failed")) << r.out;
}

TEST(CliSweep, ARerunDoesNotKeepAnEarlierReport) {
  const std::string out = scratch_dir("sweep-rerun");
  // A stale tp3.json from an "earlier sweep" claiming ok.
  gpuledger::testing::write_file(out + "/tp3.json", R"({"schema": "gpuledger.report/1", "status": "ok"})");
  auto r = run_cli(cat(cat({"sweep", "plan"}, kPlanFixed), {"--grid", "tp=3,1", "--out", out}));
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_FALSE(fs::exists(out + "/tp3.json"));
  EXPECT_EQ(read_json(out + "/sweep.json")["points"][0]["status"], "skipped");
}

TEST(CliSweep, GridUsageErrorsExit2BeforeAnythingRuns) {
  const std::vector<std::vector<std::string>> bad = {
      {"--grid", "tp"},                          // no '='
      {"--grid", "tp="},                         // no values
      {"--grid", "tp=1,,2"},                     // an empty value
      {"--grid", "=1,2"},                        // no key
      {"--grid", "nosuch=1,2"},                  // not an option of plan
      {"--grid", "tp=1,2", "--grid", "tp=4"},    // a key twice
      {"--grid", "tp=1,1"},                      // a value twice
      {"--grid", "tp=0,2"},                      // a value plan's parser refuses (--tp ≥ 1)
      {"--grid", "sp=maybe"},                    // a flag takes 1/0
      {"--grid", "json=a,b"},                    // the sweep sets --json
      {"--tp", "2", "--grid", "tp=1,2"},         // fixed and swept
      {"--json", "x.json", "--grid", "tp=1,2"},  // the sweep writes the reports
  };
  for (const auto& extra : bad) {
    const std::string out = scratch_dir("sweep-usage") + "/" + std::to_string(&extra - bad.data());
    auto r = run_cli(cat(cat(cat({"sweep", "plan"}, kPlanFixed), extra), {"--out", out}));
    std::string args;
    for (const auto& a : extra) args += a + " ";
    EXPECT_EQ(r.status, 2) << args << "\n" << r.err;
    EXPECT_TRUE(contains(r.err, "error")) << args << "\n" << r.err;
    EXPECT_FALSE(fs::exists(out + "/sweep.json")) << args;
  }
  // No grid, no --out, a subcommand that cannot be swept.
  EXPECT_EQ(run_cli(cat({"sweep", "plan"}, {"--out", scratch_dir("sweep-nogrid")})).status, 2);
  EXPECT_EQ(run_cli({"sweep", "plan", "--grid", "tp=1,2"}).status, 2);
  EXPECT_EQ(run_cli({"sweep", "models", "--grid", "tp=1", "--out", scratch_dir("sweep-models")}).status, 2);
  // --help explains, with an example.
  auto h = run_cli({"sweep", "--help"});
  EXPECT_EQ(h.status, 0);
  EXPECT_TRUE(contains(h.out, "--grid")) << h.out;
  EXPECT_TRUE(contains(h.out, "Examples")) << h.out;
}

TEST(CliSweep, KvGridReportsCapacity) {
  const std::string out = scratch_dir("sweep-kv");
  auto r = run_cli(
      {"sweep", "kv", "--model", "llama3-8b", "--device", "h100-sxm", "--grid", "context=4096,8192", "--out", out});
  ASSERT_EQ(r.status, 0) << r.err;
  const json index = read_json(out + "/sweep.json");
  ASSERT_EQ(index["points"].size(), 2u);
  // By hand: llama3-8b keeps 2 · 32 layers · 8 KV heads · 128 · 2 bytes = 131,072 bytes per token.
  for (const auto& p : index["points"]) EXPECT_EQ(p["headline"]["kv_bytes_per_token"], 131072);
  const json doc = read_json(out + "/context4096.json");
  EXPECT_EQ(index["points"][0]["headline"]["capacity_sequences"], doc["summary"]["capacity_sequences"]);
  // Twice the context: at most half as many sequences.
  EXPECT_LE(2 * index["points"][1]["headline"]["capacity_sequences"].get<int64_t>(),
            index["points"][0]["headline"]["capacity_sequences"].get<int64_t>());
}

// The train options of the small sweeps: tiny-gpt, one step on the cpu backend.
const std::vector<std::string> kTrainFixed = {"--model",  "tiny-gpt", "--backend", "cpu", "--steps",        "1",
                                              "--warmup", "0",        "--mbs",     "2",   "--microbatches", "2"};

TEST(CliSweep, TrainGridOnTheCpuBackend) {
  const std::string out = scratch_dir("sweep-train");
  auto r = run_cli(cat(cat({"sweep", "train"}, kTrainFixed), {"--grid", "seq=16,32", "--out", out}));
  ASSERT_EQ(r.status, 0) << r.err << r.out;
  const json index = read_json(out + "/sweep.json");
  ASSERT_EQ(index["points"].size(), 2u);
  for (const std::string seq : {"16", "32"}) {
    const json& p = index["points"][seq == "16" ? 0 : 1];
    EXPECT_EQ(p["name"], "seq" + seq);
    EXPECT_EQ(p["status"], "ok");
    const json doc = read_json(out + "/seq" + seq + ".json");
    EXPECT_EQ(doc["kind"], "train");
    EXPECT_EQ(doc["config"]["run"]["seq"], std::stoi(seq));
    ASSERT_EQ(doc["summary"]["loss"].size(), 1u);
    EXPECT_EQ(p["headline"]["peak_bytes"], doc["ranks"][0]["measured"]["peak_bytes"]);
    EXPECT_EQ(p["headline"]["checks_failed"], 0);
    // The same point alone: the same ledger, to the byte, and the same loss
    // (same seed, same data, one rank).
    auto alone = run_cli(cat(cat({"train"}, kTrainFixed), {"--seq", seq, "--json", "-", "--quiet"}));
    ASSERT_EQ(alone.status, 0) << alone.err;
    const json single = alone.json();
    EXPECT_EQ(doc["ranks"][0]["measured"]["at_peak"], single["ranks"][0]["measured"]["at_peak"]);
    EXPECT_EQ(doc["ranks"][0]["measured"]["peak_by_account"], single["ranks"][0]["measured"]["peak_by_account"]);
    EXPECT_EQ(doc["ranks"][0]["analytic"]["exact"], single["ranks"][0]["analytic"]["exact"]);
    EXPECT_NEAR(doc["summary"]["loss"][0].get<double>(), single["summary"]["loss"][0].get<double>(), 1e-6);
  }
  // Twice the tokens per microbatch: more activation bytes.
  EXPECT_GT(read_json(out + "/seq32.json")["ranks"][0]["measured"]["peak_by_account"]["activations"].get<int64_t>(),
            read_json(out + "/seq16.json")["ranks"][0]["measured"]["peak_by_account"]["activations"].get<int64_t>());
}

TEST(CliSweep, AnOutOfMemoryPointIsReportedAndTheSweepGoesOn) {
  const std::string out = scratch_dir("sweep-oom");
  // tiny-gpt's fp32 model states alone are ~1.7 MiB: 1 MiB cannot hold them, 1 GiB can.
  auto r = run_cli(
      cat(cat({"sweep", "train"}, kTrainFixed), {"--seq", "16", "--grid", "memory-limit=1Mi,1Gi", "--out", out}));
  EXPECT_EQ(r.status, 1) << r.err;
  const json index = read_json(out + "/sweep.json");
  ASSERT_EQ(index["points"].size(), 2u);
  EXPECT_EQ(index["points"][0]["name"], "memory-limit1Mi");
  EXPECT_EQ(index["points"][0]["status"], "oom");
  EXPECT_EQ(index["points"][1]["status"], "ok");
  EXPECT_EQ(read_json(out + "/memory-limit1Mi.json")["status"], "oom");
}

// Run by the sweep_train_mpi ctest only (it sets GPULEDGER_MPIEXEC): under
// mpirun -n 2 rank 0 is the sweep and runs each point as a 2-rank job of its
// own, whose rank 0 writes the point's report; a point that needs more ranks
// than the sweep has is skipped.
TEST(SweepMpi, TrainPointsUnderMpirun) {
  const char* mpiexec = std::getenv("GPULEDGER_MPIEXEC");
  if (!mpiexec) GTEST_SKIP() << "run by the sweep_train_mpi ctest";
  const std::string out = scratch_dir("sweep-mpi");
  std::string cmd = std::string(mpiexec) + " -n 2 --oversubscribe " + GPULEDGER_BIN + " sweep train";
  for (const auto& a : kTrainFixed) cmd += " " + a;
  // Plain DP and ZeRO-1 over dp 2 (two points keep the MPI run short), and a layout of 4 ranks
  // on a sweep of 2 (tp 2 × dp 2).
  cmd += " --seq 16 --dp 2 --grid zero=0,1 --grid tp=1,2 --out " + out + " > " + out + "/stdout.txt 2>&1";
  const int rc = std::system(cmd.c_str());
  ASSERT_TRUE(WIFEXITED(rc)) << cmd;
  EXPECT_EQ(WEXITSTATUS(rc), 0) << cmd;  // the tp 2 points are skipped, the others pass
  const json index = read_json(out + "/sweep.json");
  EXPECT_EQ(index["env"]["mpi_ranks"], 2);
  ASSERT_EQ(index["points"].size(), 4u);
  const std::vector<std::string> names = {"zero0_tp1", "zero0_tp2", "zero1_tp1", "zero1_tp2"};
  for (size_t i = 0; i < 4; ++i) {
    const json& p = index["points"][i];
    EXPECT_EQ(p["name"], names[i]);
    if (i % 2 == 0) {
      EXPECT_EQ(p["status"], "ok") << p.dump();
      const json doc = read_json(out + "/" + names[i] + ".json");
      EXPECT_EQ(doc["env"]["world"], 2);
      EXPECT_EQ(doc.value("ranks", json::array()).size(), 2u);  // rank 0 gathered both ranks' records
      EXPECT_EQ(p["headline"]["checks_failed"], 0);
    } else {
      EXPECT_EQ(p["status"], "skipped") << p.dump();
      EXPECT_TRUE(contains(p["reason"].get<std::string>(), "4 ranks, the sweep 2")) << p.dump();
      EXPECT_FALSE(fs::exists(out + "/" + names[i] + ".json"));
    }
  }
}

// Run by the plot_sweep ctest only (it sets GPULEDGER_PLOT_PYTHON to a python with matplotlib).
TEST(PlotScript, DrawsNonEmptyPngsFromSweeps) {
  const char* python = std::getenv("GPULEDGER_PLOT_PYTHON");
  if (!python) GTEST_SKIP() << "run by the plot_sweep ctest (needs a python with matplotlib)";
  const std::string script = std::string(GPULEDGER_SOURCE_DIR) + "/scripts/plot.py";
  const std::string plan = scratch_dir("plot-plan"), train = scratch_dir("plot-train"), kv = scratch_dir("plot-kv");
  ASSERT_EQ(run_cli(cat(cat({"sweep", "plan"}, kPlanFixed), {"--grid", "tp=3,1,2", "--out", plan})).status, 0);
  ASSERT_EQ(run_cli(cat(cat({"sweep", "train"}, kTrainFixed), {"--grid", "seq=16,32", "--out", train})).status, 0);
  ASSERT_EQ(run_cli({"sweep", "kv", "--model", "llama3-8b", "--device", "h100-sxm", "--grid", "context=4096,8192",
                     "--out", kv})
                .status,
            0);
  const std::string pngs = scratch_dir("plot-out");
  for (const auto& [dir, files] : std::vector<std::pair<std::string, std::vector<std::string>>>{
           {plan, {"plan_memory.png"}}, {train, {"train_memory.png", "train_mfu.png"}}, {kv, {"kv_capacity.png"}}}) {
    // Next to the sweep (default), and into --out.
    for (const std::string& where : {std::string(), pngs}) {
      const std::string cmd = std::string(python) + " " + script + " " + dir + (where.empty() ? "" : " --out " + where);
      ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
      for (const auto& f : files) {
        const std::string path = (where.empty() ? dir : where) + "/" + f;
        ASSERT_TRUE(fs::exists(path)) << path;
        EXPECT_GT(fs::file_size(path), 1000u) << path;
        std::ifstream in(path, std::ios::binary);
        char sig[4] = {};
        in.read(sig, 4);
        EXPECT_EQ(std::string(sig + 1, 3), "PNG") << path;
      }
    }
  }
  // Report files given one by one plot too.
  const std::string one = scratch_dir("plot-files");
  const std::string cmd =
      std::string(python) + " " + script + " " + plan + "/tp1.json " + plan + "/tp2.json --out " + one;
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  EXPECT_GT(fs::file_size(one + "/plan_memory.png"), 1000u);
}

}  // namespace
